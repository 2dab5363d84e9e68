"""The reference pages of the documentation site, read from the code so they cannot drift.

Three lists, each generated when MkDocs builds (tools/mkdocs_hooks.py) and checked by the test
suite (tests/unit/docs/), which fails when an entry has no description:

- every built-in calculator (the `graphrt.calculators` entry points graphruntime's Registry loads
  by name), with its docstring, the ports it declares as class attributes, the ports of the
  `node { ... }` example in its docstring, and the fields of its options proto (types and
  defaults from the descriptor);
- every `graphrt` flag of every subcommand, from the argparse parser `graphrt` itself uses;
- every metric `GET /metrics` may show, found in the metric-defining calls of the server's
  modules (a collector only yields a family once a servable of its kind is loaded, so a rendered
  registry would miss most of them).
"""

from __future__ import annotations

import argparse
import ast
import importlib.metadata
import inspect
import re
import sys
from dataclasses import dataclass, field
from pathlib import Path

from google.protobuf.descriptor import Descriptor, FieldDescriptor

ROOT = Path(__file__).resolve().parents[1]
CALCULATOR_ENTRY_POINTS = "graphrt.calculators"
# Modules whose calls define the server's Prometheus metrics: the server's *metrics.py files, so
# a new collector module is listed without being named here.
METRIC_MODULES = tuple(
    str(path.relative_to(ROOT))
    for path in sorted((ROOT / "graphrt" / "observability").glob("*metrics.py"))
)
METRIC_NAME = re.compile(r"^(ovms|graphrt)_[a-z0-9_]+$")
METRIC_TYPES = {
    "Counter": "counter",
    "CounterMetricFamily": "counter",
    "Gauge": "gauge",
    "GaugeMetricFamily": "gauge",
    "Histogram": "histogram",
    "HistogramMetricFamily": "histogram",
}
NODE_EXAMPLE = re.compile(r"node\s*:?\s*\{")
PORT_LINE = re.compile(
    r"\b(input_stream|output_stream|input_side_packet|output_side_packet)\s*:\s*\"([^\"]+)\""
)


# ---------------------------------------------------------------------------------------------
# Calculators


@dataclass(frozen=True)
class OptionField:
    name: str
    type: str
    default: str
    repeated: bool


@dataclass(frozen=True)
class CalculatorDoc:
    name: str
    module: str
    description: str
    example: str | None
    # (kind, TAG or TAG:INDEX, payload type) of the class-attribute ports.
    declared_ports: tuple[tuple[str, str, str], ...]
    # (kind, stream spec) as written in the docstring's example.
    example_ports: tuple[tuple[str, str], ...]
    options_type: str | None
    options: tuple[OptionField, ...] = field(default=())


def _own_doc(obj: object) -> str:
    """`obj`'s docstring if it has its own (not one inherited from the Calculator base)."""
    doc = vars(obj).get("__doc__") if isinstance(obj, type) else getattr(obj, "__doc__", None)
    return inspect.cleandoc(doc) if isinstance(doc, str) and doc.strip() else ""


def _indented_blocks(doc: str) -> list[str]:
    """The indented paragraphs of a docstring: its code blocks, reST style."""
    blocks, current = [], []
    for line in [*doc.splitlines(), ""]:
        if line.startswith("    "):
            current.append(line)
        elif current:
            blocks.append(inspect.cleandoc("\n" + "\n".join(current)))
            current = []
    return blocks


def node_example(doc: str) -> str | None:
    """The docstring's graph example: its first indented block that names a calculator, else
    the first `node { ... }` written inline (braces balanced)."""
    for block in _indented_blocks(doc):
        if "calculator:" in block:
            return block
    match = NODE_EXAMPLE.search(doc)
    if match is None:
        return None
    depth = 0
    for end in range(match.start(), len(doc)):
        if doc[end] == "{":
            depth += 1
        elif doc[end] == "}":
            depth -= 1
            if depth == 0:
                return doc[match.start() : end + 1].strip()
    return None


