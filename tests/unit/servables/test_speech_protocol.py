"""OpenAI's speech API on a text-to-speech servable: the JSON request checked (OVMS's
messages where OVMS has them), the text cut into sentences, and the stream's events valid
against OpenAI's published schemas.
"""

from __future__ import annotations

from typing import Any

import pytest

from servables.errors import InvalidRequest
from servables.io.audio.codec import OUTPUT_FORMATS
from servables.io.text.sentences import SentenceBuffer, sentences
from servables.text_to_speech.protocol import (
    MAX_INPUT,
    SpeechRequest,
    delta_event,
    done_event,
    parse_speech,
)
from tests.unit.servables.test_image_gen_protocol import assert_schema_valid

SPEEDS = (0.25, 4.0)


def speech(**body: Any) -> SpeechRequest:
    return parse_speech({"input": "Hello.", **body}, "tts", SPEEDS)


def refused(body: Any, speed_range: tuple[float, float] = SPEEDS) -> InvalidRequest:
    with pytest.raises(InvalidRequest) as caught:
        parse_speech(body, "tts", speed_range)
    return caught.value


def test_defaults() -> None:
    request = speech()
    assert request == SpeechRequest(
        model="tts",
        text="Hello.",
        voice=None,
        response_format="wav",  # OVMS's, not OpenAI's mp3: lossless unless asked
        speed=1.0,
        language=None,
        stream=False,
    )


def test_fields_are_read() -> None:
    request = speech(model="kokoro", voice="af_heart", speed=1.5, language="en-gb")
    assert (request.model, request.voice, request.speed) == ("kokoro", "af_heart", 1.5)
    assert request.language == "en-gb"


@pytest.mark.parametrize(
    ("body", "param", "message"),
    [
        ({}, "input", "input field is missing in JSON body"),
        ({"input": 5}, "input", "input field is not a string"),
        (
            {"input": "a" * (MAX_INPUT + 1)},
            "input",
            f"input is {MAX_INPUT + 1} characters long, more than the limit of {MAX_INPUT}",
        ),
        ({"input": "a", "voice": 3}, "voice", "voice field is not a string"),
        ({"input": "a", "voice": {"id": 3}}, "voice", "voice field is not a string"),
        ({"input": "a", "voice": {"id": "v", "x": 1}}, "voice", "voice field is not a string"),
        ({"input": "a", "language": 1}, "language", "language field is not a string"),
        ({"input": "a", "speed": "1"}, "speed", "speed field is not a float"),
        ({"input": "a", "speed": float("nan")}, "speed", "speed must be a finite number"),
        ({"input": "a", "stream_format": "ws"}, "stream_format", "got 'ws'"),
        ({"input": "a", "foo": 1}, "foo", "Unhandled parameter: foo"),
    ],
)
def test_refusals(body: dict[str, Any], param: str, message: str) -> None:
    error = refused(body)
    assert error.param == param and message in error.message


def test_body_must_be_an_object() -> None:
    assert refused(["Hello."]).message == "JSON body must be an object"


def test_input_at_the_limit_is_accepted() -> None:
    assert len(speech(input="a" * MAX_INPUT).text) == MAX_INPUT


def test_a_voice_object_is_its_id() -> None:
    assert speech(voice={"id": "speaker_1"}).voice == "speaker_1"


@pytest.mark.parametrize("speed", [0.1, 4.01, -1, 10])
def test_speed_range_message(speed: float) -> None:
    error = refused({"input": "a", "speed": speed})
    assert error.param == "speed"
    assert error.message == "speed must be between speed_min (0.25) and speed_max (4)"


def test_speed_range_is_the_graphs() -> None:
    assert speech(speed=0.25).speed == 0.25 and speech(speed=4).speed == 4.0
    error = refused({"input": "a", "speed": 1.0}, speed_range=(1.5, 2.0))
    assert error.message == "speed must be between speed_min (1.5) and speed_max (2)"
    assert parse_speech({"input": "a", "speed": 2}, "tts", (1.5, 2.0)).speed == 2.0


