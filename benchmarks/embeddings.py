"""Embeddings throughput: the server vs TextEmbeddingPipeline vs sentence-transformers, one run.

Same model (sentence-transformers/all-MiniLM-L6-v2: the `graphrt export embeddings_ov` output
for graphrt and openvino-genai, the Hugging Face checkpoint for sentence-transformers), same
sentences, and for each concurrency level C (default 1, 8, 32), one after the other:

1. sentence-transformers (torch, CPU) in the export venv: `model.encode(sentences,
   batch_size=C)`, i.e. C sentences per forward pass;
2. openvino-genai's TextEmbeddingPipeline driven directly in this process:
   `embed_documents` on batches of C sentences, back to back (what an application holding C
   sentences at a time gets without a server);
3. the server: `graphrt serve --model_path <export>` started here, C concurrent clients each
   sending one sentence per request (`POST /v3/embeddings`, base64 as the OpenAI SDK asks by
   default) in a closed loop. The server batches concurrent requests into shared inferences.

Every side first embeds a warm-up batch. The load generator shares the two cores with the
server, so its cost is part of what the ratio measures. Result: sentences/s per side and level,
and the server / pipeline ratio (target at C=32: >= 0.9).

    python tools/rag_models.py                   # once: export venv, MiniLM export (cached)
    python benchmarks/embeddings.py [--concurrency 1 8 32] [--sentences 512] [--rounds 1]
        [--model DIR] [--source DIR] [--export-python PATH] [--json out.json]
"""

from __future__ import annotations

import argparse
import asyncio
import importlib.util
import json
import os
import random
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import aiohttp

ROOT = Path(__file__).resolve().parents[1]
MODEL_NAME = "minilm"
SUBJECTS = [
    "The search engine",
    "A vector database",
    "Our support team",
    "The new laptop",
    "This recipe",
    "The city council",
    "A small startup",
    "The research group",
]
VERBS = [
    "announced",
    "reviewed",
    "improved",
    "explained",
    "compared",
    "rejected",
    "shipped",
    "documented",
]
OBJECTS = [
    "a faster way to index millions of documents",
    "the quarterly results for the region",
    "how retrieval augmented generation reduces hallucinations",
    "a plan to cut energy use in half by next year",
    "the differences between dense and sparse retrieval",
    "an update that fixes the login problem on mobile phones",
    "a short guide to cooking rice without a rice cooker",
    "why the meeting was moved to Thursday afternoon",
]
TAILS = [
    "",
    " after months of work.",
    ", according to the latest report.",
    " and the results were surprising.",
    " in a blog post on Monday.",
]


def make_sentences(count: int, seed: int = 0) -> list[str]:
    rng = random.Random(seed)
    return [
        f"{rng.choice(SUBJECTS)} {rng.choice(VERBS)} {rng.choice(OBJECTS)}{rng.choice(TAILS)}"
        for _ in range(count)
    ]


def load_rag_models() -> Any:
    spec = importlib.util.spec_from_file_location("rag_models", ROOT / "tools" / "rag_models.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


ST_SCRIPT = """
import json, sys, time
import torch
from sentence_transformers import SentenceTransformer
source, sentences_file, levels = sys.argv[1], sys.argv[2], json.loads(sys.argv[3])
sentences = json.load(open(sentences_file))
model = SentenceTransformer(source, device="cpu")
model.encode(sentences[:32], batch_size=32)
rates = {}
for level in levels:
    started = time.perf_counter()
    model.encode(sentences, batch_size=level)
    rates[level] = len(sentences) / (time.perf_counter() - started)
print(json.dumps({"rates": rates, "threads": torch.get_num_threads()}))
"""


def sentence_transformers_rates(
    python: Path, source: Path, sentences: list[str], levels: Sequence[int]
) -> dict[int, float]:
    with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as file:
        json.dump(sentences, file)
    try:
        result = subprocess.run(
            [str(python), "-c", ST_SCRIPT, str(source), file.name, json.dumps(list(levels))],
            capture_output=True,
            text=True,
            check=True,
            env={**os.environ, "HF_HUB_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false"},
        )
    finally:
        os.unlink(file.name)
    rates = json.loads(result.stdout.strip().splitlines()[-1])["rates"]
    return {int(level): float(rate) for level, rate in rates.items()}


def pipeline_rates(model: Path, sentences: list[str], levels: Sequence[int]) -> dict[int, float]:
    import openvino_genai as genai

    config = genai.TextEmbeddingPipeline.Config()
    config.pooling_type = genai.TextEmbeddingPipeline.PoolingType.MEAN
    config.normalize = True
    pipeline = genai.TextEmbeddingPipeline(str(model), "CPU", config, NUM_STREAMS="1")
    pipeline.embed_documents(sentences[:32])
    rates = {}
    for level in levels:
        started = time.perf_counter()
        for start in range(0, len(sentences), level):
            pipeline.embed_documents(sentences[start : start + level])
        rates[level] = len(sentences) / (time.perf_counter() - started)
    del pipeline
    return rates


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


class Server:
    def __init__(self, model: Path) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.log = tempfile.NamedTemporaryFile("w+", suffix=".log", delete=False)  # noqa: SIM115
        self.process = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "graphrt.cli.main",
                "serve",
                "--rest_port",
                str(self.port),
                "--model_path",
                str(model),
                "--model_name",
                MODEL_NAME,
            ],
            stdout=self.log,
            stderr=subprocess.STDOUT,
        )
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise SystemExit(f"the server exited: see {self.log.name}")
            try:
                with urllib.request.urlopen(self.url + "/v2/health/ready", timeout=2) as reply:
                    if reply.status == 200:
                        return
            except OSError:
                pass
            time.sleep(0.2)
        raise SystemExit(f"the server was not ready in 120 s: see {self.log.name}")

    def stop(self) -> None:
        self.process.send_signal(signal.SIGTERM)
        self.process.wait(60)


