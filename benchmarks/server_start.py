"""How long `graphrt serve` takes to become ready, and the CPU the start costs.

Every end-to-end test that starts a server pays this, and so does every restart in production.
Each start runs `graphrt serve --model_path MODEL` on a free port, polls /v2/health/ready, stops
the server with SIGTERM and reads the CPU time of the server and its engine process (the engine
is the server's child and is reaped by it, so the server's rusage holds both). The first start
may build caches (the GGUF's saved graph, the tokenizer, the token-text table); the rest reuse
them, as a restart does.

    python benchmarks/server_start.py [--model PATH.gguf] [--starts 5]
"""

from __future__ import annotations

import argparse
import os
import signal
import socket
import statistics
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

from host import describe  # benchmarks/ is not a package

READY_TIMEOUT = 300.0


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def start_once(model: Path) -> tuple[float, float]:
    """(seconds until ready, CPU seconds of the server and its engine over the whole run)."""
    port = free_port()
    command = [sys.executable, "-m", "graphrt.cli.main", "serve", "--rest_port", str(port)]
    command += ["--model_name", "bench", "--model_path", str(model)]
    started = time.perf_counter()
    process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{port}/v2/health/ready"
    while True:
        if process.poll() is not None:
            raise RuntimeError(f"graphrt serve exited with {process.returncode} before ready")
        if time.perf_counter() - started > READY_TIMEOUT:
            process.kill()
            raise RuntimeError(f"not ready within {READY_TIMEOUT:.0f} s")
        try:
            with urllib.request.urlopen(url, timeout=1) as response:
                if response.status == 200:
                    break
        except (urllib.error.URLError, OSError):
            pass
        time.sleep(0.05)
    ready = time.perf_counter() - started
    process.send_signal(signal.SIGTERM)
    _, status, usage = os.wait4(process.pid, 0)
    process.returncode = os.waitstatus_to_exitcode(status)
    return ready, usage.ru_utime + usage.ru_stime


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--model", type=Path, help="GGUF file or model dir (default: SmolLM2)")
    parser.add_argument("--starts", type=int, default=5)
    args = parser.parse_args()
    model = args.model
    if model is None:
        from graphrt.serving.default_model import default_model_path

        model = default_model_path()
    print(describe())
    print(f"{'start':>5} {'ready':>8} {'CPU':>8}")
    results = []
    for number in range(1, args.starts + 1):
        ready, cpu = start_once(model)
        results.append((ready, cpu))
        print(f"{number:>5} {ready:>7.2f}s {cpu:>7.2f}s", flush=True)
    later = results[1:] or results
    which = f"starts 2-{len(results)}" if len(results) > 1 else "start 1"
    print(
        f"median of {which}: ready {statistics.median(r for r, _ in later):.2f} s, "
        f"CPU {statistics.median(c for _, c in later):.2f} s"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
