"""OpenVINO's CPU pinning (`ENABLE_CPU_PINNING`) in graphrt's engine processes, on and off.

graphrt runs each LLM engine (each model, each LoRA adapter, a reload's replacement) in a process of
its own, and the CPU plugin pins a process's threads as if it had the machine alone. This measures
what pinning changes, each run in fresh processes, the two settings alternating within each round:

1. one engine alone, openvino-genai's ContinuousBatchingPipeline driven directly: its decode rate
   at 1 and at `--streams` streams (greedy, `ignore_eos`);
2. through the server (`graphrt serve --config_path`, two graphs of the model, both with the
   setting in their plugin_config): how long `/v1/config/reload` takes to load a changed graph
   while a client streams `--stream-tokens` from the other one, against the same reload with
   nothing streaming; then one stream of `--pair-tokens` to each graph at once (the time until
   both ended).

graphrt's engines run unpinned unless a graph's plugin_config sets ENABLE_CPU_PINNING
(servables/llm/engine/pipeline.py); this is the measurement behind that default.

    python benchmarks/cpu_pinning.py [--model M] [--rounds 3] [--tokens 128] [--streams 8]
        [--stream-tokens 1500] [--pair-tokens 400]
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from host import describe  # benchmarks/ is not a package
from serving import PROBE_PATH, PROMPTS, BackgroundServer, chat_payload

# Runs in a fresh process: argv = model dir, pinning (0/1), streams, tokens, benchmarks dir.
WORKER = """
import json, sys, time
sys.path.insert(0, sys.argv[-1])
from serving import PROMPTS, scheduler_config, server_scheduler
import openvino_genai as genai

model, pinned = sys.argv[1], sys.argv[2] == "1"
pipeline = genai.ContinuousBatchingPipeline(
    model, scheduler_config(server_scheduler()), "CPU", {"ENABLE_CPU_PINNING": pinned}
)
tokenizer = pipeline.get_tokenizer()
prompts = [tokenizer.apply_chat_template(m, add_generation_prompt=True) for m in PROMPTS]

def generate(streams, tokens):
    config = pipeline.get_config()
    config.max_new_tokens, config.ignore_eos = tokens, True
    batch = [prompts[i % len(prompts)] for i in range(streams)]
    began = time.perf_counter()
    pipeline.generate(batch, [config] * streams)
    return streams * tokens / (time.perf_counter() - began)