@pytest.mark.parametrize("response_format", sorted(OUTPUT_FORMATS))
def test_response_formats(response_format: str) -> None:
    assert speech(response_format=response_format).response_format == response_format


def test_aac_is_refused_naming_the_field() -> None:
    error = refused({"input": "a", "response_format": "aac"})
    assert error.param == "response_format"
    assert error.message == (
        "response_format 'aac' is not supported; use one of wav, flac, mp3, opus, pcm"
    )


def test_stream_format() -> None:
    assert speech(stream_format="sse").stream
    assert not speech(stream_format="audio").stream


def test_instructions_are_accepted_and_unused() -> None:
    assert speech(instructions="Speak calmly.").text == "Hello."


# -------------------------------------------------------------------------------------- sentences


@pytest.mark.parametrize(
    ("text", "pieces"),
    [
        ("Hello world. How are you?  Fine!", ["Hello world.", "How are you?", "Fine!"]),
        ("First line\nsecond line", ["First line", "second line"]),
        ("Pi is 3.14 today. Yes.", ["Pi is 3.14 today.", "Yes."]),  # no cut inside a number
        ("Wait; then: go", ["Wait;", "then:", "go"]),
        ("No end", ["No end"]),
        ("  padded.  \n\n  ", ["padded."]),
        ("", [""]),
    ],
)
def test_sentences(text: str, pieces: list[str]) -> None:
    assert sentences(text) == pieces


def test_sentences_keep_every_word() -> None:
    text = "One two. Three four! Five six? Seven;\neight nine."
    assert " ".join(sentences(text)).split() == text.split()


def test_cjk_sentences_are_cut_at_their_full_stops() -> None:
    """Chinese and Japanese put no space after their full stops, which the splitter lists; a
    text in them must still be spoken sentence by sentence (and stream per sentence)."""
    stop, bang, ask = "\u3002", "\uff01", "\uff1f"
    text = f"你好{stop}今天天气很好{bang}你呢{ask}"
    assert sentences(text) == [f"你好{stop}", f"今天天气很好{bang}", f"你呢{ask}"]


# -------------------------------------------------------------------------------------- events


def test_stream_events() -> None:
    delta = delta_event("UklGRg==")
    assert delta == {"type": "speech.audio.delta", "audio": "UklGRg=="}
    assert_schema_valid("SpeechAudioDeltaEvent", delta)
    done = done_event(42)
    assert done["usage"] == {"input_tokens": 42, "output_tokens": 0, "total_tokens": 42}
    assert_schema_valid("SpeechAudioDoneEvent", done)


def test_a_sentence_longer_than_the_model_reads_is_cut_at_a_space() -> None:
    """SpeechT5 reads 600 characters at once: a long sentence without punctuation would fail
    inside OpenVINO, so it is spoken in pieces cut between words."""
    words = " ".join(f"word{i}" for i in range(200))  # ~1,300 characters, no full stop
    pieces = sentences(words, longest=400)
    assert all(len(piece) <= 400 for piece in pieces) and len(pieces) == 4
    assert " ".join(pieces) == words  # every word kept, none split
    assert sentences("x" * 900, longest=400) == ["x" * 400, "x" * 400, "x" * 100]


def test_a_stream_of_pieces_gives_the_same_sentences() -> None:
    """SentenceBuffer on an LLM's stream: a sentence comes out once what follows its end has
    arrived (so "3.5" is never cut), and the whole stream gives what sentences() gives."""
    text = "It costs 3.5 dollars. Really? Yes!\nNew line here. And the end"
    buffer = SentenceBuffer()
    spoken: list[str] = []
    for start in range(0, len(text), 3):
        spoken += buffer.feed(text[start : start + 3])
    assert "It costs 3." not in spoken
    spoken += buffer.flush()
    assert spoken == sentences(text)
    assert SentenceBuffer().feed("No end yet") == []


def test_a_stream_without_sentence_ends_is_cut_to_the_models_length() -> None:
    buffer = SentenceBuffer(longest=20)
    out = buffer.feed("word " * 10)
    assert out and all(len(piece) <= 20 for piece in out)
    assert " ".join(out + buffer.flush()).split() == ["word"] * 10
