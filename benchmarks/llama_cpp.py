"""llama.cpp's own programs, built once from the sources vendored in llama-cpp-python's sdist.

llama.cpp is not on PyPI as programs, but llama-cpp-python's sdist (a registry package,
`pip download --no-binary llama-cpp-python llama-cpp-python==VERSION`) carries its whole source
tree. This module unpacks it once into ~/.cache/graphrt-bench/llama-cpp-VERSION/ and keeps it: the
benchmarks need its `llama-server` (the peer server), `llama-quantize` (GGUF quantization types)
and its `convert_hf_to_gguf.py` with the `gguf-py` it ships (Hugging Face model to GGUF). The
programs are built with GGML_NATIVE, for the CPU they run on, each on first use.

    python benchmarks/llama_cpp.py [llama-server llama-quantize ...]   # builds, prints the paths
"""

from __future__ import annotations

import fcntl
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
from collections.abc import Sequence
from pathlib import Path

BENCH_CACHE = Path(os.environ.get("GRAPHRT_BENCH_CACHE", Path.home() / ".cache" / "graphrt-bench"))
VERSION = "0.3.36"  # llama-cpp-python; its vendored llama.cpp is what every table was measured on
TARGETS = ("llama-server", "llama-quantize")
CMAKE_OPTIONS = (
    "-DLLAMA_CURL=OFF",
    "-DGGML_NATIVE=ON",
    "-DCMAKE_BUILD_TYPE=Release",
    "-DBUILD_SHARED_LIBS=OFF",  # programs that do not need the build tree's libraries
    "-DLLAMA_BUILD_TESTS=OFF",
    "-DLLAMA_BUILD_EXAMPLES=OFF",
)


def _locked(path: Path) -> int:
    path.parent.mkdir(parents=True, exist_ok=True)
    descriptor = os.open(path, os.O_CREAT | os.O_WRONLY, 0o644)
    fcntl.flock(descriptor, fcntl.LOCK_EX)
    return descriptor


def source_tree() -> Path:
    """llama.cpp's source tree out of the sdist (unpacked once, kept)."""
    root = BENCH_CACHE / f"llama-cpp-{VERSION}"
    source = root / "llama.cpp"
    lock = _locked(BENCH_CACHE / f"llama-cpp-{VERSION}.lock")
    try:
        if (source / "convert_hf_to_gguf.py").is_file():
            return source
        work = Path(tempfile.mkdtemp(prefix="llama-cpp-", dir=BENCH_CACHE))
        try:
            subprocess.run(
                [
                    sys.executable, "-m", "pip", "download", "-q", "--no-deps", "--no-binary",
                    "llama-cpp-python", f"llama-cpp-python=={VERSION}", "-d", str(work),
                ],
                check=True,
            )  # fmt: skip
            (archive,) = work.glob("llama_cpp_python-*.tar.gz")
            with tarfile.open(archive) as tar:
                tar.extractall(work, filter="data")
            (vendored,) = work.glob("llama_cpp_python-*/vendor/llama.cpp")
            root.mkdir(parents=True, exist_ok=True)
            shutil.rmtree(source, ignore_errors=True)
            vendored.rename(source)
        finally:
            shutil.rmtree(work, ignore_errors=True)
        return source
    finally:
        os.close(lock)


def program(name: str) -> Path:
    """A llama.cpp program (`llama-server`, `llama-quantize`, ...), built on first use."""
    source = source_tree()
    binary = source / "build" / "bin" / name
    if binary.is_file():  # without waiting for a build of another program
        return binary
    lock = _locked(BENCH_CACHE / f"llama-cpp-{VERSION}-build.lock")
    try:
        if binary.is_file():
            return binary
        build = source / "build"
        if not (build / "CMakeCache.txt").is_file():
            subprocess.run(
                ["cmake", "-S", str(source), "-B", str(build), *CMAKE_OPTIONS], check=True
            )
        jobs = str(os.cpu_count() or 2)
        subprocess.run(["cmake", "--build", str(build), "--target", name, "-j", jobs], check=True)
        return binary
    finally:
        os.close(lock)


def convert_script() -> Path:
    """convert_hf_to_gguf.py, which imports the gguf-py beside it."""
    return source_tree() / "convert_hf_to_gguf.py"


def main(argv: Sequence[str] | None = None) -> int:
    for name in argv if argv else TARGETS:
        print(program(name))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
