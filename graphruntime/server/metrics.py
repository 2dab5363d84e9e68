"""Prometheus metrics: OVMS's request/graph metrics, plus the LLM metrics OVMS does not have.

OVMS names and labels are kept (`ovms_requests_accepted{api,interface,method,name}` and the
rest), so existing dashboards keep working, and `--metrics_list` selects among them as in OVMS.
The LLM metrics (`graphrt_llm_*`) are always on: time to first token and inter-token latency
histograms, prompt and generated token counters, and, read from each engine at scrape time,
active and queued requests and KV-cache use.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

OVMS_METRICS = (
    "ovms_requests_success",
    "ovms_requests_fail",
    "ovms_requests_accepted",
    "ovms_requests_rejected",
    "ovms_responses",
    "ovms_current_requests",
    "ovms_current_graphs",
    "ovms_graph_error",
    "ovms_graph_processing_time_us",
    "ovms_request_time_us",
)
OVMS_DEFAULT = OVMS_METRICS
US_BUCKETS = tuple(10.0**exponent for exponent in range(1, 9))
LATENCY_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0)
ITL_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.2, 0.5, 1.0)


class EngineCollector(Collector):
    """Engine gauges, read from each LLM servable when Prometheus scrapes."""

    def __init__(self, servables: Callable[[], Iterable[Any]]) -> None:
        self._servables = servables

    def collect(self) -> Iterator[GaugeMetricFamily]:
        active = GaugeMetricFamily(
            "graphrt_llm_requests_active", "Requests the engine is working on.", labels=["name"]
        )
        queued = GaugeMetricFamily(
            "graphrt_llm_requests_queued",
            "Requests waiting for the engine to schedule them.",
            labels=["name"],
        )
        usage = GaugeMetricFamily(
            "graphrt_llm_kv_cache_usage_ratio",
            "Share of the KV cache in use (0-1).",
            labels=["name"],
        )
        size = GaugeMetricFamily(
            "graphrt_llm_kv_cache_bytes", "Size of the KV cache.", labels=["name"]
        )
        for servable in self._servables():
            metrics = servable.engine.metrics
            active.add_metric([servable.name], servable.engine.active_requests)
            queued.add_metric(
                [servable.name], max(0, metrics.requests - metrics.scheduled_requests)
            )
            usage.add_metric([servable.name], metrics.cache_usage / 100.0)
            size.add_metric([servable.name], metrics.kv_cache_bytes)
        yield from (active, queued, usage, size)


class Metrics:
    """All server metrics; see the module docstring."""

    def __init__(self, enabled: Iterable[str] = ()) -> None:
        names = set(enabled) or set(OVMS_DEFAULT)
        unknown = names - set(OVMS_METRICS)
        if unknown:
            raise ValueError(f"unknown metrics in --metrics_list: {', '.join(sorted(unknown))}")
        self.enabled = names
        self.registry = CollectorRegistry()
        request_labels = ["api", "interface", "method", "name"]
        self.requests_success = Counter(
            "ovms_requests_success",
            "Number of successful requests to a graph.",
            request_labels,
            registry=self.registry,
        )
        self.requests_fail = Counter(
            "ovms_requests_fail",
            "Number of failed requests to a graph.",
            request_labels,
            registry=self.registry,
        )
        self.requests_accepted = Counter(
            "ovms_requests_accepted",
            "Requests that put a packet into a graph.",
            request_labels,
            registry=self.registry,
        )
        self.requests_rejected = Counter(
            "ovms_requests_rejected",
            "Requests refused before reaching a graph.",
            request_labels,
            registry=self.registry,
        )
        self.responses = Counter(
            "ovms_responses",
            "Response packets produced by graphs (each streamed chunk counts).",
            request_labels,
            registry=self.registry,
        )
        self.current_requests = Gauge(
            "ovms_current_requests", "Requests being processed.", ["name"], registry=self.registry
        )
        self.current_graphs = Gauge(
            "ovms_current_graphs", "Graph runs in progress.", ["name"], registry=self.registry
        )
        self.graph_error = Counter(
            "ovms_graph_error", "Graph runs that failed.", ["name"], registry=self.registry
        )
        self.graph_time = Histogram(
            "ovms_graph_processing_time_us",
            "Duration of graph runs (a whole stream for SSE).",
            ["name"],
            buckets=US_BUCKETS,
            registry=self.registry,
        )
        self.request_time = Histogram(
            "ovms_request_time_us",
            "Request processing time.",
            ["interface", "name"],
            buckets=US_BUCKETS,
            registry=self.registry,
        )
        self.ttft = Histogram(
            "graphrt_llm_time_to_first_token_seconds",
            "Time from submission to the first token.",
            ["name"],
            buckets=LATENCY_BUCKETS,
            registry=self.registry,
        )
        self.itl = Histogram(
            "graphrt_llm_inter_token_latency_seconds",
            "Time between consecutive token batches.",
            ["name"],
            buckets=ITL_BUCKETS,
            registry=self.registry,
        )
        self.prompt_tokens = Counter(
            "graphrt_llm_prompt_tokens",
            "Prompt tokens processed.",
            ["name"],
            registry=self.registry,
        )
        self.generated_tokens = Counter(
            "graphrt_llm_generated_tokens", "Tokens generated.", ["name"], registry=self.registry
        )
        self._drop_disabled()

    def _drop_disabled(self) -> None:
        for name in set(OVMS_METRICS) - self.enabled:
            collector = self.registry._names_to_collectors.get(name)
            if collector is None:
                collector = self.registry._names_to_collectors.get(name + "_total")
            if collector is not None:
                self.registry.unregister(collector)

    def render(self) -> bytes:
        return generate_latest(self.registry)

    # The LLM servable's request listener interface.
    def started(self, servable: Any, stats: Any) -> None:
        self.prompt_tokens.labels(servable.name).inc(stats.prompt_tokens)

    def finished(self, servable: Any, stats: Any) -> None:
        name = servable.name
        if stats.first_token is not None:
            self.ttft.labels(name).observe(stats.first_token - stats.submitted)
        histogram = self.itl.labels(name)
        for gap in stats.inter_token:
            histogram.observe(gap)
        self.generated_tokens.labels(name).inc(stats.completion_tokens)
