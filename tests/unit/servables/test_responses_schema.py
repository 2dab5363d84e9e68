"""Every body ResponseBuilder produces validates against OpenAI's published JSON schemas.

The schemas come from tests/fixtures/openai_schemas.json, extracted from OpenAI's openapi.yaml by
tools/extract_openai_schemas.py (see its docstring to regenerate). Validation is standard JSON
Schema Draft 2020-12; the extraction already turned OpenAPI's `nullable: true` into `anyOf` null.
"""

from __future__ import annotations

import importlib
import importlib.util
import json
from functools import cache
from pathlib import Path
from typing import Any

import pytest

from servables.llm.choices import TokenLogprob, Usage
from servables.openai.bodies import (
    SSE_DONE,
    Choice,
    ResponseBuilder,
    chat_logprobs,
    completion_logprobs,
    dumps,
    error_body,
    sse_frame,
)

SCHEMAS_FILE = Path(__file__).resolve().parents[2] / "fixtures" / "openai_schemas.json"
# Imported by name: jsonschema ships no type stubs (types-jsonschema is not a test dependency).
jsonschema: Any = importlib.import_module("jsonschema")

CHAT = "CreateChatCompletionResponse"
CHAT_CHUNK = "CreateChatCompletionStreamResponse"
COMPLETION = "CreateCompletionResponse"
ERROR = "ErrorResponse"

LOGPROBS = [TokenLogprob("Hel", -0.25), TokenLogprob("lo ", -1.5), TokenLogprob("🐉", -3.0)]
USAGE = Usage(prompt_tokens=7, completion_tokens=3)


@cache
def _document() -> dict[str, Any]:
    document: dict[str, Any] = json.loads(SCHEMAS_FILE.read_text(encoding="utf-8"))
    return document


@cache
def _validator(name: str) -> Any:
    # A root that refers to the named schema and carries `components`, so that every
    # `#/components/schemas/X` reference resolves inside the same document.
    schema = {"$ref": f"#/components/schemas/{name}", "components": _document()["components"]}
    jsonschema.Draft202012Validator.check_schema(schema)
    return jsonschema.Draft202012Validator(schema)


def errors_of(name: str, body: Any) -> list[str]:
    # Validate the body as a client receives it: after a JSON round trip.
    decoded = json.loads(dumps(body))
    return [
        f"{'/'.join(map(str, error.absolute_path)) or '<root>'}: {error.message}"
        for error in _validator(name).iter_errors(decoded)
    ]


def assert_valid(name: str, body: Any) -> None:
    problems = errors_of(name, body)
    assert not problems, f"{name} violations:\n" + "\n".join(problems)


# --------------------------------------------------------------------------- the schemas themselves


def test_fixture_holds_the_needed_schemas() -> None:
    schemas = _document()["components"]["schemas"]
    for name in (CHAT, CHAT_CHUNK, COMPLETION, ERROR, "ListModelsResponse", "Model"):
        assert name in schemas
    assert "nullable" not in SCHEMAS_FILE.read_text(encoding="utf-8")


def test_every_reference_resolves() -> None:
    schemas = _document()["components"]["schemas"]

    def refs(node: Any) -> list[str]:
        if isinstance(node, dict):
            found = [node["$ref"]] if isinstance(node.get("$ref"), str) else []
            return found + [ref for value in node.values() for ref in refs(value)]
        if isinstance(node, list):
            return [ref for value in node for ref in refs(value)]
        return []

    all_refs = refs(schemas)
    assert all_refs
    for ref in all_refs:
        assert ref.startswith("#/components/schemas/")
        assert ref.removeprefix("#/components/schemas/") in schemas


def test_schemas_reject_wrong_bodies() -> None:
    """The validator is live: a wrong body fails (guards against a vacuous schema file)."""
    assert errors_of(CHAT, {"id": "x"})
    assert errors_of(ERROR, {"error": {"message": "m", "type": "t"}})  # param and code required
    body = ResponseBuilder("chat", "m").role_chunk(0)
    body["object"] = "chat.completion"
    assert errors_of(CHAT_CHUNK, body)


