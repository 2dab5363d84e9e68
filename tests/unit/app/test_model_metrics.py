"""OVMS's per-version metrics of classic models and pipelines, written beside the graphs' ones.

Read back with prometheus_client's own parser: one family per name even where graphs and models
both have series, OVMS's label sets (no version on ModelReady), zero series for every loaded
version and pipeline, OVMS's default family list and the optional families.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families

from graphrt.observability.metrics import DEFAULT_METRICS, OVMS_METRICS, Metrics
from graphrt.observability.model_metrics import loaded_versions
from servables.ov_model.model import OpenVINOModel
from servables.ov_model.versions import ModelConfig, Version, VersionedModel, VersionState

Samples = dict[tuple[str, tuple[tuple[str, str], ...]], float]


def repository_model(name: str) -> VersionedModel:
    model = VersionedModel(ModelConfig(name, Path(name)))
    instance = OpenVINOModel(name, 2, Path(name), count_inferences=True)
    instance.nireq, instance.streams = 4, 2
    model.versions[2] = Version(2, VersionState.AVAILABLE, instance)
    model.versions[1] = Version(1, VersionState.END)
    return model


def exposition(metrics: Metrics) -> tuple[str, Samples]:
    text = metrics.render().decode()
    samples = {
        (
            family.name if family.type == "counter" else sample.name,
            tuple(sorted(sample.labels.items())),
        ): sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
    }
    return text, samples


def watched(metrics: Metrics, models: list[VersionedModel], pipelines: list[str]) -> None:
    metrics.models.watch(lambda: loaded_versions(models), lambda: pipelines)


def test_loaded_versions_and_pipelines_show_every_series_at_zero() -> None:
    metrics = Metrics(OVMS_METRICS)
    watched(metrics, [repository_model("resnet")], ["detect"])
    text, samples = exposition(metrics)
    for name in OVMS_METRICS:
        assert text.count(f"# TYPE {name} ") <= 1, name
    for servable, version in (("resnet", "2"), ("detect", "1")):
        for interface in ("gRPC", "REST"):
            base = {"api": "KServe", "interface": interface, "name": servable}
            for family in ("ovms_requests_success", "ovms_requests_fail"):
                for method in ("ModelInfer", "ModelMetadata"):
                    key = tuple(sorted({**base, "method": method, "version": version}.items()))
                    assert samples[(family, key)] == 0
                ready = tuple(sorted({**base, "method": "ModelReady"}.items()))
                assert samples[(family, ready)] == 0
            times = (("interface", interface), ("name", servable), ("version", version))
            assert samples[("ovms_request_time_us_count", times)] == 0
    resnet = (("name", "resnet"), ("version", "2"))
    assert samples[("ovms_streams", resnet)] == 2
    assert samples[("ovms_infer_req_queue_size", resnet)] == 4
    assert samples[("ovms_infer_req_active", resnet)] == 0
    assert samples[("ovms_current_requests", resnet)] == 0
    assert samples[("ovms_inference_time_us_count", resnet)] == 0
    assert ("ovms_streams", (("name", "detect"), ("version", "1"))) not in samples  # no model


def test_requests_are_counted_by_outcome_and_only_successful_inferences_timed() -> None:
    metrics = Metrics(())
    model = repository_model("resnet")
    watched(metrics, [model], [])
    for succeeded in (True, True, False):
        with metrics.models.request("REST", "ModelInfer", "resnet", "2") as call:
            call.succeeded = succeeded
    metrics.models.counted(("gRPC", "ModelReady", "resnet", ""), succeeded=True)
    stats = loaded_versions([model])[0].stats
    assert stats is not None
    stats.inferred(0.000_05)
    stats.waited(0.000_02)
    stats.current_requests = 1
    _, samples = exposition(metrics)
    infer = {"api": "KServe", "interface": "REST", "method": "ModelInfer", "name": "resnet"}
    labelled = tuple(sorted({**infer, "version": "2"}.items()))
    assert samples[("ovms_requests_success", labelled)] == 2
    assert samples[("ovms_requests_fail", labelled)] == 1
    ready = (("api", "KServe"), ("interface", "gRPC"), ("method", "ModelReady"), ("name", "resnet"))
    assert samples[("ovms_requests_success", ready)] == 1
    times = (("interface", "REST"), ("name", "resnet"), ("version", "2"))
    assert samples[("ovms_request_time_us_count", times)] == 2
    resnet = (("name", "resnet"), ("version", "2"))
    assert samples[("ovms_inference_time_us_count", resnet)] == 1
    assert samples[("ovms_inference_time_us_sum", resnet)] == pytest.approx(50)
    assert samples[("ovms_inference_time_us_bucket", tuple(sorted((*resnet, ("le", "58.0")))))] == 1
    assert samples[("ovms_inference_time_us_bucket", tuple(sorted((*resnet, ("le", "32.0")))))] == 0
    assert (
        samples[
            ("ovms_wait_for_infer_req_time_us_bucket", tuple(sorted((*resnet, ("le", "32.0")))))
        ]
        == 1
    )
    assert samples[("ovms_current_requests", resnet)] == 1


def test_graph_and_model_series_share_their_families() -> None:
    metrics = Metrics(())
    watched(metrics, [repository_model("resnet")], [])
    with metrics.request("KServe", "gRPC", "ModelInfer", "llm", available=True) as graph_call:
        graph_call.succeeded = True
    text, samples = exposition(metrics)
    assert text.count("# TYPE ovms_requests_success counter") == 1
    assert text.count("# TYPE ovms_current_requests gauge") == 1
    assert text.count("# TYPE ovms_request_time_us histogram") == 1
    graph = (("api", "KServe"), ("interface", "gRPC"), ("method", "ModelInfer"), ("name", "llm"))
    assert samples[("ovms_requests_success", graph)] == 1
    assert samples[("ovms_current_requests", (("name", "llm"),))] == 0
    assert samples[("ovms_current_requests", (("name", "resnet"), ("version", "2")))] == 0


def test_ovms_default_families_leave_the_optional_ones_out() -> None:
    assert set(OVMS_METRICS) - DEFAULT_METRICS == {
        "ovms_infer_req_queue_size",
        "ovms_infer_req_active",
    }
    metrics = Metrics(())
    watched(metrics, [repository_model("resnet")], [])
    text, _ = exposition(metrics)
    assert "ovms_streams{" in text and "ovms_infer_req_active" not in text
    listed = Metrics(["ovms_infer_req_active"])
    watched(listed, [repository_model("resnet")], [])
    text, _ = exposition(listed)
    assert "ovms_infer_req_active{" in text and "ovms_streams" not in text
    with pytest.raises(ValueError, match="ovms_nothing"):
        Metrics(["ovms_nothing"])
