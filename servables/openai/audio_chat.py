"""OpenAI's audio chat on a graph: audio in (`input_audio` parts), audio out (`modalities`).

A chat request may carry spoken messages, `{"type": "input_audio", "input_audio": {"data":
<base64>, "format": "wav"}}`, and ask for a spoken answer, `"modalities": ["text", "audio"]` with
`"audio": {"voice": ..., "format": ...}`. The voice chat graph answers both with nodes of its
own around an unchanged LLM node: the parts are transcribed and replaced by their text, the
audio fields removed (`text_request`), and the answer's text is spoken sentence by sentence
(`AudioReply` says how). The answer carries OpenAI's `message.audio` {id, data, transcript,
expires_at} (the text stays in `content` too); a stream sends the text deltas as generated and
one `delta.audio` {id, data, transcript} chunk per spoken sentence.
"""

from __future__ import annotations

import base64
import binascii
import copy
import secrets
import time
from dataclasses import dataclass
from typing import Any

from servables.errors import InvalidRequest

AUDIO_FORMATS = {"wav": "wav", "mp3": "mp3", "flac": "flac", "opus": "opus", "pcm16": "pcm"}
EXPIRES_AFTER = 3600  # seconds: what OpenAI says of an answer's audio id (nothing is stored here)


@dataclass(frozen=True)
class AudioReply:
    """How to speak the answer: the voice, the file format (the codec's name), streaming."""

    voice: str | None
    format: str  # a servables.io.audio.codec OUTPUT_FORMATS key
    stream: bool
    id: str = ""

    @property
    def expires_at(self) -> int:
        return int(time.time()) + EXPIRES_AFTER


@dataclass(frozen=True)
class AudioPart:
    """One input_audio part: where it is (for errors and for its replacement) and its bytes."""

    message: int
    position: int
    data: bytes
    format: str

    @property
    def param(self) -> str:
        return f"messages[{self.message}].content[{self.position}].input_audio"


def audio_reply(body: dict[str, Any]) -> AudioReply | None:
    """The spoken answer a chat request asks for, checked; None for a text answer."""
    modalities = body.get("modalities")
    if modalities is None:
        modalities = ["text"]
    if not isinstance(modalities, list) or not all(m in ("text", "audio") for m in modalities):
        raise InvalidRequest('modalities must be a list of "text" and "audio"', param="modalities")
    audio = body.get("audio")
    if "audio" not in modalities:
        if audio is not None:
            raise InvalidRequest(
                'audio is set but modalities does not include "audio"', param="audio"
            )
        return None
    if not isinstance(audio, dict):
        raise InvalidRequest(
            'modalities includes "audio": audio {"voice", "format"} is required', param="audio"
        )
    voice = audio.get("voice")
    if isinstance(voice, dict) and set(voice) == {"id"}:
        voice = voice["id"]
    if voice is not None and not isinstance(voice, str):
        raise InvalidRequest("audio.voice must be a string", param="audio.voice")
    kind = audio.get("format")
    if not isinstance(kind, str) or kind not in AUDIO_FORMATS:
        raise InvalidRequest(
            f"audio.format must be one of {', '.join(AUDIO_FORMATS)}; got {kind!r}",
            param="audio.format",
        )
    if body.get("n", 1) not in (1, None):
        raise InvalidRequest("a spoken answer has one choice: n must be 1", param="n")
    stream = body.get("stream") is True
    return AudioReply(voice, AUDIO_FORMATS[kind], stream, f"audio_{secrets.token_hex(12)}")


