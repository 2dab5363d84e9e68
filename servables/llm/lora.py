"""LoRA adapters for LLMs: where an adapter's weights are, its scale, and which layers it targets.

vLLM users bring PEFT adapters: a directory with `adapter_model.safetensors` and
`adapter_config.json`. openvino-genai reads the safetensors file only and scales each layer's
update by the alpha it is given (times `alpha / rank` when the file carries `.alpha` tensors, as
kohya's do); PEFT's files carry no alpha, their scale is `lora_alpha / r` in the JSON. So the
scale is read here and handed to the engine, and a served adapter means what it means in PEFT
and vLLM.

openvino-genai matches an adapter tensor to a layer when the tensor's module path (without
`base_model.model.` and the `lora_A`/`lora_B` suffix) is part of the layer's node name; a tensor
that matches nothing is skipped with a warning on stderr. An adapter none of whose tensors
applies would serve the base model under another name, so `check_targets` makes that a load
error (the GGUF case, whose graph has no Hugging Face names, is servables/llm/gguf_lora.py's).
"""

from __future__ import annotations

import json
import math
import re
import struct
from dataclasses import dataclass
from pathlib import Path

from servables.errors import ServableLoadError

PEFT_WEIGHTS = "adapter_model.safetensors"
PEFT_CONFIG = "adapter_config.json"
# openvino-genai strips this prefix from tensor names (ContinuousBatchingPipeline and LLMPipeline).
TENSOR_PREFIX = "base_model.model."
_SUFFIX = re.compile(r"\.(lora_A|lora_B|lora_down|lora_up|alpha)(\.[^.]+)?(\.weight)?$")
_ALIAS = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._:/@-]*$")


@dataclass(frozen=True)
class LoraAdapterSpec:
    """An adapter as the graph or --lora_modules names it (alpha multiplies its own scale)."""

    alias: str
    path: Path
    alpha: float = 1.0


@dataclass(frozen=True)
class LoadedAdapter:
    """What the engine needs: the weights file and the scale genai is given (picklable)."""

    alias: str
    weights: str
    scale: float


def check_alias(alias: str, base_name: str) -> None:
    if not _ALIAS.match(alias):
        raise ServableLoadError(
            f"LoRA adapter alias {alias!r} must be a model name (letters, digits, ._:/@-)",
            param="lora_adapters",
        )
    if alias == base_name:
        raise ServableLoadError(
            f"LoRA adapter alias {alias!r} is the base model's name", param="lora_adapters"
        )


def _peft_scale(config_file: Path) -> float:
    """PEFT's scaling: lora_alpha / r (lora_alpha / sqrt(r) with rsLoRA)."""
    try:
        config = json.loads(config_file.read_text())
        rank = float(config["r"])
        lora_alpha = float(config.get("lora_alpha", rank))
    except (OSError, ValueError, KeyError, TypeError) as error:
        raise ServableLoadError(
            f"LoRA adapter config {config_file} is not a PEFT adapter_config.json ({error})",
            param="lora_adapters",
        ) from error
    if rank <= 0:
        raise ServableLoadError(f"LoRA adapter config {config_file}: r must be positive")
    return lora_alpha / (math.sqrt(rank) if config.get("use_rslora") else rank)


def load_adapter(spec: LoraAdapterSpec) -> LoadedAdapter:
    """The adapter's weights file and effective scale; a clear error for anything else."""
    path = spec.path
    if path.is_dir():
        weights = path / PEFT_WEIGHTS
        if not weights.is_file():
            raise ServableLoadError(
                f"LoRA adapter {spec.alias!r}: {path} has no {PEFT_WEIGHTS}",
                param="lora_adapters",
            )
    elif path.is_file() and path.suffix == ".safetensors":
        weights = path
    elif path.exists():
        raise ServableLoadError(
            f"LoRA adapter {spec.alias!r}: {path} is neither a PEFT directory nor a .safetensors "
            "file",
            param="lora_adapters",
        )
    else:
        raise ServableLoadError(
            f"LoRA adapter {spec.alias!r}: {path} does not exist", param="lora_adapters"
        )
    config_file = weights.parent / PEFT_CONFIG
    scale = _peft_scale(config_file) if config_file.is_file() else 1.0
    return LoadedAdapter(spec.alias, str(weights.resolve()), scale * spec.alpha)


def tensor_names(weights: Path) -> list[str]:
    """The tensor names in a .safetensors file (its JSON header; the weights are not read)."""
    try:
        with weights.open("rb") as file:
            (length,) = struct.unpack("<Q", file.read(8))
            if length > 100_000_000:
                raise ValueError("header too large")
            header = json.loads(file.read(length))
    except (OSError, ValueError, struct.error) as error:
        raise ServableLoadError(
            f"{weights} is not a safetensors file ({error})", param="lora_adapters"
        ) from error
    return [name for name in header if name != "__metadata__"]


def target_modules(names: list[str]) -> list[str]:
    """The module paths an adapter's tensors target, as genai matches them to layer names."""
    modules = {
        _SUFFIX.sub("", name.removeprefix(TENSOR_PREFIX)) for name in names if _SUFFIX.search(name)
    }
    return sorted(modules)


def check_targets(alias: str, modules: list[str], layer_names: list[str]) -> list[str]:
    """The modules no layer matches (genai's rule: the module path, or the path with `.` as `_`,
    occurs in the layer's name); none matching at all is a load error."""
    if not modules:
        raise ServableLoadError(
            f"LoRA adapter {alias!r} has no lora_A/lora_B tensors", param="lora_adapters"
        )
    layers = [*layer_names, *(name.replace(".", "_") for name in layer_names)]
    unused = [module for module in modules if not any(module in layer for layer in layers)]
    if len(unused) == len(modules):
        raise ServableLoadError(
            f"LoRA adapter {alias!r}: none of its {len(modules)} target layers (e.g. "
            f"{modules[0]}) is a layer of the model; is it an adapter for this base model?",
            param="lora_adapters",
        )
    return unused
