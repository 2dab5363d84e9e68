"""Tool-call grammars: their shape, and on the real engine that they make even SmolLM2-135M
write a call that the same family's parser reads and whose arguments satisfy the schema.

The engine test batches one request per grammar-bearing family through one
ContinuousBatchingPipeline (greedy, at most 64 new tokens): one model load and one short batched
generation, kept in the test cache until the grammars, the model or the engine change.
"""

from __future__ import annotations

import importlib
import json
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from servables.llm.grammar_check import check_json_schema
from servables.llm.output_parsers import (
    ParserConfigError,
    make_output_parser,
    tool_call_structural_tag,
)
from tests.conftest import KeptResults, genai_loadable

UNIT_TOOL: list[dict[str, Any]] = [
    {
        "type": "function",
        "function": {
            "name": "get_weather",
            "parameters": {
                "type": "object",
                "properties": {
                    "city": {"type": "string", "enum": ["Paris", "Rome"]},
                    "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]},
                },
                "required": ["city", "unit"],
                "additionalProperties": False,
            },
        },
    }
]
GRAMMAR_FAMILIES = ["hermes3", "llama3", "mistral", "devstral", "phi4"]


@pytest.mark.parametrize("family", GRAMMAR_FAMILIES)
@pytest.mark.parametrize("require_call", [True, False])
def test_the_document_is_xgrammar_triggered_tags(family: str, require_call: bool) -> None:
    document = tool_call_structural_tag(family, UNIT_TOOL, require_call=require_call)
    assert document is not None
    assert document["type"] == "structural_tag"
    tags = document["format"]
    assert tags["type"] == "triggered_tags"
    assert tags["at_least_one"] is require_call
    assert tags["stop_after_first"] is False
    for tag in tags["tags"]:
        assert any(tag["begin"].startswith(trigger) for trigger in tags["triggers"])
        assert tag["content"]["type"] == "json_schema"


def test_one_tag_per_tool_carrying_its_schema() -> None:
    tools = [
        {"type": "function", "function": {"name": "a", "parameters": {"type": "object"}}},
        {"type": "function", "name": "b"},  # Responses API form, no parameters
    ]
    document = tool_call_structural_tag("hermes3", tools, require_call=False)
    assert document is not None
    assert [
        (tag["begin"], tag["content"]["json_schema"]) for tag in document["format"]["tags"]
    ] == [
        ('<tool_call>\n{"name": "a", "arguments": ', {"type": "object"}),
        ('<tool_call>\n{"name": "b", "arguments": ', {"type": "object"}),
    ]


@pytest.mark.parametrize("family", ["qwen3coder", "gptoss"])
def test_families_without_a_grammar(family: str) -> None:
    assert tool_call_structural_tag(family, UNIT_TOOL, require_call=True) is None


def test_a_single_call_stops_after_the_first_tag() -> None:
    document = tool_call_structural_tag("hermes3", UNIT_TOOL, require_call=True, single_call=True)
    assert document is not None
    assert document["format"]["stop_after_first"] is True


def test_no_tools_no_grammar_and_unknown_families_are_refused() -> None:
    assert tool_call_structural_tag("hermes3", [], require_call=True) is None
    with pytest.raises(ParserConfigError):
        tool_call_structural_tag("hermes", UNIT_TOOL, require_call=True)


@pytest.mark.e2e
def greedy_tag_config(genai: Any, document: Any, max_new_tokens: int) -> Any:
    """A greedy GenerationConfig constrained by a structural-tag document."""
    structured = genai.StructuredOutputConfig()
    structured.structural_tags_config = json.dumps(document)
    config = genai.GenerationConfig()
    config.max_new_tokens = max_new_tokens
    config.do_sample = False
    config.structured_output_config = structured
    config.validate()
    return config


def constrained_generations(model: Path, prompt: str, documents: list[Any]) -> list[list[int]]:
    """The ids SmolLM2 generates for `prompt` under each structural-tag document, in one batch."""
    genai: Any = importlib.import_module("openvino_genai")
    scheduler = genai.SchedulerConfig()
    scheduler.cache_size = 1
    pipeline = genai.ContinuousBatchingPipeline(str(genai_loadable(model)), scheduler, "CPU", {})
    tokenizer = pipeline.get_tokenizer()
    configs = [greedy_tag_config(genai, document, 64) for document in documents]
    ids = tokenizer.encode(prompt, add_special_tokens=False).input_ids
    results = pipeline.generate([ids] * len(configs), configs)
    return [[int(token) for token in result.m_generation_ids[0]] for result in results]