def without_example(doc: str, example: str | None) -> str:
    """The docstring with its example block taken out (the page shows the example by itself)."""
    if example is None:
        return doc
    kept = [b for b in doc.split("\n\n") if inspect.cleandoc("\n" + b) != example]
    return "\n\n".join(kept).strip()


def _type_name(payload_type: object) -> str:
    if isinstance(payload_type, type):
        return "any" if payload_type is object else payload_type.__name__
    return str(payload_type).replace("typing.", "")


def _field_type(descriptor: FieldDescriptor) -> str:
    if descriptor.message_type is not None:
        return descriptor.message_type.full_name
    if descriptor.enum_type is not None:
        return descriptor.enum_type.full_name
    names = {
        value: name[len("TYPE_") :].lower()
        for name, value in vars(FieldDescriptor).items()
        if name.startswith("TYPE_") and isinstance(value, int)
    }
    return names.get(descriptor.type, "?")


def _field_default(descriptor: FieldDescriptor) -> str:
    if descriptor.type == FieldDescriptor.TYPE_MESSAGE or _is_repeated(descriptor):
        return ""
    value = descriptor.default_value
    if descriptor.enum_type is not None:
        return str(descriptor.enum_type.values_by_number[value].name)
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (str, bytes)):
        return repr(value)
    return str(value)


def _is_repeated(descriptor: FieldDescriptor) -> bool:
    repeated = getattr(descriptor, "is_repeated", None)  # protobuf >= 6.31; `label` before
    if repeated is None:
        return bool(getattr(descriptor, "label", 0) == FieldDescriptor.LABEL_REPEATED)
    return bool(repeated)


def option_fields(descriptor: Descriptor) -> tuple[OptionField, ...]:
    return tuple(
        OptionField(f.name, _field_type(f), _field_default(f), _is_repeated(f))
        for f in descriptor.fields
    )


def calculators() -> list[CalculatorDoc]:
    """Every calculator published through the entry points, sorted by name."""
    found = []
    for entry_point in importlib.metadata.entry_points(group=CALCULATOR_ENTRY_POINTS):
        calculator = entry_point.load()
        module = sys.modules[calculator.__module__]
        description = _own_doc(calculator) or _own_doc(module)
        example = node_example(_own_doc(calculator)) or node_example(_own_doc(module))
        shown = without_example(description, example)
        declared = tuple(
            (
                port.collection.replace("_", " ").rstrip("s"),
                port.tag if port.index == 0 else f"{port.tag}:{port.index}",
                _type_name(port.payload_type),
            )
            for port in calculator._ports
        )
        # The node's own ports: the example may start with the graph's input and output streams.
        node_start = NODE_EXAMPLE.search(example or "")
        node_text = (example or "")[node_start.start() if node_start else 0 :]
        example_ports = tuple(PORT_LINE.findall(node_text))
        options_type = calculator.options_type
        found.append(
            CalculatorDoc(
                name=entry_point.name,
                module=calculator.__module__,
                description=shown or description,
                example=example,
                declared_ports=declared,
                example_ports=example_ports,
                options_type=options_type.DESCRIPTOR.full_name if options_type else None,
                options=option_fields(options_type.DESCRIPTOR) if options_type else (),
            )
        )
    return sorted(found, key=lambda c: c.name)


# ---------------------------------------------------------------------------------------------
# Flags


@dataclass(frozen=True)
class FlagDoc:
    command: str  # "graphrt", "graphrt serve", "graphrt graph validate", ...
    flags: str  # "--rest_port" or "-o, --output"; positionals by their name
    default: str
    help: str
    choices: str


