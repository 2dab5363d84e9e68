"""The 1B-class benchmark model, built offline and cached by its inputs.

Single-stream speed on SmolLM2-135M is mostly per-step overhead; the models people serve are
1B-8B, where the weights' layout decides. This builds a randomly initialised Llama of
Llama-3.2-1B's shape (hidden 2048, intermediate 8192, 16 layers, 32 heads, 8 KV heads, tied
embeddings; 1.07 B parameters with SmolLM2's 49,152-token vocabulary and its chat template), in
the formats people download:

- GGUF: `convert_hf_to_gguf.py --outtype f16`, then `llama-quantize` to Q4_0, Q4_1 and Q4_K_M
  (both from the llama.cpp vendored in llama-cpp-python's sdist, benchmarks/llama_cpp.py);
- OpenVINO IR as OVMS users export it, with `graphrt export text_generation` (optimum-cli):
  int4 symmetric channel-wise with every layer compressed, and the group-128 exports (symmetric
  and asymmetric).

The Hugging Face checkpoint comes from benchmarks/llama1b_hf.py in the export venv of
tools/rag_models.py (torch, transformers, optimum-intel): `torch.manual_seed(0)`, bf16. Random
weights: for speed only; generate with `ignore_eos`. Everything goes to
~/.cache/graphrt-bench/llama1b-KEY/ (KEY: a digest of the recipe, the seed, SmolLM2's GGUF, the
llama.cpp version and the export venv; an IR's name adds the export code's), each format built
on first use, under
a file lock. On 2 cores: ~3 minutes for the checkpoint, ~2 for the f16 GGUF, 1-2 per quantized
GGUF, 4-8 per IR; ~10 GB on disk.

    python benchmarks/llama1b_fixture.py [FORMAT ...] [--check]   # builds, prints the paths

`--check` also decodes the f16 GGUF greedily in openvino-genai and in llama-server from the same
prompt ids: the tokens must be the same (both engines read the same model).

FORMAT: hf, f16, Q4_0, Q4_1, Q4_K_M, or one of IR_FORMATS' names (default: all).
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import sys
from collections.abc import Sequence
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(ROOT / "tools"))
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(ROOT))
from llama_cpp import BENCH_CACHE, VERSION, convert_script, program  # noqa: E402
from rag_models import ExportEnv, build_export_env, digest, locked, run  # noqa: E402

RECIPE_VERSION = "1"  # bump when the recipe changes what is built
SEED = 0
NAME = "llama1b-random"
GGUF_TYPES = ("Q4_0", "Q4_1", "Q4_K_M")
# graphrt export's --extra_quantization_params for each IR (all with --weight-format int4).
IR_FORMATS = {
    "ir-int4-sym-cw-all": "--sym --group-size -1 --ratio 1.0 --all-layers",
    "ir-int4-sym-g128": "--sym --group-size 128 --ratio 1.0",
    "ir-int4-asym-g128": "--group-size 128 --ratio 1.0",
}
FORMATS = ("hf", "f16", *GGUF_TYPES, *IR_FORMATS)
HF_SCRIPT = HERE / "llama1b_hf.py"
EXPORT_CODE = ROOT / "graphrt" / "export" / "text_tasks.py"  # the IRs' key adds its digest


class Fixture:
    """The model's files, each built when first asked for."""

    def __init__(self) -> None:
        from graphrt.serving.default_model import default_model_path

        self.smollm2 = default_model_path()
        self.env: ExportEnv = build_export_env()
        script = hashlib.sha256(HF_SCRIPT.read_bytes()).hexdigest()
        key = digest(RECIPE_VERSION, SEED, self.smollm2.name, VERSION, self.env.key, script)
        self.root = BENCH_CACHE / f"llama1b-{key}"
        self.root.mkdir(parents=True, exist_ok=True)
        self.export_key = hashlib.sha256(EXPORT_CODE.read_bytes()).hexdigest()[:16]

    def path(self, name: str) -> Path:
        """The format's file or directory, built first if missing."""
        if name not in FORMATS:
            raise ValueError(f"unknown format {name!r}; one of {', '.join(FORMATS)}")
        if name in IR_FORMATS:
            target = self.root / f"{name}-{self.export_key}"
        else:
            target = self.root / (name if name == "hf" else f"{NAME}.{name}.gguf")
        with locked(f"{self.root.name}-{name}"):
            if not target.exists():
                partial = target.with_name(f".{target.name}.partial")
                shutil.rmtree(partial, ignore_errors=True)
                partial.unlink(missing_ok=True)
                print(f"building the 1B fixture's {name} in {self.root} ...", flush=True)
                self._build(name, partial)
                partial.rename(target)
        return target / "model" if name in IR_FORMATS else target

    def _build(self, name: str, out: Path) -> None:
        environ = {**self.env.environ(), "PYTHONPATH": str(convert_script().parent / "gguf-py")}
        if name == "hf":
            run([self.env.python, HF_SCRIPT, self.smollm2, out, str(SEED)], env=environ)
        elif name == "f16":
            hf = self.path("hf")
            command: list[str | Path] = [self.env.python, convert_script(), hf]
            command += ["--outtype", "f16", "--model-name", NAME, "--outfile", out]
            run(command, env=environ)
        elif name in GGUF_TYPES:
            f16 = self.path("f16")
            run([program("llama-quantize"), f16, out, name, str(os.cpu_count() or 2)])
        else:
            hf = self.path("hf")
            out.mkdir()
            run(
                [
                    sys.executable, "-m", "graphrt.cli.main", "export", "text_generation",
                    "--source_model", hf, "--model_repository_path", out, "--model_name", "model",
                    "--weight-format", "int4",
                    f"--extra_quantization_params={IR_FORMATS[name]}",
                ],
                env=self.env.environ(),
                cwd=ROOT,
            )  # fmt: skip


