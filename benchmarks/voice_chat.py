"""Voice chat: the composed graph against its three pipelines run one after another, one run.

examples/voice_chat with the tiny Whisper and SpeechT5 of tools/media_models.py and the SmolLM2
GGUF (or your own models: --whisper, --speech, --llm). For `--questions` spoken questions per
round, back to back:

1. directly, in a process of its own: WhisperPipeline transcribes the question, LLMPipeline
   answers it (greedy, `--max-tokens`, the tokenizer's chat template), Text2SpeechPipeline
   speaks the answer one sentence per call; the first audio exists once the whole answer is
   written and its first sentence spoken;
2. the server: one streaming request with `modalities: ["text", "audio"]` (pcm16); the first
   audio is the first `delta.audio` chunk, while the LLM is still writing.

Printed: time to first audio (median, seconds), the whole answer's time, and the real-time
factor (seconds of answer audio per second of wall time) of each side, with the ratios server /
direct. Both sides get one untimed question first.

    python tools/media_models.py     # once (cached): the tiny speech models
    python benchmarks/voice_chat.py [--rounds 3] [--questions 4] [--json out.json]
"""

from __future__ import annotations

import argparse
import base64
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from media import Server, clip, load_media_models, wav  # noqa: E402  (benchmarks/media.py)

from graphrt.serving import default_model  # noqa: E402
from servables.io.text.sentences import sentences  # noqa: E402

EXAMPLE = ROOT / "examples" / "voice_chat"
MODEL = "voice-chat"
QUESTION_SECONDS = 2.0
PCM_RATE = 24_000


def prepare(directory: Path, whisper: Path, speech: Path, llm: Path) -> Path:
    """The example, with the models where its README puts them (a voice named alloy)."""
    target = directory / "voice_chat"
    shutil.copytree(EXAMPLE, target)
    models = target / "models"
    (models / "whisper").symlink_to(whisper)
    (models / "speecht5").mkdir()
    for entry in speech.iterdir():
        if entry.name != "graph.pbtxt":
            (models / "speecht5" / entry.name).symlink_to(entry)
    (models / "speecht5" / "voices").mkdir(exist_ok=True)
    np.random.default_rng(1).standard_normal(512).astype("<f4").tofile(
        models / "speecht5" / "voices" / "alloy.bin"
    )
    (models / "SmolLM2-135M-Instruct.Q4_1.gguf").symlink_to(llm)
    return target


# ----------------------------------------------------------------------------------- direct


def direct_run(args: argparse.Namespace) -> dict[str, list[float]]:
    """(in its own process) the three pipelines one after another, per question."""
    import openvino_genai as genai

    properties = {"NUM_STREAMS": "1"}
    whisper = genai.WhisperPipeline(str(args.whisper), "CPU", **properties)
    llm = genai.LLMPipeline(str(args.llm), "CPU")
    speech = genai.Text2SpeechPipeline(str(args.speech), "CPU", **properties)
    tokenizer = llm.get_tokenizer()
    results: dict[str, list[float]] = {"first_audio": [], "total": [], "audio_seconds": []}
    for index in range(args.questions + 1):
        samples = clip(QUESTION_SECONDS, index)
        started = time.perf_counter()
        heard = whisper.generate(samples, task="transcribe").texts[0].strip()
        prompt = tokenizer.apply_chat_template(
            [{"role": "user", "content": heard}], add_generation_prompt=True
        )
        config = llm.get_generation_config()
        config.max_new_tokens = args.max_tokens
        config.do_sample = False
        answer = str(llm.generate(prompt, config, apply_chat_template=False))
        first = 0.0
        spoken = 0.0
        for sentence in sentences(answer):
            result = speech.generate(sentence)
            first = first or time.perf_counter() - started
            spoken += result.speeches[0].get_size() / result.output_sample_rate
        if index:  # the first question warms up
            results["first_audio"].append(first)
            results["total"].append(time.perf_counter() - started)
            results["audio_seconds"].append(spoken)
    return results


# ----------------------------------------------------------------------------------- server


