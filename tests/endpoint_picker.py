"""The inference gateway's endpoint picker, as far as it reads a model server: its configuration
for graphrt (deploy/kubernetes/gateway/endpoint-picker-config.yaml) and the way it reads the
model-server protocol out of a /metrics text.

Written after llm-d-router v0.10's core-metrics-extractor (pkg/epp/framework/plugins/datalayer/
extractor/metrics): a spec is PromQL's instant selector without operators, `name{label=value}`
(values quoted or not); a standard spec takes the first matching series (the newest by its
timestamp, and the exposition has none); the LoRA spec takes the matching series with the
largest value (vLLM sets it to the update time, and old label sets linger); LoRA adapters are
label values split on commas; the cache layout is two integer labels, empty ones skipped.
"""

from __future__ import annotations

import importlib
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from prometheus_client.parser import text_string_to_metric_families

# Imported by name: ships no type stubs.
yaml: Any = importlib.import_module("yaml")

ROOT = Path(__file__).resolve().parents[1]
GATEWAY = ROOT / "deploy" / "kubernetes" / "gateway"
CONFIG_FILE = "graphrt.yaml"  # the ConfigMap's key the picker's --config-file names
ENGINE = "graphrt"

_SPEC = re.compile(r"^\s*(\S+?)\s*(?:\{([^}]*)\})?\s*$")
_PAIR = re.compile(r'^\s*(\w+)\s*=\s*"?([^"]*?)"?\s*$')
_METRIC_NAME = re.compile(r"^[a-zA-Z_:][a-zA-Z0-9_:]*$")


@dataclass(frozen=True)
class Spec:
    name: str
    labels: dict[str, str]


def parse_spec(text: str) -> Spec:
    match = _SPEC.match(text)
    if match is None or not _METRIC_NAME.match(match[1]):
        raise ValueError(f"not a metric specification: {text!r}")
    labels: dict[str, str] = {}
    if match[2] and match[2].strip():
        for pair in match[2].split(","):
            found = _PAIR.match(pair)
            if found is None:
                raise ValueError(f"invalid label pair {pair!r} in {text!r}")
            labels[found[1]] = found[2]
    return Spec(match[1], labels)


def picker_config() -> dict[str, Any]:
    """The EndpointPickerConfig the shipped ConfigMap holds."""
    (config_map,) = [
        doc
        for doc in yaml.safe_load_all((GATEWAY / "endpoint-picker-config.yaml").read_text())
        if doc and doc["kind"] == "ConfigMap"
    ]
    config: dict[str, Any] = yaml.safe_load(config_map["data"][CONFIG_FILE])
    return config


def extractor_parameters(config: dict[str, Any] | None = None) -> dict[str, Any]:
    (extractor,) = [
        plugin
        for plugin in (config or picker_config())["plugins"]
        if plugin["type"] == "core-metrics-extractor"
    ]
    parameters: dict[str, Any] = extractor["parameters"]
    return parameters


def engine_specs(config: dict[str, Any] | None = None) -> dict[str, str]:
    """The `graphrt` engine configuration's spec strings, by field."""
    (engine,) = [e for e in extractor_parameters(config)["engineConfigs"] if e["name"] == ENGINE]
    return {key: value for key, value in engine.items() if key.endswith("Spec")}


@dataclass(frozen=True)
class Reading:
    """What the picker stores for one replica after one scrape."""

    waiting: int
    running: int
    kv_usage: float
    block_size: int | None
    num_blocks: int | None
    max_lora: int | None
    running_adapters: frozenset[str]
    waiting_adapters: frozenset[str]


def _families(text: str) -> dict[str, list[tuple[dict[str, str], float]]]:
    return {
        family.name: [(sample.labels, sample.value) for sample in family.samples]
        for family in text_string_to_metric_families(text)
    }


def _matching(
    families: dict[str, list[tuple[dict[str, str], float]]], spec: Spec
) -> list[tuple[dict[str, str], float]]:
    series = families.get(spec.name)
    if not series:
        raise LookupError(f"metric family {spec.name!r} not found")
    found = [(labels, value) for labels, value in series if spec.labels.items() <= labels.items()]
    if not found:
        raise LookupError(f"no series of {spec.name!r} with labels {spec.labels}")
    return found


def _adapters(value: str) -> frozenset[str]:
    return frozenset(name.strip() for name in value.split(",") if name.strip())


def read(text: str, specs: dict[str, str] | None = None) -> Reading:
    """One scrape read the picker's way; LookupError where it would record an extraction error."""
    specs = specs or engine_specs()
    families = _families(text)
    waiting = _matching(families, parse_spec(specs["queuedRequestsSpec"]))[0][1]
    running = _matching(families, parse_spec(specs["runningRequestsSpec"]))[0][1]
    kv_usage = _matching(families, parse_spec(specs["kvUsageSpec"]))[0][1]
    cache_labels = _matching(families, parse_spec(specs["cacheInfoSpec"]))[0][0]
    block_size = cache_labels.get("block_size") or None
    num_blocks = cache_labels.get("num_gpu_blocks") or None
    lora_spec = parse_spec(specs["loraSpec"])
    max_lora, running_adapters, waiting_adapters = None, frozenset[str](), frozenset[str]()
    if families.get(lora_spec.name):  # absent without adapters, as vLLM's without LoRA
        lora, _ = max(_matching(families, lora_spec), key=lambda series: series[1])
        max_lora = int(lora["max_lora"]) if lora.get("max_lora") else None
        running_adapters = _adapters(lora.get("running_lora_adapters", ""))
        waiting_adapters = _adapters(lora.get("waiting_lora_adapters", ""))
    return Reading(
        int(waiting),
        int(running),
        kv_usage,
        int(block_size) if block_size else None,
        int(num_blocks) if num_blocks else None,
        max_lora,
        running_adapters,
        waiting_adapters,
    )