def audio_parts(body: dict[str, Any]) -> list[AudioPart]:
    """The request's input_audio parts, decoded from base64 (checked, not yet heard)."""
    messages = body.get("messages")
    parts: list[AudioPart] = []
    if not isinstance(messages, list):
        return parts  # the LLM node refuses it with its own message
    for index, message in enumerate(messages):
        content = message.get("content") if isinstance(message, dict) else None
        if not isinstance(content, list):
            continue
        for position, part in enumerate(content):
            if not isinstance(part, dict) or part.get("type") != "input_audio":
                continue
            where = f"messages[{index}].content[{position}].input_audio"
            audio = part.get("input_audio")
            data = audio.get("data") if isinstance(audio, dict) else None
            kind = audio.get("format") if isinstance(audio, dict) else None
            if not isinstance(data, str) or not isinstance(kind, str):
                raise InvalidRequest(
                    "input_audio needs data (base64) and format strings", param=where
                )
            try:
                decoded = base64.b64decode(data, validate=True)
            except (binascii.Error, ValueError):
                raise InvalidRequest(
                    "input_audio.data is not valid base64", param=f"{where}.data"
                ) from None
            parts.append(AudioPart(index, position, decoded, kind))
    return parts


def refuse_audio_ids(body: dict[str, Any]) -> None:
    """An earlier spoken answer sent back by its `audio.id` alone: its text is not kept here
    (no audio is stored), so the conversation would silently lose that turn."""
    messages = body.get("messages")
    for index, message in enumerate(messages if isinstance(messages, list) else []):
        if isinstance(message, dict) and message.get("audio") and not message.get("content"):
            raise InvalidRequest(
                "this server keeps no audio by id: send an earlier spoken answer back with its "
                "text as content (its message's content, or audio.transcript)",
                param=f"messages[{index}].audio",
            )


def text_request(
    body: dict[str, Any], parts: list[AudioPart], transcripts: list[str]
) -> dict[str, Any]:
    """The request as a text chat: each audio part replaced by its transcript, the audio
    fields removed."""
    rewritten = copy.deepcopy(body)
    for part, text in zip(parts, transcripts, strict=True):
        rewritten["messages"][part.message]["content"][part.position] = {
            "type": "text",
            "text": text,
        }
    rewritten.pop("modalities", None)
    rewritten.pop("audio", None)
    return rewritten


def answer_audio(reply: AudioReply, data: bytes, transcript: str) -> dict[str, Any]:
    """OpenAI's `message.audio` of a unary answer."""
    return {
        "id": reply.id,
        "data": base64.b64encode(data).decode("ascii"),
        "expires_at": reply.expires_at,
        "transcript": transcript,
    }


def audio_chunk(
    envelope: dict[str, Any], reply: AudioReply, data: bytes, transcript: str, last: bool
) -> dict[str, Any]:
    """A stream chunk carrying one spoken sentence (`envelope`: the stream's id, created and
    model, from its text chunks)."""
    audio: dict[str, Any] = {
        "id": reply.id,
        "data": base64.b64encode(data).decode("ascii"),
        "transcript": transcript,
    }
    if last:
        audio["expires_at"] = reply.expires_at
    return {
        **envelope,
        "object": "chat.completion.chunk",
        "choices": [{"index": 0, "delta": {"audio": audio}, "finish_reason": None}],
    }


Events = list[dict[str, Any]]


def closing_chunks(events: Events) -> tuple[Events, Events]:
    """`events` split into what may go out now and what ends a stream (the finish_reason, the
    usage chunk, an error frame), which waits until the last sentence is spoken, so a spoken
    stream still ends as OpenAI's do. A chunk with text and a finish_reason is split in two:
    the text now, an empty delta with the finish_reason later."""
    now: Events = []
    closing: Events = []
    for event in events:
        choices = event.get("choices") or []
        if "error" in event or (event.get("usage") is not None and not choices):
            closing.append(event)
        elif any(choice.get("finish_reason") for choice in choices):
            text = [{**choice, "finish_reason": None} for choice in choices if choice.get("delta")]
            if any(choice["delta"] for choice in text):
                now.append({**event, "choices": text})
            ending = [
                {**choice, "delta": {}, "logprobs": None}
                for choice in choices
                if choice.get("finish_reason")
            ]
            closing.append({**event, "choices": ending})
        else:
            now.append(event)
    return now, closing
