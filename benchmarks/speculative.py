"""Single-stream speed with prompt-lookup decoding and with a draft model, next to plain decoding.

Starts `graphrt serve` three times on the same model, one after the other:

1. plain: `graphrt serve --model_path M`;
2. prompt lookup: `--plugin_config '{"prompt_lookup": true}'` (candidate tokens are copied from
   n-grams of the prompt; 5 candidates, 3-token n-grams, OVMS's defaults);
3. draft model: `--draft_source_model D` (a small model proposes 5 tokens, the main model checks
   them in one step). openvino-genai takes drafts only as OpenVINO IR, so by default D is the
   main model itself, converted from GGUF to IR once (openvino-genai's enable_save_ov_model, into
   ~/.cache/graphrt-bench). A model as its own draft can only show that the mechanism works and
   what it costs: the draft is as slow as the main model, so it cannot pay. Pass a smaller model
   of the same tokenizer with --draft for a real measurement.

Each runs the same requests one at a time (a single stream, greedy, streamed chat completions):
summaries of a text that the answer quotes (where prompt lookup should pay) and open-ended
answers that quote nothing (where it should not). The table gives output tokens per second and
TTFT per kind and configuration, each configuration's speed over plain decoding, and whether its
texts equal plain decoding's (greedy speculative decoding must not change the output).

    python benchmarks/speculative.py [--model PATH.gguf] [--draft IR_DIR] [--requests 4]
        [--max-tokens 128] [--json F]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import statistics
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import aiohttp

sys.path.insert(0, str(Path(__file__).resolve().parent))
from serving import CHAT_PATH, ServerProcess  # benchmarks/ is not a package

ARTICLE = (
    "The city council voted on Tuesday to turn the old railway depot into a public library. "
    "The depot, built in 1892, has stood empty since the last freight trains left in 1987. "
    "Under the plan, the main hall will hold the reading rooms, the former engine shed will "
    "become a children's wing, and the water tower will house a small museum about the "
    "railway. The work will cost 14 million euros, of which the regional government pays "
    "half. Construction is to start in March and the library is to open in two years. "
    "Supporters said the project would bring life back to the north side of the city, while "
    "critics argued that the money should go to the existing branch libraries, which have "
    "cut their opening hours twice since 2019. The council promised that no branch would "
    "close because of the new library."
)
SUMMARIES = [
    [
        {
            "role": "user",
            "content": f"{ARTICLE}\n\nSummarize the text above in three sentences, reusing its "
            "wording where you can.",
        }
    ],
    [
        {
            "role": "user",
            "content": f"{ARTICLE}\n\nList the facts of the text above as bullet points, "
            "quoting it.",
        }
    ],
]
OPEN_ENDED = [
    [{"role": "user", "content": "Write a short poem about the sea at night."}],
    [{"role": "user", "content": "Give me three ideas for a birthday party for a child."}],
]
KINDS = {"summary": SUMMARIES, "open-ended": OPEN_ENDED}


@dataclass
class Run:
    config: str
    kind: str
    tokens: int
    seconds: float
    ttft_ms: list[float]
    texts: list[str]

    @property
    def tokens_per_second(self) -> float:
        return self.tokens / self.seconds


async def one_request(
    session: aiohttp.ClientSession, url: str, model: str, messages: Any, max_tokens: int
) -> tuple[str, int, float, float]:
    """One streamed chat: (text, completion tokens, TTFT s, total s)."""
    payload = {
        "model": model,
        "messages": messages,
        "max_completion_tokens": max_tokens,
        "temperature": 0,
        "stream": True,
        "stream_options": {"include_usage": True},
    }
    started = time.perf_counter()
    first = 0.0
    parts: list[str] = []
    tokens = 0
    async with session.post(url, json=payload) as response:
        if response.status != 200:
            raise RuntimeError(f"HTTP {response.status}: {(await response.text())[:300]}")
        async for raw in response.content:
            line = raw.strip()
            if not line.startswith(b"data:") or line == b"data: [DONE]":
                continue
            chunk = json.loads(line[5:])
            if "error" in chunk:
                raise RuntimeError(f"stream error: {chunk['error']}")
            for choice in chunk.get("choices") or ():
                content = (choice.get("delta") or {}).get("content")
                if content:
                    first = first or time.perf_counter() - started
                    parts.append(content)
            if chunk.get("usage"):
                tokens = int(chunk["usage"]["completion_tokens"])
    return "".join(parts), tokens, first, time.perf_counter() - started


async def measure(base_url: str, config: str, requests: int, max_tokens: int) -> list[Run]:
    url = base_url + CHAT_PATH
    timeout = aiohttp.ClientTimeout(total=None, sock_read=600)
    runs = []
    async with aiohttp.ClientSession(timeout=timeout) as session:
        await one_request(session, url, "bench", OPEN_ENDED[0], 8)  # warm-up
        for kind, prompts in KINDS.items():
            run = Run(config, kind, 0, 0.0, [], [])
            for index in range(requests):
                text, tokens, ttft, seconds = await one_request(
                    session, url, "bench", prompts[index % len(prompts)], max_tokens
                )
                run.tokens += tokens
                run.seconds += seconds
                run.ttft_ms.append(ttft * 1e3)
                run.texts.append(text)
            runs.append(run)
    return runs


def draft_from_gguf(model: Path) -> Path:
    """The GGUF model as an OpenVINO IR directory (openvino-genai saves what it converts)."""
    cache = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "graphrt-bench"
    target = cache / f"{model.stem}-ir"
    if (target / "openvino_model.xml").is_file():
        return target
    import openvino_genai

    target.mkdir(parents=True, exist_ok=True)
    copy = target / model.name
    shutil.copyfile(model, copy)
    print(f"converting {model.name} to OpenVINO IR in {target} (once)", flush=True)
    openvino_genai.LLMPipeline(str(copy), "CPU", enable_save_ov_model=True)
    copy.unlink()
    return target


def load_average() -> str:
    try:
        return " ".join(Path("/proc/loadavg").read_text().split()[:3])
    except OSError:
        return "?"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--model", type=Path, help="GGUF or model dir (default: SmolLM2)")
    parser.add_argument("--draft", type=Path, help="draft model IR dir (default: the model)")
    parser.add_argument("--requests", type=int, default=4, help="per kind and configuration")
    parser.add_argument("--max-tokens", type=int, default=128)
    parser.add_argument("--json", type=Path, help="also write the results here")
    args = parser.parse_args(argv)
    model: Path | None = args.model
    if model is None:
        from graphrt.serving.default_model import default_model_path

        model = default_model_path()
    draft = args.draft or draft_from_gguf(model)
    configs = {
        "plain": [],
        "prompt lookup": ["--plugin_config", json.dumps({"prompt_lookup": True})],
        "draft model": ["--draft_source_model", str(draft)],
    }
    print(f"model: {model}\ndraft: {draft}{'' if args.draft else ' (the model itself)'}")
    print(f"load average before: {load_average()} (1/5/15 min)", flush=True)
    runs: list[Run] = []
    for config, extra in configs.items():
        server = ServerProcess(model, "bench", ["--cache_size", "1", *extra])
        try:
            server.wait_ready()
            runs += asyncio.run(measure(server.url, config, args.requests, args.max_tokens))
        finally:
            server.stop()
    print(f"load average after: {load_average()} (1/5/15 min)")
    plain = {run.kind: run for run in runs if run.config == "plain"}
    print(
        f"\n{'configuration':<14} {'kind':<11} {'tok/s':>7} {'vs plain':>9} "
        f"{'TTFT p50 ms':>12} {'same text':>10}"
    )
    for run in runs:
        base = plain[run.kind]
        print(
            f"{run.config:<14} {run.kind:<11} {run.tokens_per_second:>7.1f} "
            f"{run.tokens_per_second / base.tokens_per_second:>8.2f}x "
            f"{statistics.median(run.ttft_ms):>12.0f} "
            f"{'yes' if run.texts == base.texts else 'NO':>10}"
        )
    if not args.draft:
        print("draft model: the model as its own draft, a mechanism check only (it cannot pay)")
    if args.json:
        args.json.write_text(
            json.dumps([asdict(run) | {"tokens_per_second": run.tokens_per_second} for run in runs])
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
