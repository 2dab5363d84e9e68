"""Audio files in and out: untrusted uploads to model-rate samples, model samples to files.

Decoding and encoding go through libsndfile (the `soundfile` wheel bundles it, with MP3, Ogg
Vorbis and Opus), resampling through libsoxr (`soxr`), the standard libraries for both. Uploads
come from clients, so every refusal is an InvalidRequest naming the form field:

* The duration is read from the header and checked against the limit before any sample is
  decoded, so a few kilobytes of FLAC that claim hours of silence are refused, not decoded.
* Samples are read block by block and each block averaged to mono at once, so memory follows
  the data actually sent; absurd rates and channel counts are refused from the header.
* The rate is converted to the model's (Whisper: 16 kHz).
* Containers libsndfile does not read (MP4/M4A, WebM) are refused with the list of those it does.

What the servables produce is float32 mono at the model's rate; `encode_audio` writes it as the
client asked: WAV as 32-bit float (lossless, what OVMS sends), FLAC, MP3, Opus in Ogg, or raw
16-bit PCM at 24 kHz (the rate OpenAI's clients assume for `pcm`).
"""

from __future__ import annotations

import io
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt
import soundfile
import soxr

from servables.errors import InvalidRequest

Samples = npt.NDArray[np.float32]

READABLE = "WAV, FLAC, MP3 or Ogg (Vorbis, Opus)"
DEFAULT_MAX_SECONDS = 3600.0
PCM_RATE = 24_000  # OpenAI's `pcm`: 24 kHz, 16-bit signed, little-endian, mono
OPUS_RATES = (8_000, 12_000, 16_000, 24_000, 48_000)
MAX_RATE = 384_000  # Hz: above it, a header is lying
MAX_CHANNELS = 32
BLOCK_FRAMES = 1 << 16


@dataclass(frozen=True)
class AudioLimits:
    """What the server accepts of an upload (`--max_audio_seconds`)."""

    max_seconds: float = DEFAULT_MAX_SECONDS


@dataclass(frozen=True)
class OutputFormat:
    """How one `response_format` is written: libsndfile's container and encoding."""

    container: str
    subtype: str
    content_type: str


OUTPUT_FORMATS: dict[str, OutputFormat] = {
    "wav": OutputFormat("WAV", "FLOAT", "audio/wav"),
    "flac": OutputFormat("FLAC", "PCM_16", "audio/flac"),
    "mp3": OutputFormat("MP3", "MPEG_LAYER_III", "audio/mpeg"),
    "opus": OutputFormat("OGG", "OPUS", "audio/ogg"),
    "pcm": OutputFormat("RAW", "PCM_16", "audio/pcm"),
}


def decode_audio(
    data: bytes, rate: int, *, max_seconds: float = DEFAULT_MAX_SECONDS, param: str = "file"
) -> Samples:
    """Mono float32 samples at `rate` Hz of an encoded audio file; see the module docstring."""
    if not data:
        raise InvalidRequest(f"{param}: the audio file is empty", param=param)
    try:
        with soundfile.SoundFile(io.BytesIO(data)) as sound:
            source_rate, channels = sound.samplerate, sound.channels
            if not 0 < source_rate <= MAX_RATE or not 0 < channels <= MAX_CHANNELS:
                raise InvalidRequest(
                    f"{param}: {channels} channels at {source_rate} Hz is not audio this server "
                    f"takes (at most {MAX_CHANNELS} channels, {MAX_RATE} Hz)",
                    param=param,
                )
            seconds = sound.frames / source_rate
            if seconds > max_seconds:
                raise InvalidRequest(
                    f"{param}: the audio lasts {seconds:.1f} s, longer than the limit of "
                    f"{max_seconds:g} s",
                    param=param,
                )
            # Block by block, each averaged to mono at once: memory follows the data that is
            # really there, not what the header claims, and never holds every channel.
            blocks = [
                block.mean(axis=1, dtype=np.float32)
                for block in sound.blocks(BLOCK_FRAMES, dtype="float32", always_2d=True)
            ]
    except (soundfile.LibsndfileError, RuntimeError, TypeError, ValueError) as error:
        reason = getattr(error, "error_string", None) or str(error)
        raise InvalidRequest(
            f"{param}: the audio could not be decoded ({READABLE} are read): {reason}",
            param=param,
        ) from error
    mono = np.concatenate(blocks) if blocks else np.zeros(0, np.float32)
    if mono.size == 0:
        raise InvalidRequest(f"{param}: the audio has no samples", param=param)
    if source_rate != rate:
        mono = soxr.resample(mono, source_rate, rate, quality="HQ")
    return np.ascontiguousarray(mono, dtype=np.float32)


def audio_seconds(samples: Samples, rate: int) -> float:
    return float(len(samples)) / rate if rate else 0.0


def encode_audio(samples: Samples, rate: int, response_format: str) -> tuple[bytes, str]:
    """`samples` (mono float32 at `rate`) as a file of `response_format`; (bytes, content type)."""
    output = OUTPUT_FORMATS[response_format]
    if response_format == "pcm" and rate != PCM_RATE:
        samples, rate = soxr.resample(samples, rate, PCM_RATE, quality="HQ"), PCM_RATE
    elif response_format == "opus" and rate not in OPUS_RATES:
        target = min((r for r in OPUS_RATES if r >= rate), default=OPUS_RATES[-1])
        samples, rate = soxr.resample(samples, rate, target, quality="HQ"), target
    if output.subtype != "FLOAT":  # integer encodings clip; keep the clipping symmetric
        samples = np.clip(samples, -1.0, 1.0)
    buffer = io.BytesIO()
    soundfile.write(
        buffer,
        np.asarray(samples, dtype=np.float32),
        rate,
        format=output.container,
        subtype=output.subtype,
        **({"endian": "LITTLE"} if output.container == "RAW" else {}),
    )
    return buffer.getvalue(), output.content_type