def resolve(model: str) -> Path:
    """A model argument of the benchmarks: a path, or one of FORMATS (the fixture's file, built
    if missing), or either followed by `+LAYOUT` (a GGUF's weights in a gguf_weights layout,
    the cached directory the server loads with --gguf_weights LAYOUT)."""
    name, _, layout = model.partition("+")
    path = Fixture().path(name) if name in FORMATS else Path(name).expanduser()
    if not layout:
        return path
    from servables.llm.gguf_requantize import requantized_model_dir

    return requantized_model_dir(path, layout)


CHECK_PROMPT = "The quick brown fox jumps over the lazy dog. Once upon a time"
CHECK_TOKENS = 16


def same_tokens(gguf: Path) -> tuple[list[int], list[int]]:
    """Greedy tokens of `gguf` from llama-server and from openvino-genai, the same prompt ids
    given to both: equal when both engines read the same model."""
    import urllib.request

    import numpy as np
    import openvino as ov
    import openvino_genai
    from peers import LlamaServer

    config = openvino_genai.GenerationConfig()
    config.max_new_tokens, config.ignore_eos, config.do_sample = CHECK_TOKENS, True, False
    pipeline = openvino_genai.ContinuousBatchingPipeline(
        str(gguf), openvino_genai.SchedulerConfig(), "CPU", {}
    )
    prompt = pipeline.get_tokenizer().encode(CHECK_PROMPT).input_ids
    ids = [int(token) for token in prompt.data[0]]
    (result,) = pipeline.generate([ov.Tensor(np.asarray([ids], np.int64))], [config])
    genai_tokens = [int(token) for token in result.m_generation_ids[0]]
    del pipeline
    server = LlamaServer(program("llama-server"), gguf, 1, 1024, os.cpu_count() or 2)
    try:
        server.wait_ready()
        body = {"prompt": ids, "n_predict": CHECK_TOKENS, "ignore_eos": True, "top_k": 1}
        body |= {"temperature": 0, "return_tokens": True, "cache_prompt": False}
        request = urllib.request.Request(
            server.url + "/completion", json.dumps(body).encode(), method="POST"
        )
        with urllib.request.urlopen(request, timeout=600) as response:
            llama_tokens = [int(token) for token in json.load(response)["tokens"]]
    finally:
        server.stop()
    return genai_tokens, llama_tokens


def main(argv: Sequence[str] | None = None) -> int:
    names = [name for name in argv or () if name != "--check"] or list(FORMATS)
    fixture = Fixture()
    paths = {name: str(fixture.path(name)) for name in names}
    print(json.dumps(paths, indent=2))
    if argv and "--check" in argv:
        genai_tokens, llama_tokens = same_tokens(fixture.path("f16"))
        same = genai_tokens == llama_tokens
        print(f"greedy tokens of the f16 GGUF\n  openvino-genai: {genai_tokens}")
        print(f"  llama-server:   {llama_tokens}\n  {'same' if same else 'DIFFERENT'}")
        return 0 if same else 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
