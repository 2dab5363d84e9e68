"""decode_audio and encode_audio: uploads to mono model-rate samples, samples to every output
format, with every refusal a 400 naming the form field. Inputs are written with soundfile here.
"""

from __future__ import annotations

import io
import wave
from typing import Any

import numpy as np
import numpy.typing as npt
import pytest
import soundfile

from servables.errors import InvalidRequest
from servables.io.audio.codec import (
    OPUS_RATES,
    OUTPUT_FORMATS,
    PCM_RATE,
    READABLE,
    audio_seconds,
    decode_audio,
    encode_audio,
)

Samples = npt.NDArray[np.float32]
# libsndfile's (container, subtype) for each readable upload format.
UPLOADS = {
    "wav": ("WAV", "PCM_16"),
    "flac": ("FLAC", "PCM_16"),
    "mp3": ("MP3", "MPEG_LAYER_III"),
    "vorbis": ("OGG", "VORBIS"),
    "opus": ("OGG", "OPUS"),
}


def sine(frequency: float, rate: int, seconds: float = 1.0, amplitude: float = 0.5) -> Samples:
    t = np.arange(int(rate * seconds)) / rate
    return (amplitude * np.sin(2 * np.pi * frequency * t)).astype(np.float32)


def write(samples: Any, rate: int, container: str, subtype: str) -> bytes:
    buffer = io.BytesIO()
    soundfile.write(buffer, samples, rate, format=container, subtype=subtype)
    return buffer.getvalue()


def peak_hz(samples: npt.NDArray[Any], rate: int) -> float:
    spectrum = np.abs(np.fft.rfft(samples * np.hanning(len(samples))))
    return float(np.fft.rfftfreq(len(samples), 1 / rate)[int(np.argmax(spectrum))])


def refused(data: bytes, **kwargs: Any) -> str:
    with pytest.raises(InvalidRequest) as caught:
        decode_audio(data, 16_000, param="file", **kwargs)
    assert caught.value.param == "file"
    return caught.value.message


def flac_claiming(frames: int, rate: int | None = None) -> bytes:
    """A one-second FLAC of silence whose STREAMINFO claims `frames` frames (at `rate`): what
    a client can send in a hundred bytes. The 64 bits at offset 18 hold 20 bits of sample rate,
    3 of channels, 5 of bits per sample and 36 of total frames."""
    data = bytearray(write(np.zeros((8_000, 8), np.float32), 8_000, "FLAC", "PCM_16"))
    assert data[:4] == b"fLaC" and data[4] & 0x7F == 0  # STREAMINFO comes first
    word = int.from_bytes(data[18:26], "big")
    if rate is not None:
        word = (rate << 44) | (word & ((1 << 44) - 1))
    word = (word & ~((1 << 36) - 1)) | frames
    data[18:26] = word.to_bytes(8, "big")
    return bytes(data)


# ------------------------------------------------------------------------------------- decoding


@pytest.mark.parametrize("kind", sorted(UPLOADS))
def test_stereo_44k_uploads_become_mono_16k_keeping_the_pitch(kind: str) -> None:
    container, subtype = UPLOADS[kind]
    rate = 48_000 if subtype == "OPUS" else 44_100  # Opus has no 44.1 kHz
    tone = sine(440, rate)
    data = write(np.stack([tone, tone], axis=1), rate, container, subtype)
    decoded = decode_audio(data, 16_000)
    assert decoded.dtype == np.float32 and decoded.ndim == 1
    assert decoded.flags.c_contiguous
    assert abs(len(decoded) - 16_000) <= 16  # one second at the model's rate
    assert audio_seconds(decoded, 16_000) == pytest.approx(1.0, abs=0.002)
    assert peak_hz(decoded, 16_000) == pytest.approx(440, abs=2)
    assert 0.3 < float(np.max(np.abs(decoded))) < 0.7  # the level is kept


def test_channels_are_averaged() -> None:
    """Left and right differ: mono is their mean, not one channel (lossless, same rate)."""
    left, right = sine(440, 16_000), sine(1000, 16_000, amplitude=0.25)
    data = write(np.stack([left, right], axis=1), 16_000, "WAV", "FLOAT")
    decoded = decode_audio(data, 16_000)
    assert np.allclose(decoded, (left + right) / 2, atol=1e-7)


def test_mono_at_the_model_rate_is_returned_unchanged() -> None:
    tone = sine(300, 16_000)
    assert np.array_equal(decode_audio(write(tone, 16_000, "WAV", "FLOAT"), 16_000), tone)


