"""The set of servables the server exposes, read from config.json (or built from CLI flags).

config.json follows OVMS's schema: `model_config_list` (required, may be empty) entries are plain
OpenVINO models with numbered version folders; `mediapipe_config_list` entries
`{name, base_path, graph_path, subconfig}` are graphs, paths relative to the config file,
`base_path` defaulting to `<config dir>/<name>` and `graph_path` to `<base_path>/graph.pbtxt`;
graphrt adds `subgraph_paths`, directories (or files) of subgraphs the graph uses, relative to the
config file. A graph's `subconfig` (default `<base_path>/subconfig.json` when present) lists more
models, served like the others, for the graph's OpenVINOModelServerSessionCalculator nodes. A
schema error names the key and the file and applies nothing; a broken servable is reported
(UNAVAILABLE with its reason) while the others load. `pipeline_config_list` entries are OVMS's
DAG pipelines, served as graphs (graphrt.serving.dag); `monitoring` is read by the server at
start (graphrt.serving.monitoring); what graphrt cannot do (custom node and loader libraries,
stateful models) is a warning or an error naming it (graphrt.serving.unsupported_config), never
ignored in silence.

`apply()` moves the repository to a new set of definitions the way OVMS's reload does: new
servables load, removed ones unload after their in-flight requests finish, changed ones are
replaced by a freshly loaded copy before the old copy drains, so open streams are never dropped.
Model version folders are rescanned on every poll, so versions that appear or disappear are
loaded or unloaded without a config change.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import logging
from collections.abc import Iterable, Mapping
from collections.abc import Set as AbstractSet
from pathlib import Path
from typing import Any

from calculators.openvino.session import MODELS
from graphrt.observability.observation import ObservationSettings
from graphrt.serving import heap, unsupported_config
from graphrt.serving.dag.config import parse_libraries, parse_pipeline
from graphrt.serving.dag.servable import (
    PipelineDefinition,
    PipelineServable,
    pipeline_definition,
)
from graphrt.serving.graph_servable import GraphDefinition, GraphServable, State
from graphrt.serving.monitoring import Monitoring, parse_monitoring
from graphrt.serving.policy import ServingPolicy
from graphruntime.services import GraphService
from servables.errors import ModelNotFound, ServableNotReady
from servables.ov_model.model import OpenVINOModel
from servables.ov_model.versions import ModelConfig, VersionedModel
from servables.runtime.supervision import Supervisor

logger = logging.getLogger(__name__)

TOP_LEVEL_KEYS = {
    "model_config_list",
    "mediapipe_config_list",
    "pipeline_config_list",
    "custom_node_library_config_list",
    "custom_loader_config_list",
    "monitoring",
}
MEDIAPIPE_KEYS = {"name", "base_path", "graph_path", "subconfig", "subgraph_paths"}
SUBCONFIG_NAME = "subconfig.json"
# Retry-After for a model still being fetched: a download takes a while.
PENDING_RETRY_AFTER = 10.0

# What config.json can define: graphs and plain models share one namespace.
ServableDefinition = GraphDefinition | ModelConfig


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


def _strings(entry: dict[str, Any], key: str, where: str, path: Path) -> list[str]:
    value = entry.get(key, [])
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise ConfigFileError(path, f"{where}.{key} must be an array of strings")
    return value


def _fingerprint(path: Path, subgraph_places: Iterable[Path] = ()) -> str:
    """The graph file's hash, and when the subgraph files it may use and the Python scripts
    beside it (Python nodes' handlers) were last changed, so that a reload notices an edit to
    any of them."""
    digest = hashlib.sha256()
    try:
        digest.update(path.read_bytes())
    except OSError:
        return "missing"  # the servable will report the missing file when it loads
    files = sorted(path.parent.glob("*.py"))
    for place in subgraph_places:
        files += sorted(place.glob("*.pbtxt")) if place.is_dir() else [place]
    for file in files:
        try:
            stat = file.stat()
        except OSError:
            continue
        digest.update(f"{file}:{stat.st_mtime_ns}:{stat.st_size}".encode())
    return digest.hexdigest()


def _load_json(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except OSError as error:
        raise ConfigFileError(path, f"cannot read the file: {error.strerror or error}") from error
    except ValueError as error:
        raise ConfigFileError(path, f"is not valid JSON: {error}") from error
    if not isinstance(data, dict):
        raise ConfigFileError(path, "the top level must be a JSON object")
    return data


def _models(path: Path, data: dict[str, Any]) -> list[ModelConfig | GraphDefinition]:
    if "model_config_list" not in data:
        raise ConfigFileError(path, "missing required key 'model_config_list' (it may be [])")
    entries = data["model_config_list"]
    if not isinstance(entries, list):
        raise ConfigFileError(path, "'model_config_list' must be an array")
    models: list[ModelConfig | GraphDefinition] = []
    for index, entry in enumerate(entries):
        where = f"model_config_list[{index}]"
        try:
            if isinstance(entry, dict) and isinstance(entry.get("config"), dict):
                unsupported_config.check_model(entry["config"], where, path)
            model = ModelConfig.from_json(entry, path.parent, where)
        except ValueError as error:
            raise ConfigFileError(path, str(error)) from error
        models.append(_graph_in_model_list(model) or model)
    return models


def _graph_in_model_list(model: ModelConfig) -> GraphDefinition | None:
    """A model_config_list entry whose base_path holds graph.pbtxt (or 1/graph.pbtxt) is a graph,
    as OVMS reads it: what OVMS's pull mode and --add_to_config write for generative models."""
    for base in (model.base_path, model.base_path / "1"):
        graph_path = base / "graph.pbtxt"
        if graph_path.is_file():
            return GraphDefinition(
                name=model.name,
                base_path=base,
                graph_path=graph_path,
                fingerprint=_fingerprint(graph_path, [base]),
            )
    return None


def read_subconfig(path: Path) -> list[ModelConfig]:
    """A graph's subconfig.json: only `model_config_list`, paths relative to the file."""
    data = _load_json(path)
    unknown = sorted(set(data) - {"model_config_list"})
    if unknown:
        raise ConfigFileError(path, f"unknown key {unknown[0]!r} (a subconfig holds only models)")
    models = _models(path, data)
    graph = next((m for m in models if isinstance(m, GraphDefinition)), None)
    if graph is not None:
        raise ConfigFileError(path, f"{graph.name!r} is a graph (a subconfig holds only models)")
    return [m for m in models if isinstance(m, ModelConfig)]


def _monitoring(path: Path, data: dict[str, Any]) -> Monitoring | None:
    if "monitoring" not in data:
        return None
    try:
        return parse_monitoring(data["monitoring"])
    except ValueError as error:
        raise ConfigFileError(path, str(error)) from error


def read_monitoring(path: Path) -> Monitoring | None:
    """config.json's `monitoring` section (None without one); raises ConfigFileError."""
    return _monitoring(path, _load_json(path))


def _pipelines(path: Path, data: dict[str, Any]) -> list[PipelineDefinition]:
    """`pipeline_config_list` (with the custom node libraries its nodes may name)."""
    try:
        libraries = parse_libraries(
            data.get("custom_node_library_config_list", []), "custom_node_library_config_list"
        )
        unsupported_config.check_sections(data, libraries, path)
        entries = data.get("pipeline_config_list", [])
        if not isinstance(entries, list):
            raise ValueError("'pipeline_config_list' must be an array")
        configs = [
            parse_pipeline(entry, f"pipeline_config_list[{index}]")
            for index, entry in enumerate(entries)
        ]
    except ValueError as error:
        raise ConfigFileError(path, str(error)) from error
    return [pipeline_definition(config, libraries, path) for config in configs]


def read_config(path: Path) -> list[ServableDefinition]:
    """Definitions from an OVMS config.json; raises ConfigFileError naming the bad key."""
    data = _load_json(path)
    unknown = sorted(set(data) - TOP_LEVEL_KEYS)
    if unknown:
        raise ConfigFileError(path, f"unknown key {unknown[0]!r} at the top level")
    _monitoring(path, data)  # only checked here: the server reads it once, at start
    models = _models(path, data)
    pipelines = _pipelines(path, data)
    graphs = data.get("mediapipe_config_list", [])
    if not isinstance(graphs, list):
        raise ConfigFileError(path, "'mediapipe_config_list' must be an array")
    root = path.parent
    definitions: list[ServableDefinition] = []
    names: set[str] = set()

    def claim(name: str, where: str) -> None:
        if name in names:
            raise ConfigFileError(path, f"{where}.name {name!r} is used twice")
        names.add(name)

    for index, model in enumerate(models):
        claim(model.name, f"model_config_list[{index}].config")
    for index, pipeline in enumerate(pipelines):
        claim(pipeline.name, f"pipeline_config_list[{index}]")
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
        claim(name, where)
        base = _string(entry, "base_path", where, path)
        base_path = (root / base) if base else (root / name)
        graph = _string(entry, "graph_path", where, path)
        graph_path = (base_path / graph) if graph else (base_path / "graph.pbtxt")
        subconfig = _string(entry, "subconfig", where, path)
        subconfig_path = base_path / (subconfig or SUBCONFIG_NAME)
        subgraph_paths = tuple(
            (root / p).resolve() for p in _strings(entry, "subgraph_paths", where, path)
        )
        problem = None
        if subconfig or subconfig_path.is_file():
            try:
                for model in read_subconfig(subconfig_path):
                    if model.name in names:
                        raise ConfigFileError(
                            subconfig_path, f"model name {model.name!r} is already used"
                        )
                    names.add(model.name)
                    definitions.append(model)
            except ConfigFileError as error:
                problem = f"subconfig {error.message}"
        definitions.append(
            GraphDefinition(
                name=name,
                base_path=base_path.resolve(),
                graph_path=graph_path.resolve(),
                subconfig=subconfig_path.resolve() if subconfig else None,
                fingerprint=_fingerprint(graph_path, [graph_path.parent, *subgraph_paths]),
                problem=problem,
                subgraph_paths=subgraph_paths,
            )
        )
    return [*models, *pipelines, *definitions]


class ModelRepository:
    """See the module docstring."""

    def __init__(
        self,
        config_path: Path | None = None,
        drain_timeout: float | None = None,
        request_listeners: Iterable[Any] = (),
        services: Mapping[GraphService[Any], Any] | None = None,
        observation: ObservationSettings | None = None,
        policy: ServingPolicy | None = None,
        monitoring: Monitoring | None = None,
        count_inferences: bool = False,
    ) -> None:
        self.config_path = config_path
        self.count_inferences = count_inferences  # models count OVMS's inference metrics
        self.monitoring = monitoring  # config.json's, as the server started with it
        self.observation = observation  # what watches every servable (graph page, profiler)
        self.policy = policy or ServingPolicy()
        self.request_listeners = list(request_listeners)
        self.services = dict(services or {})  # lent to every graph run (e.g. the media policy)
        self.servables: dict[str, GraphServable] = {}
        self.models: dict[str, VersionedModel] = {}
        self.drain_timeout = drain_timeout
        self._lock = asyncio.Lock()
        self._first_apply_done = False  # until then nothing is ready, even with no servable yet
        # Models still being fetched (pulled at start), by name: LOADING in the status, 503.
        self.pending: dict[str, str] = {}
        self._config_text: str | None = None
        self._unloading: set[asyncio.Task[None]] = set()

    def get(self, name: str) -> GraphServable:
        """The graph `name` runs: a graph's own name, or an alias one of them answers to (or
        will, once loaded)."""
        servable = self.servables.get(name)
        if servable is None:
            servable = next((s for s in self.servables.values() if name in s.aliases), None)
        if servable is None:  # an adapter of a graph not (yet) available: its 503 says why
            servable = next(
                (
                    s
                    for s in self.servables.values()
                    if not s.available and name in s.declared_aliases
                ),
                None,
            )
        if servable is None and name in self.pending:
            raise ServableNotReady(
                f"Model {name} is not available (LOADING: {self.pending[name]})",
                retry_after=PENDING_RETRY_AFTER,
            )
        if servable is None:
            raise ModelNotFound(f"The model `{name}` does not exist.", param="model")
        return servable

    def model(self, name: str, version: int | None = None) -> OpenVINOModel:
        """A loaded model version (graphs reach models through this; see calculators.openvino)."""
        versioned = self.models.get(name)
        if versioned is None:
            raise ModelNotFound(f"Model with requested name is not found: {name}")
        return versioned.get(version)

    @property
    def ready(self) -> bool:
        """The servables first applied have loaded and every graph and model can take requests."""
        return (
            self._first_apply_done
            and all(s.available for s in self.servables.values())
            and all(m.available for m in self.models.values())
        )

    def llm_servables(self) -> list[Any]:
        return [llm for servable in self.servables.values() for llm in servable.llm_servables()]

    def supervisors(self) -> list[tuple[str, Supervisor]]:
        """Every supervised worker process, with the name of its servable (for metrics)."""
        return [
            (name, supervisor)
            for name, servable in self.servables.items()
            for supervisor in servable.supervisors()
        ]

    async def apply(self, definitions: Iterable[ServableDefinition]) -> bool:
        """Load, replace and unload servables to match `definitions`; True if anything changed."""
        async with self._lock:
            definitions = list(definitions)
            models = [d for d in definitions if isinstance(d, ModelConfig)]
            graphs = [d for d in definitions if isinstance(d, GraphDefinition)]
            # Models first: graphs that open sessions on them find them loaded.
            try:
                changed_models = await self._apply_models(models)
                changed_graphs = await self._apply_graphs(graphs, changed_models)
            finally:
                self._first_apply_done = True
            return bool(changed_models) or changed_graphs

    async def _apply_models(self, configs: list[ModelConfig]) -> set[str]:
        """Load, replace and unload models; the names of those that changed."""
        wanted = {config.name: config for config in configs}
        removed = [name for name in self.models if name not in wanted]
        for name in removed:
            await self.models.pop(name).stop()
            logger.info("model %s unloaded", name)
        fresh = {
            name: VersionedModel(config, self.count_inferences)
            for name, config in wanted.items()
            if name not in self.models or self.models[name].config != config
        }
        for name, model in fresh.items():
            self.models.setdefault(name, model)  # visible as LOADING while it loads
        await asyncio.gather(*(model.refresh() for model in fresh.values()))
        for name, model in fresh.items():
            old = self.models[name]
            if old is model:
                continue
            if not model.available and old.available:
                logger.error("reload of model %s failed, the previous one keeps serving", name)
                continue
            self.models[name] = model
            await old.stop()  # requests in flight hold their version until they finish
        return {*removed, *fresh}

    async def _apply_graphs(
        self, definitions: list[GraphDefinition], changed_models: AbstractSet[str] = frozenset()
    ) -> bool:
        """Load, replace and unload graphs; a pipeline that runs a model of `changed_models`
        is loaded again, so it is checked against the model as it is now."""
        wanted = {definition.name: definition for definition in definitions}
        added = [d for name, d in wanted.items() if name not in self.servables]
        changed = [
            d
            for name, d in wanted.items()
            if name in self.servables
            and (
                self.servables[name].definition != d
                or (isinstance(d, PipelineDefinition) and bool(d.models & changed_models))
            )
        ]
        removed = [name for name in self.servables if name not in wanted]
        if not (added or changed or removed):
            return False
        fresh = {
            d.name: (PipelineServable if isinstance(d, PipelineDefinition) else GraphServable)(
                d,
                self.request_listeners,
                services={**self.services, MODELS: self},
                observation=self.observation,
                policy=self.policy,
            )
            for d in added + changed
        }
        for name, servable in fresh.items():
            if name not in self.servables:
                self.servables[name] = servable  # visible as LOADING while it loads
        await asyncio.gather(*(servable.load() for servable in fresh.values()))
        for definition in changed:
            old = self.servables[definition.name]
            replacement = fresh[definition.name]
            # A pipeline whose definition did not change failed against changed models: it is
            # no longer valid, so it is replaced all the same (and reports why).
            if not replacement.available and old.available and old.definition != definition:
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
        task = asyncio.get_running_loop().create_task(servable.unload(self.drain_timeout))
        self._unloading.add(task)  # the loop keeps only weak references to tasks
        task.add_done_callback(self._unloading.discard)

    async def reload(self) -> bool:
        """Re-read config.json; raises ConfigFileError (and changes nothing) if it is invalid."""
        if self.config_path is None:
            return False
        definitions = read_config(self.config_path)
        monitoring = read_monitoring(self.config_path)
        if monitoring != self.monitoring:
            logger.warning(
                "%s: the monitoring section changed; it is read once, when the server starts: "
                "restart the server to apply it",
                self.config_path,
            )
            self.monitoring = monitoring  # said once per change
        return await self.apply(definitions)

    async def refresh_versions(self) -> bool:
        """Pick up model version folders that appeared or disappeared (and check the pipelines
        that run those models again)."""
        async with self._lock:
            models = list(self.models.values())
            changes = await asyncio.gather(*(m.refresh() for m in models))
            changed = {model.name for model, change in zip(models, changes, strict=True) if change}
            if changed:
                current = [s.definition for s in self.servables.values()]
                await self._apply_graphs(current, changed)
            return bool(changed)

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
        """Reload when config.json changes and rescan model versions; runs until cancelled."""
        self.config_changed()
        while True:
            await asyncio.sleep(interval)
            changed = await self.refresh_versions()
            if self.config_changed():
                try:
                    if await self.reload():
                        logger.info("configuration reloaded from %s", self.config_path)
                        changed = True
                except ConfigFileError as error:
                    logger.error("configuration not reloaded: %s", error.message)
            if changed:
                heap.settle()

    async def close(self) -> None:
        servables = list(self.servables.values())
        self.servables.clear()
        await asyncio.gather(
            *(s.unload(self.drain_timeout) for s in servables if s.state is not State.END),
            *self._unloading,
        )
        models = list(self.models.values())
        self.models.clear()
        await asyncio.gather(*(m.stop() for m in models))
