"""OpenAI's audio chat request parts: the spoken answer asked for (`audio_reply`), the spoken
messages found and decoded (`audio_parts`), the request rewritten as a text chat
(`text_request`), and the answer's audio (`answer_audio`, `audio_chunk`) valid against OpenAI's
published schemas.
"""

from __future__ import annotations

import base64
import copy
import time
from typing import Any

import pytest

from servables.errors import InvalidRequest
from servables.io.audio.codec import OUTPUT_FORMATS
from servables.llm.choices import Usage
from servables.openai.audio_chat import (
    EXPIRES_AFTER,
    AudioPart,
    AudioReply,
    answer_audio,
    audio_chunk,
    audio_parts,
    audio_reply,
    closing_chunks,
    refuse_audio_ids,
    text_request,
)
from servables.openai.bodies import Choice, ResponseBuilder
from tests.unit.servables.test_image_gen_protocol import assert_schema_valid, schema_errors

SPOKEN = {"modalities": ["text", "audio"], "audio": {"voice": "alloy", "format": "wav"}}


def chat(**fields: Any) -> dict[str, Any]:
    return {"model": "voice", "messages": [{"role": "user", "content": "Hi"}], **fields}


def refused_reply(body: dict[str, Any]) -> InvalidRequest:
    with pytest.raises(InvalidRequest) as caught:
        audio_reply(body)
    return caught.value


def refused_parts(body: dict[str, Any]) -> InvalidRequest:
    with pytest.raises(InvalidRequest) as caught:
        audio_parts(body)
    return caught.value


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


def audio_message(*parts: Any) -> dict[str, Any]:
    return {"role": "user", "content": list(parts)}


def input_audio(data: bytes, kind: str = "wav") -> dict[str, Any]:
    return {"type": "input_audio", "input_audio": {"data": b64(data), "format": kind}}


def text_part(text: str) -> dict[str, Any]:
    return {"type": "text", "text": text}


# ---------------------------------------------------------------------------------- audio_reply


@pytest.mark.parametrize(
    "body",
    [chat(), chat(modalities=["text"]), chat(modalities=None), chat(modalities=["text"], n=3)],
)
def test_a_text_answer_is_none(body: dict[str, Any]) -> None:
    assert audio_reply(body) is None


def test_audio_without_the_audio_modality_is_refused() -> None:
    error = refused_reply(chat(modalities=["text"], audio={"voice": "alloy", "format": "wav"}))
    assert error.param == "audio"
    assert "modalities" in error.message
    # No modalities at all means ["text"]: the same refusal.
    assert refused_reply(chat(audio={"voice": "alloy", "format": "wav"})).param == "audio"


@pytest.mark.parametrize("audio", [None, "wav", ["wav"]])
def test_the_audio_modality_needs_an_audio_object(audio: Any) -> None:
    body = chat(modalities=["text", "audio"])
    if audio is not None:
        body["audio"] = audio
    error = refused_reply(body)
    assert error.param == "audio"
    assert "audio" in error.message


@pytest.mark.parametrize("modalities", ["audio", ["text", "video"], [], {"audio": 1}])
def test_bad_modalities_are_refused(modalities: Any) -> None:
    body = chat(modalities=modalities, audio=SPOKEN["audio"])
    if modalities == []:  # a list of nothing asks for no audio: then audio must not be set
        assert refused_reply(body).param == "audio"
    else:
        assert refused_reply(body).param == "modalities"


@pytest.mark.parametrize(
    ("field", "value", "param"),
    [
        ("modalities", ["text", ["audio"]], "modalities"),
        ("modalities", [{"type": "audio"}], "modalities"),
        ("audio", {"voice": "alloy", "format": ["wav"]}, "audio.format"),
        ("audio", {"voice": "alloy", "format": {"type": "wav"}}, "audio.format"),
    ],
)
def test_unhashable_values_are_refused_not_crashed(field: str, value: Any, param: str) -> None:
    """A JSON list or object where a string belongs is a 400 naming the field, like any other
    wrong value (today: TypeError from `set(modalities)` / `kind not in AUDIO_FORMATS`)."""
    body = chat(**SPOKEN)
    body[field] = value
    assert refused_reply(body).param == param


