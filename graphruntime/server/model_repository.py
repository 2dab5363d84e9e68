"""The set of servables the server exposes, read from config.json (or built from CLI flags).

config.json follows OVMS's schema: `model_config_list` (required, may be empty) and
`mediapipe_config_list` entries `{name, base_path, graph_path, subconfig}`, paths relative to the
config file, `base_path` defaulting to `<config dir>/<name>` and `graph_path` to
`<base_path>/graph.pbtxt`. A schema error names the key and the file and applies nothing; a broken
servable is reported (UNAVAILABLE with its reason) while the others load.

`apply()` moves the repository to a new set of definitions the way OVMS's reload does: new
servables load, removed ones unload after their in-flight requests finish, changed ones are
replaced by a freshly loaded copy before the old copy drains, so open streams are never dropped.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import logging
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from graphruntime.server.graph_servable import GraphDefinition, GraphServable, State
from servables.errors import ModelNotFound

logger = logging.getLogger(__name__)

TOP_LEVEL_KEYS = {
    "model_config_list",
    "mediapipe_config_list",
    "pipeline_config_list",
    "custom_node_library_config_list",
    "custom_loader_config_list",
    "monitoring",
}
MEDIAPIPE_KEYS = {"name", "base_path", "graph_path", "subconfig"}


class ConfigFileError(Exception):
    """config.json is unreadable or breaks the schema; nothing from it is applied."""

    def __init__(self, path: Path, message: str) -> None:
        super().__init__(f"{path}: {message}")
        self.message = f"{path}: {message}"


def _string(entry: dict[str, Any], key: str, where: str, path: Path) -> str | None:
    value = entry.get(key)
    if value is not None and not isinstance(value, str):
        raise ConfigFileError(path, f"{where}.{key} must be a string")
    return value


def _fingerprint(path: Path) -> str:
    try:
        return hashlib.sha256(path.read_bytes()).hexdigest()
    except OSError:
        return "missing"  # the servable will report the missing file when it loads


def read_config(path: Path) -> list[GraphDefinition]:
    """Definitions from an OVMS config.json; raises ConfigFileError naming the bad key."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except OSError as error:
        raise ConfigFileError(path, f"cannot read the file: {error.strerror or error}") from error
    except ValueError as error:
        raise ConfigFileError(path, f"is not valid JSON: {error}") from error
    if not isinstance(data, dict):
        raise ConfigFileError(path, "the top level must be a JSON object")
    unknown = sorted(set(data) - TOP_LEVEL_KEYS)
    if unknown:
        raise ConfigFileError(path, f"unknown key {unknown[0]!r} at the top level")
    if "model_config_list" not in data:
        raise ConfigFileError(path, "missing required key 'model_config_list' (it may be [])")
    models = data["model_config_list"]
    if not isinstance(models, list):
        raise ConfigFileError(path, "'model_config_list' must be an array")
    graphs = data.get("mediapipe_config_list", [])
    if not isinstance(graphs, list):
        raise ConfigFileError(path, "'mediapipe_config_list' must be an array")
    root = path.parent
    definitions: list[GraphDefinition] = []
    names: set[str] = set()
    for index, entry in enumerate(graphs):
        where = f"mediapipe_config_list[{index}]"
        if not isinstance(entry, dict):
            raise ConfigFileError(path, f"{where} must be an object")
        unknown = sorted(set(entry) - MEDIAPIPE_KEYS)
        if unknown:
            raise ConfigFileError(path, f"unknown key {unknown[0]!r} in {where}")
        name = _string(entry, "name", where, path)
        if not name:
            raise ConfigFileError(path, f"{where}.name is required")
        if name in names:
            raise ConfigFileError(path, f"{where}.name {name!r} is used twice")
        names.add(name)
        base = _string(entry, "base_path", where, path)
        base_path = (root / base) if base else (root / name)
        graph = _string(entry, "graph_path", where, path)
        graph_path = (base_path / graph) if graph else (base_path / "graph.pbtxt")
        subconfig = _string(entry, "subconfig", where, path)
        definitions.append(
            GraphDefinition(
                name=name,
                base_path=base_path.resolve(),
                graph_path=graph_path.resolve(),
                subconfig=(base_path / subconfig).resolve() if subconfig else None,
                fingerprint=_fingerprint(graph_path),
            )
        )
    for index, entry in enumerate(models):
        config = entry.get("config") if isinstance(entry, dict) else None
        if not isinstance(config, dict) or not isinstance(config.get("name"), str):
            raise ConfigFileError(path, f"model_config_list[{index}].config.name is required")
        logger.error(
            "%s: model %s: plain OpenVINO models (model_config_list) are not supported yet; "
            "skipping it",
            path,
            config["name"],
        )
    return definitions


