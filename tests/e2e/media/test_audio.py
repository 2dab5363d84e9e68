"""Speech to text and text to speech through the OpenAI SDK, compared with the pipelines.

A transcript must be the WhisperPipeline's text for the same samples and options; spoken audio
must be the Text2SpeechPipeline's samples, sentence by sentence, for the same voice (WAV is sent
as 32-bit float under OVMS's /v3/, so the comparison is exact; under OpenAI's /v1/ as 16-bit
PCM, equal to the samples within the 16-bit step).
"""

from __future__ import annotations

import base64
import io
import json
import wave
from typing import TYPE_CHECKING, Any

import numpy as np
import pytest
import soundfile

if TYPE_CHECKING:
    from conftest import Audio, ExactServer, Pipelines

WHISPER_MODEL = "tiny-whisper"
SPEECH_MODEL = "tiny-speecht5"
PLAIN_SPEECH_MODEL = "tiny-speecht5-plain"  # as exported: no voices
PCM16_STEP = 1 / 32767


def test_transcription_equals_the_pipeline(
    media_server: ExactServer, pipelines: Pipelines, audio: Audio
) -> None:
    samples = audio.speech_like(2.0, seed=1)
    other = audio.speech_like(2.0, seed=2)
    with media_server.client() as client:
        text = client.audio.transcriptions.create(
            model=WHISPER_MODEL, file=("a.wav", audio.wav(samples), "audio/wav")
        ).text
        other_text = client.audio.transcriptions.create(
            model=WHISPER_MODEL, file=("b.wav", audio.wav(other), "audio/wav")
        ).text
        french = client.audio.transcriptions.create(
            model=WHISPER_MODEL, file=("a.wav", audio.wav(samples), "audio/wav"), language="fr"
        ).text
    # The SDK's translations.create is deprecated (a warning, an error here): plain HTTP.
    with media_server.http() as http:
        english = http.post(
            "/v1/audio/translations",
            data={"model": WHISPER_MODEL},
            files={"file": ("a.wav", audio.wav(samples), "audio/wav")},
        ).json()["text"]
    assert text.strip()
    assert text == pipelines.transcribe(samples, task="transcribe").texts[0]
    assert other_text == pipelines.transcribe(other, task="transcribe").texts[0]
    assert other_text != text
    assert french == pipelines.transcribe(samples, task="transcribe", language="<|fr|>").texts[0]
    assert english == pipelines.transcribe(samples, task="translate").texts[0]
    assert len({text, french, english}) == 3


def test_a_stream_sends_the_transcript_as_it_is_decoded(
    media_server: ExactServer, audio: Audio
) -> None:
    wav = audio.wav(audio.speech_like(1.5, seed=4))
    with media_server.client() as client:
        unary = client.audio.transcriptions.create(
            model=WHISPER_MODEL, file=("a.wav", wav, "audio/wav")
        ).text
        events = list(
            client.audio.transcriptions.create(
                model=WHISPER_MODEL, file=("a.wav", wav, "audio/wav"), stream=True
            )
        )
    deltas = [e.delta for e in events if e.type == "transcript.text.delta"]
    assert len(deltas) > 1
    assert events[-1].type == "transcript.text.done"
    assert "".join(deltas) == events[-1].text == unary


def test_timestamps_and_subtitles_come_from_the_pipeline(
    media_server: ExactServer, pipelines: Pipelines, audio: Audio
) -> None:
    samples = audio.speech_like(3.0, seed=6)
    wav = audio.wav(samples)
    with media_server.client() as client:
        verbose = client.audio.transcriptions.create(
            model=WHISPER_MODEL,
            file=("a.wav", wav, "audio/wav"),
            response_format="verbose_json",
            timestamp_granularities=["segment"],
        )
        srt = client.audio.transcriptions.create(
            model=WHISPER_MODEL, file=("a.wav", wav, "audio/wav"), response_format="srt"
        )
        text = client.audio.transcriptions.create(
            model=WHISPER_MODEL, file=("a.wav", wav, "audio/wav"), response_format="text"
        )
    expected = pipelines.transcribe(samples, task="transcribe", return_timestamps=True)
    segments = verbose.segments or []
    assert [s.text for s in segments] == [chunk.text for chunk in expected.chunks]
    assert [round(s.start, 2) for s in segments] == [round(c.start_ts, 2) for c in expected.chunks]
    assert verbose.duration == pytest.approx(3.0)
    assert srt.startswith("1\n00:00:") and " --> " in srt
    # Without timestamps Whisper decodes differently: the plain text is the pipeline's own.
    assert text == pipelines.transcribe(samples, task="transcribe").texts[0]


