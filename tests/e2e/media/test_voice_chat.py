"""examples/voice_chat served as its README says: a spoken question in, text and speech out.

The example directory is copied, the tiny Whisper and SpeechT5 and the SmolLM2 GGUF are put
next to its graph, and it is served from its config.json. Every stage is compared with its model
run directly: the LLM's answer must be SmolLM2's greedy answer (Golden) to the Whisper pipeline's
transcript of the question, and the answer's audio the Text2Speech pipeline's samples for the
answer's sentences, in the asked voice (as 16-bit PCM WAV: OpenAI's `wav`, which Python's own
`wave` module reads; equal to the samples within the 16-bit step).
"""

from __future__ import annotations

import base64
import io
import json
import re
import shutil
import subprocess
import sys
import time
import wave
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import httpx
import numpy as np
import pytest
import soundfile

from servables.io.text.sentences import sentences

if TYPE_CHECKING:
    from conftest import Audio, ExactServer, Golden, LaunchExact, Pipelines

EXAMPLE = Path(__file__).resolve().parents[3] / "examples" / "voice_chat"
MODEL = "voice-chat"
MAX_AUDIO_SECONDS = 5


@pytest.fixture(scope="module")
def example(
    media_models: dict[str, Path], smollm2_gguf: Path, tmp_path_factory: pytest.TempPathFactory
) -> Path:
    """The example, with the tiny speech models, a voice and the GGUF where its README says."""
    target = tmp_path_factory.mktemp("voice_chat") / "voice_chat"
    shutil.copytree(EXAMPLE, target)
    models = target / "models"
    (models / "whisper").symlink_to(media_models["whisper"])
    speech = models / "speecht5"
    speech.mkdir()
    for entry in media_models["speecht5"].iterdir():
        if entry.name != "graph.pbtxt":
            (speech / entry.name).symlink_to(entry)
    (speech / "voices").mkdir()
    voice_embedding("alloy").tofile(speech / "voices" / "alloy.bin")
    (models / smollm2_gguf.name).symlink_to(smollm2_gguf)
    return target


def voice_embedding(name: str) -> np.ndarray[Any, np.dtype[np.float32]]:
    seed = sum(name.encode())  # as the media conftest's voices
    return np.random.default_rng(seed).standard_normal(512).astype("<f4")


@pytest.fixture(scope="module")
def voice_server(example: Path, launch_exact: LaunchExact) -> Iterator[ExactServer]:
    args = [
        "--config_path",
        str(example / "models" / "config.json"),
        "--metrics_enable",
        "--max_audio_seconds",
        str(MAX_AUDIO_SECONDS),
    ]
    with launch_exact(args, model=MODEL) as server:
        yield server


def spoken_question(
    audio: Audio, seconds: float = 2.0, seed: int = 3
) -> tuple[Any, dict[str, Any]]:
    samples = audio.speech_like(seconds, seed)
    data = base64.b64encode(audio.wav(samples)).decode("ascii")
    part = {"type": "input_audio", "input_audio": {"data": data, "format": "wav"}}
    return samples, {"role": "user", "content": [part]}


def wav_samples(data: bytes) -> np.ndarray[Any, Any]:
    """The samples of a 16-bit PCM WAV, read by Python's `wave` module (it refuses float)."""
    with wave.open(io.BytesIO(data)) as reader:
        assert (reader.getsampwidth(), reader.getnchannels()) == (2, 1)
        return np.frombuffer(reader.readframes(reader.getnframes()), "<i2") / 32768.0


def assert_pcm16_of(samples: np.ndarray[Any, Any], expected: np.ndarray[Any, Any]) -> None:
    assert samples.shape == expected.shape
    assert np.max(np.abs(samples - np.clip(expected, -1, 1))) <= 1 / 32767


def test_a_spoken_question_gets_the_models_answer_in_text_and_speech(
    voice_server: ExactServer, audio: Audio, pipelines: Pipelines, golden: Golden
) -> None:
    samples, message = spoken_question(audio)
    with voice_server.client() as client:
        raw = client.chat.completions.with_raw_response.create(
            model=MODEL,
            messages=[message],  # type: ignore[list-item]
            modalities=["text", "audio"],
            audio={"voice": "alloy", "format": "wav"},
            max_tokens=60,
            temperature=0,
        )
    assert raw.headers["x-voice"] == "alloy"
    reply = raw.parse()
    heard = pipelines.transcribe(samples, task="transcribe").texts[0].strip()
    expected = golden.chat([{"role": "user", "content": heard}], 60)
    answer = reply.choices[0].message
    assert heard and answer.content == expected.text
    assert answer.audio is not None and answer.audio.transcript == expected.text
    assert answer.audio.id.startswith("audio_") and answer.audio.expires_at > time.time()
    spoken = np.concatenate([pipelines.speak(s, "alloy") for s in sentences(expected.text)])
    assert_pcm16_of(wav_samples(base64.b64decode(answer.audio.data)), spoken)


