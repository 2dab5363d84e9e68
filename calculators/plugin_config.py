"""A node option every OpenVINO-backed calculator has: `plugin_config`, a JSON object of
OpenVINO properties (OVMS's), read once here for the LLM, embeddings and rerank factories."""

from __future__ import annotations

import json
from typing import Any

from servables.errors import ServableLoadError


def parse_plugin_config(text: str) -> dict[str, Any]:
    """plugin_config (a JSON object of OpenVINO properties) as a dict; "" or blanks give {}."""
    if not text.strip():
        return {}
    try:
        parsed = json.loads(text)
    except ValueError as error:
        raise ServableLoadError(
            f"plugin_config is not valid JSON: {error}", param="plugin_config"
        ) from error
    if not isinstance(parsed, dict):
        raise ServableLoadError("plugin_config must be a JSON object", param="plugin_config")
    return parsed
