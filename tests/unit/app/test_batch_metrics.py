"""The batch collector turns a batched model version's BatchStats into Prometheus families."""

from __future__ import annotations

from pathlib import Path

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families

from graphrt.observability.batch_metrics import BatchCollector, batched_models
from servables.ov_model.batching_config import DynamicBatchingConfig
from servables.ov_model.model import OpenVINOModel
from servables.ov_model.versions import ModelConfig, Version, VersionedModel, VersionState


def versioned(name: str, batching: DynamicBatchingConfig | None) -> VersionedModel:
    model = VersionedModel(ModelConfig(name, Path(name), dynamic_batching=batching))
    instance = OpenVINOModel(name, 3, Path(name), dynamic_batching=batching)
    model.versions[3] = Version(3, VersionState.AVAILABLE, instance)
    model.versions[1] = Version(1, VersionState.END)
    return model


def test_batched_versions_are_reported_with_lone_calls_folded_in() -> None:
    batched = versioned("mlp", DynamicBatchingConfig())
    plain = versioned("plain", None)
    models = batched_models([batched, plain])
    assert [m.name for m in models] == ["mlp"]
    stats = models[0].batch_stats
    stats.batches, stats.requests, stats.rows, stats.failed_batches = 2, 7, 9, 1
    for rows, calls, waited in ((4, 3, 0.0002), (5, 4, 0.001)):
        stats.batch_rows.observe(rows)
        stats.batch_requests.observe(calls)
        stats.queue_seconds.observe(waited)
    stats.lone_rows.update({1: 5, 2: 1})  # six calls that ran alone
    registry = CollectorRegistry()
    registry.register(BatchCollector(lambda: batched_models([batched, plain])))
    samples = {
        (sample.name, tuple(sorted(sample.labels.items()))): sample.value
        for family in text_string_to_metric_families(generate_latest(registry).decode())
        for sample in family.samples
    }
    labels = (("name", "mlp"), ("version", "3"))
    assert samples[("graphrt_dynamic_batches_total", labels)] == 8
    assert samples[("graphrt_dynamic_batch_calls_total", labels)] == 13
    assert samples[("graphrt_dynamic_batch_rows_total", labels)] == 9 + 7
    assert samples[("graphrt_dynamic_batch_failures_total", labels)] == 1
    assert samples[("graphrt_dynamic_batch_size_count", labels)] == 8
    one = tuple(sorted((*labels, ("le", "1.0"))))
    assert samples[("graphrt_dynamic_batch_size_bucket", one)] == 5
    assert samples[("graphrt_dynamic_batch_requests_bucket", one)] == 6
    assert samples[("graphrt_dynamic_batch_requests_sum", labels)] == 13
    assert samples[("graphrt_dynamic_batch_queue_seconds_count", labels)] == 8
    assert not any(dict(key[1]).get("name") == "plain" for key in samples)
    assert stats.batch_rows.count == 2  # reading did not change the stats
