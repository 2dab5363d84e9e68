"""Audio files in and out: untrusted uploads to model-rate samples, model samples to files.

Decoding and encoding go through libsndfile (the `soundfile` wheel bundles it, with MP3, Ogg
Vorbis and Opus), resampling through libsoxr (`soxr`), the standard libraries for both. Uploads
come from clients, so every refusal is an InvalidRequest naming the form field:

* The duration is read from the header and checked against the limit before any sample is
  decoded, so a few kilobytes of FLAC that claim hours of silence are refused, not decoded.
* Only WAV, FLAC, MP3 and Ogg containers reach libsndfile's sample decoders (it reads many
  more; those parsers never see client bytes), and absurd rates and channel counts are refused
  from the header.
* Samples are read block by block, each block averaged to mono and resampled to the model's
  rate (Whisper: 16 kHz) at once into an array sized for the header's duration at that rate:
  memory is bounded by the duration at the model's rate, whatever the source's rate or the
  compression (a 5 MB FLAC of 384 kHz silence is an hour of samples, not gigabytes).
* Containers libsndfile does not read (MP4/M4A, WebM) are refused with the list of those it does.

What the servables produce is float32 mono at the model's rate; `encode_audio` writes it as the
client asked: WAV, FLAC, MP3, Opus in Ogg, or raw 16-bit PCM at 24 kHz (the rate OpenAI's
clients assume for `pcm`). WAV is 16-bit PCM, as OpenAI's answers are and every WAV reader takes
(Python's `wave` module refuses float); `float_wav` writes 32-bit float instead, lossless, what
OVMS's speech endpoint sends.
"""

from __future__ import annotations

import io
import itertools
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
# libsndfile reads many more containers (AIFF, CAF, VOC, NIST...); clients get these parsers only.
CONTAINERS = frozenset({"WAV", "WAVEX", "RF64", "FLAC", "MP3", "OGG"})


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
    "wav": OutputFormat("WAV", "PCM_16", "audio/wav"),
    "flac": OutputFormat("FLAC", "PCM_16", "audio/flac"),
    "mp3": OutputFormat("MP3", "MPEG_LAYER_III", "audio/mpeg"),
    "opus": OutputFormat("OGG", "OPUS", "audio/ogg"),
    "pcm": OutputFormat("RAW", "PCM_16", "audio/pcm"),
}
FLOAT_WAV = OutputFormat("WAV", "FLOAT", "audio/wav")


@dataclass(frozen=True)
class AudioHeader:
    """What an upload's header says, checked before any sample is decoded."""

    format: str
    rate: int
    channels: int
    frames: int

    @property
    def seconds(self) -> float:
        return self.frames / self.rate


def _open(data: bytes, param: str) -> soundfile.SoundFile:
    if not data:
        raise InvalidRequest(f"{param}: the audio file is empty", param=param)
    try:
        return soundfile.SoundFile(io.BytesIO(data))
    except (soundfile.LibsndfileError, RuntimeError, TypeError, ValueError) as error:
        raise _undecodable(error, param) from error


def _undecodable(error: BaseException, param: str) -> InvalidRequest:
    reason = getattr(error, "error_string", None) or str(error)
    return InvalidRequest(
        f"{param}: the audio could not be decoded ({READABLE} are read): {reason}", param=param
    )


def _checked(sound: soundfile.SoundFile, max_seconds: float, param: str) -> AudioHeader:
    header = AudioHeader(sound.format, sound.samplerate, sound.channels, sound.frames)
    if header.format not in CONTAINERS:
        raise InvalidRequest(
            f"{param}: {header.format} audio is not taken ({READABLE} are)", param=param
        )
    if not 0 < header.rate <= MAX_RATE or not 0 < header.channels <= MAX_CHANNELS:
        raise InvalidRequest(
            f"{param}: {header.channels} channels at {header.rate} Hz is not audio this server "
            f"takes (at most {MAX_CHANNELS} channels, {MAX_RATE} Hz)",
            param=param,
        )
    if header.seconds > max_seconds:
        raise InvalidRequest(
            f"{param}: the audio lasts {header.seconds:.1f} s, longer than the limit of "
            f"{max_seconds:g} s",
            param=param,
        )
    if header.frames == 0:
        raise InvalidRequest(f"{param}: the audio has no samples", param=param)
    return header


def probe_audio(
    data: bytes, *, max_seconds: float = DEFAULT_MAX_SECONDS, param: str = "file"
) -> AudioHeader:
    """The upload's header, checked (container, rate, channels, duration); no sample decoded:
    a request is refused for these before it waits for a pipeline."""
    with _open(data, param) as sound:
        return _checked(sound, max_seconds, param)


def decode_audio(
    data: bytes, rate: int, *, max_seconds: float = DEFAULT_MAX_SECONDS, param: str = "file"
) -> Samples:
    """Mono float32 samples at `rate` Hz of an encoded audio file; see the module docstring."""
    try:
        with _open(data, param) as sound:
            header = _checked(sound, max_seconds, param)
            # What `rate` Hz of the duration the header gave holds: the output never grows
            # past it, whatever the blocks turn out to hold.
            capacity = int(header.seconds * rate) + BLOCK_FRAMES
            out = np.empty(capacity, dtype=np.float32)
            filled = 0
            resampler = (
                soxr.ResampleStream(header.rate, rate, 1, dtype="float32", quality="HQ")
                if header.rate != rate
                else None
            )
            blocks = sound.blocks(BLOCK_FRAMES, dtype="float32", always_2d=True)
            for block in itertools.chain(blocks, [None]):
                last = block is None
                mono = np.zeros(0, np.float32) if block is None else block.mean(axis=1)
                if resampler is not None:
                    mono = resampler.resample_chunk(mono, last=last)
                take = min(len(mono), capacity - filled)
                out[filled : filled + take] = mono[:take]
                filled += take
    except (soundfile.LibsndfileError, RuntimeError, TypeError, ValueError) as error:
        raise _undecodable(error, param) from error
    if filled == 0:
        raise InvalidRequest(f"{param}: the audio has no samples", param=param)
    return out[:filled]


def audio_seconds(samples: Samples, rate: int) -> float:
    return float(len(samples)) / rate if rate else 0.0


def encode_audio(
    samples: Samples, rate: int, response_format: str, *, float_wav: bool = False
) -> tuple[bytes, str]:
    """`samples` (mono float32 at `rate`) as a file of `response_format`; (bytes, content type).
    `float_wav`: WAV as 32-bit float (OVMS's) rather than 16-bit PCM (OpenAI's)."""
    output = OUTPUT_FORMATS[response_format]
    if float_wav and response_format == "wav":
        output = FLOAT_WAV
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
