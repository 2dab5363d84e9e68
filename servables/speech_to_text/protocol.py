"""OpenAI's transcription and translation API on a Whisper servable: requests and responses.

Both endpoints take a multipart form with the audio `file`. Transcriptions also read `language`
(ISO-639-1), `prompt` (Whisper's initial prompt), `temperature`, `timestamp_granularities[]`
and `stream`; translations (into English) read `prompt` and `temperature`. Every
`response_format` OpenAI names is written: `json` (OVMS's only one), `text`, `verbose_json`,
`srt` and `vtt`. Timestamps: OVMS adds the asked-for `words`/`segments` to the JSON answer;
OpenAI puts them in `verbose_json`, where graphrt puts them too (and in `json` when asked, as
OVMS). Refusals keep OVMS's messages.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from servables.errors import InvalidRequest
from servables.io.request_fields import RequestFields, UploadedFile
from servables.openai.bodies import dumps

ResponseFormat = Literal["json", "text", "verbose_json", "srt", "vtt"]
RESPONSE_FORMATS: tuple[ResponseFormat, ...] = ("json", "text", "verbose_json", "srt", "vtt")
GRANULARITIES = ("segment", "word")
# OpenAI fields accepted and not used: nothing in a Whisper model to apply them to.
IGNORED = ("include", "chunking_strategy", "known_speaker_names", "known_speaker_references")
TEXT_TYPES = {"text": "text/plain", "srt": "application/x-subrip", "vtt": "text/vtt"}
# Whisper's language names, for verbose_json's `language` (OpenAI writes the name).
LANGUAGE_NAMES = {
    "en": "english", "de": "german", "fr": "french", "es": "spanish", "it": "italian",
    "pt": "portuguese", "nl": "dutch", "pl": "polish", "ru": "russian", "uk": "ukrainian",
    "zh": "chinese", "ja": "japanese", "ko": "korean", "ar": "arabic", "hi": "hindi",
    "tr": "turkish", "sv": "swedish", "cs": "czech", "fi": "finnish", "da": "danish",
}  # fmt: skip


@dataclass
class TranscriptionRequest:
    model: str
    audio: UploadedFile
    translate: bool
    language: str | None = None  # ISO-639-1, as sent
    prompt: str | None = None
    temperature: float | None = None
    response_format: ResponseFormat = "json"
    words: bool = False
    segments: bool = False
    stream: bool = False

    @property
    def timestamps(self) -> bool:
        return self.words or self.segments


def parse_transcription(
    fields: RequestFields, name: str, translate: bool, word_timestamps: bool
) -> TranscriptionRequest:
    """A transcriptions (or, `translate`, translations) form. `word_timestamps`: the graph
    allows word-level timestamps (S2tCalculatorOptions.enable_word_timestamps)."""
    model = fields.string("model") or name
    stream = bool(fields.boolean("stream"))
    if stream and translate:
        raise InvalidRequest("streaming is not supported for translations endpoint", param="stream")
    files = fields.files("file")
    if len(files) != 1:
        raise InvalidRequest("File parsing fails", param="file")
    request = TranscriptionRequest(model, files[0], translate, stream=stream)
    request.prompt = fields.string("prompt")
    if translate:
        fields.raw("language")  # OVMS ignores it: the target is English
    else:
        language = fields.string("language")
        if language is not None and (len(language) > 3 or not language.isalpha()):
            raise InvalidRequest("Invalid language code.", param="language")
        request.language = language.lower() if language else None
    try:
        request.temperature = fields.number("temperature", minimum=0.0, maximum=1.0)
    except InvalidRequest as error:
        if "not a float" in error.message:
            raise InvalidRequest("Invalid temperature type.", param="temperature") from error
        raise
    request.response_format = fields.choice("response_format", RESPONSE_FORMATS, "json")  # type: ignore[assignment]
    granularities = [] if translate else (fields.strings("timestamp_granularities") or [])
    for granularity in granularities:
        if granularity not in GRANULARITIES:
            raise InvalidRequest(
                'Invalid timestamp_granularities type. Allowed types: "segment", "word"',
                param="timestamp_granularities",
            )
    if stream and granularities:
        raise InvalidRequest(
            "timestamp_granularities: a stream's events carry no timestamps; ask for them in a "
            "unary request",
            param="timestamp_granularities",
        )
    request.words = "word" in granularities
    if request.words and not word_timestamps:
        raise InvalidRequest(
            "Word timestamps not supported for this model", param="timestamp_granularities"
        )
    # Subtitles and verbose_json are made of segments, asked for or not.
    request.segments = "segment" in granularities or (
        not stream and request.response_format in ("verbose_json", "srt", "vtt")
    )
    fields.raw("stream")
    fields.refuse_unused(IGNORED)
    return request


# ------------------------------------------------------------------------------------ responses


@dataclass(frozen=True)
class Segment:
    start: float
    end: float
    text: str
    tokens: tuple[int, ...] = ()


@dataclass(frozen=True)
class Word:
    word: str
    start: float
    end: float


@dataclass
class Transcript:
    text: str
    duration: float  # seconds of audio
    language: str  # ISO-639-1 code the model used ("" when unknown)
    segments: list[Segment] = field(default_factory=list)
    words: list[Word] = field(default_factory=list)
    temperature: float = 0.0


def _seconds(value: float) -> float:
    return round(float(value), 3)


def _segment_body(index: int, segment: Segment, temperature: float) -> dict[str, Any]:
    """OpenAI's TranscriptionSegment (Whisper's quality figures are not reported by
    openvino-genai: neutral values)."""
    return {
        "id": index,
        "seek": 0,
        "start": _seconds(segment.start),
        "end": _seconds(segment.end),
        "text": segment.text,
        "tokens": list(segment.tokens),
        "temperature": temperature,
        "avg_logprob": 0.0,
        "compression_ratio": 0.0,
        "no_speech_prob": 0.0,
    }


def _clock(seconds: float, separator: str) -> str:
    millis = round(seconds * 1000)
    hours, millis = divmod(millis, 3_600_000)
    minutes, millis = divmod(millis, 60_000)
    secs, millis = divmod(millis, 1000)
    return f"{hours:02d}:{minutes:02d}:{secs:02d}{separator}{millis:03d}"


def subtitles(segments: Sequence[Segment], kind: Literal["srt", "vtt"]) -> str:
    separator = "," if kind == "srt" else "."
    cues = []
    for index, segment in enumerate(segments, start=1):
        timing = f"{_clock(segment.start, separator)} --> {_clock(segment.end, separator)}"
        cue = f"{timing}\n{segment.text.strip()}\n"
        cues.append(f"{index}\n{cue}" if kind == "srt" else cue)
    body = "\n".join(cues)
    return f"WEBVTT\n\n{body}" if kind == "vtt" else body


def response(request: TranscriptionRequest, transcript: Transcript) -> tuple[bytes, str]:
    """The answer in the requested `response_format`: (body, content type)."""
    kind = request.response_format
    if kind == "text":
        return transcript.text.encode(), TEXT_TYPES["text"]
    if kind in ("srt", "vtt"):
        text = subtitles(transcript.segments, kind)
        return text.encode(), TEXT_TYPES[kind]
    body: dict[str, Any] = {"text": transcript.text}
    if kind == "verbose_json":
        language = "english" if request.translate else transcript.language
        body = {
            "task": "translate" if request.translate else "transcribe",
            "language": LANGUAGE_NAMES.get(language, language),
            "duration": _seconds(transcript.duration),
            "text": transcript.text,
        }
    if request.words:
        body["words"] = [
            {"word": w.word, "start": _seconds(w.start), "end": _seconds(w.end)}
            for w in transcript.words
        ]
    if request.segments and (kind == "verbose_json" or request.timestamps):
        body["segments"] = [
            _segment_body(i, s, transcript.temperature) for i, s in enumerate(transcript.segments)
        ]
    body["usage"] = {"type": "duration", "seconds": _seconds(transcript.duration)}
    return dumps(body).encode(), "application/json"


def delta_event(delta: str) -> dict[str, Any]:
    return {"type": "transcript.text.delta", "delta": delta, "logprobs": []}


def done_event(text: str) -> dict[str, Any]:
    return {"type": "transcript.text.done", "text": text, "logprobs": []}
