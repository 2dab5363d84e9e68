"""The parser flags (--tool_parser, --reasoning_parser, --enable_tool_guided_generation) reach
the generated graph."""

from __future__ import annotations

from pathlib import Path

from calculators.llm.llm_calculator_pb2 import LLMCalculatorOptions
from graphrt.cli.main import build_parser
from graphrt.cli.serve import settings_from
from graphrt.server import single_model_definition
from graphruntime import ValidatedGraph, parse_graph_config


def options_for(tmp_path: Path, *flags: str) -> LLMCalculatorOptions:
    model = tmp_path / "model.gguf"
    model.touch()
    args = build_parser().parse_args(["serve", "--model_path", str(model), *flags])
    definition = single_model_definition(settings_from(args), model, "m")
    assert definition.graph_text is not None
    graph = ValidatedGraph.from_config(parse_graph_config(definition.graph_text))
    (node,) = graph.nodes
    options = graph.node_options(node, LLMCalculatorOptions)
    assert isinstance(options, LLMCalculatorOptions)
    return options


def test_parser_flags(tmp_path: Path) -> None:
    options = options_for(
        tmp_path,
        "--tool_parser",
        "hermes3",
        "--reasoning_parser",
        "none",
        "--enable_tool_guided_generation",
    )
    assert options.tool_parser == "hermes3"
    assert options.reasoning_parser == "none"
    assert options.enable_tool_guided_generation is True
    unset = options_for(tmp_path, "--enable_tool_guided_generation", "false")
    assert not unset.HasField("tool_parser") and not unset.HasField("reasoning_parser")
    assert unset.enable_tool_guided_generation is False