class ModelRepository:
    """See the module docstring."""

    def __init__(
        self,
        config_path: Path | None = None,
        drain_timeout: float | None = None,
        request_listeners: Iterable[Any] = (),
    ) -> None:
        self.config_path = config_path
        self.request_listeners = list(request_listeners)
        self.servables: dict[str, GraphServable] = {}
        self.retired: list[GraphServable] = []
        self.drain_timeout = drain_timeout
        self._lock = asyncio.Lock()
        self._config_text: str | None = None
        self._unloading: set[asyncio.Task[None]] = set()

    def get(self, name: str) -> GraphServable:
        servable = self.servables.get(name)
        if servable is None:
            raise ModelNotFound(f"The model `{name}` does not exist.", param="model")
        return servable

    def names(self) -> list[str]:
        return sorted(self.servables)

    def llm_servables(self) -> list[Any]:
        return [llm for servable in self.servables.values() for llm in servable.llm_servables()]

    async def apply(self, definitions: Iterable[GraphDefinition]) -> bool:
        """Load, replace and unload servables to match `definitions`; True if anything changed."""
        async with self._lock:
            wanted = {definition.name: definition for definition in definitions}
            added = [d for name, d in wanted.items() if name not in self.servables]
            changed = [
                d
                for name, d in wanted.items()
                if name in self.servables and self.servables[name].definition != d
            ]
            removed = [name for name in self.servables if name not in wanted]
            if not (added or changed or removed):
                return False
            fresh = {d.name: GraphServable(d, self.request_listeners) for d in added + changed}
            for name, servable in fresh.items():
                if name not in self.servables:
                    self.servables[name] = servable  # visible as LOADING while it loads
            await asyncio.gather(*(servable.load() for servable in fresh.values()))
            for definition in changed:
                old = self.servables[definition.name]
                replacement = fresh[definition.name]
                if not replacement.available and old.available:
                    logger.error(
                        "reload of %s failed, the previous version keeps serving: %s",
                        definition.name,
                        replacement.error,
                    )
                    self._retire(replacement)
                    continue
                self.servables[definition.name] = replacement
                self._retire(old)
            for name in removed:
                self._retire(self.servables.pop(name))
            return True

    def _retire(self, servable: GraphServable) -> None:
        """Unload in the background once in-flight requests are done."""
        self.retired.append(servable)

        async def unload() -> None:
            await servable.unload(self.drain_timeout)
            self.retired.remove(servable)

        task = asyncio.get_running_loop().create_task(unload())
        self._unloading.add(task)  # the loop keeps only weak references to tasks
        task.add_done_callback(self._unloading.discard)

    async def reload(self) -> bool:
        """Re-read config.json; raises ConfigFileError (and changes nothing) if it is invalid."""
        if self.config_path is None:
            return False
        return await self.apply(read_config(self.config_path))

    def config_changed(self) -> bool:
        """Whether config.json's text differs from what was last seen (for polling)."""
        if self.config_path is None:
            return False
        try:
            text = self.config_path.read_text(encoding="utf-8")
        except OSError:
            return False
        changed = text != self._config_text
        self._config_text = text
        return changed

    async def poll(self, interval: float) -> None:
        """Reload whenever config.json changes; runs until cancelled."""
        self.config_changed()
        while True:
            await asyncio.sleep(interval)
            if not self.config_changed():
                continue
            try:
                if await self.reload():
                    logger.info("configuration reloaded from %s", self.config_path)
            except ConfigFileError as error:
                logger.error("configuration not reloaded: %s", error.message)

    async def close(self) -> None:
        servables = list(self.servables.values())
        self.servables.clear()
        await asyncio.gather(
            *(s.unload(self.drain_timeout) for s in servables if s.state is not State.END),
            *self._unloading,
        )