def server_run(url: str, args: argparse.Namespace) -> dict[str, list[float]]:
    import httpx

    results: dict[str, list[float]] = {"first_audio": [], "total": [], "audio_seconds": []}
    with httpx.Client(base_url=url, timeout=300) as http:
        for index in range(args.questions + 1):
            data = base64.b64encode(wav(clip(QUESTION_SECONDS, index))).decode("ascii")
            body = {
                "model": MODEL,
                "messages": [
                    {
                        "role": "user",
                        "content": [
                            {"type": "input_audio", "input_audio": {"data": data, "format": "wav"}}
                        ],
                    }
                ],
                "modalities": ["text", "audio"],
                "audio": {"voice": "alloy", "format": "pcm16"},
                "max_tokens": args.max_tokens,
                "temperature": 0,
                "stream": True,
            }
            started = time.perf_counter()
            first = 0.0
            pcm = 0
            with http.stream("POST", "/v3/chat/completions", json=body) as response:
                for line in response.iter_lines():
                    if not line.startswith("data: {"):
                        continue
                    event = json.loads(line[len("data: ") :])
                    for choice in event.get("choices", []):
                        audio = choice.get("delta", {}).get("audio")
                        if audio and audio.get("data"):
                            first = first or time.perf_counter() - started
                            pcm += len(base64.b64decode(audio["data"]))
            if index:
                results["first_audio"].append(first)
                results["total"].append(time.perf_counter() - started)
                results["audio_seconds"].append(pcm / 2 / PCM_RATE)
    return results


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--questions", type=int, default=4)
    parser.add_argument("--max-tokens", type=int, default=100)
    parser.add_argument("--whisper", type=Path)
    parser.add_argument("--speech", type=Path)
    parser.add_argument("--llm", type=Path)
    parser.add_argument("--json", type=Path)
    parser.add_argument("--direct", action="store_true", help=argparse.SUPPRESS)
    return parser.parse_args(argv)


def summary(runs: list[dict[str, list[float]]]) -> dict[str, float]:
    first = [value for run in runs for value in run["first_audio"]]
    total = [value for run in runs for value in run["total"]]
    audio = sum(value for run in runs for value in run["audio_seconds"])
    return {
        "first_audio_s": statistics.median(first),
        "answer_s": statistics.median(total),
        "real_time_factor": audio / sum(total),
    }


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    if args.direct:
        print(json.dumps(direct_run(args)))
        return 0
    if not (args.whisper and args.speech):
        built = load_media_models().build_all()
        args.whisper = args.whisper or Path(built["whisper"])
        args.speech = args.speech or Path(built["speecht5"])
    if args.llm is None:
        os.environ.setdefault("GRAPHRT_CACHE", str(Path.home() / ".cache" / "graphrt"))
        args.llm = default_model.default_model_path()
    direct: list[dict[str, list[float]]] = []
    served: list[dict[str, list[float]]] = []
    with tempfile.TemporaryDirectory() as scratch:
        example = prepare(Path(scratch), args.whisper, args.speech, args.llm)
        server = Server(example / "models" / "config.json")
        try:
            for index in range(args.rounds):
                print(f"round {index + 1}: pipelines one after another ...", flush=True)
                command = [sys.executable, __file__, "--direct", "--questions", str(args.questions)]
                command += ["--max-tokens", str(args.max_tokens), "--whisper", str(args.whisper)]
                command += ["--speech", str(args.speech), "--llm", str(args.llm)]
                done = subprocess.run(command, capture_output=True, text=True, check=True)
                direct.append(json.loads(done.stdout.strip().splitlines()[-1]))
                print(f"round {index + 1}: the voice chat graph ...", flush=True)
                served.append(server_run(server.url, args))
        finally:
            server.stop()
    server_side, direct_side = summary(served), summary(direct)
    print(f"\n{args.rounds} rounds x {args.questions} spoken questions, {args.max_tokens} tokens")
    print("| | voice chat graph (streaming) | pipelines one after another | graph / pipelines |")
    print("|---|---|---|---|")
    for key, label in (
        ("first_audio_s", "time to first audio, s (median)"),
        ("answer_s", "whole answer, s (median)"),
        ("real_time_factor", "audio s per wall s"),
    ):
        ratio = server_side[key] / direct_side[key]
        print(f"| {label} | {server_side[key]:.3f} | {direct_side[key]:.3f} | {ratio:.3f} |")
    if args.json:
        args.json.write_text(json.dumps({"server": served, "direct": direct}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
