"""The engine's own counts of running and waiting requests, and its KV block layout.

genai reports how many requests its pipeline holds and how many the latest step scheduled; the
loops turn that into running (the batch) and waiting. The real engine under load is in
tests/e2e/test_gateway_protocol.py; these pin the rules with fakes of genai's pipeline.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import pytest

from servables.llm.engine import kv_blocks
from servables.llm.engine.batching import ContinuousBatchingLoop, _Live
from servables.llm.engine.messages import (
    AddRequest,
    EngineMetrics,
    EngineSpec,
    KVBlocks,
    Outbox,
    StepOutputs,
)
from servables.llm.engine.stateful import StatefulLoop


@dataclass
class GenaiMetrics:
    requests: int = 0
    scheduled_requests: int = 0
    cache_usage: float = 0.0
    max_cache_usage: float = 0.0
    kv_cache_size_in_bytes: int = 0


@dataclass
class Events:
    sent: list[Any] = field(default_factory=list)

    def send(self, message: Any) -> None:
        self.sent.append(message)


class Pipeline:
    def __init__(self, metrics: GenaiMetrics) -> None:
        self.metrics = metrics

    def get_metrics(self) -> GenaiMetrics:
        return self.metrics


def counts(genai: GenaiMetrics, decoding: int, prefilling: int, deferred: int = 0) -> EngineMetrics:
    """The EngineMetrics the loop sends after a step, with `decoding` requests that have
    produced tokens and `prefilling` that have not."""
    events = Events()
    loop = ContinuousBatchingLoop(Pipeline(genai), commands=None, events=events)  # type: ignore[arg-type]
    for request_id in range(decoding + prefilling):
        live = _Live(request_id, handle=None, final_only=False, prompt_tokens=8)
        live.decoding = request_id < decoding
        loop.live[request_id] = live
    loop.deferred = [AddRequest(100 + i, [1], None, {}) for i in range(deferred)]
    loop.flush(Outbox(), 0.01)
    (message,) = events.sent
    assert isinstance(message, StepOutputs)
    return message.metrics


def test_with_split_fuse_the_step_schedules_the_whole_batch() -> None:
    """dynamic_split_fuse: every decoding sequence plus the prompt chunks that fit."""
    metrics = counts(GenaiMetrics(requests=10, scheduled_requests=8), decoding=6, prefilling=4)
    assert (metrics.running, metrics.waiting) == (8, 2)


def test_a_prompt_step_does_not_make_the_decoding_requests_wait() -> None:
    """Without dynamic_split_fuse a step that runs new prompts schedules only those; the
    sequences decoding beside them keep their blocks and are still in the batch."""
    metrics = counts(GenaiMetrics(requests=6, scheduled_requests=2), decoding=5, prefilling=1)
    assert (metrics.running, metrics.waiting) == (5, 1)


def test_requests_the_loop_holds_back_are_waiting() -> None:
    """Requests with a grammar not yet proven, or behind a prompt being scored, are not in the
    pipeline yet but wait all the same."""
    metrics = counts(GenaiMetrics(requests=1, scheduled_requests=1), 1, 0, deferred=3)
    assert (metrics.running, metrics.waiting) == (1, 3)


def test_one_request_at_a_time_runs_and_the_queue_waits() -> None:
    loop = StatefulLoop(pipeline=None, commands=None, events=None)  # type: ignore[arg-type]
    for request_id in (1, 2):
        loop.pending.put(AddRequest(request_id, [1], None, {}))
    assert loop.counts(1) == EngineMetrics(requests=3, scheduled_requests=1, running=1, waiting=2)
    assert loop.counts(0).waiting == 2


class ProbePipeline:
    """genai after a one-token request: one block in use out of `blocks`."""

    def __init__(self, blocks: int, block_bytes: int, usage_error: float = 0.0) -> None:
        self.blocks, self.block_bytes, self.usage_error = blocks, block_bytes, usage_error
        self.added: list[tuple[int, list[list[int]]]] = []
        self.steps = 0

    def get_config(self) -> Any:
        import openvino_genai

        return openvino_genai.GenerationConfig()

    def add_request(self, request_id: int, prompt: Any, config: Any) -> Any:
        import openvino_genai

        assert config.max_new_tokens == 1
        self.added.append((request_id, prompt.data.tolist()))
        pipeline = self

        class Handle:
            def get_status(self) -> Any:
                status = openvino_genai.GenerationStatus
                return status.FINISHED if pipeline.steps else status.RUNNING

        return Handle()

    def step(self) -> None:
        self.steps += 1

    def get_metrics(self) -> GenaiMetrics:
        usage = 100.0 / self.blocks + self.usage_error
        return GenaiMetrics(1, 1, usage, usage, self.blocks * self.block_bytes)


@pytest.fixture
def gguf_spec(monkeypatch: pytest.MonkeyPatch) -> EngineSpec:
    monkeypatch.setattr(kv_blocks, "vocabulary_size", lambda path: 49152)
    return EngineSpec("LM_CB", "/models/m.gguf", "CPU", {}, {})


@pytest.mark.parametrize("blocks", [1, 2452, 300_000])
def test_the_probe_reads_the_block_layout(gguf_spec: EngineSpec, blocks: int) -> None:
    """One block of `blocks` in use: usage = 100 / blocks, exact for a fixed cache of any size
    and for a cache that grows on demand (one block)."""
    pipeline = ProbePipeline(blocks, 437_760)
    assert kv_blocks.measure(pipeline, gguf_spec) == KVBlocks(32, 437_760, blocks * 437_760)
    # The vocabulary's last id, never a prompt's first token; an id the frontend never uses.
    assert pipeline.added == [(kv_blocks.PROBE_REQUEST_ID, [[49151]])]


def test_no_layout_when_it_cannot_be_read(gguf_spec: EngineSpec) -> None:
    # A usage that is not one block of a whole number of blocks (e.g. a second cache's).
    assert kv_blocks.measure(ProbePipeline(1000, 437_760, usage_error=0.031), gguf_spec) is None
    for spec in (
        EngineSpec("VLM_CB", "/m", "CPU", {}, {}),
        EngineSpec("LM", "/m", "CPU", {}, {}),
        EngineSpec("LM_CB", "/m", "NPU", {}, {}),
        EngineSpec("LM_CB", "/m", "CPU", {}, {}, draft={"models_path": "/d"}),
    ):
        pipeline = ProbePipeline(10, 1024)
        assert kv_blocks.measure(pipeline, spec) is None
        assert not pipeline.added
