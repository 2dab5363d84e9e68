"""Prometheus metrics of the image and audio servables, read when Prometheus scrapes.

Each of those servables runs its pipeline through a PipelineRunner
(servables/runtime/thread_runner.py), which counts what it does without knowing Prometheus: requests
finished, failed and cancelled, the requests running and waiting, the time a request waited and
took, and the time of each pipeline step (a denoising step of an image, a piece of a transcript, a
spoken sentence). This collector turns those numbers into metric families labelled with the
servable's name and kind (image_generation, speech2text, text2speech). OVMS's per-graph request
metrics cover these servables as they cover LLMs.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from typing import Any

from prometheus_client.core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
    Metric,
)
from prometheus_client.registry import Collector

from graphrt.observability.encoder_metrics import histogram_buckets, node_resources
from servables.runtime.thread_runner import PipelineRunner


def pipeline_servables(servables: Iterable[Any]) -> list[Any]:
    """The servables behind a repository's graphs that run a pipeline through a runner."""
    return [
        r
        for r in node_resources(servables)
        if isinstance(getattr(r, "runner", None), PipelineRunner)
    ]


class PipelineCollector(Collector):
    """See the module docstring; `servables` returns the live pipeline servables."""

    def __init__(self, servables: Callable[[], Iterable[Any]]) -> None:
        self._servables = servables

    def collect(self) -> Iterator[Metric]:
        labels = ["name", "kind"]
        counters = {
            "requests": CounterMetricFamily(
                "graphrt_pipeline_requests", "Image/audio requests answered.", labels=labels
            ),
            "failures": CounterMetricFamily(
                "graphrt_pipeline_failures", "Image/audio requests that failed.", labels=labels
            ),
            "cancelled": CounterMetricFamily(
                "graphrt_pipeline_cancelled",
                "Image/audio requests stopped before their end (client gone).",
                labels=labels,
            ),
            "steps": CounterMetricFamily(
                "graphrt_pipeline_steps",
                "Pipeline steps run (denoising steps, transcript pieces, spoken sentences).",
                labels=labels,
            ),
        }
        running = GaugeMetricFamily(
            "graphrt_pipeline_requests_running",
            "Image/audio requests taken: the one on the pipeline and those waiting for it.",
            labels=labels,
        )
        queued = GaugeMetricFamily(
            "graphrt_pipeline_requests_queued",
            "Image/audio requests waiting for the pipeline (bounded by --max_queued_requests).",
            labels=labels,
        )
        histograms = {
            "queue_seconds": HistogramMetricFamily(
                "graphrt_pipeline_queue_seconds",
                "Time a request waited for the pipeline.",
                labels=labels,
            ),
            "request_seconds": HistogramMetricFamily(
                "graphrt_pipeline_request_seconds",
                "Time from a request's arrival at the servable to its result.",
                labels=labels,
            ),
            "step_seconds": HistogramMetricFamily(
                "graphrt_pipeline_step_seconds", "Duration of one pipeline step.", labels=labels
            ),
        }
        for servable in self._servables():
            runner: PipelineRunner = servable.runner
            stats, key = runner.stats, [runner.name, servable.kind]
            for attribute, counter in counters.items():
                counter.add_metric(key, getattr(stats, attribute))
            running.add_metric(key, runner.in_flight)
            queued.add_metric(key, runner.queued)
            for attribute, family in histograms.items():
                histogram = getattr(stats, attribute)
                family.add_metric(key, histogram_buckets(histogram), histogram.total)
        yield from counters.values()
        yield from (running, queued)
        yield from histograms.values()
