"""Prometheus metrics of the embeddings and rerank servables, read when Prometheus scrapes.

The servables count what they do (servables.encoders.batcher.EncoderStats: requests, inputs,
tokens, batch sizes, request and inference latency) without knowing Prometheus; this collector
turns those numbers into metric families. OVMS's per-graph request metrics
(`ovms_requests_success`, `ovms_request_time_us`, ...) cover these servables as they cover LLMs.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from typing import Any

from prometheus_client.core import CounterMetricFamily, HistogramMetricFamily, Metric
from prometheus_client.registry import Collector

from servables.encoders.batcher import EncoderStats
from servables.runtime.histogram import Histogram


def node_resources(servables: Iterable[Any]) -> Iterator[Any]:
    """The resources (servables of nodes) behind the graphs of a repository."""
    for servable in servables:
        resources = getattr(servable, "resources", None)
        if resources is not None:
            yield from resources.all()


def encoder_servables(servables: Iterable[Any]) -> list[Any]:
    """The embeddings and rerank servables behind the graphs of a repository."""
    return [
        r for r in node_resources(servables) if isinstance(getattr(r, "stats", None), EncoderStats)
    ]


def histogram_buckets(histogram: Histogram) -> list[tuple[str, float]]:
    """A Histogram's cumulative buckets as prometheus_client's families take them."""
    buckets = [
        (repr(float(bound)), float(count))
        for bound, count in zip(histogram.bounds, histogram.counts, strict=True)
    ]
    return [*buckets, ("+Inf", float(histogram.count))]


class EncoderCollector(Collector):
    """See the module docstring; `servables` returns the live encoder servables."""

    def __init__(self, servables: Callable[[], Iterable[Any]]) -> None:
        self._servables = servables

    def collect(self) -> Iterator[Metric]:
        labels = ["name", "kind"]
        requests = CounterMetricFamily(
            "graphrt_encoder_requests", "Embeddings/rerank requests served.", labels=labels
        )
        inputs = CounterMetricFamily(
            "graphrt_encoder_inputs",
            "Inputs embedded, or (query, document chunk) pairs scored.",
            labels=labels,
        )
        tokens = CounterMetricFamily(
            "graphrt_encoder_tokens", "Tokens of those inputs.", labels=labels
        )
        batch_size = HistogramMetricFamily(
            "graphrt_encoder_batch_size",
            "Inputs per inference (inputs of concurrent requests are batched).",
            labels=labels,
        )
        request_seconds = HistogramMetricFamily(
            "graphrt_encoder_request_seconds",
            "Time from a request's arrival at the servable to its results.",
            labels=labels,
        )
        inference_seconds = HistogramMetricFamily(
            "graphrt_encoder_inference_seconds", "Duration of one batched inference.", labels=labels
        )
        for servable in self._servables():
            stats: EncoderStats = servable.stats
            key = [servable.name, servable.kind]
            requests.add_metric(key, stats.requests)
            inputs.add_metric(key, stats.inputs)
            tokens.add_metric(key, stats.tokens)
            for family, histogram in (
                (batch_size, stats.batch_sizes),
                (request_seconds, stats.request_seconds),
                (inference_seconds, stats.inference_seconds),
            ):
                family.add_metric(key, histogram_buckets(histogram), histogram.total)
        yield from (requests, inputs, tokens, batch_size, request_seconds, inference_seconds)