def test_speech_equals_the_pipeline(media_server: ExactServer, pipelines: Pipelines) -> None:
    text = "Hello there. How are you today?"
    with media_server.client() as client:
        reply = client.audio.speech.create(
            model=SPEECH_MODEL, voice="alloy", input=text, response_format="wav"
        )
        other_voice = client.audio.speech.create(
            model=SPEECH_MODEL, voice="echo", input=text, response_format="wav"
        )
    samples, rate = soundfile.read(io.BytesIO(reply.read()), dtype="float32")
    assert reply.response.headers["content-type"] == "audio/wav"
    assert reply.response.headers["x-voice"] == "alloy"
    expected = np.concatenate(
        [pipelines.speak(sentence, "alloy") for sentence in ("Hello there.", "How are you today?")]
    )
    assert rate == 16_000
    assert np.array_equal(samples, expected)
    echo, _ = soundfile.read(io.BytesIO(other_voice.read()), dtype="float32")
    assert not np.array_equal(echo, samples)


def pcm16_wav(data: bytes) -> tuple[np.ndarray[Any, Any], int]:
    """A WAV that Python's own `wave` module reads (16-bit PCM): its samples and rate."""
    with wave.open(io.BytesIO(data)) as reader:
        assert (reader.getsampwidth(), reader.getnchannels()) == (2, 1)
        frames = reader.readframes(reader.getnframes())
        return np.frombuffer(frames, "<i2") / 32768.0, reader.getframerate()


def assert_pcm16_of(samples: np.ndarray[Any, Any], expected: np.ndarray[Any, Any]) -> None:
    assert samples.shape == expected.shape
    assert np.max(np.abs(samples - np.clip(expected, -1, 1))) <= PCM16_STEP


def test_wav_is_openais_16_bit_under_v1_and_ovms_float_under_v3(
    media_server: ExactServer, pipelines: Pipelines
) -> None:
    """OpenAI's clients read 16-bit PCM (Python's `wave` refuses float); OVMS sends float."""
    text = "One short sentence."
    expected = pipelines.speak(text, "alloy")
    with media_server.client("/v1") as openai_client, media_server.client("/v3") as ovms_client:
        openai_reply = openai_client.audio.speech.create(
            model=SPEECH_MODEL, voice="alloy", input=text, response_format="wav"
        )
        ovms_reply = ovms_client.audio.speech.create(
            model=SPEECH_MODEL, voice="alloy", input=text, response_format="wav"
        )
    samples, rate = pcm16_wav(openai_reply.read())
    assert rate == 16_000
    assert_pcm16_of(samples, expected)
    with soundfile.SoundFile(io.BytesIO(ovms_reply.read())) as sound:
        assert sound.subtype == "FLOAT"
        assert np.array_equal(sound.read(dtype="float32"), expected)


def test_a_model_without_voices_speaks_any_voice_name_in_its_default_speaker(
    media_server: ExactServer, pipelines: Pipelines
) -> None:
    """OpenAI's SDK requires a voice; a model exported without voices answers every name (OVMS
    refuses them all) in its default speaker, and says so."""
    text = "Hello there."
    with media_server.client() as client:
        replies = [
            client.audio.speech.create(
                model=PLAIN_SPEECH_MODEL, voice=voice, input=text, response_format="wav"
            )
            for voice in ("alloy", "shimmer")
        ]
    expected = pipelines.speak(text, None)
    for reply in replies:
        assert reply.response.headers["x-voice"] == "default"
        samples, _ = soundfile.read(io.BytesIO(reply.read()), dtype="float32")
        assert np.array_equal(samples, expected)
    assert not np.array_equal(expected, pipelines.speak(text, "alloy"))


