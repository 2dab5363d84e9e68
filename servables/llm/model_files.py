"""What a model path holds: servable type, context length, files a pipeline needs.

OVMS infers the pipeline type from the device and the files in `models_path`; an explicit
`pipeline_type` that contradicts the files is refused here with the reason, before any engine
starts.
The context length comes from config.json (OVMS's field list) or, for a .gguf file, from its
metadata. The GGUF header is read directly: the `gguf` package would parse the whole vocabulary
(about 2 s for SmolLM2) to answer a question that the first kilobytes hold.
"""

from __future__ import annotations

import contextlib
import enum
import hashlib
import json
import logging
import os
import shutil
import struct
from pathlib import Path
from typing import Any, BinaryIO

from servables.errors import ServableLoadError
from servables.hf_config import max_model_length as max_model_length_in
from servables.io.request_fields import is_integer

logger = logging.getLogger(__name__)

VLM_MARKERS = ("openvino_text_embeddings_model.xml", "openvino_vision_embeddings_model.xml")
OMNI_MARKER = "openvino_talker_model.xml"


class PipelineType(enum.Enum):
    LM = "LM"  # stateful LLMPipeline, one request at a time
    VLM = "VLM"  # stateful VLMPipeline
    LM_CB = "LM_CB"  # ContinuousBatchingPipeline
    VLM_CB = "VLM_CB"  # ContinuousBatchingPipeline with a vision encoder
    OMNI = "OMNI"
    AUTO = "AUTO"

    @property
    def continuous_batching(self) -> bool:
        return self in (PipelineType.LM_CB, PipelineType.VLM_CB)

    @property
    def vision(self) -> bool:
        return self in (PipelineType.VLM, PipelineType.VLM_CB)


def is_gguf(path: Path) -> bool:
    return path.is_file() and path.suffix.lower() == ".gguf"


def resolve_models_path(models_path: str, graph_dir: Path) -> Path:
    """OVMS rule: relative to the graph's directory; must be a directory or a .gguf file."""
    if not models_path:
        raise ServableLoadError("LLM node models_path is empty", param="models_path")
    path = Path(models_path)
    if not path.is_absolute():
        path = graph_dir / path
    path = path.resolve()
    if not path.exists():
        raise ServableLoadError(f"LLM node models_path: {path} does not exist", param="models_path")
    if not (path.is_dir() or is_gguf(path)):
        raise ServableLoadError(
            f"LLM node models_path: {path} is not a directory nor GGUF file", param="models_path"
        )
    return path


def has_vlm_files(path: Path) -> bool:
    return path.is_dir() and all((path / name).exists() for name in VLM_MARKERS)


def infer_pipeline_type(path: Path, device: str, requested: PipelineType) -> PipelineType:
    """The servable type for these files and device; refuses contradictions with the reason."""
    vision = has_vlm_files(path)
    omni = path.is_dir() and (path / OMNI_MARKER).exists()
    if requested is PipelineType.AUTO:
        if omni:
            raise ServableLoadError("OMNI models are not supported by graphrt yet")
        if vision:
            return PipelineType.VLM if device == "NPU" else PipelineType.VLM_CB
        return PipelineType.LM if device == "NPU" else PipelineType.LM_CB
    if requested is PipelineType.OMNI:
        raise ServableLoadError(
            "pipeline_type OMNI is not supported by graphrt yet", param="pipeline_type"
        )
    if requested.vision and not vision:
        raise ServableLoadError(
            f"pipeline_type {requested.value} needs a vision-language model directory, but "
            f"{path} lacks {' and '.join(VLM_MARKERS)}",
            param="pipeline_type",
        )
    if not requested.vision and vision:
        raise ServableLoadError(
            f"pipeline_type {requested.value} is for text-only models, but {path} holds a "
            "vision-language model (it has vision and text embedding models); use VLM_CB or VLM",
            param="pipeline_type",
        )
    return requested


def _read_exact(file: BinaryIO, size: int) -> bytes:
    data = file.read(size)
    if len(data) != size:
        raise ValueError("truncated GGUF header")
    return data


_SCALARS = {
    0: "<B",
    1: "<b",
    2: "<H",
    3: "<h",
    4: "<I",
    5: "<i",
    6: "<f",
    7: "<?",
    10: "<Q",
    11: "<q",
    12: "<d",
}
_STRING, _ARRAY = 8, 9


