"""The engine collectors: per-engine gauges, and the per-server series of the inference
gateway's model-server protocol, computed from the engines' own reports (fakes here; the
meaning under real load is tests/e2e/test_gateway_protocol.py's)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families

from graphrt.observability.engine_metrics import (
    EngineCollector,
    ServerCollector,
    engines_of,
)
from servables.llm.engine.messages import EngineMetrics, KVBlocks, Ready

GIB = 1 << 30


@dataclass
class FakeEngine:
    metrics: EngineMetrics = field(default_factory=EngineMetrics)
    ready: Ready | None = None
    reported_at: float = 0.0
    active_requests: int = 0
    queued_requests: int = 0


def loaded(block_size: int = 32, block_bytes: int = 1024) -> Ready:
    return Ready(1.0, 2, "/tok", KVBlocks(block_size, block_bytes, 4 * block_bytes))


@dataclass
class FakeServable:
    name: str
    engine: FakeEngine
    adapter_engines: dict[str, FakeEngine] = field(default_factory=dict)

    def engines(self) -> list[tuple[str, Any]]:
        return [(self.name, self.engine), *self.adapter_engines.items()]


def scrape(servables: list[FakeServable]) -> dict[str, list[tuple[dict[str, str], float]]]:
    """Family name -> its samples (labels, value), as a Prometheus parser reads them."""
    registry = CollectorRegistry()
    for collector in (EngineCollector, ServerCollector):
        registry.register(collector(lambda: engines_of(servables)))
    return {
        family.name: [(sample.labels, sample.value) for sample in family.samples]
        for family in text_string_to_metric_families(generate_latest(registry).decode())
    }


def only(families: dict[str, list[tuple[dict[str, str], float]]], name: str) -> float:
    ((labels, value),) = families[name]
    assert labels == {}, f"{name} must be one unlabelled series per server, got {labels}"
    return value


def test_every_engine_is_a_series_and_the_server_series_add_them_up() -> None:
    base = FakeEngine(
        EngineMetrics(requests=5, running=3, waiting=2, cache_usage=50.0, kv_cache_bytes=GIB),
        loaded(),
        active_requests=6,
    )
    poet = FakeEngine(
        EngineMetrics(requests=1, running=1, waiting=0, cache_usage=10.0, kv_cache_bytes=3 * GIB),
        loaded(),
    )
    families = scrape([FakeServable("llm", base, {"poet": poet})])

    running = {labels["model"]: value for labels, value in families["graphrt_llm_requests_running"]}
    assert running == {"llm": 3, "poet": 1}
    waiting = {labels["model"]: value for labels, value in families["graphrt_llm_requests_waiting"]}
    assert waiting == {"llm": 2, "poet": 0}
    assert {labels["name"] for labels, _ in families["graphrt_llm_requests_active"]} == {"llm"}
    usage = {labels["model"]: v for labels, v in families["graphrt_llm_kv_cache_usage_ratio"]}
    assert usage == {"llm": 0.5, "poet": 0.1}

    assert only(families, "graphrt_server_requests_running") == 4
    assert only(families, "graphrt_server_requests_waiting") == 2
    # Used bytes over all bytes: (0.5 * 1 + 0.1 * 3) / 4 GiB.
    assert only(families, "graphrt_server_kv_cache_usage_ratio") == 0.2


def test_cache_config_names_the_block_size_and_counts_every_engine_blocks() -> None:
    base = FakeEngine(EngineMetrics(kv_cache_bytes=10 * 1024), loaded())
    poet = FakeEngine(EngineMetrics(kv_cache_bytes=6 * 1024), loaded())
    ((labels, value),) = scrape([FakeServable("llm", base, {"poet": poet})])[
        "graphrt_server_cache_config_info"
    ]
    assert labels == {"block_size": "32", "num_gpu_blocks": "16"} and value == 1


def test_cache_config_is_empty_where_a_layout_is_unknown() -> None:
    """An engine whose blocks could not be read (a vision model, speculative decoding) makes the
    total unknown: the picker then keeps its configured defaults."""
    known = FakeEngine(EngineMetrics(kv_cache_bytes=1024), loaded())
    unknown = FakeEngine(EngineMetrics(kv_cache_bytes=1024), Ready(1.0, 2, "/tok"))
    families = scrape([FakeServable("a", known), FakeServable("b", unknown)])
    ((labels, _),) = families["graphrt_server_cache_config_info"]
    assert labels == {"block_size": "", "num_gpu_blocks": ""}
    mixed = scrape([FakeServable("a", known), FakeServable("g", FakeEngine(ready=loaded(16)))])
    ((labels, _),) = mixed["graphrt_server_cache_config_info"]
    assert labels == {"block_size": "", "num_gpu_blocks": "1"}  # sizes differ: no single size


def test_lora_info_lists_the_adapters_running_and_waiting_with_vllms_labels() -> None:
    poet = FakeEngine(EngineMetrics(running=2, waiting=1), loaded(), reported_at=1_700_000_002.5)
    pirate = FakeEngine(EngineMetrics(running=1), loaded(), reported_at=1_700_000_001.0)
    idle = FakeEngine(EngineMetrics(), loaded(), reported_at=1_700_000_000.0)
    base = FakeEngine(EngineMetrics(running=4, waiting=3), loaded())
    servable = FakeServable("llm", base, {"poet": poet, "pirate": pirate, "bard": idle})
    ((labels, value),) = scrape([servable])["graphrt_server_lora_requests_info"]
    assert labels == {
        "max_lora": "3",
        "running_lora_adapters": "poet,pirate",
        "waiting_lora_adapters": "poet",
    }
    assert value == 1_700_000_002.5  # the latest report: the picker keeps the newest series


def test_no_lora_series_without_adapters_and_zeros_before_anything_loads() -> None:
    """As vLLM without --enable-lora; and a server whose models are still loading answers
    /metrics with the protocol's series at 0 (no cache layout yet)."""
    families = scrape([FakeServable("llm", FakeEngine(ready=loaded()))])
    assert "graphrt_server_lora_requests_info" not in families
    empty = scrape([])
    assert only(empty, "graphrt_server_requests_waiting") == 0
    assert only(empty, "graphrt_server_kv_cache_usage_ratio") == 0
    assert "graphrt_server_cache_config_info" not in empty
