"""Prometheus metrics of the LLM engines, read from each engine's latest step when scraped.

Two views of the same numbers:

- per engine, labelled with the servable's `name` and the `model` a request names to reach that
  engine (the base model, or one of its LoRA adapters, each of which has an engine of its own):
  requests running and waiting as the engine counts them, requests in flight and queued as the
  frontend counts them, and the KV cache's use and size;
- per server, the model-server protocol of Kubernetes' inference gateway (GAIE's proposal 003,
  llm-d's router): its endpoint picker scrapes every replica each 50 ms and reads one series per
  signal, the first that matches its selector, so these are totals over every LLM engine of the
  server: `graphrt_server_requests_waiting` and `_running`, `graphrt_server_kv_cache_usage_ratio`
  (0-1), `graphrt_server_cache_config_info{block_size,num_gpu_blocks}` and
  `graphrt_server_lora_requests_info{max_lora,running_lora_adapters,waiting_lora_adapters}`,
  with vLLM's label names and meaning. Their types and meaning are vLLM's `vllm:` series'; the
  names are graphrt's, and the picker reads them through an engine configuration
  (deploy/kubernetes/gateway/).

Running and waiting are the engine's own counts (servables.llm.engine.batching); the frontend's
`active` and `queued` count requests from their hand-over to their end, so they include requests
still on their way to the engine.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import Any

from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector


@dataclass(frozen=True)
class Engine:
    """One engine process and the names it serves under."""

    servable: str  # the servable's (graph's) name
    model: str  # what a request's `model` says to reach it: the base model or an adapter
    adapter: bool
    client: Any  # servables.llm.engine.client.EngineClient


def engines_of(servables: Iterable[Any]) -> list[Engine]:
    """Every engine of the LLM servables, base models first."""
    return [
        Engine(servable.name, model, index > 0, client)
        for servable in servables
        for index, (model, client) in enumerate(servable.engines())
    ]


class EngineCollector(Collector):
    """The per-engine view (see the module docstring)."""

    def __init__(self, engines: Callable[[], Iterable[Engine]]) -> None:
        self._engines = engines

    def collect(self) -> Iterator[GaugeMetricFamily]:
        labels = ["name", "model"]
        running = GaugeMetricFamily(
            "graphrt_llm_requests_running",
            "Requests in the engine's batch: scheduled by its latest step, or decoding.",
            labels=labels,
        )
        waiting = GaugeMetricFamily(
            "graphrt_llm_requests_waiting",
            "Requests in the engine that are not in its batch: their prompts wait for a slot, "
            "for step tokens or for KV blocks.",
            labels=labels,
        )
        active = GaugeMetricFamily(
            "graphrt_llm_requests_active",
            "Requests handed to the engine and not yet ended (running, waiting, or on their way).",
            labels=labels,
        )
        queued = GaugeMetricFamily(
            "graphrt_llm_requests_queued",
            "Requests in flight beyond max_num_seqs: what --max_queued_requests bounds.",
            labels=labels,
        )
        usage = GaugeMetricFamily(
            "graphrt_llm_kv_cache_usage_ratio",
            "Share of the engine's KV cache in use (0-1).",
            labels=labels,
        )
        size = GaugeMetricFamily(
            "graphrt_llm_kv_cache_bytes", "Size of the engine's KV cache.", labels=labels
        )
        for engine in self._engines():
            client, key = engine.client, [engine.servable, engine.model]
            metrics = client.metrics
            running.add_metric(key, metrics.running)
            waiting.add_metric(key, metrics.waiting)
            active.add_metric(key, client.active_requests)
            queued.add_metric(key, client.queued_requests)
            usage.add_metric(key, metrics.cache_usage / 100.0)
            size.add_metric(key, metrics.kv_cache_bytes)
        yield from (running, waiting, active, queued, usage, size)


class ServerCollector(Collector):
    """The model-server protocol's view (see the module docstring)."""

    def __init__(self, engines: Callable[[], Iterable[Engine]]) -> None:
        self._engines = engines

    def collect(self) -> Iterator[GaugeMetricFamily]:
        engines = list(self._engines())
        reports = [engine.client.metrics for engine in engines]
        yield GaugeMetricFamily(
            "graphrt_server_requests_waiting",
            "Requests waiting in any LLM engine of this server (the protocol's queue size).",
            value=sum(report.waiting for report in reports),
        )
        yield GaugeMetricFamily(
            "graphrt_server_requests_running",
            "Requests in the batch of any LLM engine of this server.",
            value=sum(report.running for report in reports),
        )
        cache_bytes = sum(report.kv_cache_bytes for report in reports)
        used = sum(report.cache_usage / 100.0 * report.kv_cache_bytes for report in reports)
        yield GaugeMetricFamily(
            "graphrt_server_kv_cache_usage_ratio",
            "Share of the KV cache in use over every LLM engine of this server (0-1).",
            value=used / cache_bytes if cache_bytes else 0.0,
        )
        if engines:
            yield cache_config(engines)
        adapters = [engine for engine in engines if engine.adapter]
        if adapters:
            yield lora_requests(adapters)


def cache_config(engines: list[Engine]) -> GaugeMetricFamily:
    """vLLM's cache_config_info: the block size if every engine has the same, and the blocks of
    all engines together (both empty when an engine's layout is unknown)."""
    layouts = [
        (layout, engine.client.metrics.kv_cache_bytes)
        for engine in engines
        if (layout := getattr(engine.client.ready, "kv_blocks", None)) is not None
    ]
    block_size = blocks = ""
    if len(layouts) == len(engines):
        sizes = {layout.block_size for layout, _ in layouts}
        block_size = str(sizes.pop()) if len(sizes) == 1 else ""
        blocks = str(sum(layout.count(cache_bytes) for layout, cache_bytes in layouts))
    family = GaugeMetricFamily(
        "graphrt_server_cache_config_info",
        "KV cache layout of this server's LLM engines: tokens per block, and blocks in all.",
        labels=["block_size", "num_gpu_blocks"],
    )
    family.add_metric([block_size, blocks], 1.0)
    return family


def lora_requests(adapters: list[Engine]) -> GaugeMetricFamily:
    """vLLM's lora_requests_info: every adapter is loaded, in an engine of its own, so max_lora
    is their number; an adapter runs while its engine has requests in its batch and waits
    while its engine has requests waiting. The value is the time of the latest report."""
    running = [engine.model for engine in adapters if engine.client.metrics.running]
    waiting = [engine.model for engine in adapters if engine.client.metrics.waiting]
    family = GaugeMetricFamily(
        "graphrt_server_lora_requests_info",
        "LoRA adapters of this server: how many can serve at once, those running, those "
        "waiting (comma-separated); the value is when this was last updated (Unix time).",
        labels=["max_lora", "running_lora_adapters", "waiting_lora_adapters"],
    )
    updated = max(engine.client.reported_at for engine in adapters) or time.time()
    family.add_metric([str(len(adapters)), ",".join(running), ",".join(waiting)], updated)
    return family
