"""What an OVMS config.json may hold that graphrt does not do, said out loud instead of ignored.

OVMS loads C shared libraries from config.json: custom node libraries for its pipelines
(`custom_node_library_config_list`) and custom model loaders (`custom_loader_config_list`, a
model's `custom_loader_options`). graphrt runs no such library. The lists themselves are
warnings naming each library (a pipeline with a custom node is refused on its own, with the
node's name, by graphrt.serving.dag.structure); a model that needs a custom loader is an error,
since serving the files without it would serve something else.

Model keys that older OVMS releases read for stateful models (`stateful`, `idle_sequence_cleanup`,
`max_sequence_number`, `low_latency_transformation`; current OVMS's schema refuses them) are
warnings, except `stateful: true`, which is an error: a stateful model served statelessly drops
its sequence state between requests. `allow_cache` is a warning: graphrt keeps no compiled-model
cache. Errors are ValueErrors naming the key; the caller makes them config file errors.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

logger = logging.getLogger(__name__)

IGNORED_MODEL_KEYS = {
    "stateful": "graphrt serves no stateful (sequence) models",
    "idle_sequence_cleanup": "graphrt serves no stateful (sequence) models",
    "max_sequence_number": "graphrt serves no stateful (sequence) models",
    "low_latency_transformation": "graphrt serves no stateful (sequence) models",
    "allow_cache": "graphrt keeps no compiled-model cache (OVMS's --cache_dir)",
}


def check_model(config: dict[str, Any], where: str, path: Path) -> None:
    """One model_config_list entry's `config` object."""
    if "custom_loader_options" in config:
        raise ValueError(
            f"{where}.config.custom_loader_options: graphrt does not load OVMS's custom loader "
            "libraries; give base_path the model files the loader would have produced"
        )
    if config.get("stateful") is True:
        raise ValueError(
            f"{where}.config.stateful: graphrt serves no stateful (sequence) models, and serving "
            "this one statelessly would drop its state between requests"
        )
    for key, reason in IGNORED_MODEL_KEYS.items():
        if key in config:
            logger.warning("%s: %s.config.%s is ignored: %s", path, where, key, reason)


def _loaders(value: Any) -> list[str]:
    """`custom_loader_config_list` entries (`{"config": {"loader_name", "library_path", ...}}`)
    as "name (library)"."""
    if not isinstance(value, list):
        raise ValueError("'custom_loader_config_list' must be an array")
    found = []
    for index, entry in enumerate(value):
        config = entry.get("config") if isinstance(entry, dict) else None
        if not isinstance(config, dict):
            raise ValueError(f"custom_loader_config_list[{index}] must be an object with 'config'")
        found.append(f"{config.get('loader_name')} ({config.get('library_path')})")
    return found


def check_sections(data: dict[str, Any], libraries: dict[str, str], path: Path) -> None:
    """The top-level lists of libraries (see the module docstring); `libraries` are the custom
    node libraries, by name."""
    if libraries:
        logger.warning(
            "%s: custom_node_library_config_list is not loaded: graphrt does not run OVMS's "
            "custom node libraries (%s); pipelines with custom nodes are not served",
            path,
            ", ".join(f"{name} ({base})" for name, base in libraries.items()),
        )
    loaders = _loaders(data.get("custom_loader_config_list", []))
    if loaders:
        logger.warning(
            "%s: custom_loader_config_list is not loaded: graphrt does not run OVMS's custom "
            "model loaders (%s)",
            path,
            ", ".join(loaders),
        )
