"""Prometheus metrics: OVMS's request/graph metrics, plus the LLM metrics OVMS does not have.

OVMS's names and labels are kept exactly, so existing dashboards keep working, and
`--metrics_list` selects among them as in OVMS. OVMS's counters have no `_total` suffix
(`ovms_requests_success{api,interface,method,name}`); prometheus_client would add one to every
counter, so those few lines are written here and the rest (gauges, histograms, the
`graphrt_llm_*` metrics) comes from prometheus_client. The LLM metrics are always on: time to
first token and inter-token latency histograms, prompt and generated token counters, and, read
from each engine when Prometheus scrapes, active and queued requests and KV-cache use.

OVMS's per-request gauges and histograms are plain numbers too, handed to prometheus_client
only when it scrapes (`RequestCollector`): every request is counted on the event loop's thread,
and prometheus_client's own metrics take a lock per update, ten of them per request (~10 us of
a ~80 us KServe request on a tiny model).

Classic models and DAG pipelines have OVMS's per-version series instead of a graph's
(model_metrics.py); the families both use are written once, with both label sets.
`--metrics_list` empty shows OVMS's default families: all but ovms_infer_req_queue_size and
ovms_infer_req_active, which OVMS shows only when listed.
"""

from __future__ import annotations

import time
from bisect import bisect_left
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

from prometheus_client import (
    CollectorRegistry,
    Counter,
    Histogram,
    disable_created_metrics,
    generate_latest,
)
from prometheus_client.core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
    Metric,
)
from prometheus_client.registry import Collector
from prometheus_client.utils import floatToGoString

from graphrt.observability.model_metrics import MODEL_FAMILIES, OPTIONAL_FAMILIES, ModelMetrics

REQUEST_LABELS = ("api", "interface", "method", "name")
OVMS_COUNTERS = {
    "ovms_requests_success": (
        "Number of successful requests to a model, a DAG or a graph.",
        REQUEST_LABELS,
    ),
    "ovms_requests_fail": (
        "Number of failed requests to a model, a DAG or a graph.",
        REQUEST_LABELS,
    ),
    "ovms_requests_accepted": ("Requests that put a packet into a graph.", REQUEST_LABELS),
    "ovms_requests_rejected": ("Requests refused before reaching a graph.", REQUEST_LABELS),
    "ovms_responses": (
        "Response packets produced by graphs (each streamed chunk counts).",
        REQUEST_LABELS,
    ),
    "ovms_graph_error": ("Graph runs that failed.", ("name",)),
}
OVMS_OTHERS = (
    "ovms_current_requests",
    "ovms_current_graphs",
    "ovms_graph_processing_time_us",
    "ovms_request_time_us",
)
OVMS_METRICS = (*OVMS_COUNTERS, *OVMS_OTHERS, *MODEL_FAMILIES)
# What an empty --metrics_list shows: OVMS's default families (all but the optional ones).
DEFAULT_METRICS = frozenset(OVMS_METRICS) - OPTIONAL_FAMILIES
US_BUCKETS = tuple(10.0**exponent for exponent in range(1, 9))
# Their `le` labels as prometheus_client writes them ("1e+06", ..., "+Inf").
US_BUCKET_LABELS = (*(floatToGoString(b) for b in US_BUCKETS), "+Inf")  # type: ignore[no-untyped-call]
LATENCY_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0)
ITL_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.2, 0.5, 1.0)


def _escape(value: str) -> str:
    return value.replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')


@dataclass
class OvmsCounter:
    """A counter exposed under its exact OVMS name."""

    name: str
    help: str
    label_names: tuple[str, ...]
    values: dict[tuple[str, ...], float] = field(default_factory=dict)

    def inc(self, *labels: str, amount: float = 1.0) -> None:
        self.values[labels] = self.values.get(labels, 0.0) + amount

    def value(self, *labels: str) -> float:
        return self.values.get(labels, 0.0)

    def render(self, more: Iterable[tuple[dict[str, str], float]] = ()) -> str:
        """The family's text; `more` are samples of other label sets (OVMS's model series)."""
        lines = [f"# HELP {self.name} {self.help}", f"# TYPE {self.name} counter"]
        samples = [
            (dict(zip(self.label_names, labels, strict=True)), value)
            for labels, value in sorted(self.values.items())
        ]
        for labels, value in (*samples, *more):
            pairs = ",".join(f'{key}="{_escape(item)}"' for key, item in labels.items())
            lines.append(f"{self.name}{{{pairs}}} {value!r}")
        return "\n".join(lines) + "\n"


