"""--lora_modules: vLLM's three spellings, and the adapters spliced into the graph's LLM node."""

from __future__ import annotations

from pathlib import Path

import pytest
from google.protobuf import text_format

from calculators.llm.llm_calculator_pb2 import LLMCalculatorOptions
from graphrt.export.lora_modules import (
    LoraModule,
    LoraModulesError,
    parse_lora_modules,
    with_lora_modules,
)
from graphrt.export.text_graphs import TextGenerationSettings, text_generation_graph


@pytest.fixture
def loras(tmp_path: Path) -> Path:
    for name in ("a", "b", "c"):
        (tmp_path / name).mkdir()
    return tmp_path


def test_name_path_lists_and_json_objects(loras: Path) -> None:
    modules = parse_lora_modules(
        [
            f"a={loras / 'a'},b={loras / 'b'}",
            f'{{"name": "c", "path": "{loras / "c"}", "alpha": 0.5}}',
        ]
    )
    assert modules == [
        LoraModule("a", str(loras / "a")),
        LoraModule("b", str(loras / "b")),
        LoraModule("c", str(loras / "c"), 0.5),
    ]


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ("a", "expected name=path"),
        ("=x", "expected name=path"),
        ('{"name": "a"}', "not a JSON object with name and path"),
        ("a={root}/missing", "does not exist"),
        ("a={root}/a,a={root}/b", "a given twice"),
    ],
)
def test_bad_values_are_one_line_errors(loras: Path, value: str, message: str) -> None:
    with pytest.raises(LoraModulesError, match=message):
        parse_lora_modules([value.replace("{root}", str(loras))])


def llm_options(graph: str) -> LLMCalculatorOptions:
    """The LLMCalculatorOptions block of a generated graph, parsed."""
    start = graph.index("LLMCalculatorOptions]: {") + len("LLMCalculatorOptions]: {")
    end = graph.index("\n    }\n  }", start)
    return text_format.Parse(graph[start:end], LLMCalculatorOptions())


def test_adapters_become_lora_adapters_of_the_llm_node(loras: Path) -> None:
    graph = text_generation_graph(TextGenerationSettings(models_path="m.gguf"))
    modules = [LoraModule("a", str(loras / "a")), LoraModule("c", str(loras / "c"), 0.5)]
    options = llm_options(with_lora_modules(graph, modules))
    assert options.models_path == "m.gguf"
    assert [(e.alias, e.path, e.alpha) for e in options.lora_adapters] == [
        ("a", str(loras / "a"), 1.0),
        ("c", str(loras / "c"), 0.5),
    ]


def test_proto2_extension_options_take_adapters_too() -> None:
    graph = 'node { options { [mediapipe.LLMCalculatorOptions.ext] { models_path: "m" } } }'
    spliced = with_lora_modules(graph, [LoraModule("a", "/a")])
    assert 'lora_adapters { alias: "a" path: "/a" alpha: 1.0 }' in spliced


def test_a_graph_without_exactly_one_llm_node_is_refused() -> None:
    with pytest.raises(LoraModulesError, match="has 0"):
        with_lora_modules('node { calculator: "X" }', [LoraModule("a", "/a")])
