"""The properties an engine process gives openvino-genai: the graph's plugin_config, with CPU
pinning off unless it asks for it (servables/llm/engine/pipeline.py says why)."""

from __future__ import annotations

from servables.llm.engine.pipeline import CPU_PINNING, with_engine_defaults


def test_a_cpu_engine_is_not_pinned_by_default() -> None:
    assert with_engine_defaults("CPU", {}) == {CPU_PINNING: False}
    assert with_engine_defaults("CPU", {"CACHE_DIR": "/c"}) == {
        "CACHE_DIR": "/c",
        CPU_PINNING: False,
    }


def test_the_plugin_config_decides_when_it_names_pinning() -> None:
    assert with_engine_defaults("CPU", {CPU_PINNING: True}) == {CPU_PINNING: True}


def test_other_devices_get_the_plugin_config_as_it_is() -> None:
    for device in ("GPU", "NPU", "HETERO:GPU,CPU"):
        assert with_engine_defaults(device, {"NUM_STREAMS": 1}) == {"NUM_STREAMS": 1}


def test_the_given_properties_are_not_changed() -> None:
    given = {"NUM_STREAMS": 1}
    with_engine_defaults("CPU", given)
    assert given == {"NUM_STREAMS": 1}
