"""How much of the prefix cache survives other requests, by KV cache size: engine alone.

For each `--cache-size` (GB; 0 is the engine's grow-on-demand cache, graphrt's and OVMS's
default) a ContinuousBatchingPipeline with prefix caching on (the server's scheduler otherwise)
goes twice through the chat prompts of benchmarks/serving.py. Each prompt is first answered
with one token, timed (its time to first token), then with `--max-tokens` tokens, as a client
would, before the next prompt. In the first pass a prompt is new; in the second it was last
seen seven generations ago, so its TTFT says whether its KV blocks were still cached. The third
column sends each prompt twice in a row and times the second: the best case.

    python benchmarks/prefix_cache.py [--model PATH.gguf] [--cache-size 0 1] [--max-tokens 128]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from serving import PROMPTS, scheduler_config, server_scheduler  # benchmarks/ is not a package


def ttft_ms(pipeline: Any, prompt: str, config: Any) -> float:
    begin = time.perf_counter()
    pipeline.generate([prompt], config)
    return (time.perf_counter() - begin) * 1e3


def measure(model: Path, cache_gb: int, max_tokens: int) -> dict[str, float]:
    import openvino_genai

    scheduler = scheduler_config(server_scheduler(cache_size=cache_gb))
    pipeline = openvino_genai.LLMPipeline(str(model), "CPU", scheduler_config=scheduler)
    tokenizer = pipeline.get_tokenizer()
    one = openvino_genai.GenerationConfig(max_new_tokens=1, do_sample=False)
    answer = openvino_genai.GenerationConfig(
        max_new_tokens=max_tokens, do_sample=False, ignore_eos=True
    )
    prompts = [tokenizer.apply_chat_template(m, add_generation_prompt=True) for m in PROMPTS]
    passes: list[list[float]] = []
    for _ in range(2):
        times = []
        for prompt in prompts:
            times.append(ttft_ms(pipeline, prompt, one))
            pipeline.generate([prompt], answer)
        passes.append(times)
    again = []
    for prompt in prompts:
        ttft_ms(pipeline, prompt, one)
        again.append(ttft_ms(pipeline, prompt, one))
    return {
        "new": statistics.median(passes[0]),
        "seen_before": statistics.median(passes[1]),
        "just_repeated": statistics.median(again),
    }


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--model", type=Path, help="a GGUF file (default: the served default)")
    parser.add_argument("--cache-size", type=int, nargs="+", default=[0, 1])
    parser.add_argument("--max-tokens", type=int, default=128)
    args = parser.parse_args(argv)
    if args.model is None:
        from graphrt.serving.default_model import default_model_path

        args.model = default_model_path()
    print(f"{'cache_size':>10} | TTFT p50 ms: {'new':>8} {'seen before':>12} {'just repeated':>14}")
    for size in args.cache_size:
        found = measure(args.model, size, args.max_tokens)
        print(
            f"{size:>10} | {'':12} {found['new']:>8.1f} {found['seen_before']:>12.1f} "
            f"{found['just_repeated']:>14.1f}",
            flush=True,
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
