"""The token-text table (servables.llm.detokenizer.TokenTexts) kept on disk, one per tokenizer.

Building the table decodes every token alone and beside three anchor tokens: ~400k decodes for
SmolLM2's 49k-token vocabulary, ~2 s of CPU at every server start, spent while the engine
process compiles on the same cores. The table is a function of the detokenizer model and of the
code that runs it, so it is stored under graphrt's cache, named by a hash of the detokenizer's
files, the versions of openvino-genai and openvino-tokenizers, and this table's format. A copy of
the same model elsewhere (the tests' tiny llama shares SmolLM2's tokenizer) finds it too. A
table that cannot be read or written is rebuilt, never an error: the cache only saves time.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import os
from collections.abc import Callable
from importlib import metadata
from pathlib import Path

from servables.llm.detokenizer import TokenTexts
from servables.llm.model_files import cache_root

__all__ = ["cached_token_texts"]

logger = logging.getLogger(__name__)

# Bump when TokenTexts.build decides differently (the stored tables would no longer be its own).
FORMAT = "1"
DETOKENIZER_FILES = ("openvino_detokenizer.xml", "openvino_detokenizer.bin")
LIBRARIES = ("openvino-genai", "openvino-tokenizers", "openvino")


def _library_versions() -> list[str]:
    versions = []
    for name in LIBRARIES:
        try:
            versions.append(f"{name}=={metadata.version(name)}")
        except metadata.PackageNotFoundError:
            versions.append(f"{name} absent")
    return versions


def table_path(tokenizer_dir: Path) -> Path | None:
    """Where the table of this tokenizer is kept; None when its detokenizer files are not there
    to name it (a .gguf given to the frontend directly)."""
    digest = hashlib.sha256(json.dumps([FORMAT, *_library_versions()]).encode())
    for name in DETOKENIZER_FILES:
        try:
            digest.update((tokenizer_dir / name).read_bytes())
        except OSError:
            return None
    return cache_root() / "token-texts" / f"{digest.hexdigest()[:32]}.json"


def _read(path: Path) -> tuple[bool, TokenTexts | None]:
    """(found, table): a stored None means the tokenizer does not concatenate."""
    try:
        stored = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return False, None
    except (OSError, ValueError) as error:
        logger.debug("token texts in %s unreadable (%s); building them", path, error)
        return False, None
    texts = stored.get("texts") if isinstance(stored, dict) else None
    if texts is None:
        return isinstance(stored, dict) and "texts" in stored, None
    if not isinstance(texts, list) or not all(t is None or isinstance(t, str) for t in texts):
        logger.debug("token texts in %s malformed; building them", path)
        return False, None
    return True, TokenTexts(texts)


def _write(path: Path, table: TokenTexts | None) -> None:
    scratch = path.with_name(f"{path.name}.{os.getpid()}.partial")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        scratch.write_text(
            json.dumps({"texts": table.texts if table else None}, ensure_ascii=False),
            encoding="utf-8",
        )
        os.replace(scratch, path)  # whole or absent for a concurrent reader
    except OSError as error:
        logger.debug("could not keep token texts in %s (%s)", path, error)
        with contextlib.suppress(OSError):
            scratch.unlink(missing_ok=True)


def cached_token_texts(
    tokenizer_dir: Path, build: Callable[[], TokenTexts | None]
) -> TokenTexts | None:
    """The table stored for this tokenizer, else `build()`'s, which is then stored."""
    path = table_path(tokenizer_dir)
    if path is None:
        return build()
    found, table = _read(path)
    if found:
        return table
    table = build()
    _write(path, table)
    return table
