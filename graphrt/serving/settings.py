"""Server settings, with OVMS's flag names and defaults (where they are safe)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from graphrt.export.task_flags import TaskFlags
from servables.openvino_defaults import OpenVinoDefaults


@dataclass(frozen=True)
class GrpcSettings:
    """OVMS's gRPC tuning flags as grpcio takes them (graphrt/cli/ovms_server_flags.py)."""

    channel_arguments: tuple[tuple[str, int | str], ...] = ()
    max_concurrent_rpcs: int | None = None  # --grpc_max_threads


@dataclass
class ServerSettings:
    rest_port: int = 8000
    port: int = 0  # gRPC; 0 = off
    rest_bind_address: str = "127.0.0.1"  # OVMS binds 0.0.0.0; we do not expose by default
    grpc_bind_address: str = "127.0.0.1"
    config_path: str | None = None
    model_path: str | None = None
    model_name: str | None = None
    task: str | None = None
    log_level: str = "INFO"
    file_system_poll_wait_seconds: float = 1.0
    shutdown_timeout: float = 30.0
    max_request_size: int = 32 * 1024 * 1024
    api_key: str | None = None
    metrics_enable: bool = False
    metrics_list: list[str] = field(default_factory=list)
    allowed_origins: str = "*"
    allowed_methods: str = "*"
    allowed_headers: str = "*"
    allow_credentials: bool = False
    allowed_local_media_path: str | None = None
    allowed_media_domains: list[str] | None = None
    media_download_timeout: float = 10.0  # seconds for one image URL download
    # OVMS's task flags: the options of the graph generated in single-model mode
    task_flags: TaskFlags = field(default_factory=TaskFlags)
    # Watching graphs run: the live graph page, the profiler, OpenTelemetry traces.
    graph_stats: bool = True
    trace_dir: str | None = None
    tracing: bool = False
    # faults: engine restarts and back-pressure (graphrt.serving.policy)
    max_engine_restarts: int = 5
    engine_restart_window: float = 300.0
    max_queued_requests: int = 1024
    max_audio_seconds: float = 3600.0  # longest upload speech to text takes
    subgraph_paths: tuple[str, ...] = ()  # searched for subgraph files by every graph
    verbose_response: bool = False  # LLM answers carry OVMS's __verbose {prompt, content}
    lora_modules: tuple[str, ...] = ()  # --lora_modules values, as given (see lora_modules.py)
    # a classic model's flags (--layout, --mean, ...) as its config.json entry holds them
    model_options: dict[str, Any] = field(default_factory=dict)
    # OVMS's server flags beyond models (graphrt/cli/ovms_server_flags.py)
    grpc: GrpcSettings = field(default_factory=GrpcSettings)
    openvino: OpenVinoDefaults = field(default_factory=OpenVinoDefaults)
