"""openvino-genai's graph of a GGUF, saved once as an IR that graphrt can rewrite before loading.

genai builds a GGUF's graph itself and never hands it out, except by saving it next to the file
(`enable_save_ov_model`). Two features rewrite that graph before the engine loads it: LoRA
adapters need its layers under Hugging Face's names (servables/llm/gguf_lora.py), and the
opt-in `gguf_weights` layouts requantize its weights (servables/llm/gguf_requantize.py). Each
result is a model directory in the cache, keyed by the file's path, size and mtime (as the
tokenizer is) and made once, by one process at a time: the other engine processes wait for it
under a file lock.
"""

from __future__ import annotations

import fcntl
import logging
import os
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

from servables.llm.model_files import cache_root, file_key, openable_gguf

logger = logging.getLogger(__name__)

MODEL_XML = "openvino_model.xml"


def cached_model_dir(models_path: Path, kind: str, make: Callable[[Path, Path], None]) -> Path:
    """cache/`kind`/KEY for the GGUF at `models_path`, made by `make(models_path, directory)`
    into a scratch directory the first time (renamed into place when it succeeds)."""
    target = cache_root() / kind / file_key(models_path)
    if (target / MODEL_XML).is_file():
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    with (target.parent / f"{target.name}.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not (target / MODEL_XML).is_file():
            for stale in target.parent.glob(f"{target.name}.*.partial"):  # of a killed process
                shutil.rmtree(stale, ignore_errors=True)
            work = target.with_name(f"{target.name}.{os.getpid()}.partial")
            try:
                work.mkdir()
                make(models_path, work)
                work.rename(target)
            finally:
                shutil.rmtree(work, ignore_errors=True)
    return target


def save_genai_graph(models_path: Path, directory: Path) -> Any:
    """genai's graph of the GGUF (an `ov.Model`); its tokenizer's IRs are copied to `directory`."""
    import openvino as ov
    import openvino_genai

    saved = directory / "genai"
    saved.mkdir()
    link = saved / "model.gguf"
    link.symlink_to(openable_gguf(models_path).resolve())
    # Writes openvino_model.* and the tokenizer's IR next to the file it is given.
    pipeline = openvino_genai.LLMPipeline(str(link), "CPU", enable_save_ov_model=True)
    del pipeline
    for file in saved.iterdir():
        if file.name.startswith(("openvino_tokenizer", "openvino_detokenizer")):
            shutil.copyfile(file, directory / file.name)
    return ov.Core().read_model(str(saved / MODEL_XML))


def save_model(model: Any, directory: Path) -> None:
    """The rewritten graph, weights as they are (no fp16 compression of f32 constants)."""
    import openvino as ov

    ov.save_model(model, str(directory / MODEL_XML), compress_to_fp16=False)
    shutil.rmtree(directory / "genai", ignore_errors=True)


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
