"""graphrt vs. llama.cpp's llama-server: the same GGUF, prompts, settings and client, one run.

Both servers are started here on the same model file and stay up for the whole run; the load
alternates between them (never both at once: the box has 2 cores), level by level and round by
round, the order flipped every round so neither always runs second. Each side gets the client of
benchmarks/serving.py: a closed loop of streaming chat completions (greedy, `ignore_eos`,
`max_tokens` tokens, usage from the final chunk), and the same vLLM-style metrics.

llama-server is llama.cpp's own C++ server (tools/server), built once from the llama.cpp sources
vendored in llama-cpp-python's sdist with GGML_NATIVE for this CPU (benchmarks/llama_cpp.py). It
gets `-np` slots for the highest level (each with `--ctx-per-slot` tokens), `-t` threads
(default: every core, as graphrt's engine) and its default continuous batching.

The model is SmolLM2-135M Q4_1 by default, or the 1B-class fixture (benchmarks/llama1b_fixture.py)
by its format's name: `--model Q4_K_M` puts both servers on that GGUF (add
`--graphrt-flag=--gguf_weights=int4_channelwise` for graphrt's requantized layout);
`--graphrt-model ir-int4-sym-cw-all` gives graphrt an IR export of the same model, so each
engine runs its best layout. The CPU, its features and OpenVINO's settings are printed first, the
load average before every run.

Prints per level and side: output tok/s, TTFT p50, TPOT p50 and ITL p50, then the ratios
graphrt / llama.cpp (throughput: higher is better for graphrt; latencies: lower is), medians
over rounds, next to the issues' targets (>= 1.0x at one stream, >= 2x at 8, >= 1.5x at 32).

    python benchmarks/peers.py [--model PATH.gguf|FORMAT] [--graphrt-model PATH|FORMAT[+LAYOUT]]
        [--llama-server PATH] [--concurrency 1 8 32] [--num-prompts N] [--max-tokens 128]
        [--rounds 3] [--threads N] [--graphrt-flag=--plugin_config=... ...] [--json out.json]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import sys
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from host import describe, load  # benchmarks/ is not a package
from llama1b_fixture import resolve
from llama_cpp import program
from serving import (
    CHAT_PATH,
    PROMPTS,
    WARMUP_TOKENS,
    BackgroundServer,
    LevelMetrics,
    ServerProcess,
    run_server_level,
    summarize,
)

NAME = "smollm2"
TARGETS = {1: 1.0, 8: 2.0, 32: 1.5}  # graphrt / llama.cpp output tok/s (issues 29 and 40)


# ------------------------------------------------------------------------------ llama-server


class LlamaServer(BackgroundServer):
    """llama-server in a subprocess."""

    def __init__(
        self, binary: Path, model: Path, slots: int, ctx_per_slot: int, threads: int
    ) -> None:
        def command(port: int) -> list[str]:
            return [
                str(binary),
                "-m",
                str(model),
                "--host",
                "127.0.0.1",
                "--port",
                str(port),
                "-np",
                str(slots),
                "-c",
                str(slots * ctx_per_slot),
                "-t",
                str(threads),
                "--alias",
                NAME,
                "--no-webui",
            ]

        super().__init__("llama-server", command, "/health")


# ---------------------------------------------------------------------------------------- load


async def drive(
    server: BackgroundServer, path: str, concurrency: int, num_prompts: int, max_tokens: int
) -> LevelMetrics:
    """One level against one server: serving.py's closed loop of streaming chats, a connection
    per request on both sides (llama-server drops idle keep-alive connections)."""
    results, duration = await run_server_level(
        server.url, NAME, concurrency, num_prompts, max_tokens, path, force_close=True
    )
    return summarize(results, duration, concurrency, max_tokens)


async def warm_up(server: BackgroundServer, path: str) -> None:
    """Every prompt once, a few tokens: both sides start with their caches warm."""
    await drive(server, path, len(PROMPTS), len(PROMPTS), WARMUP_TOKENS)


@dataclass
class Pair:
    level: int
    round: int
    graphrt: LevelMetrics
    llama: LevelMetrics


def ratio(ours: float, theirs: float) -> float:
    return ours / theirs if theirs else float("nan")


def print_table(pairs: Sequence[Pair], levels: Sequence[int]) -> dict[str, Any]:
    print()
    header = (
        f"{'streams':>7} | {'graphrt tok/s':>13} {'llama tok/s':>11} {'ratio':>6} "
        f"{'target':>6} | {'TTFT g/l ms':>13} | {'TPOT g/l ms':>13} | {'ITL g/l ms':>13}"
    )
    print(header)
    print("-" * len(header))
    summary: dict[str, Any] = {}
    for level in levels:
        mine = [p for p in pairs if p.level == level]
        if not mine:
            continue

        def med(side: str, key: str, group: list[Pair] = mine) -> float:
            return float(statistics.median(getattr(getattr(p, side), key) for p in group))

        throughput = statistics.median(
            ratio(p.graphrt.output_throughput, p.llama.output_throughput) for p in mine
        )
        target = TARGETS.get(level)
        mark = "" if target is None else ("ok" if throughput >= target else "MISS")
        row: dict[str, Any] = {
            "graphrt_tok_s": med("graphrt", "output_throughput"),
            "llama_tok_s": med("llama", "output_throughput"),
            "throughput_ratio": throughput,
            "ttft_ms": (med("graphrt", "median_ttft_ms"), med("llama", "median_ttft_ms")),
            "tpot_ms": (med("graphrt", "median_tpot_ms"), med("llama", "median_tpot_ms")),
            "itl_ms": (med("graphrt", "median_itl_ms"), med("llama", "median_itl_ms")),
            "target": target,
        }
        summary[str(level)] = row
        print(
            f"{level:>7} | {row['graphrt_tok_s']:>13.1f} {row['llama_tok_s']:>11.1f} "
            f"{throughput:>5.2f}x {(f'{target:.1f}x ' + mark) if target else '':>6} | "
            + " | ".join(
                f"{row[k][0]:>6.1f}/{row[k][1]:<6.1f}" for k in ("ttft_ms", "tpot_ms", "itl_ms")
            )
        )
    return summary


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--model", help="a GGUF, or a format of the 1B fixture (default: SmolLM2-135M Q4_1)"
    )
    parser.add_argument(
        "--graphrt-model", help="graphrt's model if not --model: a path or FORMAT[+LAYOUT]"
    )
    parser.add_argument("--llama-server", type=Path, help="a llama-server binary")
    parser.add_argument("--concurrency", type=int, nargs="+", default=[1, 8, 32])
    parser.add_argument(
        "--num-prompts", type=int, help="per level (default: 2 x concurrency, >= 8)"
    )
    parser.add_argument("--max-tokens", type=int, default=128)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--threads", type=int, default=os.cpu_count() or 2)
    parser.add_argument("--ctx-per-slot", type=int, default=1024)
    parser.add_argument(
        "--graphrt-flag",
        action="append",
        default=[],
        help="extra `graphrt serve` flag (repeatable; write --graphrt-flag=--name=value)",
    )
    parser.add_argument("--json", type=Path, help="write every level's metrics here")
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    binary = args.llama_server or program("llama-server")
    if args.model is None:
        from graphrt.serving.default_model import default_model_path

        model = default_model_path()
    else:
        model = resolve(args.model)
    graphrt_model = resolve(args.graphrt_model) if args.graphrt_model else model
    print(describe(), flush=True)
    print(f"llama-server: {model}\ngraphrt serve: {graphrt_model} {' '.join(args.graphrt_flag)}")
    levels = sorted(set(args.concurrency))
    graphrt = ServerProcess(graphrt_model, NAME, args.graphrt_flag)
    llama = LlamaServer(binary, model, max(levels), args.ctx_per_slot, args.threads)
    pairs: list[Pair] = []
    try:
        graphrt.wait_ready()
        llama.wait_ready()
        sides: dict[str, tuple[BackgroundServer, str]] = {
            "graphrt": (graphrt, CHAT_PATH),
            "llama": (llama, "/v1/chat/completions"),
        }
        for server, path in sides.values():
            asyncio.run(warm_up(server, path))
        for round_index in range(args.rounds):
            for level in levels:
                prompts = args.num_prompts or max(8, 2 * level)
                order = ["graphrt", "llama"] if round_index % 2 == 0 else ["llama", "graphrt"]
                measured: dict[str, LevelMetrics] = {}
                for side in order:
                    before = load()
                    measured[side] = asyncio.run(
                        drive(*sides[side], level, prompts, args.max_tokens)
                    )
                    m = measured[side]
                    print(
                        f"round {round_index + 1} level {level} {side:>7}: "
                        f"{m.output_throughput:7.1f} tok/s, TTFT p50 {m.median_ttft_ms:7.1f} ms, "
                        f"TPOT p50 {m.median_tpot_ms:6.2f} ms, failed {m.failed}, load before "
                        f"{before}" + (f" ({m.errors[0]})" if m.errors else ""),
                        flush=True,
                    )
                pairs.append(Pair(level, round_index, measured["graphrt"], measured["llama"]))
    finally:
        graphrt.stop()
        llama.stop()
    summary = print_table(pairs, levels)
    if args.json:
        args.json.write_text(
            json.dumps({"summary": summary, "pairs": [asdict(p) for p in pairs]}, indent=2)
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
