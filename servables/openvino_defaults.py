"""OpenVINO settings the operator gives every model of the server (OVMS's `--cache_dir` and
`--cpu_extension`).

They are the process's, as OVMS's are: the server sets them once at start, before any graph or
model loads, and the code that turns a `plugin_config` into OpenVINO properties reads them, so
no graph, factory or servable signature carries them. `CACHE_DIR` goes to every model unless its
own `plugin_config` names one (OVMS's rule: the graph's wins); an LLM's engine process gets it
in its properties like any other. The CPU extension is loaded into the OpenVINO core that
compiles model_config_list's models, as OVMS loads it into its own core: openvino-genai's
pipelines (LLMs, image and speech models) build theirs.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

__all__ = ["OpenVinoDefaults", "configure", "current", "with_defaults"]

CACHE_DIR = "CACHE_DIR"


@dataclass(frozen=True)
class OpenVinoDefaults:
    cache_dir: str | None = None  # OpenVINO's compiled-model cache for every model
    cpu_extension: str | None = None  # a library of custom operations for classic models


_current = OpenVinoDefaults()


def configure(defaults: OpenVinoDefaults) -> None:
    """Set the process's defaults (the server, at start)."""
    global _current
    _current = defaults


def current() -> OpenVinoDefaults:
    return _current


def with_defaults(properties: Mapping[str, Any]) -> dict[str, Any]:
    """`properties` (a model's plugin_config) with the server's CACHE_DIR unless it has one."""
    merged = dict(properties)
    if _current.cache_dir is not None and CACHE_DIR not in merged:
        merged[CACHE_DIR] = _current.cache_dir
    return merged
