"""The engine's SchedulerConfig, built from the settings the LLM factory writes
(calculators/llm/resources.py), with openvino-genai's own classes."""

from __future__ import annotations

from servables.llm.engine.pipeline import _scheduler_config

EVICTION = {
    "aggregation_mode": "SUM",
    "start_size": 32,
    "recent_size": 128,
    "max_cache_size": 672,
    "apply_rotation": False,
    "snapkv_window_size": 8,
}


def test_cache_eviction_with_kv_crush_reaches_genai() -> None:
    crush = {"budget": 4, "anchor_point_mode": "MEAN", "rng_seed": 7}
    config = _scheduler_config({"cache_eviction_config": {**EVICTION, "kvcrush_config": crush}})
    assert config.use_cache_eviction
    eviction = config.cache_eviction_config
    assert (eviction.get_start_size(), eviction.get_recent_size()) == (32, 128)
    assert eviction.aggregation_mode.name == "SUM"
    kv_crush = eviction.kvcrush_config
    assert (kv_crush.budget, kv_crush.anchor_point_mode.name, kv_crush.rng_seed) == (4, "MEAN", 7)


def test_cache_eviction_without_kv_crush_keeps_genais_default() -> None:
    config = _scheduler_config({"cache_eviction_config": EVICTION})
    assert config.cache_eviction_config.kvcrush_config.budget == 0  # KVCrush off