def _extractor() -> Any:
    """tools/extract_openai_schemas.py, loaded by path (tools/ is not a package)."""
    path = Path(__file__).resolve().parents[3] / "tools" / "extract_openai_schemas.py"
    spec = importlib.util.spec_from_file_location("extract_openai_schemas", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_extractor_converts_nullable_and_keeps_property_names() -> None:
    spec = {
        "openapi": "3.1.0",
        "info": {"version": "1"},
        "components": {
            "schemas": {
                "Root": {
                    "type": "object",
                    "description": "dropped",
                    "x-oaiMeta": {"dropped": True},
                    "properties": {
                        # Property names that look like keywords must survive.
                        "description": {"type": "string", "nullable": True},
                        "nullable": {"$ref": "#/components/schemas/Leaf", "nullable": True},
                        "title": {"type": "integer", "nullable": False},
                    },
                    "required": ["description"],
                },
                "Leaf": {"type": "string", "enum": ["a", "b"], "example": "a"},
                "Unused": {"type": "string"},
            }
        },
    }
    document = _extractor().extract(spec, ("Root",))
    assert document["components"]["schemas"] == {
        "Leaf": {"type": "string", "enum": ["a", "b"]},
        "Root": {
            "type": "object",
            "properties": {
                "description": {"anyOf": [{"type": "string"}, {"type": "null"}]},
                "nullable": {"anyOf": [{"$ref": "#/components/schemas/Leaf"}, {"type": "null"}]},
                "title": {"type": "integer"},
            },
            "required": ["description"],
        },
    }


def test_extractor_refuses_missing_and_remote_references() -> None:
    extractor = _extractor()
    missing = {"components": {"schemas": {"A": {"$ref": "#/components/schemas/B"}}}}
    with pytest.raises(SystemExit, match=r"'B' is not in components\.schemas"):
        extractor.extract(missing, ("A",))
    remote = {"components": {"schemas": {"A": {"$ref": "other.yaml#/X"}}}}
    with pytest.raises(SystemExit, match="non-local reference"):
        extractor.extract(remote, ("A",))


# --------------------------------------------------------------------------------- chat: unary


def test_chat_unary() -> None:
    builder = ResponseBuilder("chat", "smollm2")
    body = builder.unary([Choice(0, "Hello there", "stop")], USAGE)
    assert_valid(CHAT, body)
    assert body["object"] == "chat.completion"
    assert body["id"].startswith("chatcmpl-")
    assert body["model"] == "smollm2"
    assert isinstance(body["created"], int)
    assert body["choices"] == [
        {
            "index": 0,
            "message": {"role": "assistant", "content": "Hello there", "refusal": None},
            "logprobs": None,
            "finish_reason": "stop",
        }
    ]
    assert body["usage"] == {"prompt_tokens": 7, "completion_tokens": 3, "total_tokens": 10}


@pytest.mark.parametrize("top", [0, 2])
def test_chat_unary_logprobs(top: int) -> None:
    builder = ResponseBuilder("chat", "m", top_logprobs=top)
    body = builder.unary([Choice(0, "Hello 🐉", "length", LOGPROBS)], USAGE)
    assert_valid(CHAT, body)
    content = body["choices"][0]["logprobs"]["content"]
    assert [entry["token"] for entry in content] == ["Hel", "lo ", "🐉"]
    assert content[2]["bytes"] == list("🐉".encode())
    assert body["choices"][0]["logprobs"]["refusal"] is None
    for entry in content:
        assert len(entry["top_logprobs"]) == (1 if top else 0)


def test_chat_unary_empty_logprobs() -> None:
    body = ResponseBuilder("chat", "m").unary([Choice(0, "", "stop", [])], Usage(3, 0))
    assert_valid(CHAT, body)
    assert body["choices"][0]["logprobs"] == {"content": [], "refusal": None}


def test_chat_unary_n2() -> None:
    builder = ResponseBuilder("chat", "m", top_logprobs=1)
    choices = [Choice(0, "one", "stop", LOGPROBS[:1]), Choice(1, "two", "length", LOGPROBS[1:])]
    body = builder.unary(choices, Usage(5, 4))
    assert_valid(CHAT, body)
    assert [choice["index"] for choice in body["choices"]] == [0, 1]
    assert [choice["finish_reason"] for choice in body["choices"]] == ["stop", "length"]


# -------------------------------------------------------------------------------- chat: stream


@pytest.mark.parametrize("include_usage", [False, True])
def test_chat_stream_chunks(include_usage: bool) -> None:
    builder = ResponseBuilder("chat", "m", include_usage=include_usage)
    chunks = [
        builder.role_chunk(0),
        builder.delta_chunk(0, "Hel"),
        builder.delta_chunk(0, "lo"),
        builder.delta_chunk(0, "", finish_reason="stop"),
    ]
    for chunk in chunks:
        assert_valid(CHAT_CHUNK, chunk)
        assert chunk["object"] == "chat.completion.chunk"
        assert chunk["id"] == builder.id
        assert chunk["created"] == builder.created
        if include_usage:
            # OpenAI: with include_usage every chunk carries "usage": null but the last.
            assert "usage" in chunk
            assert chunk["usage"] is None
        else:
            assert "usage" not in chunk
    assert chunks[0]["choices"][0]["delta"] == {"role": "assistant", "content": ""}
    assert chunks[1]["choices"][0]["delta"] == {"content": "Hel"}
    assert chunks[1]["choices"][0]["finish_reason"] is None
    assert chunks[3]["choices"][0]["delta"] == {}
    assert chunks[3]["choices"][0]["finish_reason"] == "stop"


def test_chat_stream_usage_chunk() -> None:
    builder = ResponseBuilder("chat", "m", include_usage=True)
    chunk = builder.usage_chunk(USAGE)
    assert_valid(CHAT_CHUNK, chunk)
    assert chunk["choices"] == []
    assert chunk["usage"] == {"prompt_tokens": 7, "completion_tokens": 3, "total_tokens": 10}


@pytest.mark.parametrize("top", [0, 3])
def test_chat_stream_logprobs(top: int) -> None:
    builder = ResponseBuilder("chat", "m", top_logprobs=top)
    chunk = builder.delta_chunk(1, "Hello", LOGPROBS[:2], finish_reason="length")
    assert_valid(CHAT_CHUNK, chunk)
    assert chunk["choices"][0]["index"] == 1
    assert len(chunk["choices"][0]["logprobs"]["content"]) == 2


def test_chat_stream_n2_role_chunks() -> None:
    builder = ResponseBuilder("chat", "m")
    for index in (0, 1):
        assert_valid(CHAT_CHUNK, builder.role_chunk(index))
        last = builder.delta_chunk(index, f"choice {index}", finish_reason="stop")
        assert_valid(CHAT_CHUNK, last)


# -------------------------------------------------------------------------- completions: unary


def test_completion_unary() -> None:
    builder = ResponseBuilder("completions", "m")
    body = builder.unary([Choice(0, " world", "length")], USAGE)
    assert_valid(COMPLETION, body)
    assert body["object"] == "text_completion"
    assert body["id"].startswith("cmpl-")
    assert body["choices"] == [
        {"index": 0, "text": " world", "logprobs": None, "finish_reason": "length"}
    ]
    assert body["usage"]["total_tokens"] == 10


def test_completion_unary_echo() -> None:
    builder = ResponseBuilder("completions", "m")
    body = builder.unary([Choice(0, " world", "stop")], USAGE, prompt_text="Hello")
    assert_valid(COMPLETION, body)
    assert body["choices"][0]["text"] == "Hello world"


@pytest.mark.parametrize("top", [0, 1, 5])
def test_completion_unary_logprobs(top: int) -> None:
    # `top` is the request's `logprobs` value (0..5); 0 asks for the chosen tokens' logprobs only.
    builder = ResponseBuilder("completions", "m", top_logprobs=top)
    body = builder.unary([Choice(0, "Hello 🐉", "stop", LOGPROBS)], USAGE, prompt_text="P: ")
    assert_valid(COMPLETION, body)
    logprobs = body["choices"][0]["logprobs"]
    assert logprobs["tokens"] == ["Hel", "lo ", "🐉"]
    assert logprobs["token_logprobs"] == [-0.25, -1.5, -3.0]
    # Offsets count characters of the returned text, which starts with the echoed prompt.
    assert logprobs["text_offset"] == [3, 6, 9]
    # Only the chosen token's logprob is known; the schema wants a list of token → logprob maps.
    assert logprobs["top_logprobs"] == [{"Hel": -0.25}, {"lo ": -1.5}, {"🐉": -3.0}]


def test_completion_unary_n2() -> None:
    builder = ResponseBuilder("completions", "m", top_logprobs=1)
    choices = [Choice(0, "a", "stop", LOGPROBS[:1]), Choice(1, "b", "length", LOGPROBS[1:2])]
    body = builder.unary(choices, USAGE)
    assert_valid(COMPLETION, body)


# ------------------------------------------------------------------------- completions: stream
# OpenAI streams completions as CreateCompletionResponse objects (the spec has no chunk schema).


@pytest.mark.parametrize("include_usage", [False, True])
def test_completion_stream_chunks(include_usage: bool) -> None:
    builder = ResponseBuilder("completions", "m", include_usage=include_usage)
    chunks = [
        builder.delta_chunk(0, "Hel"),
        builder.delta_chunk(0, "lo", finish_reason="stop"),
    ]
    for chunk in chunks:
        # Stream chunks are the unary shape; a non-final chunk's finish_reason is null, which
        # the schema's enum does not list, so validate with it set as the last chunk has it.
        final = json.loads(dumps(chunk))
        final["choices"][0]["finish_reason"] = final["choices"][0]["finish_reason"] or "stop"
        if include_usage:
            assert final.pop("usage") is None
        assert_valid(COMPLETION, final)
        assert chunk["object"] == "text_completion"
        assert chunk["id"] == builder.id
    assert [chunk["choices"][0]["text"] for chunk in chunks] == ["Hel", "lo"]
    assert chunks[0]["choices"][0]["finish_reason"] is None


@pytest.mark.parametrize("top", [0, 2])
def test_completion_stream_logprobs_offsets_continue(top: int) -> None:
    builder = ResponseBuilder("completions", "m", top_logprobs=top)
    first = builder.delta_chunk(0, "Hello ", LOGPROBS[:2])
    second = builder.delta_chunk(0, "🐉", LOGPROBS[2:], finish_reason="stop")
    other = builder.delta_chunk(1, "x", [TokenLogprob("x", -0.5)], finish_reason="stop")
    assert first["choices"][0]["logprobs"]["text_offset"] == [0, 3]
    assert second["choices"][0]["logprobs"]["text_offset"] == [6]
    assert other["choices"][0]["logprobs"]["text_offset"] == [0]  # per choice
    for chunk in (second, other):
        assert_valid(COMPLETION, chunk)


def test_completion_stream_usage_chunk() -> None:
    builder = ResponseBuilder("completions", "m", include_usage=True)
    chunk = builder.usage_chunk(USAGE)
    assert_valid(COMPLETION, chunk)
    assert chunk["choices"] == []


# ---------------------------------------------------------------------------- logprob helpers


def test_chat_logprobs_shape() -> None:
    assert chat_logprobs([TokenLogprob("é", -0.5)], 0) == {
        "content": [{"token": "é", "logprob": -0.5, "bytes": [195, 169], "top_logprobs": []}],
        "refusal": None,
    }
    entry = chat_logprobs([TokenLogprob("a", -0.5)], 4)["content"][0]
    assert entry["top_logprobs"] == [{"token": "a", "logprob": -0.5, "bytes": [97]}]


def test_completion_logprobs_shape() -> None:
    result = completion_logprobs([TokenLogprob("ab", -1.0), TokenLogprob("c", -2.0)], 10)
    assert result == {
        "tokens": ["ab", "c"],
        "token_logprobs": [-1.0, -2.0],
        "top_logprobs": [{"ab": -1.0}, {"c": -2.0}],
        "text_offset": [10, 12],
    }


# ------------------------------------------------------------------------------------- errors


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (
            ("bad",),
            {"message": "bad", "type": "invalid_request_error", "param": None, "code": None},
        ),
        (
            ("nope", "server_error", "model", "model_not_ready"),
            {
                "message": "nope",
                "type": "server_error",
                "param": "model",
                "code": "model_not_ready",
            },
        ),
    ],
)
def test_error_body(args: tuple[Any, ...], expected: dict[str, Any]) -> None:
    body = error_body(*args)
    assert_valid(ERROR, body)
    assert body == {"error": expected}