@pytest.mark.parametrize("kind", ["aac", None, "WAV", "pcm"])
def test_unknown_format_is_refused(kind: Any) -> None:
    error = refused_reply(chat(modalities=["text", "audio"], audio={"voice": "a", "format": kind}))
    assert error.param == "audio.format"
    assert repr(kind) in error.message
    for name in ("wav", "mp3", "flac", "opus", "pcm16"):
        assert name in error.message


def test_voice_may_be_an_object_with_an_id() -> None:
    body = chat(modalities=["text", "audio"], audio={"voice": {"id": "v_123"}, "format": "mp3"})
    reply = audio_reply(body)
    assert reply is not None
    assert reply.voice == "v_123"


@pytest.mark.parametrize("voice", [5, {"id": "a", "name": "b"}, {"name": "b"}, ["alloy"]])
def test_a_voice_that_is_no_string_is_refused(voice: Any) -> None:
    error = refused_reply(
        chat(modalities=["text", "audio"], audio={"voice": voice, "format": "wav"})
    )
    assert error.param == "audio.voice"


def test_voice_may_be_left_out() -> None:
    reply = audio_reply(chat(modalities=["text", "audio"], audio={"format": "wav"}))
    assert reply is not None
    assert reply.voice is None


@pytest.mark.parametrize("n", [2, 0])
def test_a_spoken_answer_has_one_choice(n: int) -> None:
    error = refused_reply(chat(n=n, **SPOKEN))
    assert error.param == "n"


@pytest.mark.parametrize("n", [1, None])
def test_n_of_one_or_null_is_accepted(n: Any) -> None:
    assert audio_reply(chat(n=n, **SPOKEN)) is not None


@pytest.mark.parametrize(
    ("asked", "codec"),
    [("wav", "wav"), ("mp3", "mp3"), ("flac", "flac"), ("opus", "opus"), ("pcm16", "pcm")],
)
def test_formats_are_the_codecs_names(asked: str, codec: str) -> None:
    reply = audio_reply(chat(modalities=["text", "audio"], audio={"voice": "a", "format": asked}))
    assert reply is not None
    assert reply.format == codec
    assert reply.format in OUTPUT_FORMATS  # what encode_audio is called with


@pytest.mark.parametrize(("stream", "expected"), [(True, True), (False, False), (None, False)])
def test_stream_flag(stream: Any, expected: bool) -> None:
    body = chat(**SPOKEN) if stream is None else chat(stream=stream, **SPOKEN)
    reply = audio_reply(body)
    assert reply is not None
    assert reply.stream is expected


def test_reply_fields_and_a_fresh_audio_id() -> None:
    first = audio_reply(chat(**SPOKEN))
    second = audio_reply(chat(**SPOKEN))
    assert first is not None and second is not None
    assert (first.voice, first.format, first.stream) == ("alloy", "wav", False)
    for reply in (first, second):
        assert reply.id.startswith("audio_")
        assert len(reply.id) > len("audio_") + 8
    assert first.id != second.id


def test_expires_at_is_an_hour_from_now() -> None:
    reply = AudioReply("alloy", "wav", False, "audio_x")
    before = int(time.time())
    expires = reply.expires_at
    assert before + EXPIRES_AFTER <= expires <= int(time.time()) + EXPIRES_AFTER
    assert EXPIRES_AFTER == 3600


# ---------------------------------------------------------------------------------- audio_parts


def test_parts_are_found_in_every_message_with_their_positions() -> None:
    body = chat(
        messages=[
            {"role": "system", "content": "Be brief."},
            audio_message(text_part("Listen:"), input_audio(b"first", "wav")),
            {"role": "assistant", "content": "Sure."},
            audio_message(
                input_audio(b"second", "mp3"),
                {"type": "image_url", "image_url": {"url": "data:,"}},
                input_audio(b"\x00\xff third", "wav"),
            ),
        ]
    )
    assert audio_parts(body) == [
        AudioPart(1, 1, b"first", "wav"),
        AudioPart(3, 0, b"second", "mp3"),
        AudioPart(3, 2, b"\x00\xff third", "wav"),
    ]
    assert audio_parts(body)[2].param == "messages[3].content[2].input_audio"


