"""KServe v2 REST infer driven by `wrk`: the server's own cost, with a client that costs little.

benchmarks/kserve.py loads the server with Triton's Python clients on the same two cores, so
the client's CPU is part of every number. Here `wrk` (a C load generator: Debian's `wrk`
package) sends the same binary-data infer request to the bare aiohttp server of kserve.py
(`--bare-server`: a prebuilt response) and then to `graphrt serve`, over `--connections`
connections for `--seconds` each, and reports requests/s, the server process's CPU time per
request and the server's share of the bare server's rate.

    python benchmarks/kserve_wrk.py [--connections 1 16] [--seconds 5] [--rounds 1]
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import kserve  # the sibling benchmark: model, servers, CPU time

SCRIPT = """
local f = io.open("{body}", "rb")
wrk.method = "POST"
wrk.body = f:read("*all")
f:close()
wrk.headers["Inference-Header-Content-Length"] = "{header_length}"
wrk.headers["Content-Type"] = "application/octet-stream"
"""


def write_request(directory: Path) -> Path:
    """The wrk script posting kserve.py's input as binary data, asking for binary output."""
    tensor = kserve.inputs().tobytes()
    header = json.dumps(
        {
            "inputs": [
                {
                    "name": "x",
                    "datatype": "FP32",
                    "shape": [1, kserve.INPUT_SIZE],
                    "parameters": {"binary_data_size": len(tensor)},
                }
            ],
            "outputs": [{"name": "y", "parameters": {"binary_data": True}}],
        }
    ).encode()
    body = directory / "body.bin"
    body.write_bytes(header + tensor)
    script = directory / "infer.lua"
    script.write_text(SCRIPT.format(body=body, header_length=len(header)))
    return script


def run_wrk(
    server: kserve.Server, script: Path, connections: int, seconds: int
) -> tuple[float, float]:
    """(requests/s, server CPU us per request); a one-second warm-up first."""
    url = f"http://127.0.0.1:{server.rest_port}/v2/models/{kserve.MODEL}/infer"
    command = ["wrk", "-t1", f"-c{connections}", "-s", str(script), url]
    subprocess.run([*command, "-d1s"], check=True, capture_output=True)
    before = kserve.cpu_seconds(server.process.pid)
    report = subprocess.run(
        [*command, f"-d{seconds}s"], check=True, capture_output=True, text=True
    ).stdout
    cpu = kserve.cpu_seconds(server.process.pid) - before
    if "Non-2xx" in report:
        raise SystemExit(f"the server refused requests:\n{report}")
    found = re.search(r"(\d+) requests in", report)
    rate = re.search(r"Requests/sec:\s+([\d.]+)", report)
    if found is None or rate is None:
        raise SystemExit(f"unexpected wrk output:\n{report}")
    return float(rate.group(1)), cpu / int(found.group(1)) * 1e6


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--connections", type=int, nargs="+", default=[1, 16])
    parser.add_argument("--seconds", type=int, default=5)
    parser.add_argument("--rounds", type=int, default=1, help="bare/server pairs (medians)")
    args = parser.parse_args(argv)
    if shutil.which("wrk") is None:
        raise SystemExit("wrk is not installed (Debian: apt-get install wrk)")
    rows: dict[tuple[str, int], list[tuple[float, float]]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        repository = Path(tmp)
        kserve.save_model(repository / kserve.MODEL / "1", 256)
        script = write_request(repository)
        servers = {"bare": kserve.BareServer(), "graphrt": kserve.Server(repository, 4)}
        try:
            for _ in range(args.rounds):
                for connections in args.connections:
                    for label, server in servers.items():
                        found = run_wrk(server, script, connections, args.seconds)
                        rows.setdefault((label, connections), []).append(found)
        finally:
            for server in servers.values():
                server.stop()
    print(f"{'server':<8} {'conns':>5} {'req/s':>9} {'CPU/req':>9} {'vs bare':>8}")
    for connections in args.connections:
        bare = rows[("bare", connections)]
        for label in ("bare", "graphrt"):
            runs = rows[(label, connections)]
            rate = float(np.median([r for r, _ in runs]))
            cpu = float(np.median([c for _, c in runs]))
            share = float(np.median([r / b for (r, _), (b, _) in zip(runs, bare, strict=True)]))
            print(f"{label:<8} {connections:>5} {rate:>9.0f} {cpu:>6.0f} us {share:>8.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
