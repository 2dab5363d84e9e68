"""MkDocs hooks (mkdocs.yml `hooks:`): the pages the site builds from the code and the repository.

- `index.md` is README.md, its links turned into links between pages, so the front page and the
  repository's README are one text;
- `reference/calculators.md`, `reference/flags.md` and `reference/metrics.md` are written from
  the code by tools/docs_reference.py;
- `examples/NAME.md` is examples/NAME/README.md, so a page can link to an example.

Pages in docs/ link to repository files the way GitHub resolves them (`../examples/NAME`,
`../ARCHITECTURE.md`); `on_page_markdown` points those links at the site's pages instead.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path
from typing import Any

from mkdocs.config.defaults import MkDocsConfig
from mkdocs.structure.files import File, Files
from mkdocs.structure.pages import Page

sys.path.insert(0, str(Path(__file__).resolve().parent))
import docs_reference as reference  # tools/ is not a package

ROOT = reference.ROOT
EXAMPLES = ROOT / "examples"
REPOSITORY_LINK = re.compile(r"\]\((?:\.\./)+(examples/[\w-]+|ARCHITECTURE\.md)/?(#[\w-]*)?\)")


def _cell(text: str) -> str:
    """Text for a Markdown table cell: one line, pipes escaped."""
    return " ".join(text.split()).replace("|", "\\|")


def readme_page() -> str:
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    text = text.replace("](docs/", "](")
    text = text.replace("](ARCHITECTURE.md)", "](architecture.md)")
    return re.sub(r"\]\(examples/([\w-]+)/?\)", r"](examples/\1.md)", text)


def calculators_page() -> str:
    lines = [
        "# Calculators",
        "",
        "Every calculator graphrt ships, as graph.pbtxt names it (the `graphrt.calculators` entry",
        "points). Ports a calculator declares as class attributes are listed with their",
        "payload types; the others depend on the node and are shown as its docstring's example",
        "writes them.",
        "Options are the fields of the node's options message (`node_options` or `options`).",
        "Writing your own: [Graphs and calculators](../graphs.md).",
        "",
    ]
    for calc in reference.calculators():
        lines += [f"## {calc.name}", "", f"`{calc.module}`", "", calc.description, ""]
        if calc.declared_ports:
            lines += ["| declared port | tag | payload |", "|---|---|---|"]
            lines += [
                f"| {kind} | `{tag}` | `{payload}` |" for kind, tag, payload in calc.declared_ports
            ]
            lines.append("")
        if calc.example_ports:
            lines += ["| port in the example | stream or side packet |", "|---|---|"]
            lines += [f"| {kind} | `{spec}` |" for kind, spec in calc.example_ports]
            lines.append("")
        if calc.options_type:
            lines += [f"Options: `{calc.options_type}`", ""]
            lines += ["| field | type | default |", "|---|---|---|"]
            for option in calc.options:
                kind = f"repeated {option.type}" if option.repeated else option.type
                default = f"`{option.default}`" if option.default else ""
                lines.append(f"| `{option.name}` | `{kind}` | {default} |")
            lines.append("")
        if calc.example:
            lines += ["Example (from the docstring):", "", "```text", calc.example, "```", ""]
    return "\n".join(lines)


def flags_page() -> str:
    lines = [
        "# Command-line flags",
        "",
        "Every flag of every `graphrt` subcommand, read from the parser `graphrt` itself uses",
        "(`graphrt SUBCOMMAND --help` prints the same). What they do together:",
        "[Operations](../operations.md#flags).",
        "",
    ]
    descriptions = dict(reference.commands())
    by_command: dict[str, list[reference.FlagDoc]] = {}
    for flag in reference.flags():
        by_command.setdefault(flag.command, []).append(flag)
    for command, description in descriptions.items():
        lines += [f"## `{command}`", "", description, ""]
        found = by_command.get(command, [])
        if found:
            lines += ["| flag | default | choices | meaning |", "|---|---|---|---|"]
            for flag in found:
                default = f"`{_cell(flag.default)}`" if flag.default else ""
                lines.append(
                    f"| `{flag.flags}` | {default} | {_cell(flag.choices)} | {_cell(flag.help)} |"
                )
            lines.append("")
    return "\n".join(lines)


def metrics_page() -> str:
    lines = [
        "# Metrics",
        "",
        "Every metric `GET /metrics` may show (`--metrics_enable`), read from the code that",
        "defines it. A family appears once a servable of its kind is loaded. How to read them:",
        "[Operations](../operations.md#metrics).",
        "",
        "| metric | type | meaning | defined in |",
        "|---|---|---|---|",
    ]
    lines += [
        f"| `{m.name}` | {m.type} | {_cell(m.help)} | `{m.module}` |" for m in reference.metrics()
    ]
    return "\n".join(lines) + "\n"


def example_pages() -> dict[str, str]:
    return {
        f"examples/{readme.parent.name}.md": readme.read_text(encoding="utf-8")
        for readme in sorted(EXAMPLES.glob("*/README.md"))
    }


def generated_pages() -> dict[str, str]:
    """Site path -> Markdown of every page this hook adds."""
    return {
        "index.md": readme_page(),
        "reference/calculators.md": calculators_page(),
        "reference/flags.md": flags_page(),
        "reference/metrics.md": metrics_page(),
        **example_pages(),
    }


def on_files(files: Files, config: MkDocsConfig, **_: Any) -> Files:
    for path, text in generated_pages().items():
        files.append(File.generated(config, path, content=text))
    return files


def on_page_markdown(markdown: str, page: Page, **_: Any) -> str:
    depth = page.file.src_uri.count("/")

    def to_page(match: re.Match[str]) -> str:
        target, anchor = match.group(1), match.group(2) or ""
        page_path = "architecture.md" if target == "ARCHITECTURE.md" else f"{target}.md"
        return f"]({'../' * depth}{page_path}{anchor})"

    return REPOSITORY_LINK.sub(to_page, markdown)
