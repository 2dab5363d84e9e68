"""What the frontend does with a grammar the engine could not compile (servables/llm/engine).

The engine side runs for real in tests/e2e/test_grammar_containment.py; here: the worker's
message for the client loses the build machine's paths, the client turns the failure into a 400
and remembers the grammar (boundedly), and a request cut short by a rebuild is retryable.
"""

from __future__ import annotations

import pytest

from servables.errors import GrammarNotCompiled, InvalidRequest, ServableNotReady
from servables.llm.engine import client as client_module
from servables.llm.engine.client import EngineClient, RequestStream
from servables.llm.engine.messages import EngineSpec, RequestFailed
from servables.llm.engine.pipeline import engine_message, grammar_key

ENGINE_ERROR = (
    "[04:54:47] /home/jenkins/agent/workspace/private-ci/ie/build-linux-manylinux_2_28/b/repos/"
    "openvino.genai/.py-build-cmake_cache/cp311-cp311-manylinux_2_28_x86_64/_deps/xgrammar-src/"
    "cpp/regex_converter.cc:75: Regex parsing error at position 3: Two consecutive repetition "
    "modifiers are not allowed.\n"
)


def test_engine_messages_lose_timestamps_and_build_paths() -> None:
    assert engine_message(RuntimeError(ENGINE_ERROR)) == (
        "Regex parsing error at position 3: Two consecutive repetition modifiers are not allowed."
    )
    assert engine_message(RuntimeError("")) == "RuntimeError"


def test_grammar_key() -> None:
    assert grammar_key({"max_new_tokens": 3}) is None
    assert grammar_key({"structured_output": {"regex": "a+"}}) == ("regex", "a+")


def streamed(client: EngineClient, request_id: int) -> RequestStream:
    stream = RequestStream([request_id], client)
    client._streams[request_id] = stream
    return stream


async def next_error(stream: RequestStream) -> BaseException:
    with pytest.raises(Exception) as info:
        await stream.next_batch()
    return info.value


async def test_a_grammar_the_engine_refused_is_a_400_and_remembered(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(client_module, "BAD_GRAMMARS", 2)
    client = EngineClient(EngineSpec("LM_CB", "/nowhere", "CPU", {}, {}), "m")
    assert client.grammar_failure({"regex": "a++"}) is None
    stream = streamed(client, 1)
    message = "the grammar engine could not compile the grammar: Regex parsing error"
    client._fail_request(RequestFailed(1, message, True, grammar=("regex", "a++")))
    error = await next_error(stream)
    assert isinstance(error, GrammarNotCompiled) and isinstance(error, InvalidRequest)
    assert error.message == message
    assert client.grammar_failure({"regex": "a++"}) == message
    # Failures of requests no longer streamed (aborted) are remembered too; the oldest goes.
    client._fail_request(RequestFailed(7, "m2", True, grammar=("grammar", "root ::= x")))
    client._fail_request(RequestFailed(8, "m3", True, grammar=("json_schema", "{}")))
    assert client.grammar_failure({"regex": "a++"}) is None
    assert client.grammar_failure({"json_schema": "{}"}) == "m3"


async def test_a_request_cut_short_by_a_rebuild_is_retryable() -> None:
    client = EngineClient(EngineSpec("LM_CB", "/nowhere", "CPU", {}, {}), "m")
    stream = streamed(client, 3)
    client._fail_request(RequestFailed(3, "interrupted; send it again", False, retryable=True))
    error = await next_error(stream)
    assert isinstance(error, ServableNotReady)
    assert error.retry_after == client_module.REBUILD_RETRY_AFTER