def test_a_stream_speaks_each_sentence_while_the_answer_is_written(
    voice_server: ExactServer, audio: Audio, pipelines: Pipelines
) -> None:
    """Text deltas as generated; each sentence's audio after its text, the first one before
    the last text delta; the sentences' audio the pipeline's."""
    _, message = spoken_question(audio, seed=5)
    events: list[tuple[str, Any]] = []
    with voice_server.client() as client:
        raw = client.chat.completions.with_raw_response.create(
            model=MODEL,
            messages=[message],  # type: ignore[list-item]
            modalities=["text", "audio"],
            audio={"voice": "alloy", "format": "wav"},
            max_tokens=150,
            temperature=0,
            stream=True,
        )
        assert raw.headers["x-voice"] == "alloy"
        for chunk in raw.parse():
            if not chunk.choices:
                continue
            delta = chunk.choices[0].delta
            if delta.content:
                events.append(("text", delta.content))
            if getattr(delta, "audio", None) is not None:
                events.append(("audio", delta.audio))
    text = "".join(piece for kind, piece in events if kind == "text")
    spoken = [(i, audio_delta) for i, (kind, audio_delta) in enumerate(events) if kind == "audio"]
    assert [a.transcript.strip() for _, a in spoken] == sentences(text)
    assert "".join(a.transcript for _, a in spoken) == text.rstrip()  # they add up to the text
    assert len(spoken) >= 2, "a long answer has several sentences"
    last_text = max(i for i, (kind, _) in enumerate(events) if kind == "text")
    assert spoken[0][0] < last_text  # the first sentence is heard while the text goes on
    for index, audio_delta in spoken:
        written = "".join(piece for kind, piece in events[:index] if kind == "text")
        sentence = audio_delta.transcript.strip()
        assert sentence in written  # its text went out before its audio
        heard = wav_samples(base64.b64decode(audio_delta.data))
        assert_pcm16_of(heard, pipelines.speak(sentence, "alloy"))
    assert spoken[-1][1].expires_at is not None


def test_a_text_chat_passes_through(voice_server: ExactServer, golden: Golden) -> None:
    messages = [{"role": "user", "content": "What is the capital of France?"}]
    with voice_server.client() as client:
        reply = client.chat.completions.create(
            model=MODEL,
            messages=messages,  # type: ignore[arg-type]
            max_tokens=30,
            temperature=0,
        )
    assert reply.choices[0].message.content == golden.chat(messages, 30).text
    assert reply.choices[0].message.audio is None


@pytest.mark.parametrize(
    ("change", "param", "message"),
    [
        ({"audio": {"voice": "nova", "format": "wav"}}, "audio.voice", "voice 'nova' not found"),
        ({"audio": {"voice": "alloy", "format": "aac"}}, "audio.format", "audio.format"),
        ({"modalities": ["audio", "video"]}, "modalities", "modalities"),
        ({"bad_audio": True}, "messages[0].content[0].input_audio", "could not be decoded"),
        ({"long_audio": True}, "messages[0].content[0].input_audio", "longer than the limit"),
        ({"audio_id": True}, "messages[1].audio", "keeps no audio by id"),
    ],
)
def test_bad_audio_requests_are_400(
    voice_server: ExactServer,
    audio: Audio,
    change: dict[str, Any],
    param: str,
    message: str,
) -> None:
    _, question = spoken_question(
        audio, seconds=MAX_AUDIO_SECONDS + 1 if "long_audio" in change else 1
    )
    if change.pop("bad_audio", False):
        question["content"][0]["input_audio"]["data"] = base64.b64encode(b"noise" * 50).decode()
    change.pop("long_audio", None)
    earlier = (
        [{"role": "assistant", "audio": {"id": "audio_1"}}] if change.pop("audio_id", 0) else []
    )
    tokens = metric(voice_server, "graphrt_llm_generated_tokens_total")
    body = {
        "model": MODEL,
        "messages": [question, *earlier],
        "modalities": ["text", "audio"],
        "audio": {"voice": "alloy", "format": "wav"},
        "max_tokens": 10,
        **change,
    }
    with voice_server.http() as http:
        response = http.post("/v3/chat/completions", json=body)
    assert response.status_code == 400, response.text
    error = response.json()["error"]
    assert error["param"] == param and message in error["message"]
    # Refused before the LLM wrote a token (the voice: as soon as Speak saw the request).
    assert metric(voice_server, "graphrt_llm_generated_tokens_total") == tokens