# --------------------------------------------------------------------------------- SSE framing


def test_sse_frame() -> None:
    body = {"text": "héllo 🐉", "n": [1, 2], "none": None}
    frame = sse_frame(body)
    assert frame.startswith(b"data: ")
    assert frame.endswith(b"\n\n")
    assert frame.count(b"\n") == 2  # one event, one data line
    payload = frame[len(b"data: ") : -2]
    assert json.loads(payload) == body
    # Compact separators, UTF-8 not \u escapes.
    assert frame == 'data: {"text":"héllo 🐉","n":[1,2],"none":null}\n\n'.encode()


def test_sse_frame_escapes_newlines_in_text() -> None:
    frame = sse_frame({"text": "a\nb\r\n\n"})
    assert frame == b'data: {"text":"a\\nb\\r\\n\\n"}\n\n'
    assert frame.count(b"\n") == 2


def test_sse_frame_of_a_chunk_round_trips() -> None:
    chunk = ResponseBuilder("chat", "m").delta_chunk(0, "hi")
    assert json.loads(sse_frame(chunk)[6:-2]) == chunk


def test_sse_done() -> None:
    assert SSE_DONE == b"data: [DONE]\n\n"
    assert isinstance(SSE_DONE, bytes)


def test_ids_differ_per_builder() -> None:
    ids = {ResponseBuilder("chat", "m").id for _ in range(20)}
    assert len(ids) == 20