def _read_value(file: BinaryIO, kind: int, keep: bool) -> Any:
    if kind in _SCALARS:
        fmt = _SCALARS[kind]
        return struct.unpack(fmt, _read_exact(file, struct.calcsize(fmt)))[0]
    if kind == _STRING:
        (length,) = struct.unpack("<Q", _read_exact(file, 8))
        if not keep:
            file.seek(length, 1)
            return None
        return _read_exact(file, length).decode("utf-8", "replace")
    if kind == _ARRAY:
        item_kind, count = struct.unpack("<IQ", _read_exact(file, 12))
        if item_kind in _SCALARS:
            file.seek(struct.calcsize(_SCALARS[item_kind]) * count, 1)
        else:
            for _ in range(count):
                _read_value(file, item_kind, False)
        return count if keep else None
    raise ValueError(f"unknown GGUF value type {kind}")


def gguf_metadata(path: Path, wanted: set[str]) -> dict[str, Any]:
    """The scalar/string metadata values named in `wanted`; a wanted array gives its length."""
    found: dict[str, Any] = {}
    with path.open("rb") as file:
        if _read_exact(file, 4) != b"GGUF":
            raise ValueError(f"{path} is not a GGUF file")
        (version,) = struct.unpack("<I", _read_exact(file, 4))
        if version < 2:
            raise ValueError(f"GGUF version {version} is not supported")
        _, count = struct.unpack("<QQ", _read_exact(file, 16))
        for _ in range(count):
            (key_length,) = struct.unpack("<Q", _read_exact(file, 8))
            key = _read_exact(file, key_length).decode("utf-8", "replace")
            (kind,) = struct.unpack("<I", _read_exact(file, 4))
            value = _read_value(file, kind, key in wanted)
            if key in wanted:
                found[key] = value
                if len(found) == len(wanted):
                    break
    return found