def test_resampling_keeps_the_duration() -> None:
    data = write(sine(440, 8_000, seconds=2.5), 8_000, "WAV", "PCM_16")
    decoded = decode_audio(data, 16_000)
    assert abs(len(decoded) - 40_000) <= 4
    assert peak_hz(decoded, 16_000) == pytest.approx(440, abs=2)


def test_empty_upload() -> None:
    assert refused(b"") == "file: the audio file is empty"


@pytest.mark.parametrize(
    "data", [b"hello world" * 10, bytes(range(256)) * 4, b"\x00" * 100, b"\x89PNG\r\n\x1a\n"]
)
def test_garbage_is_refused_naming_the_readable_formats(data: bytes) -> None:
    message = refused(data)
    assert message.startswith(f"file: the audio could not be decoded ({READABLE} are read)")


def test_the_field_name_is_the_callers() -> None:
    with pytest.raises(InvalidRequest) as caught:
        decode_audio(b"nonsense" * 8, 16_000, param="audio")
    assert caught.value.param == "audio" and caught.value.message.startswith("audio: ")


def test_zero_frames() -> None:
    data = write(np.zeros(0, np.float32), 16_000, "WAV", "PCM_16")
    assert refused(data) == "file: the audio has no samples"


def test_too_long_is_refused_from_the_header_before_decoding() -> None:
    """The file holds one second but claims ten hours: the claim alone is refused (decoding
    would have found one second, or failed on the missing data)."""
    data = flac_claiming(10 * 3600 * 8_000)
    assert len(data) < 1_000
    message = refused(data, max_seconds=3600)
    assert message == "file: the audio lasts 36000.0 s, longer than the limit of 3600 s"


def test_a_real_long_silence_is_refused_too() -> None:
    buffer = io.BytesIO()
    with soundfile.SoundFile(buffer, "w", 8_000, 1, format="FLAC", subtype="PCM_16") as sound:
        for _ in range(3):
            sound.write(np.zeros(8_000 * 60, np.float32))
    data = buffer.getvalue()
    assert len(data) < 200_000  # three minutes of silence compress to little
    assert refused(data, max_seconds=90) == (
        "file: the audio lasts 180.0 s, longer than the limit of 90 s"
    )
    assert len(decode_audio(data, 16_000, max_seconds=180)) == 180 * 16_000


def test_a_header_claiming_a_huge_rate_within_the_duration_limit_is_refused() -> None:
    """3500 s is under the default limit, but at 655,350 Hz on 8 channels the decode would need
    68 GiB: a hundred bytes of upload must not make the server allocate that (or fail with a
    MemoryError, a 500). It is a 400 naming the field."""
    data = flac_claiming(3500 * 655_350, rate=655_350)
    with soundfile.SoundFile(io.BytesIO(data)) as sound:
        assert (sound.samplerate, sound.channels) == (655_350, 8)
    refused(data)


# ------------------------------------------------------------------------------------- encoding


def read(data: bytes) -> tuple[Samples, Any]:
    with soundfile.SoundFile(io.BytesIO(data)) as sound:
        return sound.read(dtype="float32"), sound


@pytest.mark.parametrize("response_format", sorted(OUTPUT_FORMATS))
def test_every_output_format_round_trips(response_format: str) -> None:
    tone = sine(440, 24_000)
    data, content_type = encode_audio(tone, 24_000, response_format)
    assert content_type == OUTPUT_FORMATS[response_format].content_type
    decoded: npt.NDArray[Any]
    if response_format == "pcm":
        decoded = np.frombuffer(data, "<i2").astype(np.float32) / 32768
        rate = PCM_RATE
    else:
        decoded, sound = read(data)
        output = OUTPUT_FORMATS[response_format]
        assert (sound.format, sound.subtype) == (output.container, output.subtype)
        assert sound.channels == 1
        rate = sound.samplerate
    assert rate == 24_000
    assert abs(len(decoded) - len(tone)) <= 1152  # an MP3 frame of padding at most
    assert peak_hz(decoded, rate) == pytest.approx(440, abs=2)


def test_content_types() -> None:
    types = {name: output.content_type for name, output in OUTPUT_FORMATS.items()}
    assert types == {
        "wav": "audio/wav",
        "flac": "audio/flac",
        "mp3": "audio/mpeg",
        "opus": "audio/ogg",
        "pcm": "audio/pcm",
    }


