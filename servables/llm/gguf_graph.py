"""openvino-genai's graph of a GGUF, saved once as an IR that later loads read instead of the file.

genai builds a GGUF's graph itself and never hands it out, except by saving it next to the file
(`enable_save_ov_model`). Building it is most of a GGUF's load (SmolLM2-135M Q4_1 on 2 cores:
~8.7 s from the file, ~4 s from the saved IR, with the same tokens), so every GGUF is served
from its saved graph after its first load (`genai_model_dir`). Two features rewrite that graph
before the engine loads it: LoRA adapters need its layers under Hugging Face's names
(servables/llm/gguf_lora.py), and the opt-in `gguf_weights` layouts requantize its weights
(servables/llm/gguf_requantize.py). Each result is a model directory in the cache, keyed by the
file's path, size and mtime and by genai's version (whose graph it is), made once, by one process
at a time: the other engine processes wait for it under a file lock. Each directory records its
file (SOURCE), and making one removes those whose file is gone or changed, so a cache serving
files that come and go (pulled, copied, replaced) does not grow without end.
"""

from __future__ import annotations

import fcntl
import logging
import os
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

from servables.llm.model_files import cache_root, file_key, is_gguf, openable_gguf

logger = logging.getLogger(__name__)

MODEL_XML = "openvino_model.xml"
UNCHANGED = "gguf-genai"  # the kind of directory holding genai's graph as it saved it
SOURCE = "source.txt"  # in each cached directory: its file's path, then the directory's name


def cached_model_dir(models_path: Path, kind: str, make: Callable[[Path, Path], None]) -> Path:
    """cache/`kind`/KEY for the GGUF at `models_path`, made by `make(models_path, directory)`
    into a scratch directory the first time (renamed into place when it succeeds)."""
    target = _entry_dir(models_path, kind)
    if (target / MODEL_XML).is_file():
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    with (target.parent / f"{target.name}.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not (target / MODEL_XML).is_file():
            for stale in target.parent.glob(f"{target.name}.*.partial"):  # of a killed process
                shutil.rmtree(stale, ignore_errors=True)
            _remove_orphans(target.parent)
            work = target.with_name(f"{target.name}.{os.getpid()}.partial")
            try:
                work.mkdir()
                make(models_path, work)
                (work / SOURCE).write_text(f"{models_path.resolve()}\n{target.name}\n", "utf-8")
                work.rename(target)
            finally:
                shutil.rmtree(work, ignore_errors=True)
    return target


def _entry_dir(models_path: Path, kind: str) -> Path:
    return cache_root() / kind / _entry_name(models_path)


def _entry_name(models_path: Path) -> str:
    return f"{file_key(models_path)}-{_genai_version()}"


def _remove_orphans(kind_dir: Path) -> None:
    """Remove the finished directories of `kind_dir` whose file is gone or changed since, that
    another genai made, or that do not say which file they are of (made by an older graphrt)."""
    for entry in kind_dir.iterdir():
        if not entry.is_dir() or entry.name.endswith(".partial"):
            continue
        try:
            path = (entry / SOURCE).read_text(encoding="utf-8").split("\n")[0]
            current = _entry_name(Path(path))
        except OSError:
            current = ""
        if current != entry.name:
            logger.info("removing %s: its file is gone or changed", entry)
            shutil.rmtree(entry, ignore_errors=True)


def _genai_version() -> str:
    import openvino_genai

    return str(openvino_genai.__version__).split("-")[0]


def genai_model_dir(models_path: Path) -> Path:
    """A model directory with genai's own graph of the GGUF at `models_path`, unchanged: the
    directory genai loads in place of the file. Raises OSError when the cache cannot hold it."""
    return cached_model_dir(models_path, UNCHANGED, _save_unchanged)


def saved_graph_dir(models_path: Path) -> Path | None:
    """genai's saved graph of the GGUF at `models_path` (with its tokenizer IRs), if one was made
    and is complete; None for anything else."""
    if not is_gguf(models_path):
        return None
    target = _entry_dir(models_path, UNCHANGED)
    return target if (target / MODEL_XML).is_file() else None


def _save_unchanged(models_path: Path, directory: Path) -> None:
    """genai's graph and tokenizer IRs of the GGUF, saved into `directory` by genai itself."""
    import openvino_genai

    logger.info(
        "saving openvino-genai's graph of %s (once per file; later loads read it)", models_path
    )
    link = directory / "model.gguf"
    link.symlink_to(openable_gguf(models_path).resolve())
    # Writes openvino_model.* and the tokenizer's IR next to the file it is given.
    pipeline = openvino_genai.LLMPipeline(str(link), "CPU", enable_save_ov_model=True)
    del pipeline
    link.unlink()


def save_genai_graph(models_path: Path, directory: Path) -> Any:
    """genai's graph of the GGUF (an `ov.Model`, read from `genai_model_dir`, so genai builds it
    once per file whatever rewrites it); its tokenizer's IRs are copied to `directory`."""
    import openvino as ov

    saved = genai_model_dir(models_path)
    for file in saved.iterdir():
        if file.name.startswith(("openvino_tokenizer", "openvino_detokenizer")):
            shutil.copyfile(file, directory / file.name)
    return ov.Core().read_model(str(saved / MODEL_XML))


def save_model(model: Any, directory: Path) -> None:
    """The rewritten graph, weights as they are (no fp16 compression of f32 constants)."""
    import openvino as ov

    ov.save_model(model, str(directory / MODEL_XML), compress_to_fp16=False)


def constant_only(node: Any, memo: dict[str, bool]) -> bool:
    """Whether `node` is computed from constants only (a layer's weights, however decoded)."""
    key = node.get_name()  # unique per node (Python wrappers come and go, so no id())
    if key not in memo:
        kind = node.get_type_name()
        if kind == "Constant":
            memo[key] = True
        elif kind in ("Parameter", "ReadValue") or not node.inputs():
            memo[key] = False
        else:
            memo[key] = all(constant_only(i.get_node(), memo) for i in node.input_values())
    return memo[key]