@pytest.mark.parametrize(
    "body",
    [
        chat(),
        chat(messages=[audio_message(text_part("no audio"))]),
        chat(messages="not a list"),
        chat(messages=["not a dict", {"role": "user"}]),
        {"model": "voice"},
    ],
)
def test_no_parts(body: dict[str, Any]) -> None:
    assert audio_parts(body) == []


@pytest.mark.parametrize("data", ["not base64!", "YW Jj", "YWJjZA"])
def test_bad_base64_names_the_data_field(data: str) -> None:
    body = chat(
        messages=[
            {"role": "user", "content": "Hi"},
            audio_message(
                text_part("x"),
                input_audio(b"fine"),
                {"type": "input_audio", "input_audio": {"data": data, "format": "wav"}},
            ),
        ]
    )
    error = refused_parts(body)
    assert error.param == "messages[1].content[2].input_audio.data"
    assert "base64" in error.message


@pytest.mark.parametrize(
    "audio",
    [
        {"format": "wav"},
        {"data": b64(b"x")},
        {"data": 5, "format": "wav"},
        {"data": b64(b"x"), "format": None},
        "a string",
        None,
    ],
)
def test_missing_data_or_format_names_the_part(audio: Any) -> None:
    part: dict[str, Any] = {"type": "input_audio"}
    if audio is not None:
        part["input_audio"] = audio
    error = refused_parts(chat(messages=[audio_message(text_part("x"), part)]))
    assert error.param == "messages[0].content[1].input_audio"
    assert "data" in error.message and "format" in error.message


# --------------------------------------------------------------------------------- text_request


def test_text_request_replaces_exactly_the_audio_parts() -> None:
    image = {"type": "image_url", "image_url": {"url": "data:,"}}
    body = chat(
        messages=[
            {"role": "system", "content": "Be brief."},
            audio_message(text_part("Listen:"), input_audio(b"first")),
            audio_message(input_audio(b"second"), image, input_audio(b"third")),
        ],
        stream=True,
        temperature=0.5,
        **SPOKEN,
    )
    original = copy.deepcopy(body)
    parts = audio_parts(body)
    rewritten = text_request(body, parts, ["one", "two", "three"])

    assert rewritten == {
        "model": "voice",
        "messages": [
            {"role": "system", "content": "Be brief."},
            audio_message(text_part("Listen:"), text_part("one")),
            audio_message(text_part("two"), image, text_part("three")),
        ],
        "stream": True,
        "temperature": 0.5,
    }
    assert body == original  # the caller's body is untouched


def test_text_request_copies_deeply() -> None:
    body = chat(messages=[audio_message(text_part("keep"), input_audio(b"a"))], **SPOKEN)
    original = copy.deepcopy(body)
    rewritten = text_request(body, audio_parts(body), ["heard"])
    rewritten["messages"][0]["content"][0]["text"] = "changed"
    rewritten["messages"][0]["role"] = "changed"
    assert body == original


def test_text_request_without_parts_only_drops_the_audio_fields() -> None:
    body = chat(**SPOKEN)
    assert text_request(body, [], []) == chat()
    assert body == chat(**SPOKEN)


def test_text_request_needs_a_transcript_per_part() -> None:
    body = chat(messages=[audio_message(input_audio(b"a"), input_audio(b"b"))])
    with pytest.raises(ValueError):
        text_request(body, audio_parts(body), ["only one"])


# ------------------------------------------------------------------- the answer's audio, schemas


REPLY = AudioReply("alloy", "wav", False, "audio_0123456789abcdef01234567")


def unary_body(content: str) -> dict[str, Any]:
    builder = ResponseBuilder("chat", "voice-chat")
    return builder.unary([Choice(0, content, "stop")], Usage(7, 5))


def test_answer_audio_in_a_unary_body_is_valid() -> None:
    data = b"RIFF\x00\x01 some audio bytes"
    before = int(time.time())
    audio = answer_audio(REPLY, data, "Hello there.")
    assert set(audio) == {"id", "data", "expires_at", "transcript"}
    assert audio["id"] == REPLY.id
    assert base64.b64decode(audio["data"], validate=True) == data
    assert audio["transcript"] == "Hello there."
    assert before + EXPIRES_AFTER <= audio["expires_at"] <= int(time.time()) + EXPIRES_AFTER

    body = unary_body("Hello there.")
    body["choices"][0]["message"]["audio"] = audio
    assert_schema_valid("CreateChatCompletionResponse", body)


