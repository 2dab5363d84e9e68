"""Where one decoded token's time goes inside OpenVINO: per-operation times of the model's graph.

Runs the GGUF's graph as openvino-genai builds it (saved once to an IR by the same code the LoRA
support uses, servables/llm/gguf_lora.py), or a model directory's (an IR export), stateful, one
token at a time after a short prompt, compiled with `PERF_COUNT` and the properties given, and
prints the median step time, the sum of the operations' times by operation type, and the slowest
operations with the kernel each ran (`exec_type`). It answers what no engine setting can:
whether a step is bound by the matrix multiplications' kernels (`FullyConnectedCompressed` and
its `brgemm_*` implementation) or by everything around them.

    python benchmarks/decode_profile.py [--model PATH.gguf] [--steps 100]
        [--property NAME=VALUE ...] [--top 10]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections import defaultdict
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))
from host import describe
from llama1b_fixture import resolve

WARMUP_STEPS = 10
PROMPT = [1, 504, 3, 2000, 33, 77, 123, 900]


def profile(model_xml: Path, properties: dict[str, Any], steps: int) -> dict[str, Any]:
    import openvino as ov

    compiled = ov.Core().compile_model(str(model_xml), "CPU", {"PERF_COUNT": True, **properties})
    request = compiled.create_infer_request()
    for state in request.query_state():
        state.reset()

    def run(tokens: list[int], position: int) -> float:
        begin = time.perf_counter()
        request.infer(
            {
                "input_ids": np.asarray([tokens], np.int64),
                "attention_mask": np.ones((1, position + len(tokens)), np.int64),
                "position_ids": np.arange(position, position + len(tokens), dtype=np.int64)[None],
                "beam_idx": np.zeros(1, np.int32),
            }
        )
        return time.perf_counter() - begin

    run(PROMPT, 0)
    by_type: defaultdict[str, float] = defaultdict(float)
    by_node: defaultdict[tuple[str, str, str], float] = defaultdict(float)
    seconds = []
    for step in range(steps):
        seconds.append(run([42 + step], len(PROMPT) + step))
        if step < WARMUP_STEPS:
            continue
        for info in request.get_profiling_info():
            ms = info.real_time.total_seconds() * 1e3
            by_type[info.node_type] += ms
            by_node[(info.node_name, info.node_type, info.exec_type)] += ms
    counted = steps - WARMUP_STEPS
    return {
        "step_ms": statistics.median(seconds[WARMUP_STEPS:]) * 1e3,
        "by_type": {name: ms / counted for name, ms in by_type.items()},
        "by_node": {key: ms / counted for key, ms in by_node.items()},
    }


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument(
        "--model",
        help="a GGUF, a model directory, or a 1B-fixture FORMAT[+LAYOUT] (benchmarks/"
        "llama1b_fixture.py; default: the served default)",
    )
    parser.add_argument("--steps", type=int, default=100)
    parser.add_argument("--property", action="append", default=[], metavar="NAME=VALUE")
    parser.add_argument("--top", type=int, default=10)
    args = parser.parse_args(argv)
    from servables.llm.gguf_graph import MODEL_XML
    from servables.llm.gguf_lora import named_model_dir

    if args.model is None:
        from graphrt.serving.default_model import default_model_path

        model = default_model_path()
    else:
        model = resolve(args.model)
    model_xml = named_model_dir(model) / MODEL_XML  # a directory is used as it is
    properties = dict(item.split("=", 1) for item in args.property)
    print(describe(properties), flush=True)
    found = profile(model_xml, properties, max(args.steps, WARMUP_STEPS + 1))
    total = sum(found["by_type"].values())
    print(f"model graph: {model_xml}; properties {properties or '{}'}")
    print(f"median step {found['step_ms']:.2f} ms; operations' time summed {total:.2f} ms/step")
    for name, ms in sorted(found["by_type"].items(), key=lambda item: -item[1])[: args.top]:
        print(f"  {name:<40} {ms:7.3f} ms  {100 * ms / total:5.1f}%")
    print("slowest operations (name, type, kernel):")
    for (name, kind, kernel), ms in sorted(found["by_node"].items(), key=lambda i: -i[1])[:5]:
        print(f"  {ms:7.3f} ms  {name} {kind} {kernel}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