@pytest.mark.parametrize(
    ("response_format", "content_type"),
    [("mp3", "audio/mpeg"), ("flac", "audio/flac"), ("opus", "audio/ogg"), ("pcm", "audio/pcm")],
)
def test_speech_formats(media_server: ExactServer, response_format: str, content_type: str) -> None:
    with media_server.client() as client:
        reply = client.audio.speech.create(
            model=SPEECH_MODEL,
            voice="alloy",
            input="One short sentence.",
            response_format=response_format,
        )
    data = reply.read()
    assert reply.response.headers["content-type"] == content_type
    if response_format == "pcm":
        samples = np.frombuffer(data, dtype="<i2")
        rate = 24_000
    else:
        samples, rate = soundfile.read(io.BytesIO(data), dtype="float32")
    assert 0.2 < len(samples) / rate < 10


def test_a_speech_stream_sends_each_sentence(
    media_server: ExactServer, pipelines: Pipelines
) -> None:
    sentences = ("First one.", "Then a second!", "And a third?")
    body = {
        "model": SPEECH_MODEL,
        "voice": "echo",
        "input": " ".join(sentences),
        "response_format": "wav",
        "stream_format": "sse",
    }
    with media_server.http() as http, http.stream("POST", "/v3/audio/speech", json=body) as reply:
        assert reply.headers["content-type"].startswith("text/event-stream")
        assert reply.headers["x-voice"] == "echo"
        frames = [line[len("data: ") :] for line in reply.iter_lines() if line.startswith("data:")]
    events = [json.loads(frame) for frame in frames]
    assert [e["type"] for e in events] == ["speech.audio.delta"] * 3 + ["speech.audio.done"]
    for event, sentence in zip(events, sentences, strict=False):
        samples, _ = soundfile.read(io.BytesIO(base64.b64decode(event["audio"])), dtype="float32")
        assert np.array_equal(samples, pipelines.speak(sentence, "echo"))


@pytest.mark.parametrize(
    ("path", "form", "param", "message"),
    [
        ("/v3/audio/transcriptions", {}, "file", "File parsing fails"),
        ("/v3/audio/transcriptions", {"language": "xx"}, "language", "Invalid language code."),
        ("/v3/audio/transcriptions", {"language": "english"}, "language", "Invalid language"),
        ("/v3/audio/transcriptions", {"temperature": "hot"}, "temperature", "Invalid temperature"),
        (
            "/v3/audio/transcriptions",
            {"timestamp_granularities[]": "word"},
            "timestamp_granularities",
            "Word timestamps not supported for this model",
        ),
        (
            "/v3/audio/translations",
            {"stream": "true"},
            "stream",
            "streaming is not supported for translations endpoint",
        ),
    ],
)
def test_bad_transcriptions_are_400(
    media_server: ExactServer,
    audio: Audio,
    path: str,
    form: dict[str, str],
    param: str,
    message: str,
) -> None:
    files: dict[str, Any] = (
        {"note": ("n.txt", b"", "text/plain")}
        if param == "file"
        else {"file": ("a.wav", audio.wav(audio.speech_like(0.5, 0)), "audio/wav")}
    )
    with media_server.http() as http:
        response = http.post(path, data={"model": WHISPER_MODEL, **form}, files=files)
    assert response.status_code == 400, response.text
    error = response.json()["error"]
    assert error["param"] == param
    assert message in error["message"]


