"""One stream, engine alone: how openvino-genai settings and weight formats change decode speed.

Every variant is a pipeline loaded once in this process: the ContinuousBatchingPipeline that
`graphrt serve` builds (OVMS's scheduler defaults) with extra OpenVINO properties, optionally on
another model directory (an IR of the same weights, e.g. exported by optimum-intel), or the
stateful LLMPipeline. The variants then decode the same chat prompt greedily (`ignore_eos`,
`--max-tokens`) one at a time, in rounds whose order flips every round, and the table gives each
variant's median TTFT and TPOT (time per output token after the first) and the TPOT relative to
the first variant. Only one pipeline runs at a time; idle ones cost nothing.

    python benchmarks/engine_options.py [--model PATH.gguf] [--rounds 8] [--max-tokens 128]
        [--variant NAME=JSON[@MODEL] ...] [--stateful NAME=JSON[@MODEL] ...] [--llama1b]

With no --variant, the settings measured in docs/performance.md run: the server's pipeline,
PERFORMANCE_HINT LATENCY and THROUGHPUT, KV_CACHE_PRECISION f32,
DYNAMIC_QUANTIZATION_GROUP_SIZE 0, one inference thread and the stateful pipeline. With
`--llama1b`, the weight layouts of the 1B-class fixture (benchmarks/llama1b_fixture.py) run
instead: genai's graph of its Q4_0, Q4_1 and Q4_K_M GGUFs, those requantized by `gguf_weights`,
and its int4 IR exports. A MODEL is a path or a fixture format, `+LAYOUT` for a GGUF's weights
in a gguf_weights layout (e.g. `Q4_K_M+int4_channelwise`). The CPU, its features and OpenVINO's
settings are printed first, the load average before every round.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from host import describe, load
from llama1b_fixture import resolve

DEFAULT_MODEL = Path.home() / ".cache/graphrt-tests/models/SmolLM2-135M-Instruct.Q4_1.gguf"
PROMPT = [{"role": "user", "content": "Explain the difference between a process and a thread."}]
DEFAULT_VARIANTS = [
    ("server", "{}", False),
    ("latency", '{"PERFORMANCE_HINT": "LATENCY"}', False),
    ("throughput", '{"PERFORMANCE_HINT": "THROUGHPUT"}', False),
    ("kv_f32", '{"KV_CACHE_PRECISION": "f32"}', False),
    ("dq_off", '{"DYNAMIC_QUANTIZATION_GROUP_SIZE": "0"}', False),
    ("one_thread", '{"INFERENCE_NUM_THREADS": 1}', False),
    ("stateful", "{}", True),
]
LLAMA1B_VARIANTS = [
    ("gguf-Q4_0", "Q4_0"),
    ("gguf-Q4_1", "Q4_1"),
    ("gguf-Q4_K_M", "Q4_K_M"),
    ("Q4_0+int4cw", "Q4_0+int4_channelwise"),
    ("Q4_K_M+int4cw", "Q4_K_M+int4_channelwise"),
    ("Q4_K_M+int8cw", "Q4_K_M+int8_channelwise"),
    ("ir-int4-sym-cw-all", "ir-int4-sym-cw-all"),
    ("ir-int4-sym-g128", "ir-int4-sym-g128"),
    ("ir-int4-asym-g128", "ir-int4-asym-g128"),
]


@dataclass
class Variant:
    name: str
    properties: dict[str, Any]
    model: Path
    stateful: bool
    pipeline: Any = None


def parse_variant(text: str, model: Path, stateful: bool) -> Variant:
    """NAME=JSON[@MODEL]: OpenVINO properties, on another model if given."""
    name, _, rest = text.partition("=")
    properties, _, other = rest.partition("@")
    return Variant(
        name, json.loads(properties or "{}"), resolve(other) if other else model, stateful
    )


def build(variant: Variant) -> Any:
    import openvino_genai as genai

    if variant.stateful:
        return genai.LLMPipeline(str(variant.model), "CPU", **variant.properties)
    scheduler = genai.SchedulerConfig()
    scheduler.cache_size = 0
    scheduler.max_num_batched_tokens = 256
    scheduler.max_num_seqs = 256
    scheduler.dynamic_split_fuse = True
    scheduler.enable_prefix_caching = True
    return genai.ContinuousBatchingPipeline(
        str(variant.model), scheduler, "CPU", variant.properties
    )


def decode(variant: Variant, ids: list[int], max_tokens: int) -> tuple[float, float]:
    """(TTFT, TPOT) in seconds of one greedy generation."""
    import openvino as ov
    import openvino_genai as genai

    prompt = ov.Tensor(np.asarray([ids], dtype=np.int64))
    times: list[float] = []
    pipeline = variant.pipeline
    started = time.perf_counter()
    if variant.stateful:
        config = pipeline.get_generation_config()
        config.max_new_tokens, config.ignore_eos, config.do_sample = max_tokens, True, False

        class Clock(genai.StreamerBase):  # type: ignore[misc]
            """Called once per generated token (token ids, not text)."""

            def write(self, token: Any) -> Any:
                times.append(time.perf_counter())
                return genai.StreamingStatus.RUNNING

            def end(self) -> None:
                pass

        pipeline.generate(prompt, config, Clock())
    else:
        config = pipeline.get_config()
        config.max_new_tokens, config.ignore_eos, config.do_sample = max_tokens, True, False
        handle = pipeline.add_request(len(times) + int(started * 1e3) % 10**9, prompt, config)
        while pipeline.has_non_finished_requests():
            pipeline.step()
            while handle.can_read():
                for output in handle.read().values():
                    times.extend([time.perf_counter()] * len(output.generated_ids))
    return times[0] - started, (times[-1] - times[0]) / (len(times) - 1)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", type=Path, default=DEFAULT_MODEL)
    parser.add_argument("--rounds", type=int, default=8)
    parser.add_argument("--max-tokens", type=int, default=128)
    parser.add_argument("--variant", action="append", default=[], help="NAME=JSON[@MODEL_DIR]")
    parser.add_argument("--stateful", action="append", default=[], help="NAME=JSON[@MODEL]")
    parser.add_argument("--llama1b", action="store_true", help="the 1B fixture's weight layouts")
    args = parser.parse_args(argv)
    variants = [parse_variant(v, args.model, False) for v in args.variant]
    variants += [parse_variant(v, args.model, True) for v in args.stateful]
    if args.llama1b:
        variants += [Variant(name, {}, resolve(model), False) for name, model in LLAMA1B_VARIANTS]
    if not variants:
        variants = [
            Variant(name, json.loads(props), args.model, stateful)
            for name, props, stateful in DEFAULT_VARIANTS
        ]
    print(describe(), flush=True)
    for variant in variants:
        print(f"{variant.name}: {variant.model} {json.dumps(variant.properties)}", flush=True)
        variant.pipeline = build(variant)
    first = variants[0].pipeline
    tokenizer = first.get_tokenizer()
    text = tokenizer.apply_chat_template(PROMPT, add_generation_prompt=True)
    ids = [int(t) for t in tokenizer.encode(text, add_special_tokens=False).input_ids.data[0]]
    for variant in variants:  # warm-up
        decode(variant, ids, 8)
    results: dict[str, list[tuple[float, float]]] = {v.name: [] for v in variants}
    for round_index in range(args.rounds):
        print(f"round {round_index + 1}: load average {load()}", flush=True)
        order = variants if round_index % 2 == 0 else variants[::-1]
        for variant in order:
            results[variant.name].append(decode(variant, ids, args.max_tokens))
    reference = statistics.median(tpot for _, tpot in results[variants[0].name])
    print(f"{'variant':<16} {'TTFT p50 ms':>12} {'TPOT p50 ms':>12} {'tok/s':>7} {'vs first':>9}")
    for name, runs in results.items():
        ttft = statistics.median(t for t, _ in runs) * 1e3
        tpot = statistics.median(t for _, t in runs)
        change = f"{100 * (tpot / reference - 1):+.0f}%"
        print(f"{name:<16} {ttft:>12.1f} {tpot * 1e3:>12.2f} {1 / tpot:>7.1f} {change:>9}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
