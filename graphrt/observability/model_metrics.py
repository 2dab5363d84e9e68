"""OVMS's metrics of classic models and DAG pipelines, beside the graph metrics of metrics.py.

OVMS counts a model's or pipeline's requests per version (a pipeline is version 1) in other
series than a graph's, and reports what each model version's inferences cost:

- `ovms_requests_success` / `ovms_requests_fail` {api, interface, method, name, version}:
  KServe ModelInfer and ModelMetadata calls (ModelReady's have no version), in the same
  families as the graphs' requests (metrics.py writes them together);
- `ovms_request_time_us` {interface, name, version}: successful ModelInfer calls;
- `ovms_current_requests` {name, version}: a model version's inferences in progress;
- `ovms_inference_time_us`, `ovms_wait_for_infer_req_time_us` {name, version}: the time
  OpenVINO took and the wait for a free infer request;
- `ovms_streams`, `ovms_infer_req_queue_size` (nireq) and `ovms_infer_req_active` {name, version}.

The last four sets come from each model's `InferenceStats`
(servables/ov_model/inference_stats.py), read when Prometheus scrapes, so a pipeline's nodes
and a graph's OpenVINOInferenceCalculator count in their models' numbers, as OVMS counts its
pipelines' nodes. Every loaded version and pipeline shows its series from the start, at zero,
as OVMS's do, so a dashboard shows a model before its first request.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Collection, Iterable, Iterator

from prometheus_client.core import GaugeMetricFamily, HistogramMetricFamily, Metric
from prometheus_client.registry import Collector
from prometheus_client.utils import floatToGoString

from servables.ov_model.inference_stats import OVMS_US_BUCKETS, InferenceStats
from servables.ov_model.model import OpenVINOModel
from servables.ov_model.versions import VersionedModel
from servables.runtime.histogram import Tally

API = "KServe"
INTERFACES = ("gRPC", "REST")
INFER = "ModelInfer"
METADATA = "ModelMetadata"
READY = "ModelReady"
# Their `le` labels, as metrics.py writes its own histograms' ("10.0", ..., "+Inf").
BUCKET_LABELS = (*(floatToGoString(b) for b in OVMS_US_BUCKETS), "+Inf")  # type: ignore[no-untyped-call]
# A model version's families: (name, help), as OVMS words them.
GAUGES = (
    ("ovms_current_requests", "Number of inference requests currently in process."),
    ("ovms_streams", "Number of OpenVINO execution streams."),
    ("ovms_infer_req_queue_size", "Inference request queue size (nireq)."),
    (
        "ovms_infer_req_active",
        "Number of currently consumed inference requests from the processing queue.",
    ),
)
HISTOGRAMS = (
    ("ovms_inference_time_us", "Inference execution time in the OpenVINO backend."),
    ("ovms_wait_for_infer_req_time_us", "Request waiting time in the scheduling queue."),
)
# The families only models have (ovms_current_requests is the graphs' too).
MODEL_FAMILIES = tuple(name for name, _ in (*GAUGES, *HISTOGRAMS))[1:]
# OVMS's optional families: shown only when --metrics_list (or monitoring) names them.
OPTIONAL_FAMILIES = frozenset({"ovms_infer_req_queue_size", "ovms_infer_req_active"})

# (interface, method, name, version); version "" for ModelReady, which OVMS does not version.
Key = tuple[str, str, str, str]


def loaded_versions(models: Iterable[VersionedModel]) -> list[OpenVINOModel]:
    """Every loaded model version of the repository."""
    return [
        version.model
        for model in models
        for version in list(model.versions.values())
        if version.model is not None
    ]


def _buckets(tally: Tally) -> list[tuple[str, float]]:
    return [(b, float(c)) for b, c in zip(BUCKET_LABELS, tally.cumulative(), strict=True)]


class ServableRequest:
    """One KServe call to a model version or a pipeline (`with`; set `succeeded`)."""

    __slots__ = ("key", "metrics", "started", "succeeded")

    def __init__(self, metrics: ModelMetrics, key: Key) -> None:
        self.metrics = metrics
        self.key = key
        self.succeeded = False
        self.started = 0.0

    def __enter__(self) -> ServableRequest:
        self.started = time.perf_counter()
        return self

    def __exit__(self, *exc_info: object) -> None:
        metrics, key = self.metrics, self.key
        metrics.counted(key, self.succeeded)
        if self.succeeded and key[1] == INFER:
            times_key = (key[0], key[2], key[3])
            times = metrics.request_times.get(times_key)
            if times is None:
                times = metrics.request_times[times_key] = Tally(OVMS_US_BUCKETS)
            times.observe((time.perf_counter() - self.started) * 1e6)


class ModelMetrics(Collector):
    """See the module docstring. `watch` tells it where the loaded models and pipelines are."""

    def __init__(self, enabled: Collection[str]) -> None:
        self.enabled = enabled
        self.counts: dict[Key, list[int]] = {}  # [successes, failures]
        self.request_times: dict[tuple[str, str, str], Tally] = {}  # (interface, name, version)
        self._models: Callable[[], Iterable[OpenVINOModel]] = list
        self._pipelines: Callable[[], Iterable[str]] = list

    def watch(
        self, models: Callable[[], Iterable[OpenVINOModel]], pipelines: Callable[[], Iterable[str]]
    ) -> None:
        self._models, self._pipelines = models, pipelines

    def request(self, interface: str, method: str, name: str, version: str) -> ServableRequest:
        return ServableRequest(self, (interface, method, name, "" if method == READY else version))

    def counted(self, key: Key, succeeded: bool) -> None:
        """One call, in ovms_requests_success or ovms_requests_fail."""
        outcome = self.counts.get(key)
        if outcome is None:
            outcome = self.counts[key] = [0, 0]
        outcome[0 if succeeded else 1] += 1

    def _servables(self) -> list[tuple[str, str]]:
        """(name, version) of every loaded model version and pipeline."""
        found = [(model.name, str(model.version)) for model in self._models()]
        return found + [(name, "1") for name in self._pipelines()]

    def counter_samples(self, family: str) -> list[tuple[dict[str, str], float]]:
        """`family`'s (ovms_requests_success or _fail) samples: (labels, value)."""
        index = 0 if family == "ovms_requests_success" else 1
        keys: dict[Key, None] = {}
        for name, version in self._servables():
            for interface in INTERFACES:
                for method, labelled in ((INFER, version), (METADATA, version), (READY, "")):
                    keys[(interface, method, name, labelled)] = None
        keys.update(dict.fromkeys(self.counts))
        samples = []
        for interface, method, name, version in sorted(keys):
            labels = {"api": API, "interface": interface, "method": method, "name": name}
            if version:
                labels["version"] = version
            value = self.counts.get((interface, method, name, version), [0, 0])[index]
            samples.append((labels, float(value)))
        return samples

    def collect(self) -> Iterator[Metric]:
        enabled = self.enabled
        if "ovms_request_time_us" in enabled:
            family = HistogramMetricFamily(
                "ovms_request_time_us",
                "Processing time of requests to a model or a DAG.",
                labels=["interface", "name", "version"],
            )
            times = dict(self.request_times)
            for name, version in self._servables():
                for interface in INTERFACES:
                    times.setdefault((interface, name, version), Tally(OVMS_US_BUCKETS))
            for labels, tally in sorted(times.items()):
                family.add_metric(list(labels), _buckets(tally), tally.total)
            yield family
        yield from self._model_families(list(self._models()))

    def _model_families(self, models: list[OpenVINOModel]) -> Iterator[Metric]:
        labels = ["name", "version"]
        for name, text in GAUGES:
            if name in self.enabled:
                gauge = GaugeMetricFamily(name, text, labels=labels)
                for model in models:
                    gauge.add_metric([model.name, str(model.version)], _gauge(name, model))
                yield gauge
        for name, text in HISTOGRAMS:
            if name in self.enabled:
                family = HistogramMetricFamily(name, text, labels=labels)
                for model in models:
                    stats = model.stats or InferenceStats()
                    tally = stats.inference_us if name == HISTOGRAMS[0][0] else stats.waiting_us
                    family.add_metric(
                        [model.name, str(model.version)], _buckets(tally), tally.total
                    )
                yield family


def _gauge(name: str, model: OpenVINOModel) -> float:
    if name == "ovms_streams":
        return model.streams
    if name == "ovms_infer_req_queue_size":
        return model.nireq
    stats = model.stats or InferenceStats()
    return stats.current_requests if name == "ovms_current_requests" else stats.active