def _subparsers(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            return dict(action.choices)
    return {}


def flags(parser: argparse.ArgumentParser | None = None, command: str = "graphrt") -> list[FlagDoc]:
    """Every argument of `parser` (graphrt's own by default) and of its subcommands, in order."""
    if parser is None:
        from graphrt.cli.main import build_parser

        parser = build_parser()
    found = []
    for action in parser._actions:
        if isinstance(action, (argparse._HelpAction, argparse._SubParsersAction)):
            continue
        if action.help == argparse.SUPPRESS:
            continue
        default = action.default
        shown = "" if default is None or default == argparse.SUPPRESS else repr(default)
        found.append(
            FlagDoc(
                command=command,
                flags=", ".join(action.option_strings) or str(action.dest),
                default=shown,
                help=(action.help or "").replace("%(default)s", str(default)).replace("%%", "%"),
                choices=", ".join(map(str, action.choices)) if action.choices else "",
            )
        )
    for name, sub in _subparsers(parser).items():
        found.extend(flags(sub, f"{command} {name}"))
    return found


def commands(parser: argparse.ArgumentParser | None = None) -> list[tuple[str, str]]:
    """(command, description) of graphrt and each of its subcommands."""
    if parser is None:
        from graphrt.cli.main import build_parser

        parser = build_parser()
        found = [("graphrt", parser.description or "")]
    else:
        found = []
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            helps = {a.dest: a.help or "" for a in action._choices_actions}
            for name, sub in action.choices.items():
                found.append((f"{parser.prog.split(' [')[0]} {name}".strip(), helps.get(name, "")))
                found.extend(commands(sub))
    return found


# ---------------------------------------------------------------------------------------------
# Metrics


@dataclass(frozen=True)
class MetricDoc:
    name: str  # as Prometheus shows it (counters end in _total)
    type: str
    help: str
    module: str


def _exposed(name: str, kind: str) -> str:
    return f"{name}_total" if kind == "counter" and not name.startswith("ovms_") else name


def _metric_calls(path: Path) -> list[MetricDoc]:
    tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
    module = str(path.relative_to(ROOT))
    found: list[MetricDoc] = []
    for node in ast.walk(tree):
        pair: list[ast.expr] = []
        kind = ""
        if isinstance(node, ast.Call):
            callee = node.func
            called = callee.id if isinstance(callee, ast.Name) else getattr(callee, "attr", "")
            kind = METRIC_TYPES.get(called, "")
            pair = list(node.args[:2])
        elif isinstance(node, ast.Tuple) and len(node.elts) == 2:  # ("name", "help")
            pair = list(node.elts)
        elif isinstance(node, ast.Dict):  # {"name": ("help", labels)}: OVMS's counters
            for key, value in zip(node.keys, node.values, strict=True):
                if (
                    isinstance(key, ast.Constant)
                    and isinstance(key.value, str)
                    and METRIC_NAME.match(key.value)
                    and isinstance(value, ast.Tuple)
                    and value.elts
                    and isinstance(value.elts[0], ast.Constant)
                ):
                    found.append(MetricDoc(key.value, "counter", str(value.elts[0].value), module))
            continue
        if len(pair) == 2 and all(
            isinstance(p, ast.Constant) and isinstance(p.value, str) for p in pair
        ):
            name, text = (str(p.value) for p in pair if isinstance(p, ast.Constant))
            if METRIC_NAME.match(name) and not METRIC_NAME.match(text):
                found.append(MetricDoc(name, kind, text, module))
    return found


def metrics() -> list[MetricDoc]:
    """Every metric family the server defines, by exposed name; a name defined both by a typed
    call and in a (name, help) pair keeps the typed one."""
    by_name: dict[str, MetricDoc] = {}
    for relative in METRIC_MODULES:
        for metric in _metric_calls(ROOT / relative):
            known = by_name.get(metric.name)
            if known is None or (not known.type and metric.type):
                by_name[metric.name] = metric
    # An untyped (name, help) pair feeds a family whose type only its use says: OVMS's request
    # gauges. Their names say which they are.
    result = []
    for metric in by_name.values():
        kind = metric.type or ("histogram" if metric.name.endswith("_us") else "gauge")
        result.append(MetricDoc(_exposed(metric.name, kind), kind, metric.help, metric.module))
    return sorted(result, key=lambda m: m.name)
