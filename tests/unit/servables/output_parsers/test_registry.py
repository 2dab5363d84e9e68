"""Parser names, pairs and per-request construction (OVMS's names and pair rule)."""

from __future__ import annotations

from typing import Any

import pytest

from servables.errors import ServableLoadError
from servables.llm.output_parsers import (
    REASONING_PARSERS,
    TOOL_PARSERS,
    ParserConfigError,
    make_output_parser,
    validate_parser_names,
)
from servables.llm.output_parsers.testing import calls_of


@pytest.mark.parametrize(
    ("tool_parser", "reasoning_parser"),
    [
        *((name, None) for name in TOOL_PARSERS),
        *((None, name) for name in REASONING_PARSERS),
        ("hermes3", "qwen3"),
        ("qwen3coder", "qwen3"),
        ("llama3", "qwen3"),
        ("mistral", "qwen3"),
        ("phi4", "qwen3"),
        ("gptoss", "gptoss"),
        ("minicpm5", "minicpm5"),
        (None, None),
    ],
)
def test_valid_names_and_pairs(tool_parser: str | None, reasoning_parser: str | None) -> None:
    validate_parser_names(tool_parser, reasoning_parser)


@pytest.mark.parametrize(
    ("tool_parser", "reasoning_parser", "param", "message"),
    [
        ("hermes", None, "tool_parser", "unknown tool_parser 'hermes'; supported: hermes3, "),
        (None, "deepseek_r1", "reasoning_parser", "unknown reasoning_parser 'deepseek_r1'"),
    ],
)
def test_unknown_names_are_load_errors_that_list_the_choices(
    tool_parser: str | None, reasoning_parser: str | None, param: str, message: str
) -> None:
    with pytest.raises(ParserConfigError) as caught:
        validate_parser_names(tool_parser, reasoning_parser)
    assert isinstance(caught.value, ServableLoadError)
    assert message in caught.value.message
    assert caught.value.param == param
    assert "(or 'none')" in caught.value.message


@pytest.mark.parametrize(
    ("tool_parser", "reasoning_parser"),
    [
        ("gptoss", "qwen3"),
        ("hermes3", "gptoss"),
        ("devstral", "qwen3"),
        ("qwen3coder", "gptoss"),
        ("minicpm5", "qwen3"),
    ],
)
def test_pairs_that_need_different_decoding_are_rejected_as_ovms_does(
    tool_parser: str, reasoning_parser: str
) -> None:
    with pytest.raises(ParserConfigError, match="cannot be combined"):
        validate_parser_names(tool_parser, reasoning_parser)
    with pytest.raises(ParserConfigError):
        make_output_parser(tool_parser, reasoning_parser, tools=None)


@pytest.mark.parametrize(
    ("tool_parser", "reasoning_parser", "keeps"),
    [
        ("hermes3", None, False),
        ("qwen3coder", None, False),
        ("phi4", None, False),
        ("llama3", None, True),
        ("mistral", None, True),
        ("devstral", None, True),
        ("gptoss", "gptoss", True),
        ("hermes3", "qwen3", False),
        (None, "qwen3", False),
        (None, "gptoss", True),
    ],
)
def test_which_families_need_special_tokens_kept(
    tool_parser: str | None, reasoning_parser: str | None, keeps: bool, weather_tools: Any
) -> None:
    parser = make_output_parser(tool_parser, reasoning_parser, tools=weather_tools)
    assert parser is not None
    assert parser.keep_special_tokens is keeps


def test_every_sequence_gets_its_own_parser(weather_tools: Any) -> None:
    first = make_output_parser("hermes3", None, tools=weather_tools)
    second = make_output_parser("hermes3", None, tools=weather_tools)
    assert first is not None and second is not None and first is not second
    first.feed('<tool_call>{"name": "get_weather", "arguments": {"city": "A"}}</tool_call>')
    assert second.parse("plain").content == "plain"


def test_responses_api_flat_tools_give_the_schemas_too() -> None:
    flat = [
        {
            "type": "function",
            "name": "set_alarm",
            "parameters": {"type": "object", "properties": {"minutes": {"type": "integer"}}},
        }
    ]
    parser = make_output_parser("qwen3coder", None, tools=flat)
    assert parser is not None
    output = parser.parse(
        "<tool_call>\n<function=set_alarm>\n<parameter=minutes>\n15\n</parameter>\n</function>"
    )
    assert calls_of(output) == [("set_alarm", {"minutes": 15})]
