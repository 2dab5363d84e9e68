"""Messages between the frontend (`client`) and an engine process (`worker`).

Plain dataclasses sent with pickle over multiprocessing pipes. Prompts travel as token ids (the
frontend renders templates and tokenizes) or as text when the engine must tokenize (vision models,
whose prompts embed image placeholders). Images travel decoded, as RGB (height, width, 3) uint8
arrays: the layout openvino-genai takes, so the worker wraps them in tensors without a copy and
never spends engine time on decoding. Commands go through `send_command` / `receive_command`,
which pickle with protocol 5 and move array buffers out of band (PEP 574): the pixels go from the
frontend's array into the pipe and from the pipe into the worker's array with no pickle copies,
which cut a 4096x4096 image's transfer from ~150 to ~110 ms here (the worker reads it between
two engine steps). One `StepOutputs` carries everything one engine step produced, so the
per-token cost of the pipe is amortized over the batch.
"""

from __future__ import annotations

import pickle
from dataclasses import dataclass, field
from multiprocessing.connection import Connection
from typing import Any

import numpy as np
import numpy.typing as npt

from servables.llm.lora import LoadedAdapter


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
    adapter: LoadedAdapter | None = None  # a LoRA adapter this engine applies to every request
    gguf_weights: str = "genai"  # or a layout of servables.llm.gguf_requantize: requantized


@dataclass(frozen=True)
class AddRequest:
    request_id: int
    prompt_ids: list[int] | None
    prompt_text: str | None
    config: dict[str, Any]
    # Sequences arrive only when finished (beam search): read_all at the end, not per step.
    final_only: bool = False
    images: tuple[npt.NDArray[np.uint8], ...] = ()  # RGB HWC uint8, in prompt order


@dataclass(frozen=True)
class Abort:
    request_id: int


@dataclass(frozen=True)
class Shutdown:
    pass


@dataclass(frozen=True)
class KVBlocks:
    """Tokens per KV-cache block and bytes per block, so the frontend can count the cache's
    blocks from its size in bytes (what openvino-genai reports), and that size at load."""

    block_size: int
    block_bytes: int
    cache_bytes: int

    def count(self, cache_bytes: int) -> int:
        return cache_bytes // self.block_bytes if self.block_bytes else 0


@dataclass(frozen=True)
class Ready:
    load_seconds: float
    eos_token_id: int
    tokenizer_path: str  # where the frontend loads its tokenizer from (fast, no conversion)
    kv_blocks: KVBlocks | None = None  # the KV cache's block layout, when the engine has one


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
    # The prompt's token count; for text prompts (vision models) only known, and set, at the end.
    prompt_tokens: int = 0
    # With `echo` and logprobs: the prompt tokens' logprobs, on the sequence's first delta (None
    # for the first token and for tokens the engine took from its prefix cache).
    prompt_logprobs: list[float | None] | None = None


@dataclass(frozen=True)
class RequestFailed:
    request_id: int
    message: str
    client_error: bool  # True: the request was invalid (400); False: the engine failed it
    # The request's grammar ((field, text)) when the engine could not compile it.
    grammar: tuple[str, str] | None = None
    # The request may succeed if sent again (it was cut short by an engine rebuild).
    retryable: bool = False


@dataclass
class EngineMetrics:
    """The engine's own counts after a step (see servables.llm.engine.batching for how running
    and waiting are read)."""

    requests: int = 0  # in the pipeline
    scheduled_requests: int = 0  # scheduled by the latest step
    running: int = 0  # in the batch: scheduled by the latest step, or decoding
    waiting: int = 0  # not running: in the pipeline, or held back by the loop
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


def send_command(connection: Connection, message: Any) -> None:
    """Send a command: its pickle (protocol 5), then each out-of-band buffer as raw bytes."""
    buffers: list[pickle.PickleBuffer] = []
    payload = pickle.dumps(message, protocol=5, buffer_callback=buffers.append)
    views = [buffer.raw() for buffer in buffers]
    connection.send((payload, [view.nbytes for view in views]))
    for view in views:
        connection.send_bytes(view)


def receive_command(connection: Connection) -> Any:
    """Receive what `send_command` sent; arrays come back writable, backed by their own bytes."""
    payload, sizes = connection.recv()
    buffers = []
    for size in sizes:
        buffer = bytearray(size)
        connection.recv_bytes_into(buffer)
        buffers.append(buffer)
    return pickle.loads(payload, buffers=buffers)
