"""Prometheus metrics of dynamic batching on plain models, read when Prometheus scrapes.

A model version with `dynamic_batching` in its config counts the batches its batcher forms
(servables.ov_model.dynamic_batcher.BatchStats) without knowing Prometheus; this collector turns
those numbers into metric families labelled with the model's name and version, so an operator
can see whether calls are actually being stacked (`graphrt_dynamic_batch_size`) and what the
queue costs them (`graphrt_dynamic_batch_queue_seconds`). docs/dynamic-batching.md lists them.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator

from prometheus_client.core import CounterMetricFamily, HistogramMetricFamily, Metric
from prometheus_client.registry import Collector

from graphrt.observability.encoder_metrics import histogram_buckets
from graphrt.observability.model_metrics import loaded_versions
from servables.ov_model.model import OpenVINOModel
from servables.ov_model.versions import VersionedModel


def batched_models(models: Iterable[VersionedModel]) -> list[OpenVINOModel]:
    """The loaded model versions that have dynamic batching switched on."""
    return [model for model in loaded_versions(models) if model.dynamic_batching is not None]


class BatchCollector(Collector):
    """See the module docstring; `models` returns the live batched model versions."""

    def __init__(self, models: Callable[[], Iterable[OpenVINOModel]]) -> None:
        self._models = models

    def collect(self) -> Iterator[Metric]:
        labels = ["name", "version"]
        batches = CounterMetricFamily(
            "graphrt_dynamic_batches",
            "Inferences run by dynamic batching (batches, a lone call's included).",
            labels=labels,
        )
        calls = CounterMetricFamily(
            "graphrt_dynamic_batch_calls", "Calls answered by those inferences.", labels=labels
        )
        rows = CounterMetricFamily(
            "graphrt_dynamic_batch_rows", "Rows (dimension 0) those calls held.", labels=labels
        )
        retried = CounterMetricFamily(
            "graphrt_dynamic_batch_failures",
            "Batches that failed and whose calls were run again one by one.",
            labels=labels,
        )
        size = HistogramMetricFamily(
            "graphrt_dynamic_batch_size", "Rows per batched inference.", labels=labels
        )
        requests = HistogramMetricFamily(
            "graphrt_dynamic_batch_requests", "Calls per batched inference.", labels=labels
        )
        queued = HistogramMetricFamily(
            "graphrt_dynamic_batch_queue_seconds",
            "Time the oldest call of a batch waited in the queue.",
            labels=labels,
        )
        for model in self._models():
            stats = model.batch_stats
            key = [model.name, str(model.version)]
            batches.add_metric(key, stats.all_batches)
            calls.add_metric(key, stats.all_requests)
            rows.add_metric(key, stats.all_rows)
            retried.add_metric(key, stats.failed_batches)
            for family, histogram in zip((size, requests, queued), stats.histograms(), strict=True):
                family.add_metric(key, histogram_buckets(histogram), histogram.total)
        yield from (batches, calls, rows, retried, size, requests, queued)