def test_a_plain_llm_graph_refuses_audio(media_server: ExactServer, audio: Audio) -> None:
    _, question = spoken_question(audio, seconds=1)
    with media_server.http() as http:
        heard = http.post(
            "/v3/chat/completions",
            json={"model": "smollm2", "messages": [question], "max_tokens": 5},
        )
        spoken = http.post(
            "/v3/chat/completions",
            json={
                "model": "smollm2",
                "messages": [{"role": "user", "content": "hi"}],
                "modalities": ["text", "audio"],
                "audio": {"voice": "alloy", "format": "wav"},
            },
        )
    assert heard.status_code == spoken.status_code == 400
    assert "examples/voice_chat" in heard.json()["error"]["message"]
    assert spoken.json()["error"]["param"] == "modalities"


def metric(server: ExactServer, name: str) -> float:
    with server.http() as http:
        text = http.get("/metrics").text
    return sum(
        float(line.rsplit(" ", 1)[1])
        for line in text.splitlines()
        if line.startswith(name) and f'name="{MODEL}"' in line
    )


def test_a_disconnect_stops_every_stage(voice_server: ExactServer, audio: Audio) -> None:
    """The client leaves at the first spoken sentence of a long answer: the LLM stops well
    short of its 400 tokens and nothing runs any more."""
    _, question = spoken_question(audio, seed=8)
    tokens_before = metric(voice_server, "graphrt_llm_generated_tokens_total")
    body = {
        "model": MODEL,
        "messages": [question],
        "modalities": ["text", "audio"],
        "audio": {"voice": "alloy", "format": "pcm16"},
        "max_tokens": 400,
        "ignore_eos": True,
        "stream": True,
    }
    with (
        httpx.Client(base_url=voice_server.base_url, timeout=120) as http,
        http.stream("POST", "/v3/chat/completions", json=body) as response,
    ):
        for line in response.iter_lines():
            if '"audio"' in line:
                break
    deadline = time.monotonic() + 60
    while (
        metric(voice_server, "graphrt_llm_requests_active")
        + metric(voice_server, "graphrt_pipeline_requests_running")
        > 0
    ):
        assert time.monotonic() < deadline, "a stage went on after the client left"
        time.sleep(0.05)
    generated = metric(voice_server, "graphrt_llm_generated_tokens_total") - tokens_before
    assert generated < 300, f"{generated} tokens generated after the client left"


def test_every_node_shows_on_the_graph_page(voice_server: ExactServer) -> None:
    with voice_server.http() as http:
        stats = http.get(f"/graphs/{MODEL}/stats").json()
    calls = {node["name"]: node["calls"] for node in stats["nodes"]}
    assert set(calls) == {"Listen", "Think", "Sentences", "Speak", "Reply"}
    assert all(count > 0 for count in calls.values()), calls
    assert set(stats["pipelines"]) == {"Listen", "Speak"}


def test_the_example_client(
    example: Path, voice_server: ExactServer, audio: Audio, pipelines: Pipelines, golden: Golden
) -> None:
    samples = audio.speech_like(2.0, 3)
    (example / "question.wav").write_bytes(audio.wav(samples))
    heard = pipelines.transcribe(samples, task="transcribe").texts[0].strip()
    expected = golden.chat([{"role": "user", "content": heard}], 80).text
    for mode in ([], ["--stream"]):
        done = subprocess.run(
            [
                sys.executable,
                "client.py",
                "question.wav",
                "--url",
                f"{voice_server.base_url}/v3",
                *mode,
            ],
            cwd=example,
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
        assert done.returncode == 0, done.stderr
        assert done.stdout == expected + "\n"
        answer, rate = soundfile.read(example / "answer.wav")
        assert rate in (16_000, 24_000) and len(answer) / rate > 0.5
    assert json.loads((example / "models" / "config.json").read_text())["mediapipe_config_list"]


def test_the_readme_example_runs(
    voice_server: ExactServer,
    audio: Audio,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    page = Path(__file__).resolve().parents[3] / "docs" / "voice-chat.md"
    readme = page.read_text(encoding="utf-8")
    blocks = re.findall(r"```python\n(.*?)```", readme, re.DOTALL)
    (block,) = [b for b in blocks if 'model="voice-chat"' in b]
    (tmp_path / "question.wav").write_bytes(audio.wav(audio.speech_like(2.0, 3)))
    monkeypatch.chdir(tmp_path)
    code = block.replace("http://127.0.0.1:8000", voice_server.base_url)
    exec(compile(code, str(page), "exec"), {"__name__": "readme_example"})
    assert wav_samples((tmp_path / "answer.wav").read_bytes()).size > 0
    assert capsys.readouterr().out.strip()
