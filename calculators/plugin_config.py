"""A node option every OpenVINO-backed calculator has: `plugin_config`, a JSON object of
OpenVINO properties (OVMS's), read once here for every factory, with the server's defaults
(`--cache_dir`: servables.openvino_defaults) where the graph does not set its own."""

from __future__ import annotations

import json
from typing import Any

from servables.errors import ServableLoadError
from servables.openvino_defaults import with_defaults


def parse_plugin_config(text: str) -> dict[str, Any]:
    """plugin_config (a JSON object of OpenVINO properties) as a dict, with the server's
    defaults; "" or blanks give the defaults alone."""
    if not text.strip():
        return with_defaults({})
    try:
        parsed = json.loads(text)
    except ValueError as error:
        raise ServableLoadError(
            f"plugin_config is not valid JSON: {error}", param="plugin_config"
        ) from error
    if not isinstance(parsed, dict):
        raise ServableLoadError("plugin_config must be a JSON object", param="plugin_config")
    return with_defaults(parsed)
