"""Messages between the frontend (`client`) and an engine process (`worker`).

Plain dataclasses sent with pickle over multiprocessing pipes. Prompts travel as token ids (the
frontend renders templates and tokenizes) or as text when the engine must tokenize (vision models,
whose prompts embed image placeholders). One `StepOutputs` carries everything one engine step
produced, so the per-token cost of the pipe is amortized over the batch.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class EngineSpec:
    """Everything a worker needs to build its pipeline (picklable)."""

    kind: str  # PipelineType value: LM, LM_CB, VLM, VLM_CB
    models_path: str
    device: str
    properties: dict[str, Any]
    scheduler: dict[str, Any]
    draft: dict[str, Any] | None = None
    log_level: int = 20


@dataclass(frozen=True)
class AddRequest:
    request_id: int
    prompt_ids: list[int] | None
    prompt_text: str | None
    config: dict[str, Any]
    # Sequences arrive only when finished (beam search): read_all at the end, not per step.
    final_only: bool = False


@dataclass(frozen=True)
class Abort:
    request_id: int


@dataclass(frozen=True)
class Shutdown:
    pass


@dataclass(frozen=True)
class Ready:
    load_seconds: float
    eos_token_id: int
    tokenizer_path: str  # where the frontend loads its tokenizer from (fast, no conversion)


@dataclass(frozen=True)
class LoadFailed:
    message: str


@dataclass(frozen=True)
class SequenceDelta:
    """New tokens of one sequence of one request from one step (or the whole result if final)."""

    request_id: int
    index: int
    token_ids: list[int]
    logprobs: list[float]
    finish_reason: str | None  # "stop", "length", or None while running
    prompt_tokens: int = 0


@dataclass(frozen=True)
class RequestFailed:
    request_id: int
    message: str
    client_error: bool  # True: the request was invalid (400); False: the engine failed it


@dataclass
class EngineMetrics:
    requests: int = 0
    scheduled_requests: int = 0
    cache_usage: float = 0.0  # percent
    max_cache_usage: float = 0.0
    kv_cache_bytes: int = 0


@dataclass(frozen=True)
class StepOutputs:
    deltas: list[SequenceDelta]
    failures: list[RequestFailed]
    metrics: EngineMetrics
    step_seconds: float = 0.0


@dataclass(frozen=True)
class EngineFailed:
    message: str


@dataclass
class Outbox:
    """What the worker accumulates during one step before sending it."""

    deltas: list[SequenceDelta] = field(default_factory=list)
    failures: list[RequestFailed] = field(default_factory=list)
