"""Run the server: decide what to serve, listen, load, and shut down gracefully.

The REST port opens before models load, so /v2/health/live answers at once and
/v2/health/ready turns 200 when every servable is AVAILABLE (as in OVMS). A model pulled at
start (`--source_model`) is fetched after the ports open, as OVMS does, so a pod's liveness
probe sees a live server through a long download: the model shows as LOADING in /v1/config,
requests for it get 503, /metrics answers, and a failed pull ends the server with 1.

On SIGINT/SIGTERM the server stops accepting, lets in-flight requests and streams finish for up
to --shutdown_timeout seconds, stops the engine processes and returns 0. Engine processes do
not take these signals themselves (servables.llm.engine.lifetime), so signalling the whole process
group drains the same way. A second SIGINT/SIGTERM during the drain ends the process at once
with 128 + the signal's number (130 for SIGINT, 143 for SIGTERM, as a shell reports a process
the signal killed); its engine processes die with it, as they do whenever their frontend
disappears.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import logging
import os
import signal
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from aiohttp import web

from calculators.http.services import MEDIA_POLICY
from graphrt.export.image_audio_graphs import (
    MEDIA_TASKS,
    CompositeLoraSetting,
    LoraSetting,
    media_graph,
    parse_source_loras,
)
from graphrt.export.lora_modules import LoraModulesError, parse_lora_modules, with_lora_modules
from graphrt.export.task_flags import graph_options
from graphrt.export.text_graphs import (
    EmbeddingsSettings,
    RerankSettings,
    TextGenerationSettings,
    embeddings_graph,
    infer_task,
    rerank_graph,
    text_generation_graph,
)
from graphrt.http.app import create_app
from graphrt.kserve.dataplane import KServeDataPlane
from graphrt.kserve.grpc_server import start_grpc_server
from graphrt.observability.batch_metrics import BatchCollector, batched_models
from graphrt.observability.encoder_metrics import EncoderCollector, encoder_servables
from graphrt.observability.engine_metrics import EngineCollector, ServerCollector, engines_of
from graphrt.observability.metrics import Metrics, SupervisionCollector
from graphrt.observability.model_metrics import loaded_versions
from graphrt.observability.observation import ObservationSettings
from graphrt.observability.pipeline_metrics import PipelineCollector, pipeline_servables
from graphrt.serving import default_model, heap
from graphrt.serving.dag.servable import PipelineServable
from graphrt.serving.graph_servable import GraphDefinition
from graphrt.serving.model_repository import (
    ConfigFileError,
    ModelRepository,
    ServableDefinition,
    read_config,
    read_monitoring,
)
from graphrt.serving.monitoring import Monitoring
from graphrt.serving.policy import ServingPolicy
from graphrt.serving.settings import ServerSettings
from servables import openvino_defaults
from servables.io.audio.codec import AudioLimits
from servables.io.images.sources import MediaPolicy
from servables.ov_model.model_files import is_classic_model, loose_model_files
from servables.ov_model.versions import ModelConfig
from servables.runtime.supervision import RestartPolicy

logger = logging.getLogger("graphrt")


class StartupError(Exception):
    """The settings do not describe anything servable; the message says what to change."""


# Model options that graphs take too (the others are only a classic model's).
SHARED_MODEL_OPTIONS = {"target_device", "plugin_config"}


@dataclass(frozen=True)
class ModelFetch:
    """A model the server fetches once it listens (OVMS's pull-and-start): `fetch` runs in a
    thread and returns the model's path, served as `name`; it raises StartupError. `doing`
    says what happens meanwhile (in 503 answers)."""

    name: str
    doing: str
    fetch: Callable[[], Path]


def plugin_config_of(settings: ServerSettings) -> dict[str, object]:
    if not settings.task_flags.plugin_config:
        return {}
    try:
        plugin_config = json.loads(settings.task_flags.plugin_config)
    except ValueError as error:
        raise StartupError(f"--plugin_config is not valid JSON: {error}") from error
    if not isinstance(plugin_config, dict):
        raise StartupError("--plugin_config must be a JSON object")
    return plugin_config


def encoder_graph(settings: ServerSettings, models_path: str, task: str) -> str:
    """OVMS's embeddings or rerank graph for a model directory, from the task flags."""
    flags, plugin_config = settings.task_flags, plugin_config_of(settings)
    if task == "embeddings":
        return embeddings_graph(
            graph_options(flags, EmbeddingsSettings, models_path, plugin_config)
        )
    return rerank_graph(graph_options(flags, RerankSettings, models_path, plugin_config))


def media_graph_for(settings: ServerSettings, models_path: str, task: str) -> str:
    """OVMS's image or audio graph for a model directory, from the task flags; LoRA adapters
    are used where they are (local .safetensors files)."""
    loras: list[LoraSetting] = []
    composites: list[CompositeLoraSetting] = []
    if settings.task_flags.source_loras:
        try:
            sources, composites = parse_source_loras(settings.task_flags.source_loras)
        except ValueError as error:
            raise StartupError(str(error)) from error
        for source in sources:
            file = Path(source.source).expanduser()
            if not file.is_file():
                raise StartupError(
                    f"--source_loras {source.alias}: {source.source} is not a local file "
                    "(`graphrt export image_generation` downloads adapters)"
                )
            loras.append(LoraSetting(source.alias, str(file.resolve()), source.alpha))
    return media_graph(
        task, models_path, settings.task_flags, plugin_config_of(settings), loras, composites
    )


def single_model_definition(settings: ServerSettings, path: Path, name: str) -> ServableDefinition:
    """A model directory with graph.pbtxt is used as is; a classic model (version folders of
    model files, or the file itself) is served over KServe; otherwise OVMS's graph is
    generated."""
    path = path.resolve()
    if not path.exists():
        raise StartupError(f"--model_path {path} does not exist")
    own_graph = path / "graph.pbtxt"
    if settings.task is None and is_classic_model(path):
        return classic_model_definition(settings, path, name)
    if settings.task is None and loose_model_files(path):
        raise StartupError(
            f"--model_path {path} holds model files but no version folders: move them into "
            f"{path / '1'} (OVMS's layout), or give the model file itself as --model_path"
        )
    given = sorted(set(settings.model_options) - SHARED_MODEL_OPTIONS)
    if given:
        raise StartupError(
            f"--{given[0]} is a classic model's parameter, and {path} is served as a graph "
            "(it holds graph.pbtxt, a generative model or a .gguf, or --task is given)"
        )
    if own_graph.is_file() and not settings.lora_modules:
        return GraphDefinition(name=name, base_path=path, graph_path=own_graph)
    base = path if path.is_dir() else path.parent
    text = (
        own_graph.read_text(encoding="utf-8")
        if own_graph.is_file()
        else generated_graph(settings, path)
    )
    if settings.lora_modules:
        try:
            text = with_lora_modules(text, parse_lora_modules(list(settings.lora_modules)))
        except LoraModulesError as error:
            raise StartupError(str(error)) from None
    return GraphDefinition(name=name, base_path=base, graph_text=text)


def classic_model_definition(settings: ServerSettings, path: Path, name: str) -> ModelConfig:
    """A classic model from the command line, as OVMS's single-model mode serves it."""
    if settings.lora_modules:
        raise StartupError(f"--lora_modules is for LLMs; {path} is a classic model")
    try:
        config = ModelConfig.from_settings(
            {"name": name, "base_path": str(path), **settings.model_options}, path.parent, "--"
        )
    except ValueError as error:
        raise StartupError(str(error)) from None
    logger.info("serving %s as the classic model %s (KServe)", path, name)
    return config


def generated_graph(settings: ServerSettings, path: Path, models_path: str | None = None) -> str:
    """OVMS's graph for the model at `path` (a directory or a .gguf), its task given or inferred,
    its options from the flags; `models_path` is what the graph names (default: `path`)."""
    task = settings.task or infer_task(path)
    where = models_path or str(path)
    if task != "text_generation" and not path.is_dir():
        raise StartupError(f"--task {task} needs a model directory, not {path}")
    logger.info("serving %s as a %s model", path, task)
    if task in MEDIA_TASKS:
        return media_graph_for(settings, where, task)
    if task != "text_generation":
        return encoder_graph(settings, where, task)
    flags = settings.task_flags
    return text_generation_graph(
        graph_options(
            flags,
            TextGenerationSettings,
            where,
            plugin_config_of(settings),
            draft_models_path=flags.draft_source_model,
        )
    )


def definitions_for(
    settings: ServerSettings,
) -> tuple[list[ServableDefinition], Path | None]:
    """What to serve, and the config file to watch (None in single-model modes)."""
    if settings.config_path and settings.model_path:
        raise StartupError("--config_path and --model_path cannot be used together")
    if settings.config_path and settings.lora_modules:
        raise StartupError(
            "--lora_modules is for --model_path or --source_model; a config.json graph lists its "
            "adapters in the LLM node's lora_adapters option"
        )
    if settings.config_path:
        given = sorted(set(settings.model_options) - SHARED_MODEL_OPTIONS)
        if given:
            raise StartupError(
                f"--config_path and --{given[0]} cannot be used together: a config.json sets "
                "each model's parameters in its entry"
            )
        path = Path(settings.config_path).resolve()
        try:
            return read_config(path), path
        except ConfigFileError as error:
            raise StartupError(error.message) from error
    if settings.model_path:
        name = settings.model_name or Path(settings.model_path).stem
        return [single_model_definition(settings, Path(settings.model_path), name)], None
    path = default_model.default_model_path()
    name = settings.model_name or default_model.NAME
    logger.info("no model given: serving the embedded default model %s", name)
    return [single_model_definition(settings, path, name)], None


def monitoring_of(settings: ServerSettings, config_path: Path | None) -> Monitoring | None:
    """config.json's monitoring section, which OVMS refuses beside the metrics flags."""
    if config_path is None:
        return None
    try:
        monitoring = read_monitoring(config_path)
    except ConfigFileError as error:
        raise StartupError(error.message) from error
    if monitoring is not None and (settings.metrics_enable or settings.metrics_list):
        raise StartupError(
            "Metrics configuration duplicated in configuration file and CLI parameters: give "
            f"--metrics_enable/--metrics_list or the monitoring section of {config_path}, not both"
        )
    return monitoring


def metrics_of(settings: ServerSettings) -> Metrics:
    try:
        return Metrics(settings.metrics_list)
    except ValueError as error:  # a family --metrics_list names that OVMS does not have
        raise StartupError(str(error)) from error


def media_policy(settings: ServerSettings) -> MediaPolicy:
    """Where request images may come from (data URLs always; files and URLs only if allowed)."""
    try:
        return MediaPolicy.from_flags(
            settings.allowed_local_media_path,
            settings.allowed_media_domains,
            settings.media_download_timeout,
        )
    except ValueError as error:
        raise StartupError(str(error)) from error


def start_tracing() -> Any:
    """graphrt.observability.tracing.Tracing, configured from OTEL_*; imported only when asked."""
    try:
        from graphrt.observability import tracing
    except ImportError as error:
        raise StartupError(
            f"--tracing needs the OpenTelemetry packages: pip install 'graphrt[tracing]' ({error})"
        ) from error
    return tracing.Tracing(tracing.configure())


def serving_policy(settings: ServerSettings) -> ServingPolicy:
    return ServingPolicy(
        RestartPolicy(
            max_restarts=settings.max_engine_restarts, window=settings.engine_restart_window
        ),
        settings.max_queued_requests,
        AudioLimits(settings.max_audio_seconds),
        settings.subgraph_paths,
        settings.verbose_response,
    )


def exit_now(signum: int) -> None:
    """The second signal: no more waiting for anything (engines die with this process)."""
    logger.warning(
        "%s during shutdown: exiting now with code %d", signal.Signals(signum).name, 128 + signum
    )
    logging.shutdown()
    os._exit(128 + signum)


async def load_models(
    repository: ModelRepository,
    settings: ServerSettings,
    definitions: list[ServableDefinition],
    fetching: ModelFetch | None,
) -> None:
    """Fetch the model first if one is pulled at start, then load everything."""
    if fetching is not None:
        repository.pending[fetching.name] = fetching.doing
        try:
            path = await asyncio.to_thread(fetching.fetch)
            fetched = dataclasses.replace(settings, model_path=str(path), model_name=fetching.name)
            definitions, _ = await asyncio.to_thread(definitions_for, fetched)
        finally:
            del repository.pending[fetching.name]
    await repository.apply(definitions)


async def serve(settings: ServerSettings, fetching: ModelFetch | None = None) -> int:
    """Serve until SIGINT/SIGTERM (0), or until the model pulled at start fails (1)."""
    loop = asyncio.get_running_loop()
    openvino_defaults.configure(settings.openvino)  # before any model loads
    if settings.openvino.cache_dir is not None:
        logger.info("Model cache is enabled: %s", settings.openvino.cache_dir)
    if settings.openvino.cpu_extension is not None:
        logger.info("CPU extension for model_config_list: %s", settings.openvino.cpu_extension)
    definitions: list[ServableDefinition] = []
    config_path = None
    if fetching is None:
        definitions, config_path = await asyncio.to_thread(definitions_for, settings)
    monitoring = monitoring_of(settings, config_path)
    if monitoring is not None:
        settings = dataclasses.replace(
            settings,
            metrics_enable=monitoring.enable,
            metrics_list=list(monitoring.metrics_list),
        )
    metrics = metrics_of(settings)
    tracing = start_tracing() if settings.tracing else None
    observation = ObservationSettings(
        graph_stats=settings.graph_stats, trace_dir=settings.trace_dir, tracing=tracing
    )
    repository = ModelRepository(
        config_path,
        drain_timeout=settings.shutdown_timeout,
        request_listeners=[metrics, *([tracing] if tracing else [])],
        services={MEDIA_POLICY: media_policy(settings)},
        observation=observation,
        policy=serving_policy(settings),
        monitoring=monitoring,
        count_inferences=settings.metrics_enable,
    )
    metrics.models.watch(
        lambda: loaded_versions(repository.models.values()),
        lambda: [n for n, s in repository.servables.items() if isinstance(s, PipelineServable)],
    )
    for collector in (EngineCollector, ServerCollector):
        metrics.registry.register(collector(lambda: engines_of(repository.llm_servables())))
    metrics.registry.register(SupervisionCollector(repository.supervisors))
    metrics.registry.register(
        PipelineCollector(lambda: pipeline_servables(repository.servables.values()))
    )
    metrics.registry.register(
        EncoderCollector(lambda: encoder_servables(repository.servables.values()))
    )
    metrics.registry.register(BatchCollector(lambda: batched_models(repository.models.values())))
    dataplane = KServeDataPlane(repository, metrics)
    app = create_app(
        repository, settings, metrics, dataplane, tracing.middleware if tracing else None
    )
    runner = web.AppRunner(
        app,
        handler_cancellation=True,
        shutdown_timeout=settings.shutdown_timeout,
        access_log=None,
    )
    await runner.setup()
    site = web.TCPSite(runner, settings.rest_bind_address, settings.rest_port)
    await site.start()
    logger.info(
        "REST server listening on http://%s:%d", settings.rest_bind_address, settings.rest_port
    )
    grpc_server = None
    if settings.port:
        grpc_server = await start_grpc_server(
            dataplane,
            settings.grpc_bind_address,
            settings.port,
            settings.max_request_size,
            [tracing.grpc_interceptor()] if tracing else [],
            settings.grpc,
        )
        logger.info(
            "gRPC server (KServe v2) listening on %s:%d", settings.grpc_bind_address, settings.port
        )

    stop = asyncio.Event()
    for signum in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(signum, stop.set)
    loader = asyncio.create_task(load_models(repository, settings, definitions, fetching))
    loader.add_done_callback(heap.settle_after)
    failure: list[BaseException] = []

    def load_failed(task: asyncio.Task[None]) -> None:
        """A pull that failed (or any error the loader did not handle) leaves nothing to
        serve: end the server with 1, as the start would have before listening."""
        if task.cancelled() or (error := task.exception()) is None:
            return
        if isinstance(error, StartupError | OSError):
            logger.error("%s", error)
        else:
            logger.error("loading the models failed", exc_info=error)
        failure.append(error)
        stop.set()

    loader.add_done_callback(load_failed)
    poller = None
    if config_path is not None and settings.file_system_poll_wait_seconds > 0:
        poller = asyncio.create_task(repository.poll(settings.file_system_poll_wait_seconds))
    await stop.wait()
    for signum in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(signum, exit_now, signum)

    logger.info(
        "shutting down: finishing in-flight requests (up to %.0f s)", settings.shutdown_timeout
    )
    dataplane.shutting_down = True
    for task in (poller, loader):
        if task is not None:
            task.cancel()
    # Both transports drain their in-flight calls at the same time, within --shutdown_timeout.
    await asyncio.gather(
        runner.cleanup(),
        *([grpc_server.stop(settings.shutdown_timeout)] if grpc_server is not None else []),
    )
    await repository.close()
    if tracing is not None:
        tracing.shutdown()
    logger.info("stopped")
    return 1 if failure else 0
