"""The encoder collector turns the servables' own counters into Prometheus families."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families

from graphrt.observability.encoder_metrics import EncoderCollector, encoder_servables
from servables.encoders.batcher import EncoderStats


@dataclass
class FakeServable:
    name: str
    kind: str
    stats: EncoderStats = field(default_factory=EncoderStats)


class Resources:
    def __init__(self, *resources: Any) -> None:
        self.resources = resources

    def all(self) -> list[Any]:
        return list(self.resources)


@dataclass
class Graph:
    resources: Resources | None


def test_families_follow_the_stats() -> None:
    embedder = FakeServable("minilm", "embeddings")
    embedder.stats.requests, embedder.stats.inputs, embedder.stats.tokens = 3, 40, 700
    for size in (1, 8, 31):
        embedder.stats.batch_sizes.observe(size)
    embedder.stats.request_seconds.observe(0.02)
    llm = object()  # LLM resources have no EncoderStats and are skipped
    graphs = [Graph(Resources(embedder, llm)), Graph(None)]
    assert encoder_servables(graphs) == [embedder]

    registry = CollectorRegistry()
    registry.register(EncoderCollector(lambda: encoder_servables(graphs)))
    samples = {
        (sample.name, sample.labels.get("le")): sample.value
        for family in text_string_to_metric_families(generate_latest(registry).decode())
        for sample in family.samples
        if sample.labels.get("name") == "minilm" and sample.labels.get("kind") == "embeddings"
    }
    assert samples[("graphrt_encoder_requests_total", None)] == 3
    assert samples[("graphrt_encoder_inputs_total", None)] == 40
    assert samples[("graphrt_encoder_tokens_total", None)] == 700
    assert samples[("graphrt_encoder_batch_size_bucket", "8.0")] == 2
    assert samples[("graphrt_encoder_batch_size_bucket", "+Inf")] == 3
    assert samples[("graphrt_encoder_batch_size_count", None)] == 3
    assert samples[("graphrt_encoder_batch_size_sum", None)] == 40
    assert samples[("graphrt_encoder_request_seconds_count", None)] == 1
