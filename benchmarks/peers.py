"""graphrt vs. llama.cpp's llama-server: the same GGUF, prompts, settings and client, one run.

Both servers are started here on the same model file and stay up for the whole run; the load
alternates between them (never both at once: the box has 2 cores), level by level and round by
round, the order flipped every round so neither always runs second. Each side gets the client of
benchmarks/serving.py: a closed loop of streaming chat completions (greedy, `ignore_eos`,
`max_tokens` tokens, usage from the final chunk), and the same vLLM-style metrics.

llama-server is llama.cpp's own C++ server (tools/server). It is not on PyPI as a program, so
`--build-llama-server` builds it from the llama.cpp sources vendored in llama-cpp-python's sdist
(a registry package: `pip download --no-binary :all: llama-cpp-python`), with GGML_NATIVE for
this CPU, into ~/.cache/graphrt-bench (once). It gets `-np` slots for the highest level (each
with `--ctx-per-slot` tokens), `-t` threads (default: every core, as graphrt's engine) and its
default continuous batching.

Prints per level and side: output tok/s, TTFT p50, TPOT p50 and ITL p50, then the ratios
graphrt / llama.cpp (throughput: higher is better for graphrt; latencies: lower is), medians
over rounds, next to the issue's targets (>= 1.0x at one stream, >= 1.5x at 8 and 32).

    python benchmarks/peers.py [--model PATH.gguf] [--llama-server PATH | --build-llama-server]
        [--concurrency 1 8 32] [--num-prompts N] [--max-tokens 128] [--rounds 3]
        [--threads N] [--graphrt-flag=--plugin_config=... ...] [--json out.json]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import statistics
import subprocess
import sys
import tarfile
import tempfile
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from serving import (  # benchmarks/ is not a package
    CHAT_PATH,
    PROMPTS,
    WARMUP_TOKENS,
    BackgroundServer,
    LevelMetrics,
    ServerProcess,
    run_server_level,
    summarize,
)

BENCH_CACHE = Path.home() / ".cache" / "graphrt-bench"
DEFAULT_MODEL = Path.home() / ".cache" / "graphrt-tests" / "models"
MODEL_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"
NAME = "smollm2"
TARGETS = {1: 1.0, 8: 1.5, 32: 1.5}  # graphrt / llama.cpp output tok/s (issue 29)


# ------------------------------------------------------------------------------ llama-server


def build_llama_server() -> Path:
    """llama-server from llama-cpp-python's sdist (vendored llama.cpp), built once here."""
    binary = BENCH_CACHE / "llama-server"
    if binary.is_file():
        return binary
    work = Path(tempfile.mkdtemp(prefix="llama-cpp-", dir=BENCH_CACHE.parent))
    try:
        subprocess.run(
            [
                sys.executable,
                "-m",
                "pip",
                "download",
                "-q",
                "--no-binary",
                ":all:",
                "--no-deps",
                "llama-cpp-python",
                "-d",
                str(work),
            ],
            check=True,
        )
        (archive,) = work.glob("llama_cpp_python-*.tar.gz")
        with tarfile.open(archive) as tar:
            tar.extractall(work, filter="data")
        (source,) = work.glob("llama_cpp_python-*/vendor/llama.cpp")
        build = source / "build"
        options = ["-DLLAMA_CURL=OFF", "-DGGML_NATIVE=ON", "-DCMAKE_BUILD_TYPE=Release"]
        options += ["-DBUILD_SHARED_LIBS=OFF"]  # one binary, kept after the sources go
        options += ["-DLLAMA_BUILD_TESTS=OFF", "-DLLAMA_BUILD_EXAMPLES=OFF"]
        subprocess.run(["cmake", "-S", str(source), "-B", str(build), *options], check=True)
        jobs = str(os.cpu_count() or 2)
        subprocess.run(
            ["cmake", "--build", str(build), "--target", "llama-server", "-j", jobs], check=True
        )
        BENCH_CACHE.mkdir(parents=True, exist_ok=True)
        shutil.copy2(build / "bin" / "llama-server", binary)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return binary


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
    parser.add_argument("--model", type=Path, default=DEFAULT_MODEL / MODEL_FILE)
    where = parser.add_mutually_exclusive_group()
    where.add_argument("--llama-server", type=Path, help="a llama-server binary")
    where.add_argument(
        "--build-llama-server",
        action="store_true",
        help="build llama-server from llama-cpp-python's sdist (once, into ~/.cache/graphrt-bench)",
    )
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
    binary = args.llama_server or (
        build_llama_server() if args.build_llama_server else BENCH_CACHE / "llama-server"
    )
    if not binary.is_file():
        print(f"no llama-server at {binary}: pass --build-llama-server", file=sys.stderr)
        return 2
    levels = sorted(set(args.concurrency))
    graphrt = ServerProcess(args.model, NAME, args.graphrt_flag)
    llama = LlamaServer(binary, args.model, max(levels), args.ctx_per_slot, args.threads)
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
                    measured[side] = asyncio.run(
                        drive(*sides[side], level, prompts, args.max_tokens)
                    )
                    m = measured[side]
                    print(
                        f"round {round_index + 1} level {level} {side:>7}: "
                        f"{m.output_throughput:7.1f} tok/s, TTFT p50 {m.median_ttft_ms:7.1f} ms, "
                        f"TPOT p50 {m.median_tpot_ms:6.2f} ms, failed {m.failed}"
                        + (f" ({m.errors[0]})" if m.errors else ""),
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