def test_each_grammar_makes_smollm2_write_a_valid_call_its_parser_reads(
    smollm2_gguf: Path, smollm2_tokenizer: Any
) -> None:
    """The generations are kept in the test cache (KeptResults): a changed grammar document,
    model or engine version generates again."""
    prompt = smollm2_tokenizer.apply_chat_template(
        [{"role": "user", "content": "What is the weather in Paris?"}], add_generation_prompt=True
    )
    documents = [
        tool_call_structural_tag(family, UNIT_TOOL, require_call=True)
        for family in GRAMMAR_FAMILIES
    ]
    kept = KeptResults(constrained_generations, greedy_tag_config, smollm2_gguf)
    generations = kept.get(
        [prompt, documents],
        lambda: constrained_generations(smollm2_gguf, prompt, documents),
    )
    schema = UNIT_TOOL[0]["function"]["parameters"]
    for family, generated in zip(GRAMMAR_FAMILIES, generations, strict=True):
        parser = make_output_parser(family, None, tools=UNIT_TOOL)
        assert parser is not None
        text = smollm2_tokenizer.decode(
            generated, skip_special_tokens=not parser.keep_special_tokens
        )
        output = parser.parse(text)
        assert [call.name for call in output.tool_calls][:1] == ["get_weather"], (family, text)
        jsonschema.validate(json.loads(output.tool_calls[0].arguments), schema)


REF_TOOLS: list[dict[str, Any]] = [
    {
        "type": "function",
        "function": {
            "name": "get_weather",
            "parameters": {
                "type": "object",
                "properties": {"loc": {"$ref": "#/$defs/Loc"}},
                "required": ["loc"],
                "$defs": {
                    "Loc": {
                        "type": "object",
                        "properties": {"city": {"type": "string"}},
                        "required": ["city"],
                    }
                },
            },
        },
    },
    {
        "type": "function",
        "function": {
            "name": "add",
            "parameters": {
                "type": "object",
                "properties": {"a": {"$ref": "#/definitions/N"}, "b": {"$ref": "#/definitions/N"}},
                "definitions": {"N": {"type": "integer"}},
            },
        },
    },
]


def _refs(schema: Any) -> list[str]:
    if isinstance(schema, dict):
        own = [schema["$ref"]] if isinstance(schema.get("$ref"), str) else []
        return own + [ref for value in schema.values() for ref in _refs(value)]
    if isinstance(schema, list):
        return [ref for item in schema for ref in _refs(item)]
    return []


def _resolve(document: Any, ref: str) -> Any:
    assert ref.startswith("#/"), ref
    node = document
    for part in ref[2:].split("/"):
        part = part.replace("~1", "/").replace("~0", "~")
        assert isinstance(node, dict) and part in node, f"{ref} does not resolve"
        node = node[part]
    return node


@pytest.mark.parametrize("family", GRAMMAR_FAMILIES)
def test_local_refs_of_tool_schemas_resolve_inside_each_tag_body(family: str) -> None:
    document = tool_call_structural_tag(family, REF_TOOLS, require_call=True)
    assert document is not None
    bodies = [tag["content"]["json_schema"] for tag in document["format"]["tags"]]
    for body in bodies:
        for ref in _refs(body):
            _resolve(body, ref)
    # ... and they mean what they meant
    valid = {"get_weather": {"loc": {"city": "Paris"}}, "add": {"a": 1, "b": 2}}
    invalid = {"get_weather": {"loc": {"city": 3}}, "add": {"a": "one"}}
    for index, name in enumerate(valid):
        for arguments, expected in ((valid[name], True), (invalid[name], False)):
            if family == "phi4":  # one body: the list of calls
                body, instance = bodies[0], [{"name": name, "arguments": arguments}]
            else:  # one tag per tool
                body, instance = bodies[index], arguments
            valid_here = jsonschema.Draft202012Validator(body).is_valid(instance)
            assert valid_here is expected, (family, name, arguments)


def test_phi4_moves_only_schemas_with_refs_to_defs() -> None:
    tools = [*REF_TOOLS, {"type": "function", "function": {"name": "noop"}}]
    document = tool_call_structural_tag("phi4", tools, require_call=False)
    assert document is not None
    (tag,) = document["format"]["tags"]
    body = tag["content"]["json_schema"]
    arguments = [call["properties"]["arguments"] for call in body["items"]["anyOf"]]
    assert arguments == [
        {"$ref": "#/$defs/tool_0_parameters"},
        {"$ref": "#/$defs/tool_1_parameters"},
        {"type": "object"},
    ]
    assert body["$defs"]["tool_0_parameters"]["properties"]["loc"] == {
        "$ref": "#/$defs/tool_0_parameters/$defs/Loc"
    }
    assert REF_TOOLS[0]["function"]["parameters"]["properties"]["loc"] == {"$ref": "#/$defs/Loc"}
    # the engine will accept it: the pre-engine grammar check vouches for it
    check_json_schema(body, "tools")


@pytest.mark.e2e
def test_the_engine_compiles_the_phi4_tag_of_tools_with_refs(tiny_llm_gguf: Path) -> None:
    genai: Any = importlib.import_module("openvino_genai")
    scheduler = genai.SchedulerConfig()
    scheduler.cache_size = 1
    pipeline = genai.ContinuousBatchingPipeline(
        str(genai_loadable(tiny_llm_gguf)), scheduler, "CPU", {}
    )
    tokenizer = pipeline.get_tokenizer()
    document = tool_call_structural_tag("phi4", REF_TOOLS, require_call=True)
    config = greedy_tag_config(genai, document, 48)
    ids = tokenizer.encode("Call a tool.", add_special_tokens=False).input_ids
    (result,) = pipeline.generate([ids], [config])
    text = tokenizer.decode([int(token) for token in result.m_generation_ids[0]])
    assert text.startswith("functools"), text
