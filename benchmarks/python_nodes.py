"""Python nodes share the server's GIL: what a busy pure-Python `execute` costs other requests.

Serves two graphs of OVMS Python nodes from a temporary folder: `echo` (returns its input) and
`spin` (loops in pure Python for `--spin` seconds). Sends `--requests` sequential gRPC requests
to `echo` (20 ms apart) with the server idle, then again while one `spin` request runs, and
prints the median, p90 and maximum latency of each. In OVMS the script runs beside C++ frontends
that do not need the GIL; in graphrt the frontends are Python, so they wait for the GIL while the
script holds it (CPython hands it over every 5 ms by default).

    python benchmarks/python_nodes.py [--requests 40] [--spin 3] [--rounds 2]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from serving import BackgroundServer, free_port  # benchmarks/ is not a package

GRAPH = """
input_stream: "OVMS_PY_TENSOR:text"
output_stream: "OVMS_PY_TENSOR:out"
node {
  name: "node"
  calculator: "PythonExecutorCalculator"
  input_side_packet: "PYTHON_NODE_RESOURCES:py"
  input_stream: "INPUT:text"
  output_stream: "OUTPUT:out"
  node_options: {
    [type.googleapis.com / mediapipe.PythonExecutorCalculatorOptions]: { handler_path: "model.py" }
  }
}
"""
ECHO = """
from pyovms import Tensor

class OvmsPythonModel:
    def execute(self, inputs):
        return [Tensor("out", bytes(inputs[0]))]
"""
SPIN = """
import time
from pyovms import Tensor

class OvmsPythonModel:
    def execute(self, inputs):
        end = time.perf_counter() + float(bytes(inputs[0]))
        while time.perf_counter() < end:
            pass
        return [Tensor("out", b"done")]
"""


def write_models(root: Path) -> Path:
    for name, script in (("echo", ECHO), ("spin", SPIN)):
        (root / name).mkdir()
        (root / name / "graph.pbtxt").write_text(GRAPH)
        (root / name / "model.py").write_text(script)
    config = {
        "model_config_list": [],
        "mediapipe_config_list": [{"name": "echo"}, {"name": "spin"}],
    }
    (root / "config.json").write_text(json.dumps(config))
    return root / "config.json"


def infer(client: Any, model: str, data: bytes) -> float:
    import tritonclient.grpc as grpcclient

    tensor = grpcclient.InferInput("text", [len(data)], "BYTES")
    tensor._raw_content = data
    started = time.perf_counter()
    client.infer(model, [tensor])
    return time.perf_counter() - started


def latencies(client: Any, count: int) -> list[float]:
    found = []
    for _ in range(count):
        found.append(infer(client, "echo", b"ping"))
        time.sleep(0.02)
    return found


def summary(values: Sequence[float]) -> str:
    ordered = sorted(values)
    p90 = ordered[int(0.9 * (len(ordered) - 1))]
    return (
        f"median {statistics.median(ordered) * 1000:6.1f} ms  p90 {p90 * 1000:6.1f} ms  "
        f"max {ordered[-1] * 1000:6.1f} ms"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=40)
    parser.add_argument("--spin", type=float, default=3.0)
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args()
    import tritonclient.grpc as grpcclient

    with tempfile.TemporaryDirectory() as folder:
        config = write_models(Path(folder))
        grpc_port = free_port()

        def command(port: int) -> list[str]:
            return [
                *(sys.executable, "-m", "graphrt.cli.main", "serve"),
                *("--config_path", str(config), "--rest_port", str(port)),
                *("--port", str(grpc_port)),
            ]

        server = BackgroundServer("graphrt serve", command, "/v2/health/ready")
        try:
            server.wait_ready()
            client = grpcclient.InferenceServerClient(f"127.0.0.1:{grpc_port}")
            latencies(client, 5)  # warm up
            for round_number in range(1, args.rounds + 1):
                idle = latencies(client, args.requests)
                spinner = threading.Thread(
                    target=infer, args=(client, "spin", str(args.spin).encode())
                )
                spinner.start()
                time.sleep(0.1)
                busy = latencies(client, min(args.requests, int(args.spin / 0.03)))
                spinner.join()
                print(f"round {round_number}: idle               {summary(idle)}")
                print(f"round {round_number}: during the spin    {summary(busy)}")
        finally:
            server.stop()


if __name__ == "__main__":
    main()