def _config_json(path: Path) -> dict[str, Any] | None:
    """The model directory's config.json as a dict; None when missing, unreadable or not one."""
    try:
        data = json.loads((path / "config.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def max_model_length(path: Path) -> int | None:
    """Context length of the model, if its files say."""
    if is_gguf(path):
        try:
            architecture = gguf_metadata(path, {"general.architecture"}).get("general.architecture")
            if not architecture:
                return None
            key = f"{architecture}.context_length"
            value = gguf_metadata(path, {key}).get(key)
        except (OSError, ValueError, UnicodeDecodeError) as error:
            raise ServableLoadError(f"{path}: {error}", param="models_path") from error
        return int(value) if isinstance(value, int) else None
    data = _config_json(path)
    if data is None:
        return None
    sources = [data, data.get("text_config") or {}, data.get("llm_config") or {}]
    for source in sources:
        length = max_model_length_in(source) if isinstance(source, dict) else None
        if length is not None:
            return length
    return None


def vocabulary_size(path: Path) -> int | None:
    """Number of token ids the model knows, if its files say (None: unknown).

    A prompt of token ids past the vocabulary would index outside the embedding table. The
    tokenizer cannot tell: openvino-genai's decode() returns "" for unknown ids, and its
    get_vocab_vector() fails on byte-level vocabularies (tokens that are not UTF-8).
    """
    if is_gguf(path):
        try:
            count = gguf_metadata(path, {"tokenizer.ggml.tokens"}).get("tokenizer.ggml.tokens")
        except (OSError, ValueError, UnicodeDecodeError):
            return None
        return count if isinstance(count, int) and count > 0 else None
    data = _config_json(path)
    if data is None:
        return None
    for source in (data, data.get("text_config"), data.get("llm_config")):
        value = source.get("vocab_size") if isinstance(source, dict) else None
        if is_integer(value) and value > 0:
            return value
    return None


def generation_defaults(path: Path) -> dict[str, Any]:
    """generation_config.json of a model directory (request fields override these)."""
    file = path / "generation_config.json" if path.is_dir() else None
    if file is None or not file.is_file():
        return {}
    try:
        data = json.loads(file.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def cache_root() -> Path:
    """graphrt's cache directory: $GRAPHRT_CACHE, else ~/.cache/graphrt."""
    return Path(os.environ.get("GRAPHRT_CACHE", Path.home() / ".cache" / "graphrt"))


def file_key(path: Path) -> str:
    """A cache key for a file: its path, size and modification time."""
    stat = path.stat()
    key = hashlib.sha256(f"{path.resolve()}:{stat.st_size}:{stat.st_mtime_ns}".encode())
    return key.hexdigest()[:24]


def openable_gguf(path: Path) -> Path:
    """`path`, or for a GGUF this process may not write, a copy of it in the cache.

    openvino-genai reads GGUF files with gguflib, whose gguf_init() opens them O_RDWR|O_APPEND
    and maps them PROT_READ|PROT_WRITE, so a GGUF on a read-only mount (`docker run -v
    models:/models:ro`, a read-only Kubernetes volume) or owned by another user fails with
    "Failed to open ... with gguf_open". Such a file is copied once into the cache (keyed by its
    path, size and mtime) and the copy is loaded; the original is never written.
    """
    if not is_gguf(path) or os.access(path, os.W_OK):
        return path
    target = cache_root() / "gguf" / file_key(path) / path.name
    if target.is_file() and target.stat().st_size == path.stat().st_size:
        return target
    partial = target.with_name(f"{target.name}.{os.getpid()}.partial")
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(path, partial)
        partial.replace(target)
    except OSError as error:
        with contextlib.suppress(OSError):
            partial.unlink()
        logger.warning("%s is read-only and could not be copied (%s)", path, error)
        return path
    logger.info(
        "%s is read-only; openvino-genai opens GGUF files read-write: using %s", path, target
    )
    return target


TOKENIZER_FILES = ("openvino_tokenizer.xml", "openvino_detokenizer.xml")


def converted_tokenizer(models_path: Path) -> Path | None:
    """The tokenizer the frontend can load now, without the conversion only the engine process
    may run (see `tokenizer_location`): the model directory itself, or a GGUF's tokenizer
    converted by an earlier start; None when it is still to be converted."""
    if not is_gguf(models_path):
        return models_path
    target = cache_root() / "tokenizers" / file_key(models_path)
    return target if all((target / name).is_file() for name in TOKENIZER_FILES) else None


def _copy_tokenizer(source: Path, target: Path) -> bool:
    """Copy the tokenizer and detokenizer IRs (.xml and .bin) of `source` into `target`; the
    .xml files last, since their presence is what says the copy is complete."""
    names = [name.removesuffix(".xml") for name in TOKENIZER_FILES]
    if not all((source / f"{name}.{ext}").is_file() for name in names for ext in ("xml", "bin")):
        return False
    for ext in ("bin", "xml"):
        for name in names:
            scratch = target / f"{name}.{ext}.{os.getpid()}.partial"
            shutil.copyfile(source / f"{name}.{ext}", scratch)
            scratch.replace(target / f"{name}.{ext}")
    return True


def tokenizer_location(models_path: Path, converted_in: Path | None = None) -> Path:
    """Where the frontend should load its tokenizer from, converting a GGUF's once if needed.

    Building an openvino-genai Tokenizer straight from a .gguf converts its vocabulary and holds
    the GIL for seconds, which would freeze the HTTP server; loading the converted IR takes
    milliseconds. So the engine process (which may block) writes the IR into the cache, keyed by
    the file's path, size and modification time, and the frontend loads that. If the cache cannot
    be written, the .gguf itself is returned and the frontend converts it (and stalls) as before.
    `converted_in`: a directory already holding this GGUF's tokenizer IRs (genai saves them with
    its graph), copied instead of converting the vocabulary again (~3 s for SmolLM2's).
    """
    ready = converted_tokenizer(models_path)
    if ready is not None:
        return ready
    target = cache_root() / "tokenizers" / file_key(models_path)
    try:
        import openvino_genai

        target.mkdir(parents=True, exist_ok=True)
        if converted_in is not None and _copy_tokenizer(converted_in, target):
            return target
        link = target / "model.gguf"
        link.unlink(missing_ok=True)
        link.symlink_to(openable_gguf(models_path).resolve())
        # Writes openvino_tokenizer.* and openvino_detokenizer.* next to the file it is given.
        openvino_genai.Tokenizer(str(link), enable_save_ov_model=True)
        link.unlink()
    except (OSError, RuntimeError) as error:
        logger.warning(
            "could not cache the tokenizer of %s (%s); using the GGUF", models_path, error
        )
        return models_path
    return target