async def server_rate(url: str, sentences: list[str], level: int) -> float:
    queue = list(reversed(sentences))

    async def client(session: aiohttp.ClientSession) -> None:
        while queue:
            sentence = queue.pop()
            body = {"model": MODEL_NAME, "input": sentence, "encoding_format": "base64"}
            async with session.post(url + "/v3/embeddings", json=body) as response:
                assert response.status == 200, await response.text()
                await response.read()

    connector = aiohttp.TCPConnector(limit=level)
    async with aiohttp.ClientSession(connector=connector) as session:
        started = time.perf_counter()
        await asyncio.gather(*(client(session) for _ in range(level)))
        return len(sentences) / (time.perf_counter() - started)


def server_rates(model: Path, sentences: list[str], levels: Sequence[int]) -> dict[int, float]:
    server = Server(model)
    try:
        asyncio.run(server_rate(server.url, sentences[:64], 8))  # warm-up
        return {level: asyncio.run(server_rate(server.url, sentences, level)) for level in levels}
    finally:
        server.stop()


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--concurrency", type=int, nargs="+", default=[1, 8, 32])
    parser.add_argument("--sentences", type=int, default=512)
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("--model", type=Path, help="graphrt export of MiniLM (default: cached)")
    parser.add_argument("--source", type=Path, help="its Hugging Face directory (default: cached)")
    parser.add_argument("--export-python", type=Path, help="python with sentence-transformers")
    parser.add_argument("--json", type=Path, help="write the results here")
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    if args.model is None or args.source is None or args.export_python is None:
        rag_models = load_rag_models()
        env = rag_models.build_export_env()
        args.source = args.source or rag_models.minilm_source()
        args.model = args.model or rag_models.export_minilm(env, args.source, "fp32") / MODEL_NAME
        args.export_python = args.export_python or env.python
    sentences = make_sentences(args.sentences)
    levels = args.concurrency
    rounds: list[dict[str, dict[int, float]]] = []
    for round_index in range(args.rounds):
        print(f"round {round_index + 1}: sentence-transformers ...", flush=True)
        st = sentence_transformers_rates(args.export_python, args.source, sentences, levels)
        print(f"round {round_index + 1}: TextEmbeddingPipeline ...", flush=True)
        pipeline = pipeline_rates(args.model, sentences, levels)
        print(f"round {round_index + 1}: server ...", flush=True)
        server = server_rates(args.model, sentences, levels)
        rounds.append({"sentence_transformers": st, "pipeline": pipeline, "server": server})

    def median(side: str, level: int) -> float:
        values = sorted(r[side][level] for r in rounds)
        return values[len(values) // 2]

    print(
        f"\n{len(sentences)} sentences, sentences/s (medians of {args.rounds} rounds; the ratio is "
        "the median of per-round ratios)"
    )
    print(
        "| concurrency | server | TextEmbeddingPipeline | sentence-transformers "
        "| server / pipeline |"
    )
    print("|---|---|---|---|---|")
    summary = []
    for level in levels:
        row = {
            "concurrency": level,
            "server": median("server", level),
            "pipeline": median("pipeline", level),
            "sentence_transformers": median("sentence_transformers", level),
        }
        # Ratios are taken per round (server and pipeline measured back to back), then the median.
        ratios = sorted(r["server"][level] / r["pipeline"][level] for r in rounds)
        row["ratio"] = ratios[len(ratios) // 2]
        summary.append(row)
        print(
            f"| {level} | {row['server']:.0f} | {row['pipeline']:.0f} | "
            f"{row['sentence_transformers']:.0f} | {row['ratio']:.2f} |"
        )
    target = next((r for r in summary if r["concurrency"] == 32), None)
    if target is not None:
        verdict = "met" if target["ratio"] >= 0.9 else "NOT met"
        print(f"\ntarget server >= 0.9 x pipeline at concurrency 32: {verdict}")
    if args.json:
        args.json.write_text(json.dumps({"levels": summary, "rounds": rounds}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
