"""The frontend's CPU per request when chats arrive together: what admitting a request costs.

Starts `graphrt serve` on the model and sends bursts of `--burst` concurrent unary chat
completions with `max_tokens` 1 (so the engine does one prefill step each and the frontend's
work is mostly admission: HTTP, the graph run, the chat template, tokenization, the response),
each prompt made unique so nothing can be reused between requests. Prints the frontend process's
CPU time per request and the burst's wall time, per burst size. A lone request (burst 1) runs
with the caches cold after every idle gap, so it costs more than one of a burst.

    python benchmarks/admission.py [--model PATH.gguf] [--burst 1 8 32] [--bursts 10]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import time
from pathlib import Path

import aiohttp

sys.path.insert(0, str(Path(__file__).resolve().parent))
from serving import CHAT_PATH, PROMPTS, ServerProcess, cpu_seconds  # benchmarks/ is not a package

WARM_UP_BURSTS = 3


async def bursts(url: str, pid: int, size: int, count: int) -> tuple[float, float]:
    """(frontend CPU seconds per request, median burst seconds) over `count` bursts."""
    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=0)) as session:

        async def chat(index: int) -> None:
            messages = [dict(message) for message in PROMPTS[index % len(PROMPTS)]]
            messages[-1]["content"] += f" (request {index})"
            body = {"model": "bench", "messages": messages, "max_tokens": 1, "temperature": 0}
            async with session.post(url + CHAT_PATH, json=body) as response:
                await response.read()
                if response.status != 200:
                    raise RuntimeError(f"HTTP {response.status}")

        sent = 0
        for _ in range(WARM_UP_BURSTS):
            await asyncio.gather(*(chat(sent + i) for i in range(size)))
            sent += size
        started_cpu = cpu_seconds(pid)
        walls = []
        for _ in range(count):
            started = time.perf_counter()
            await asyncio.gather(*(chat(sent + i) for i in range(size)))
            walls.append(time.perf_counter() - started)
            sent += size
            await asyncio.sleep(0.2)  # the engine drains; the next burst finds it idle
        per_request = (cpu_seconds(pid) - started_cpu) / (count * size)
        return per_request, statistics.median(walls)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--model", type=Path, help="GGUF file or model dir (default: SmolLM2)")
    parser.add_argument("--burst", type=int, nargs="+", default=[1, 8, 32])
    parser.add_argument("--bursts", type=int, default=10, help="bursts per size")
    args = parser.parse_args()
    model = args.model
    if model is None:
        from graphrt.serving.default_model import default_model_path

        model = default_model_path()
    server = ServerProcess(model, "bench", [])
    try:
        server.wait_ready()
        print(f"{'burst':>5} {'frontend CPU/request':>21} {'burst wall p50':>15}")
        for size in args.burst:
            count = max(args.bursts, 100 // size)
            cpu, wall = asyncio.run(bursts(server.url, server.process.pid, size, count))
            print(f"{size:>5} {cpu * 1e3:>18.2f} ms {wall * 1e3:>12.0f} ms", flush=True)
    finally:
        server.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