def test_undecodable_audio_is_400(media_server: ExactServer) -> None:
    with media_server.http() as http:
        response = http.post(
            "/v3/audio/transcriptions",
            data={"model": WHISPER_MODEL},
            files={"file": ("a.mp4", b"\0\0\0 ftypisom" + b"\0" * 200, "audio/mp4")},
        )
    assert response.status_code == 400
    error = response.json()["error"]
    assert error["param"] == "file" and "could not be decoded" in error["message"]


@pytest.mark.parametrize(
    ("body", "param", "message"),
    [
        ({"voice": "alloy"}, "input", "input field is missing in JSON body"),
        (
            {"input": "Hi", "voice": "nova"},
            "voice",
            "Requested voice 'nova' not found in available voices (alloy, echo)",
        ),
        ({"input": "Hi", "voice": "alloy", "speed": 5}, "speed", "speed must be between"),
        ({"input": "Hi", "voice": "alloy", "response_format": "aac"}, "response_format", "aac"),
        ({"input": "x" * 4097, "voice": "alloy"}, "input", "limit of 4096"),
    ],
)
def test_bad_speech_requests_are_400(
    media_server: ExactServer, body: dict[str, Any], param: str, message: str
) -> None:
    with media_server.http() as http:
        response = http.post("/v3/audio/speech", json={"model": SPEECH_MODEL, **body})
    assert response.status_code == 400, response.text
    error = response.json()["error"]
    assert error["param"] == param
    assert message in error["message"]


def test_a_form_says_stream_as_the_calculator_reads_it(
    media_server: ExactServer, audio: Audio
) -> None:
    """`stream=1` streams (the route and the calculator read the field alike)."""
    wav = audio.wav(audio.speech_like(1.0, seed=12))
    with (
        media_server.http() as http,
        http.stream(
            "POST",
            "/v3/audio/transcriptions",
            data={"model": WHISPER_MODEL, "stream": "1"},
            files={"file": ("a.wav", wav, "audio/wav")},
        ) as response,
    ):
        assert response.headers["content-type"].startswith("text/event-stream")
        frames = [line for line in response.iter_lines() if line.startswith("data: ")]
    assert json.loads(frames[-1][len("data: ") :])["type"] == "transcript.text.done"


@pytest.mark.parametrize(
    "path", ["/v3/audio/transcriptions", "/v1/audio/translations", "/v3/images/edits"]
)
@pytest.mark.parametrize(
    "body",
    [
        b"--B\r\nl\x0b--B--\r\n",  # a part whose header line is not a header
        b'--B\r\nContent-Disposition: form-data; name="a\x01b"\r\n\r\nx\r\n--B--\r\n',
    ],
    ids=["header line", "control character in a name"],
)
def test_a_malformed_part_header_is_400_not_500(
    media_server: ExactServer, path: str, body: bytes
) -> None:
    """aiohttp's reader raises InvalidHeader on these (it was an internal error)."""
    with media_server.http() as http:
        response = http.post(
            path, content=body, headers={"Content-Type": "multipart/form-data; boundary=B"}
        )
        assert response.status_code == 400, response.text
        error = response.json()["error"]
        assert error["type"] == "invalid_request_error"
        assert error["message"].startswith("Failed to parse multipart data: Invalid HTTP header")
        assert http.get("/v2/health/ready").status_code == 200


def test_a_malformed_form_part_is_400(media_server: ExactServer) -> None:
    body = (
        b'--B\r\nContent-Disposition: form-data; name="model"\r\n\r\n'
        + WHISPER_MODEL.encode()
        + b'\r\n--B\r\nContent-Disposition: form-data; name="file"; filename="a.wav"\r\n'
        b"Content-Transfer-Encoding: base64\r\n\r\n%%%not base64%%%\r\n--B--\r\n"
    )
    with media_server.http() as http:
        response = http.post(
            "/v3/audio/transcriptions",
            content=body,
            headers={"Content-Type": "multipart/form-data; boundary=B"},
        )
    assert response.status_code == 400, response.text
    assert "Failed to parse multipart data" in response.json()["error"]["message"]
