"""`--lora_modules`: vLLM's way of serving LoRA adapters, turned into the graph's LLM options.

vLLM takes `--lora-modules name=path ...` or JSON objects (`{"name": ..., "path": ...}`); the
issue's users also write `name=path,name=path`. All three are accepted. The adapters become
`lora_adapters` entries in the LLM node's options of the graph being served (generated or the
model directory's graph.pbtxt), so a flag and a graph file mean the same thing and are checked by
the same code (calculators/llm/resources.py).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path

from graphrt.export.graph_text import quote

# The opening of LLMCalculatorOptions in a node: as an Any or as a proto2 extension.
_LLM_OPTIONS = re.compile(
    r"\[\s*(?:type\.googleapis\.com\s*/\s*)?mediapipe\.LLMCalculatorOptions(?:\.ext)?\s*\]\s*:?\s*\{"
)


class LoraModulesError(ValueError):
    """A --lora_modules value that cannot be used; the message is for the user."""


@dataclass(frozen=True)
class LoraModule:
    name: str
    path: str
    alpha: float = 1.0


def _module(name: str, path: str, alpha: float = 1.0) -> LoraModule:
    name, path = name.strip(), path.strip()
    if not name or not path:
        raise LoraModulesError(f"--lora_modules: expected name=path, got {name}={path}")
    where = Path(path).expanduser().resolve()
    if not where.exists():
        raise LoraModulesError(f"--lora_modules {name}: {where} does not exist")
    return LoraModule(name, str(where), alpha)


def parse_lora_modules(values: list[str]) -> list[LoraModule]:
    """`name=path`, `name=path,name=path` or `{"name": ..., "path": ..., "alpha": ...}` items."""
    modules: list[LoraModule] = []
    for value in values:
        text = value.strip()
        if text.startswith("{"):
            try:
                data = json.loads(text)
                modules.append(_module(data["name"], data["path"], float(data.get("alpha", 1.0))))
            except (ValueError, KeyError, TypeError, AttributeError) as error:
                raise LoraModulesError(
                    f"--lora_modules: {text} is not a JSON object with name and path ({error})"
                ) from None
            continue
        for item in filter(None, (part.strip() for part in text.split(","))):
            name, sep, path = item.partition("=")
            if not sep:
                raise LoraModulesError(f"--lora_modules: expected name=path, got {item!r}")
            modules.append(_module(name, path))
    names = [module.name for module in modules]
    twice = sorted({name for name in names if names.count(name) > 1})
    if twice:
        raise LoraModulesError(f"--lora_modules: {', '.join(twice)} given twice")
    return modules


def with_lora_modules(graph_text: str, modules: list[LoraModule]) -> str:
    """`graph_text` with the adapters added to its one LLM node's options."""
    openings = list(_LLM_OPTIONS.finditer(graph_text))
    if len(openings) != 1:
        raise LoraModulesError(
            f"--lora_modules needs a graph with one LLM node (LLMCalculatorOptions); this one has "
            f"{len(openings)}"
        )
    entries = "".join(
        f"\n      lora_adapters {{ alias: {quote(m.name)} path: {quote(m.path)} alpha: {m.alpha} }}"
        for m in modules
    )
    at = openings[0].end()
    return graph_text[:at] + entries + graph_text[at:]
