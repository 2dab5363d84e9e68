"""A grammar the engine cannot compile fails its own request only
(servables/llm/engine/batching.py).

The tests drive a real engine process (EngineClient, the tiny llama, openvino-genai's
ContinuousBatchingPipeline) with requests sent straight to the engine, so the grammars skip
the frontend's checks (servables/llm/grammar_check.py) the way a grammar those checks miss would:
the bad request fails as invalid, with the engine's message and no build paths, requests around
it finish, the grammar is remembered, and no number of such requests costs an engine restart.
A corpus of grammars the checks accept, edge cases included, must all compile and run a step.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from servables.errors import GrammarNotCompiled, InvalidRequest
from servables.llm.engine.client import EngineClient
from servables.llm.engine.messages import AddRequest, EngineSpec
from servables.llm.grammar_check import check_ebnf, check_regex, json_schema_text
from servables.llm.request import Limits
from servables.llm.servable import LLMServable, LLMServableConfig
from servables.openai import structured_output
from servables.openai.protocol import parse_request
from servables.runtime.supervision import RestartPolicy, SupervisorState

PROMPT = [1, 2, 3, 4]
BAD = {"regex": "a++"}  # XGrammar: "Two consecutive repetition modifiers are not allowed"
LONG = 120
REPEATS = RestartPolicy().max_restarts + 1


@pytest.fixture
async def engine(tiny_llm_gguf: Path) -> AsyncIterator[EngineClient]:
    spec = EngineSpec("LM_CB", str(tiny_llm_gguf), "CPU", {}, {"cache_size": 1})
    client = EngineClient(spec, "tiny")
    await client.start()
    try:
        yield client
    finally:
        await client.close()


def request(client: EngineClient, tokens: int, grammar: dict[str, str] | None = None) -> AddRequest:
    config: dict[str, Any] = {"max_new_tokens": tokens, "do_sample": False}
    if grammar is None:
        config["ignore_eos"] = True
    else:
        config["structured_output"] = grammar
    return AddRequest(client.new_request_id(), PROMPT, None, config)


async def run(client: EngineClient, tokens: int, grammar: dict[str, str] | None = None) -> int:
    """Tokens the request produced, once it finished."""
    stream = client.submit([request(client, tokens, grammar)])
    produced = 0
    try:
        while True:
            for delta in await stream.next_batch():
                produced += len(delta.token_ids)
                if delta.finish_reason is not None:
                    return produced
    finally:
        stream.close()


async def test_a_grammar_the_engine_cannot_compile_fails_only_its_request(
    engine: EngineClient,
) -> None:
    # A long request is running (with output already sent) when the bad grammar arrives, and
    # one with another new grammar arrives with it.
    long_stream = engine.submit([request(engine, LONG)])
    first = await long_stream.next_batch()
    bad = asyncio.create_task(run(engine, 5, BAD))
    other = asyncio.create_task(run(engine, 4, {"regex": "[ab]+"}))
    with pytest.raises(GrammarNotCompiled) as caught:
        await bad
    message = caught.value.message
    assert "could not compile" in message and "repetition" in message, message
    assert "/home/" not in message and ".cc:" not in message, message
    assert await other > 0
    produced = sum(len(delta.token_ids) for delta in first)
    while True:
        batch = await long_stream.next_batch()
        produced += sum(len(delta.token_ids) for delta in batch)
        if any(delta.finish_reason for delta in batch):
            break
    long_stream.close()
    assert produced == LONG  # carried over to the rebuilt pipeline, not started again
    assert engine.grammar_failure(BAD) == message
    assert await run(engine, 3) == 3
    # However often it comes, the engine is never restarted (each time the worker rebuilds
    # its pipeline in place; the server would refuse it at once, from the memory above).
    for _ in range(REPEATS):
        with pytest.raises(GrammarNotCompiled):
            await run(engine, 5, BAD)
    assert await run(engine, 3) == 3
    assert engine.alive and engine.supervisor.state is SupervisorState.RUNNING
    assert engine.supervisor.restarts == 0


async def test_a_stateful_pipeline_fails_the_grammar_and_goes_on(tiny_llm_gguf: Path) -> None:
    client = EngineClient(EngineSpec("LM", str(tiny_llm_gguf), "CPU", {}, {}), "tiny-lm")
    await client.start()
    try:
        with pytest.raises(GrammarNotCompiled) as caught:
            await run(client, 5, BAD)
        assert "could not compile" in caught.value.message
        assert "/home/" not in caught.value.message
        assert client.grammar_failure(BAD) == caught.value.message
        assert await run(client, 3) == 3
        assert client.alive and client.supervisor.restarts == 0
    finally:
        await client.close()


# Grammars the checks accept, edge cases first; each must compile in the engine.
ACCEPTED: list[tuple[str, Any]] = [
    ("regex", r"^a"),
    ("regex", r"[\d]+"),
    ("regex", r"\x41\u0041"),
    ("regex", "a{0}"),
    ("regex", "()"),
    ("regex", "(a)*?"),
    ("regex", "[^a]"),
    ("regex", "(?:yes|no)"),
    ("grammar", 'root ::= root "a" | "a"'),
    ("grammar", "root ::= [^]"),
    ("grammar", 'root ::= "a"{0}'),
    ("grammar", 'root ::= a-b\na-b ::= "x"'),
    ("grammar", r'root ::= [\-\]] "\x41" "\u00e9" "\U0001F600"'),
    ("grammar", "root ::= [+--] [a-a]"),
    ("json_schema", {"$ref": "#"}),
    ("json_schema", {"type": "integer", "minimum": (1 << 63) - 1}),
    ("json_schema", {"type": "integer", "maximum": -(1 << 63)}),
    ("json_schema", {"type": "integer", "minimum": 1e18, "maximum": 2e18}),
    ("json_schema", {"type": "integer", "exclusiveMinimum": 5, "exclusiveMaximum": 7}),
    ("json_schema", {"type": "number", "minimum": -1e300, "maximum": 1e300}),
    ("json_schema", {"type": "array", "items": {"type": "integer"}, "minItems": 100000}),
    ("json_schema", {"type": "array", "prefixItems": [{"type": "string"}], "minItems": 1}),
    ("json_schema", {"type": "object", "minProperties": 1, "additionalProperties": True}),
    ("json_schema", {"type": "object", "properties": {"a": {}}, "minProperties": 1}),
    ("json_schema", {"type": "object", "patternProperties": {"^x": {"type": "integer"}}}),
    ("json_schema", {"type": "string", "maxLength": 0}),
    ("regex", "a{2}?"),
    ("grammar", r'root ::= "\x4" "\e" "a"'),
    ("json_schema", {"type": "array", "unevaluatedItems": True, "minItems": 2}),
    ("json_schema", {"type": "object", "minProperties": 2, "additionalProperties": {}}),
    ("json_schema", {"type": "object", "minProperties": 1, "patternProperties": {"^x": {}}}),
]


def checked(kind: str, value: Any) -> dict[str, str]:
    if kind == "regex":
        check_regex(value, kind)
        return {kind: value}
    if kind == "grammar":
        check_ebnf(value, kind)
        return {kind: value}
    return {kind: json_schema_text(value, kind)}


async def test_grammars_the_checks_accept_compile(engine: EngineClient) -> None:
    grammars = [checked(kind, value) for kind, value in ACCEPTED]
    results = await asyncio.gather(
        *(run(engine, 2, grammar) for grammar in grammars), return_exceptions=True
    )
    failed = [
        (json.dumps(grammar), result)
        for grammar, result in zip(grammars, results, strict=True)
        if isinstance(result, BaseException)
    ]
    assert not failed


# --------------------------------------------------------------------- through the LLM servable


@pytest.fixture
async def servable(tiny_llm_gguf: Path) -> AsyncIterator[LLMServable]:
    served = LLMServable(
        LLMServableConfig(name="tiny", models_path=tiny_llm_gguf, scheduler={"cache_size": 1})
    )
    await served.start()
    try:
        yield served
    finally:
        await served.stop()


async def complete(servable: LLMServable, **fields: Any) -> str:
    body = {"model": "tiny", "prompt": "Say something", "max_tokens": 4, **fields}
    request = parse_request(body, "completions", Limits())
    text = ""
    async for event in servable.generate(request):
        text += "".join(update.text for update in event.updates)
    return text


async def test_the_servable_names_the_field_and_refuses_the_grammar_next_time(
    servable: LLMServable, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A grammar the checks miss: here one they would catch, with the regex check switched off.
    monkeypatch.setattr(structured_output, "check_regex", lambda pattern, param: None)
    with pytest.raises(InvalidRequest) as caught:
        await complete(servable, guided_regex="a++")
    assert caught.value.param == "guided_regex"
    assert caught.value.message.startswith("guided_regex: the grammar engine could not compile")
    submit = servable.engine.submit
    monkeypatch.setattr(servable.engine, "submit", None)  # refused before reaching the engine
    for _ in range(REPEATS):
        with pytest.raises(InvalidRequest) as again:
            await complete(servable, guided_regex="a++")
        assert again.value.message == caught.value.message
        assert again.value.param == "guided_regex"
    monkeypatch.setattr(servable.engine, "submit", submit)
    await complete(servable)
    await complete(servable, guided_regex="[ab]+")
    assert servable.engine.alive and servable.engine.supervisor.restarts == 0