streams, tokens = int(sys.argv[3]), int(sys.argv[4])
generate(1, 16)  # warm-up
print(json.dumps({"one": generate(1, tokens), "many": generate(streams, tokens)}), flush=True)
"""

SETTINGS = {"pinned": True, "unpinned": False}


def worker(*args: object) -> subprocess.Popen[str]:
    here = str(Path(__file__).resolve().parent)
    command = [sys.executable, "-c", WORKER, *(str(a) for a in args), here]
    return subprocess.Popen(command, stdout=subprocess.PIPE, text=True)


def result(process: subprocess.Popen[str]) -> dict[str, Any]:
    out, _ = process.communicate(timeout=900)
    if process.returncode != 0:
        raise RuntimeError(f"worker failed ({process.returncode})")
    last: dict[str, Any] = json.loads(out.strip().splitlines()[-1])
    return last


def decode(model: Path, pinned: bool, streams: int, tokens: int) -> dict[str, Any]:
    return result(worker(model, int(pinned), streams, tokens))


def write_repository(root: Path, model: Path, pinned: bool) -> Path:
    """config.json serving graphs `streamed` and `reloaded` of `model`, pinned or not."""
    from graphrt.export.text_graphs import TextGenerationSettings, text_generation_graph

    settings = TextGenerationSettings(
        models_path=str(model), plugin_config={"ENABLE_CPU_PINNING": pinned}
    )
    for name in ("streamed", "reloaded"):
        (root / name).mkdir(exist_ok=True)
        (root / name / "graph.pbtxt").write_text(text_generation_graph(settings), "utf-8")
    config = root / "config.json"
    entries = [{"name": name, "base_path": name} for name in ("streamed", "reloaded")]
    config.write_text(json.dumps({"model_config_list": [], "mediapipe_config_list": entries}))
    return config


def timed_reload(url: str, graph: Path) -> float:
    """Seconds until /v1/config/reload answers, after a change to `graph` (a comment line)."""
    with graph.open("a", encoding="utf-8") as text:
        text.write("# changed\n")
    began = time.monotonic()
    request = urllib.request.Request(url + "/v1/config/reload", method="POST")
    with urllib.request.urlopen(request, timeout=600) as response:
        response.read()
    return time.monotonic() - began


def server_times(model: Path, pinned: bool, stream_tokens: int, pair_tokens: int) -> dict[str, Any]:
    """A reload with nothing running, one while a client streams from the other graph, then a
    stream to each graph at once."""
    with tempfile.TemporaryDirectory() as scratch:
        config = write_repository(Path(scratch), model, pinned)
        server = BackgroundServer(
            "graphrt serve",
            lambda port: [
                sys.executable,
                "-m",
                "graphrt.cli.main",
                "serve",
                "--config_path",
                str(config),
                "--rest_port",
                str(port),
                "--file_system_poll_wait_seconds",
                "0",
            ],
            PROBE_PATH,
        )
        try:
            server.wait_ready()
            idle = timed_reload(server.url, Path(scratch) / "reloaded" / "graph.pbtxt")
            body = chat_payload("streamed", PROMPTS[0], stream_tokens)
            streaming = threading.Thread(target=stream_to_end, args=(server.url, body))
            streaming.start()
            time.sleep(1.0)  # the stream is under way
            busy = timed_reload(server.url, Path(scratch) / "reloaded" / "graph.pbtxt")
            streaming.join()
            pair = [
                threading.Thread(
                    target=stream_to_end,
                    args=(server.url, chat_payload(name, PROMPTS[0], pair_tokens)),
                )
                for name in ("streamed", "reloaded")
            ]
            began = time.monotonic()
            for thread in pair:
                thread.start()
            for thread in pair:
                thread.join()
            both = time.monotonic() - began
        finally:
            server.stop()
    return {"idle": idle, "busy": busy, "pair": both}


def stream_to_end(url: str, body: dict[str, Any]) -> None:
    request = urllib.request.Request(
        url + "/v3/chat/completions",
        data=json.dumps(body).encode(),
        headers={"Content-Type": "application/json"},
    )
    with urllib.request.urlopen(request, timeout=600) as response:
        while response.read(65536):
            pass


def source_model(model: Path | None) -> Path:
    if model is not None:
        return model
    from graphrt.serving.default_model import default_model_path

    return default_model_path()


def engine_dir(model: Path) -> Path:
    """The directory the server's engine loads: genai's saved graph of a GGUF (made once)."""
    from servables.llm.gguf_graph import genai_model_dir
    from servables.llm.model_files import is_gguf

    return genai_model_dir(model) if is_gguf(model) else model


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", type=Path, help="GGUF file or model dir (default: SmolLM2)")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--tokens", type=int, default=128)
    parser.add_argument("--streams", type=int, default=8)
    parser.add_argument("--stream-tokens", type=int, default=1500)
    parser.add_argument("--pair-tokens", type=int, default=400)
    args = parser.parse_args(argv)
    model = source_model(args.model)
    print(describe(), f"\nmodel: {model}", flush=True)

    rates: dict[str, list[dict[str, float]]] = {name: [] for name in SETTINGS}
    reloads: dict[str, list[dict[str, Any]]] = {name: [] for name in SETTINGS}
    for round_number in range(args.rounds):
        order = list(SETTINGS) if round_number % 2 == 0 else list(reversed(SETTINGS))
        for name in order:
            pinned = SETTINGS[name]
            rates[name].append(decode(engine_dir(model), pinned, args.streams, args.tokens))
            reloads[name].append(server_times(model, pinned, args.stream_tokens, args.pair_tokens))
            rate, reload = rates[name][-1], reloads[name][-1]
            print(
                f"round {round_number + 1} {name}: {rate['one']:.1f} tok/s at 1 stream, "
                f"{rate['many']:.1f} at {args.streams}; reload {reload['idle']:.1f} s idle, "
                f"{reload['busy']:.1f} s beside a stream; two streams at once "
                f"{reload['pair']:.1f} s",
                flush=True,
            )

    print("\nmedians over rounds:")
    print(
        f"| setting | 1 stream tok/s | {args.streams} streams tok/s | reload, idle "
        "| reload beside a stream | two streams at once |"
    )
    print("|---|---|---|---|---|---|")
    for name in SETTINGS:
        print(
            f"| {name} | {statistics.median(r['one'] for r in rates[name]):.1f} | "
            f"{statistics.median(r['many'] for r in rates[name]):.1f} | "
            f"{statistics.median(r['idle'] for r in reloads[name]):.1f} s | "
            f"{statistics.median(r['busy'] for r in reloads[name]):.1f} s | "
            f"{statistics.median(r['pair'] for r in reloads[name]):.1f} s |"
        )
    ratios = [
        (u["one"] / p["one"], u["many"] / p["many"])
        for u, p in zip(rates["unpinned"], rates["pinned"], strict=True)
    ]
    print(
        "unpinned / pinned decode rate, median of rounds: "
        f"{statistics.median(r[0] for r in ratios):.2f} at 1 stream, "
        f"{statistics.median(r[1] for r in ratios):.2f} at {args.streams}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