def test_the_schema_check_sees_a_broken_message_audio() -> None:
    """The validation above can fail: the schema requires every field of message.audio."""
    audio = answer_audio(REPLY, b"x", "Hi.")
    del audio["expires_at"]
    body = unary_body("Hi.")
    body["choices"][0]["message"]["audio"] = audio
    problems = schema_errors("CreateChatCompletionResponse", body)
    assert [problem.split(":")[0] for problem in problems] == ["choices/0/message/audio"]


@pytest.mark.parametrize("last", [False, True])
def test_audio_chunk_is_a_valid_stream_chunk(last: bool) -> None:
    builder = ResponseBuilder("chat", "voice-chat")
    first = builder.role_chunk(0)
    envelope = {key: first[key] for key in ("id", "created", "model")}
    data = b"\x01\x02\x03 pcm"
    chunk = audio_chunk(envelope, REPLY, data, "Hi there.", last)

    assert_schema_valid("CreateChatCompletionStreamResponse", chunk)
    assert {key: chunk[key] for key in ("id", "created", "model")} == envelope
    assert chunk["object"] == "chat.completion.chunk"
    [choice] = chunk["choices"]
    assert (choice["index"], choice["finish_reason"]) == (0, None)
    audio = choice["delta"]["audio"]
    assert audio["id"] == REPLY.id
    assert base64.b64decode(audio["data"], validate=True) == data
    assert audio["transcript"] == "Hi there."
    if last:
        assert set(audio) == {"id", "data", "transcript", "expires_at"}
        assert abs(audio["expires_at"] - (int(time.time()) + EXPIRES_AFTER)) <= 2
    else:
        assert set(audio) == {"id", "data", "transcript"}
    assert set(choice["delta"]) == {"audio"}


def test_audio_chunk_does_not_change_the_envelope() -> None:
    envelope = {"id": "chatcmpl-1", "created": 1, "model": "m"}
    audio_chunk(envelope, REPLY, b"", "", True)
    assert envelope == {"id": "chatcmpl-1", "created": 1, "model": "m"}


def test_an_answer_sent_back_by_its_audio_id_alone_is_refused() -> None:
    """OpenAI keeps spoken answers by id for the next turn; this server keeps none, so such a
    turn would reach the LLM empty: refused, saying what to send instead."""
    body = {
        "messages": [
            {"role": "user", "content": "hi"},
            {"role": "assistant", "audio": {"id": "audio_1"}},
            {"role": "user", "content": "and?"},
        ]
    }
    with pytest.raises(InvalidRequest, match="send an earlier spoken answer back") as raised:
        refuse_audio_ids(body)
    assert raised.value.param == "messages[1].audio"
    body["messages"][1]["content"] = "Hello!"  # with its text: fine
    refuse_audio_ids(body)


def test_the_end_of_a_stream_is_split_from_its_last_words() -> None:
    """The last text goes out now; its finish_reason (without the logprobs, sent already with
    the text) waits, as do the usage chunk and an error frame."""
    text_and_end = {
        "id": "c",
        "choices": [
            {
                "index": 0,
                "delta": {"content": "Bye."},
                "logprobs": {"content": []},
                "finish_reason": "stop",
            }
        ],
    }
    usage = {"id": "c", "choices": [], "usage": {"total_tokens": 3}}
    error = {"error": {"message": "boom"}}
    plain = {
        "id": "c",
        "choices": [{"index": 0, "delta": {"content": "Hi"}, "finish_reason": None}],
    }
    now, ending = closing_chunks([plain, text_and_end, usage, error])
    assert now[0] == plain and now[1]["choices"][0]["delta"] == {"content": "Bye."}
    assert now[1]["choices"][0]["finish_reason"] is None and len(now) == 2
    assert ending[0]["choices"][0] == {
        "index": 0,
        "delta": {},
        "logprobs": None,
        "finish_reason": "stop",
    }
    assert ending[1:] == [usage, error]
