"""OpenAI's transcription and translation API on a Whisper servable: the form checked with
OVMS's refusals, and the answer in every response_format OpenAI names (JSON ones valid against
OpenAI's published schemas, subtitles in SRT and WebVTT timing syntax).
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from servables.errors import InvalidRequest
from servables.io.request_fields import RequestFields, UploadedFile
from servables.speech_to_text.protocol import (
    Segment,
    Transcript,
    TranscriptionRequest,
    Word,
    delta_event,
    done_event,
    parse_transcription,
    response,
    subtitles,
)
from tests.unit.servables.test_image_gen_protocol import assert_schema_valid

AUDIO = UploadedFile("speech.wav", "audio/wav", b"RIFF....WAVE")
TRANSCRIPT = Transcript(
    text=" Hello there. General Kenobi.",
    duration=3.25,
    language="en",
    segments=[Segment(0.0, 1.5, " Hello there.", (1, 2)), Segment(1.5, 3.2504, " General Kenobi.")],
    words=[Word(" Hello", 0.0, 0.61234), Word(" there.", 0.7, 1.5)],
)


def fields(with_file: bool = True, **values: str | list[str]) -> RequestFields:
    """A form; `x__` stands for `x[]` (how OpenAI's SDKs send lists)."""
    parts: dict[str, list[str | UploadedFile]] = {"file": [AUDIO]} if with_file else {}
    for name, value in values.items():
        parts[name.replace("__", "[]")] = list(value) if isinstance(value, list) else [value]
    return RequestFields(form=parts)


def parse(
    form: RequestFields, translate: bool = False, word_timestamps: bool = False
) -> TranscriptionRequest:
    return parse_transcription(form, "whisper", translate, word_timestamps)


def refused(form: RequestFields, translate: bool = False) -> InvalidRequest:
    with pytest.raises(InvalidRequest) as caught:
        parse(form, translate)
    return caught.value


def json_response(request: TranscriptionRequest, transcript: Transcript = TRANSCRIPT) -> Any:
    body, content_type = response(request, transcript)
    assert content_type == "application/json"
    return json.loads(body)


# -------------------------------------------------------------------------------------- requests


def test_defaults() -> None:
    request = parse(fields())
    assert request.model == "whisper" and request.audio == AUDIO and not request.translate
    assert request.response_format == "json" and not request.stream
    assert (request.language, request.prompt, request.temperature) == (None, None, None)
    assert not request.timestamps


def test_fields_are_read() -> None:
    request = parse(
        fields(model="w", language="DE", prompt="Names: Kenobi.", temperature="0.4", stream="1")
    )
    assert request.model == "w" and request.language == "de"  # ISO-639-1, lowered
    assert request.prompt == "Names: Kenobi." and request.temperature == 0.4 and request.stream


@pytest.mark.parametrize(
    ("form", "param", "message"),
    [
        (fields(with_file=False), "file", "File parsing fails"),
        (fields(with_file=False, file="text"), "file", "file must be a file part of the form"),
        (fields(language="english"), "language", "Invalid language code."),
        (fields(language="e1"), "language", "Invalid language code."),
        (fields(temperature="warm"), "temperature", "Invalid temperature type."),
        (fields(temperature="1.5"), "temperature", "temperature must be at most 1; got 1.5"),
        (fields(temperature="-0.5"), "temperature", "temperature must be at least 0; got -0.5"),
        (
            fields(timestamp_granularities__=["segment", "line"]),
            "timestamp_granularities",
            'Invalid timestamp_granularities type. Allowed types: "segment", "word"',
        ),
        (
            fields(timestamp_granularities__=["word"]),
            "timestamp_granularities",
            "Word timestamps not supported for this model",
        ),
        (
            fields(response_format="xml"),
            "response_format",
            "response_format must be one of json, text, verbose_json, srt, vtt; got 'xml'",
        ),
        (fields(stream="maybe"), "stream", "stream field is not a boolean"),
        (fields(foo="1"), "foo", "Unhandled parameter: foo"),
    ],
)
def test_refusals(form: RequestFields, param: str, message: str) -> None:
    error = refused(form)
    assert (error.param, error.message) == (param, message)


def test_two_files_are_refused() -> None:
    form = RequestFields(form={"file": [AUDIO, AUDIO]})
    assert refused(form).message == "File parsing fails"


def test_word_timestamps_when_the_graph_enables_them() -> None:
    request = parse(fields(timestamp_granularities__=["word", "segment"]), word_timestamps=True)
    assert request.words and request.segments and request.timestamps


def test_a_single_granularity_field_works_as_the_list() -> None:
    assert parse(fields(timestamp_granularities="segment")).segments


def test_subtitles_and_verbose_json_ask_for_segments() -> None:
    for response_format in ("srt", "vtt", "verbose_json"):
        request = parse(fields(response_format=response_format))
        assert request.segments and not request.words
    assert not parse(fields(response_format="text")).segments


def test_openai_fields_without_a_whisper_meaning_are_accepted() -> None:
    request = parse(fields(include__=["logprobs"], chunking_strategy="auto"))
    assert request.response_format == "json"


def test_streaming_translations_are_refused() -> None:
    error = refused(fields(stream="true"), translate=True)
    assert error.param == "stream"
    assert error.message == "streaming is not supported for translations endpoint"


def test_a_stream_has_no_timestamps() -> None:
    error = refused(fields(stream="true", timestamp_granularities__=["segment"]))
    assert error.param == "timestamp_granularities"
    assert error.message.startswith("timestamp_granularities: a stream's events carry no")


def test_translations_ignore_the_language_and_take_no_granularities() -> None:
    request = parse(fields(language="fr"), translate=True)
    assert request.translate and request.language is None  # the target is English
    error = refused(fields(timestamp_granularities__=["segment"]), translate=True)
    assert error.message == "Unhandled parameter: timestamp_granularities"


# ------------------------------------------------------------------------------------- responses


def test_json() -> None:
    body = json_response(parse(fields()))
    assert body == {"text": TRANSCRIPT.text, "usage": {"type": "duration", "seconds": 3.25}}
    assert_schema_valid("CreateTranscriptionResponseJson", body)


def test_json_with_timestamps_as_ovms_adds_them() -> None:
    request = parse(fields(timestamp_granularities__=["word", "segment"]), word_timestamps=True)
    body = json_response(request)
    assert body["words"][0] == {"word": " Hello", "start": 0.0, "end": 0.612}
    assert [s["end"] for s in body["segments"]] == [1.5, 3.25]
    assert_schema_valid("CreateTranscriptionResponseJson", body)


def test_text() -> None:
    body, content_type = response(parse(fields(response_format="text")), TRANSCRIPT)
    assert (body.decode(), content_type) == (TRANSCRIPT.text, "text/plain")


def test_verbose_json() -> None:
    body = json_response(parse(fields(response_format="verbose_json")))
    assert body["task"] == "transcribe" and body["language"] == "english"
    assert body["duration"] == 3.25 and body["text"] == TRANSCRIPT.text
    first, second = body["segments"]
    assert (first["id"], first["start"], first["end"], first["tokens"]) == (0, 0.0, 1.5, [1, 2])
    assert (second["id"], second["text"]) == (1, " General Kenobi.")
    assert "words" not in body
    assert_schema_valid("CreateTranscriptionResponseVerboseJson", body)


def test_verbose_json_with_words() -> None:
    request = parse(
        fields(response_format="verbose_json", timestamp_granularities__=["word"]),
        word_timestamps=True,
    )
    body = json_response(request)
    assert [w["word"] for w in body["words"]] == [" Hello", " there."]
    assert len(body["segments"]) == 2
    assert_schema_valid("CreateTranscriptionResponseVerboseJson", body)


def test_verbose_json_of_a_translation() -> None:
    transcript = Transcript("Hello.", 1.0, "fr", [Segment(0.0, 1.0, "Hello.")])
    body = json_response(parse(fields(response_format="verbose_json"), translate=True), transcript)
    assert body["task"] == "translate" and body["language"] == "english"
    assert_schema_valid("CreateTranslationResponseVerboseJson", body)
    plain = json_response(parse(fields(), translate=True), transcript)
    assert_schema_valid("CreateTranslationResponseJson", plain)


def test_an_unknown_language_code_is_reported_as_it_is() -> None:
    transcript = Transcript("Moi.", 1.0, "et")
    assert (
        json_response(parse(fields(response_format="verbose_json")), transcript)["language"] == "et"
    )


def test_srt() -> None:
    body, content_type = response(parse(fields(response_format="srt")), TRANSCRIPT)
    assert content_type == "application/x-subrip"
    assert body.decode() == (
        "1\n00:00:00,000 --> 00:00:01,500\nHello there.\n"
        "\n"
        "2\n00:00:01,500 --> 00:00:03,250\nGeneral Kenobi.\n"
    )


def test_vtt() -> None:
    body, content_type = response(parse(fields(response_format="vtt")), TRANSCRIPT)
    assert content_type == "text/vtt"
    assert body.decode() == (
        "WEBVTT\n\n"
        "00:00:00.000 --> 00:00:01.500\nHello there.\n"
        "\n"
        "00:00:01.500 --> 00:00:03.250\nGeneral Kenobi.\n"
    )


def test_subtitle_clock_carries_into_minutes_and_hours() -> None:
    segments = [Segment(59.9996, 61.25, "a"), Segment(3599.5, 3723.042, "b")]
    text = subtitles(segments, "srt")
    assert "00:01:00,000 --> 00:01:01,250" in text
    assert "00:59:59,500 --> 01:02:03,042" in text
    assert "01:02:03.042" in subtitles(segments, "vtt")


def test_stream_events() -> None:
    delta = delta_event(" Hello")
    assert delta == {"type": "transcript.text.delta", "delta": " Hello", "logprobs": []}
    assert_schema_valid("TranscriptTextDeltaEvent", delta)
    done = done_event(" Hello there.")
    assert done["type"] == "transcript.text.done" and done["text"] == " Hello there."
    assert_schema_valid("TranscriptTextDoneEvent", done)
