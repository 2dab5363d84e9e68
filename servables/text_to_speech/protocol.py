"""OpenAI's speech API on a text-to-speech servable: the JSON request, checked.

`input` and `voice` as OpenAI (a voice is a name the graph loaded, from its `voices` option or
the model's `voices/` directory; `{"id": name}` works too), `speed` within the graph's
`speed_min`..`speed_max`, `response_format` wav (32-bit float, lossless; the default when none
is asked, as OVMS), flac, mp3, opus or pcm (16-bit at 24 kHz, as OpenAI's); aac is refused.
`stream_format: "sse"` streams OpenAI's `speech.audio.delta` events, one per sentence as it is
spoken (OVMS refuses streaming). OVMS's `language` extension is read. `instructions` (a
prompt for voices that take one) is accepted and unused: SpeechT5 and Kokoro take none.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from servables.errors import InvalidRequest
from servables.io.audio.codec import OUTPUT_FORMATS
from servables.io.request_fields import RequestFields

MAX_INPUT = 4096  # characters, OpenAI's limit
IGNORED = ("instructions",)


@dataclass
class SpeechRequest:
    model: str
    text: str
    voice: str | None
    response_format: str
    speed: float
    language: str | None
    stream: bool


def _voice(fields: RequestFields) -> str | None:
    value = fields.raw("voice")
    if isinstance(value, dict) and set(value) == {"id"}:
        value = value["id"]
    if value is None:
        return None
    if not isinstance(value, str):
        raise InvalidRequest("voice field is not a string", param="voice")
    return value


def parse_speech(body: Any, name: str, speed_range: tuple[float, float]) -> SpeechRequest:
    if not isinstance(body, dict):
        raise InvalidRequest("JSON body must be an object")
    fields = RequestFields(body)
    model = fields.string("model") or name
    text = fields.string("input", required=True)
    assert text is not None
    if len(text) > MAX_INPUT:
        raise InvalidRequest(
            f"input is {len(text)} characters long, more than the limit of {MAX_INPUT}",
            param="input",
        )
    stream_format = fields.choice("stream_format", ("audio", "sse"), "audio")
    voice = _voice(fields)
    language = fields.string("language")
    speed = fields.number("speed")
    low, high = speed_range
    if speed is not None and not low <= speed <= high:
        raise InvalidRequest(
            f"speed must be between speed_min ({low:g}) and speed_max ({high:g})", param="speed"
        )
    response_format = fields.string("response_format") or "wav"
    if response_format not in OUTPUT_FORMATS:
        raise InvalidRequest(
            f"response_format {response_format!r} is not supported; use one of "
            f"{', '.join(OUTPUT_FORMATS)}",
            param="response_format",
        )
    fields.refuse_unused(IGNORED)
    return SpeechRequest(
        model=model,
        text=text,
        voice=voice,
        response_format=response_format,
        speed=1.0 if speed is None else speed,
        language=language,
        stream=stream_format == "sse",
    )


def delta_event(audio_base64: str) -> dict[str, Any]:
    return {"type": "speech.audio.delta", "audio": audio_base64}


def done_event(characters: int) -> dict[str, Any]:
    return {
        "type": "speech.audio.done",
        "usage": {"input_tokens": characters, "output_tokens": 0, "total_tokens": characters},
    }
