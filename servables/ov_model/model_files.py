"""Where a classic model's files are, in every format OpenVINO's frontends read.

OVMS looks in a version folder for, in this order, OpenVINO IR (`.xml` with its `.bin`), ONNX
(`.onnx`), PaddlePaddle (`.pdmodel` with its `.pdiparams`), TensorFlow (`saved_model.pb` with
its `variables/`, or a frozen graph `.pb`) and TensorFlow Lite (`.tflite`); `model_path` (or
`base_path`) may also name one model file, served as version 1. `core.read_model` then picks
the frontend from the path: a SavedModel is read from its folder, Paddle from the `.pdmodel`.

The same rules tell a classic model from a generative one on `--model_path`: a generative model
folder carries Hugging Face's `config.json` (or diffusers' `model_index.json`), a graph, a
tokenizer IR, or a GGUF file; a classic one is version folders holding model files, or the
file itself.
"""

from __future__ import annotations

from pathlib import Path

from servables.errors import ServableLoadError

# The formats in OVMS's order of precedence: the first that a folder holds is the model.
MODEL_SUFFIXES = (".xml", ".onnx", ".pdmodel", ".pb", ".tflite")
# A file that names a model but is not the one to read: the frontend's file is beside it.
COMPANIONS = {".bin": ".xml", ".pdiparams": ".pdmodel"}
SAVED_MODEL = "saved_model.pb"
# What marks a folder as a generative model: OVMS's task detection reads Hugging Face's and
# diffusers' files; an IR that openvino-genai wrote from a GGUF has only its tokenizer.
GENERATIVE_MARKERS = (
    "config.json",
    "model_index.json",
    "graph.pbtxt",
    "openvino_tokenizer.xml",
    "openvino_detokenizer.xml",
)


def _model_in_file(path: Path) -> Path:
    """What read_model takes for a model file given by name (checks its companion file)."""
    suffix = path.suffix.lower()
    if suffix in COMPANIONS:
        path = path.with_suffix(COMPANIONS[suffix])
        suffix = path.suffix.lower()
    if suffix not in MODEL_SUFFIXES:
        raise ServableLoadError(
            f"{path.name} is not a model file OpenVINO reads (expected one of "
            + ", ".join(MODEL_SUFFIXES)
            + ")"
        )
    needed = {".xml": ".bin", ".pdmodel": ".pdiparams"}.get(suffix)
    if needed is not None and not path.with_suffix(needed).is_file():
        raise ServableLoadError(f"{path} needs {path.with_suffix(needed).name} beside it")
    if path.name == SAVED_MODEL:
        return path.parent
    return path


def find_model_file(path: Path) -> Path:
    """What `core.read_model` reads for a version folder, or for a model file given itself."""
    if path.is_file():
        return _model_in_file(path)
    for suffix in MODEL_SUFFIXES:
        candidates = sorted(p for p in path.iterdir() if p.is_file() and p.suffix.lower() == suffix)
        if len(candidates) > 1:
            found = ", ".join(p.name for p in candidates)
            raise ServableLoadError(
                f"{path} must hold exactly one model, found several {suffix} files: {found}"
            )
        if candidates:
            return _model_in_file(candidates[0])
    raise ServableLoadError(
        f"{path} holds no model: expected one of "
        + ", ".join(MODEL_SUFFIXES)
        + " (IR with its .bin, ONNX, PaddlePaddle, TensorFlow, TensorFlow Lite); found "
        + (", ".join(sorted(p.name for p in path.iterdir())) or "nothing")
    )


def is_model_file(path: Path) -> bool:
    suffix = path.suffix.lower()
    return path.is_file() and (suffix in MODEL_SUFFIXES or suffix in COMPANIONS)


def holds_model_files(folder: Path) -> bool:
    return folder.is_dir() and any(is_model_file(p) for p in folder.iterdir())


def version_folders(base: Path) -> list[int]:
    """The numbered version folders under `base` (OVMS's layout); a model file is version 1."""
    if base.is_file():
        return [1]
    if not base.is_dir():
        return []
    return [
        int(p.name) for p in base.iterdir() if p.is_dir() and p.name.isascii() and p.name.isdigit()
    ]


def version_path(base: Path, version: int) -> Path:
    """Where version `version` of the model at `base` is (the file itself for a model file)."""
    return base if base.is_file() else base / str(version)


def loose_model_files(path: Path) -> bool:
    """Whether `path` is a folder of model files with no version folders and none of the files
    that make a folder generative: a classic model laid out as OVMS does not serve it."""
    return (
        path.is_dir()
        and not any((path / marker).exists() for marker in GENERATIVE_MARKERS)
        and holds_model_files(path)
        and not version_folders(path)
    )


def is_classic_model(path: Path) -> bool:
    """Whether `--model_path` names a classic model: a model file, or a folder of version
    folders holding model files and none of the files that make a folder generative."""
    if path.is_file():
        return is_model_file(path)
    if not path.is_dir() or any((path / marker).exists() for marker in GENERATIVE_MARKERS):
        return False
    return any(holds_model_files(path / str(version)) for version in version_folders(path))