class MergedFamilies:
    """A registry's families with those of one name joined into one: graphs' and models' OVMS
    series share family names with different label sets, and an exposition may name a family
    only once."""

    def __init__(self, registry: CollectorRegistry) -> None:
        self.registry = registry

    def collect(self) -> Iterator[Metric]:
        families: dict[str, Metric] = {}
        for family in self.registry.collect():
            known = families.get(family.name)
            if known is None:
                families[family.name] = family
            else:
                known.samples.extend(family.samples)
        return iter(families.values())


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
            "Requests in flight beyond what the engine runs at once (max_num_seqs).",
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
            queued.add_metric([servable.name], servable.engine.queued_requests)
            usage.add_metric([servable.name], metrics.cache_usage / 100.0)
            size.add_metric([servable.name], metrics.kv_cache_bytes)
        yield from (active, queued, usage, size)


class SupervisionCollector(Collector):
    """Restarts of supervised worker processes (engines), per servable, read when scraped."""

    def __init__(self, supervisors: Callable[[], Iterable[tuple[str, Any]]]) -> None:
        self._supervisors = supervisors

    def collect(self) -> Iterator[CounterMetricFamily]:
        restarts = CounterMetricFamily(
            "graphrt_engine_restarts",
            "Restarts of a servable's engine process after it died.",
            labels=["name"],
        )
        totals: dict[str, int] = {}
        for name, supervisor in self._supervisors():
            totals[name] = totals.get(name, 0) + supervisor.restarts
        for name, count in sorted(totals.items()):
            restarts.add_metric([name], count)
        yield restarts


class Tally:
    """A histogram's bucket counts (not cumulative; the last is +Inf) and sum."""

    __slots__ = ("counts", "total")

    def __init__(self) -> None:
        self.counts = [0] * (len(US_BUCKETS) + 1)
        self.total = 0.0

    def observe(self, value: float) -> None:
        self.counts[bisect_left(US_BUCKETS, value)] += 1  # le: value <= bound
        self.total += value

    def buckets(self) -> list[tuple[str, float]]:
        running, cumulative = 0, []
        for bound, count in zip(US_BUCKET_LABELS, self.counts, strict=True):
            running += count
            cumulative.append((bound, float(running)))
        return cumulative


class NameTally:
    """A servable's requests in flight (OVMS's current requests and graphs: one number, as every
    request is one graph run here) and its graph processing time."""

    __slots__ = ("graph_time", "in_flight")

    def __init__(self) -> None:
        self.in_flight = 0
        self.graph_time = Tally()


class RequestRecord:
    """One request's share of OVMS's request metrics, filled in while it is served.

    Its own context manager (not a generator-based one): entered and left once per request on
    the KServe path, where contextlib's machinery cost a few microseconds of a ~100 us request.
    """

    __slots__ = (
        "_name",
        "_request_time",
        "_started",
        "available",
        "labels",
        "metrics",
        "succeeded",
    )

    def __init__(
        self, metrics: Metrics, labels: tuple[str, str, str, str], available: bool = True
    ) -> None:
        self.metrics = metrics
        self.labels = labels
        self.available = available
        self.succeeded = False
        self._name, self._request_time = metrics.tallies(labels[1], labels[3])
        self._started = 0.0

    def responded(self) -> None:
        """A response (or streamed chunk) went out."""
        self.metrics.responses.inc(*self.labels)

    def graph_failed(self) -> None:
        self.metrics.graph_error.inc(self.labels[-1])

    def __enter__(self) -> RequestRecord:
        metrics, labels = self.metrics, self.labels
        (metrics.requests_accepted if self.available else metrics.requests_rejected).inc(*labels)
        self._name.in_flight += 1
        self._started = time.perf_counter()
        return self

    def __exit__(self, *exc_info: object) -> None:
        elapsed_us = (time.perf_counter() - self._started) * 1e6
        name = self._name
        name.graph_time.observe(elapsed_us)
        self._request_time.observe(elapsed_us)
        name.in_flight -= 1
        metrics = self.metrics
        (metrics.requests_success if self.succeeded else metrics.requests_fail).inc(*self.labels)