def test_wav_is_16_bit_pcm_that_pythons_wave_module_reads() -> None:
    """OpenAI's WAV: 16-bit PCM, which every reader takes (`wave` refuses float: format 3)."""
    samples = np.random.default_rng(0).uniform(-1.5, 1.5, 5_000).astype(np.float32)
    data, _ = encode_audio(samples, 16_000, "wav")
    with wave.open(io.BytesIO(data)) as reader:
        assert (reader.getsampwidth(), reader.getnchannels()) == (2, 1)
        assert reader.getframerate() == 16_000
        pcm = np.frombuffer(reader.readframes(reader.getnframes()), "<i2")
    expected = np.clip(samples, -1.0, 1.0)
    assert np.max(np.abs(pcm / 32768 - expected)) <= 1 / 32768 + 1e-6


def test_float_wav_is_32_bit_float_and_bit_exact() -> None:
    """OVMS's WAV (its speech endpoint): lossless."""
    samples = np.random.default_rng(0).uniform(-1.5, 1.5, 5_000).astype(np.float32)
    data, content_type = encode_audio(samples, 16_000, "wav", float_wav=True)
    decoded, sound = read(data)
    assert sound.subtype == "FLOAT" and sound.samplerate == 16_000
    assert content_type == "audio/wav"
    assert np.array_equal(decoded, samples)  # nothing clipped or rounded
    # The flag is about WAV only: other formats are what they are.
    assert encode_audio(samples, 16_000, "flac", float_wav=True) == encode_audio(
        samples, 16_000, "flac"
    )


def test_flac_is_16_bit_at_the_model_rate() -> None:
    samples = sine(440, 16_000)
    decoded, sound = read(encode_audio(samples, 16_000, "flac")[0])
    assert sound.samplerate == 16_000 and len(decoded) == len(samples)
    assert np.allclose(decoded, samples, atol=1 / 32768 + 1e-6)


@pytest.mark.parametrize("rate", [16_000, 22_050, 24_000, 44_100])
def test_pcm_is_raw_little_endian_16_bit_at_24k(rate: int) -> None:
    tone = sine(440, rate)
    data, content_type = encode_audio(tone, rate, "pcm")
    assert content_type == "audio/pcm"
    assert len(data) % 2 == 0 and not data.startswith(b"RIFF")
    decoded = np.frombuffer(data, "<i2").astype(np.float32) / 32768
    assert abs(len(decoded) - len(tone) * PCM_RATE / rate) <= 1
    assert peak_hz(decoded, PCM_RATE) == pytest.approx(440, abs=2)
    assert 0.45 < float(np.max(np.abs(decoded))) < 0.55  # little-endian: the level is right
    if rate == PCM_RATE:
        assert np.allclose(decoded, tone, atol=1 / 32768 + 1e-6)


@pytest.mark.parametrize(
    ("rate", "expected"), [(16_000, 16_000), (22_050, 24_000), (44_100, 48_000)]
)
def test_opus_uses_a_rate_opus_has(rate: int, expected: int) -> None:
    assert expected in OPUS_RATES
    tone = sine(440, rate)
    decoded, sound = read(encode_audio(tone, rate, "opus")[0])
    assert sound.samplerate == expected
    assert abs(len(decoded) - len(tone) * expected / rate) <= 2
    assert peak_hz(decoded, expected) == pytest.approx(440, abs=2)


def test_containers_beyond_the_four_are_refused_from_the_header() -> None:
    """libsndfile reads AIFF, CAF, VOC...: those parsers never see client bytes."""
    buffer = io.BytesIO()
    soundfile.write(buffer, np.zeros(1600, np.float32), 16_000, format="AIFF")
    with pytest.raises(InvalidRequest, match="AIFF audio is not taken") as raised:
        decode_audio(buffer.getvalue(), 16_000)
    assert raised.value.param == "file"


def test_memory_follows_the_models_rate_not_the_sources() -> None:
    """A small FLAC of 384 kHz silence decodes into the model's 16 kHz samples directly (an
    array of the duration at 16 kHz, never the source's 24x larger one)."""
    buffer = io.BytesIO()
    soundfile.write(buffer, np.zeros(384_000 * 20, np.float32), 384_000, format="FLAC")
    assert len(buffer.getvalue()) < 200_000
    samples = decode_audio(buffer.getvalue(), 16_000)
    assert abs(len(samples) - 16_000 * 20) < 100
    assert samples.dtype == np.float32 and not samples.any()