class RequestCollector(Collector):
    """OVMS's request gauges and histograms, from the tallies, when Prometheus scrapes."""

    def __init__(self, metrics: Metrics) -> None:
        self.metrics = metrics

    def collect(self) -> Iterator[GaugeMetricFamily | HistogramMetricFamily]:
        metrics, enabled = self.metrics, self.metrics.enabled
        names = metrics.name_tallies
        for gauge, text in (
            ("ovms_current_requests", "Requests being processed."),
            ("ovms_current_graphs", "Graph runs in progress."),
        ):
            if gauge in enabled:
                family = GaugeMetricFamily(gauge, text, labels=["name"])
                for name, tally in names.items():
                    family.add_metric([name], tally.in_flight)
                yield family
        if "ovms_graph_processing_time_us" in enabled:
            graph_time = HistogramMetricFamily(
                "ovms_graph_processing_time_us",
                "Duration of graph runs (a whole stream for SSE).",
                labels=["name"],
            )
            for name, tally in names.items():
                graph_time.add_metric([name], tally.graph_time.buckets(), tally.graph_time.total)
            yield graph_time
        if "ovms_request_time_us" in enabled:
            request_time = HistogramMetricFamily(
                "ovms_request_time_us", "Request processing time.", labels=["interface", "name"]
            )
            for labels, times in metrics.request_times.items():
                request_time.add_metric(list(labels), times.buckets(), times.total)
            yield request_time


class Metrics:
    """All server metrics; see the module docstring."""

    def __init__(self, enabled: Iterable[str] = ()) -> None:
        names = set(enabled) or set(DEFAULT_METRICS)
        unknown = names - set(OVMS_METRICS)
        if unknown:
            raise ValueError(
                f"unknown metrics in --metrics_list: {', '.join(sorted(unknown))} (OVMS's "
                f"families: {', '.join(OVMS_METRICS)})"
            )
        self.enabled = names
        disable_created_metrics()  # type: ignore[no-untyped-call]  # OVMS has no *_created
        self.counters = {
            name: OvmsCounter(name, text, labels) for name, (text, labels) in OVMS_COUNTERS.items()
        }
        self.requests_success = self.counters["ovms_requests_success"]
        self.requests_fail = self.counters["ovms_requests_fail"]
        self.requests_accepted = self.counters["ovms_requests_accepted"]
        self.requests_rejected = self.counters["ovms_requests_rejected"]
        self.responses = self.counters["ovms_responses"]
        self.graph_error = self.counters["ovms_graph_error"]

        self.registry = CollectorRegistry()
        registry = self.registry
        # Request tallies by servable name, and request times by (interface, name).
        self.name_tallies: dict[str, NameTally] = {}
        self.request_times: dict[tuple[str, str], Tally] = {}
        registry.register(RequestCollector(self))
        # Classic models' and pipelines' series (model_metrics.py), joined by render().
        self.models = ModelMetrics(self.enabled)
        registry.register(self.models)
        self.ttft = Histogram(
            "graphrt_llm_time_to_first_token_seconds",
            "Time from submission to the first token.",
            ["name"],
            buckets=LATENCY_BUCKETS,
            registry=registry,
        )
        self.itl = Histogram(
            "graphrt_llm_inter_token_latency_seconds",
            "Time between consecutive token batches.",
            ["name"],
            buckets=ITL_BUCKETS,
            registry=registry,
        )
        self.prompt_tokens = Counter(
            "graphrt_llm_prompt_tokens", "Prompt tokens processed.", ["name"], registry=registry
        )
        self.generated_tokens = Counter(
            "graphrt_llm_generated_tokens", "Tokens generated.", ["name"], registry=registry
        )

    def request(
        self, api: str, interface: str, method: str, name: str, *, available: bool
    ) -> RequestRecord:
        """Count a request from arrival to its last byte (`with`); mark `succeeded` on it."""
        return RequestRecord(self, (api, interface, method, name), available)

    def tallies(self, interface: str, name: str) -> tuple[NameTally, Tally]:
        """The numbers a request of `name` over `interface` adds to (made on first use)."""
        named = self.name_tallies.get(name)
        if named is None:
            named = self.name_tallies[name] = NameTally()
        times = self.request_times.get((interface, name))
        if times is None:
            times = self.request_times[(interface, name)] = Tally()
        return named, times

    def render(self) -> bytes:
        counters = "".join(
            counter.render(self.models.counter_samples(name))
            if name in ("ovms_requests_success", "ovms_requests_fail")
            else counter.render()
            for name, counter in self.counters.items()
            if name in self.enabled
        )
        return counters.encode() + generate_latest(MergedFamilies(self.registry))

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
