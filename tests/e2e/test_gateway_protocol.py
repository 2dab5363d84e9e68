"""The model-server protocol of Kubernetes' inference gateway, read from a live server the way
its endpoint picker reads it, and checked for meaning under load.

The picker's configuration is the one deploy/kubernetes/gateway ships (tests/endpoint_picker.py
reads its spec strings and applies the picker's rules); a thread scrapes /metrics every 50 ms,
as the picker does. The server runs the SmolLM2 GGUF with one LoRA adapter (an engine of its
own), a 1 GB KV cache per engine, and a batch of CAPACITY: with dynamic_split_fuse a step gives
each decoding sequence one of its max_num_batched_tokens, so CAPACITY sequences fill it.

- Below capacity (requests added one by one, each once the one before streams) nothing waits
  and running climbs to CAPACITY, with the KV cache's use.
- Past capacity (a burst to the adapter) requests wait, running never exceeds CAPACITY, and
  the adapter is listed as running and as waiting while it serves, and no longer afterwards.
- KV use times the number of blocks is a whole number of blocks, not 0 while requests run:
  the block count the server reports is the one its usage ratio is a share of.

The picker parses with Prometheus' Go parser, where one error fails the whole scrape: the text
under load passes `promtool check metrics` (Debian's prometheus package; a `system` test, .ci/run
installs it), whose only complaints are about OVMS's names, kept for OVMS's dashboards.
"""

from __future__ import annotations

import shutil
import subprocess
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import httpx
import pytest

from graphrt.observability.metrics import OVMS_METRICS
from tests import endpoint_picker
from tests.e2e.test_lora import write_peft_adapter

if TYPE_CHECKING:
    from conftest import Launch, Server

CAPACITY = 4
ADAPTER = "poet"
SCRAPE_SECONDS = 0.05  # the picker's default refresh interval
BODY = {
    "messages": [{"role": "user", "content": "Tell me a story about a lighthouse."}],
    "ignore_eos": True,
    "stream": True,
}
# SmolLM2-135M's attention projections (in, out) and depth, for the adapter.
SMOLLM2_SHAPES = {"self_attn.q_proj": (576, 576), "self_attn.k_proj": (576, 192)}
SMOLLM2_LAYERS = 30
RAMP_TOKENS = 96  # the first request of the ramp outlives the ramp to CAPACITY
BURST_TOKENS = 24


@pytest.fixture(scope="module")
def gateway_server(
    smollm2_gguf: Path, launch: Launch, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Server]:
    adapter = write_peft_adapter(
        tmp_path_factory.mktemp("adapters") / ADAPTER,
        0,
        list(SMOLLM2_SHAPES),
        8,
        16,
        0.05,
        SMOLLM2_SHAPES,
        SMOLLM2_LAYERS,
    )
    args = [
        "--model_path",
        str(smollm2_gguf),
        "--lora_modules",
        f"{ADAPTER}={adapter}",
        "--metrics_enable",
        "--cache_size",
        "1",
        "--max_num_batched_tokens",
        str(CAPACITY),
        "--max_num_seqs",
        str(CAPACITY),
    ]
    with launch(args) as running:
        yield running


@dataclass(frozen=True)
class Scrape:
    at: float  # when it was asked for: the reading is of the server at or after this moment
    reading: endpoint_picker.Reading


class Scraper:
    """Reads /metrics the picker's way every SCRAPE_SECONDS until stopped."""

    def __init__(self, server: Server) -> None:
        self.server = server
        self.scrapes: list[Scrape] = []
        self.errors: list[BaseException] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        with httpx.Client(base_url=self.server.base_url, timeout=30.0) as http:
            while not self._stop.is_set():
                try:
                    asked = time.monotonic()
                    text = http.get("/metrics").text
                    self.scrapes.append(Scrape(asked, endpoint_picker.read(text)))
                except Exception as error:  # a parse or lookup failure fails the test
                    self.errors.append(error)
                    return
                self._stop.wait(SCRAPE_SECONDS)

    @contextmanager
    def running(self) -> Iterator[Scraper]:
        self._thread.start()
        try:
            yield self
        finally:
            self._stop.set()
            self._thread.join(30)
        assert not self.errors, self.errors

    def since(self, moment: float) -> list[endpoint_picker.Reading]:
        return [scrape.reading for scrape in self.scrapes if scrape.at >= moment]

    def await_scrape_after(self, moment: float, timeout: float = 30.0) -> None:
        """Waits for a scrape that began after `moment`: stopping at once could end the
        scraping with its last reading taken before the moment."""
        deadline = time.monotonic() + timeout
        while not self.since(moment) and self._thread.is_alive() and time.monotonic() < deadline:
            time.sleep(SCRAPE_SECONDS)


def stream(
    server: Server, model: str, tokens: int, first_token: threading.Event | None = None
) -> None:
    body = {**BODY, "model": model, "max_tokens": tokens}
    with (
        httpx.Client(base_url=server.base_url, timeout=300.0) as http,
        http.stream("POST", "/v3/chat/completions", json=body) as response,
    ):
        assert response.status_code == 200, response.read()
        for line in response.iter_lines():
            if first_token is not None and line.startswith("data:"):
                first_token.set()


def wait_idle(server: Server, timeout: float = 60.0) -> endpoint_picker.Reading:
    deadline = time.monotonic() + timeout
    with httpx.Client(base_url=server.base_url, timeout=30.0) as http:
        while True:
            reading = endpoint_picker.read(http.get("/metrics").text)
            if not (reading.running or reading.waiting or reading.running_adapters):
                return reading
            assert time.monotonic() < deadline, f"not idle after {timeout} s: {reading}"
            time.sleep(SCRAPE_SECONDS)


def test_an_idle_server_has_every_field(gateway_server: Server) -> None:
    reading = wait_idle(gateway_server)
    assert (reading.waiting, reading.running, reading.kv_usage) == (0, 0, 0.0)
    assert reading.block_size == 32  # openvino-genai's CPU block (kv_cache_manager.hpp)
    assert reading.num_blocks and reading.num_blocks > 0
    assert reading.max_lora == 1
    assert not reading.running_adapters and not reading.waiting_adapters


def test_below_capacity_nothing_waits_and_running_and_kv_use_climb(gateway_server: Server) -> None:
    wait_idle(gateway_server)
    scraper = Scraper(gateway_server)
    threads: list[threading.Thread] = []
    with scraper.running():
        for _ in range(CAPACITY):
            first = threading.Event()
            thread = threading.Thread(
                target=stream, args=(gateway_server, gateway_server.model, RAMP_TOKENS, first)
            )
            thread.start()
            threads.append(thread)
            assert first.wait(120), "no token streamed"
            time.sleep(0.3)  # a few scrapes at each step of the ramp
        full = time.monotonic()
        time.sleep(1.0)  # a few scrapes with the batch full
        for thread in threads:
            thread.join(300)
    readings = [scrape.reading for scrape in scraper.scrapes]
    assert readings, "no scrape"
    assert all(r.waiting == 0 for r in readings), [r.waiting for r in readings]
    assert all(0 <= r.running <= CAPACITY for r in readings)
    assert any(r.running == CAPACITY for r in scraper.since(full))
    one = max(r.kv_usage for r in readings if r.running == 1)
    all_running = max(r.kv_usage for r in readings if r.running == CAPACITY)
    assert 0 < one < all_running <= 1
    assert not any(r.running_adapters for r in readings)  # the base model is no adapter
    assert_whole_blocks(readings)


def test_past_capacity_requests_wait_and_the_adapter_is_listed(gateway_server: Server) -> None:
    wait_idle(gateway_server)
    scraper = Scraper(gateway_server)
    burst = CAPACITY + 3
    with scraper.running():
        threads = [
            threading.Thread(target=stream, args=(gateway_server, ADAPTER, BURST_TOKENS))
            for _ in range(burst)
        ]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(300)
        done = time.monotonic()
        idle = wait_idle(gateway_server)
        scraper.await_scrape_after(done)
    readings = [scrape.reading for scrape in scraper.scrapes]
    assert all(r.running <= CAPACITY for r in readings), [r.running for r in readings]
    assert max(r.waiting for r in readings) >= burst - CAPACITY - 1
    assert any(r.running == CAPACITY and r.waiting > 0 for r in readings)
    assert any(ADAPTER in r.running_adapters for r in readings)
    assert any(ADAPTER in r.waiting_adapters for r in readings)
    for r in readings:  # listed exactly while its engine has requests in that state
        assert (ADAPTER in r.running_adapters) == (r.running > 0), r
        assert (ADAPTER in r.waiting_adapters) == (r.waiting > 0), r
    assert not idle.running_adapters and not idle.waiting_adapters
    assert scraper.since(done), "no scrape after the burst"
    assert_whole_blocks(readings)


def assert_whole_blocks(readings: list[endpoint_picker.Reading]) -> None:
    """The usage ratio is a share of the blocks the server reports: the blocks in use are a
    whole number, and not 0 while requests run."""
    for reading in readings:
        assert reading.num_blocks
        used = reading.kv_usage * reading.num_blocks
        assert abs(used - round(used)) < 0.02, (used, reading)
        assert round(used) >= min(reading.running, 1), reading


@pytest.mark.system
def test_the_text_under_load_passes_prometheus_own_checker(gateway_server: Server) -> None:
    """Not a skip without promtool: .ci/run installs Debian's prometheus package."""
    promtool = shutil.which("promtool")
    if promtool is None:
        pytest.fail("promtool not installed (apt-get install prometheus)", pytrace=False)
    wait_idle(gateway_server)
    models = [gateway_server.model, ADAPTER] * (CAPACITY + 1)
    threads = [
        threading.Thread(target=stream, args=(gateway_server, model, BURST_TOKENS))
        for model in models
    ]
    for thread in threads:
        thread.start()
    texts: list[str] = []
    with httpx.Client(base_url=gateway_server.base_url, timeout=30.0) as http:
        while len(texts) < 3 and any(thread.is_alive() for thread in threads):
            text = http.get("/metrics").text
            reading = endpoint_picker.read(text)
            if reading.waiting and reading.running_adapters:
                texts.append(text)
            time.sleep(SCRAPE_SECONDS)
    for thread in threads:
        thread.join(300)
    assert texts, "no scrape saw requests waiting and an adapter running"
    for text in texts:
        for series in endpoint_picker.engine_specs().values():
            assert f"\n{endpoint_picker.parse_spec(series).name}" in text
        checked = subprocess.run(
            [promtool, "check", "metrics"], input=text, capture_output=True, text=True, check=False
        )
        report = checked.stdout + checked.stderr
        # 0: clean; 3: lint problems only (1 would be a parse error: the picker's scrape fails).
        assert checked.returncode in (0, 3), report
        flagged = {line.split()[0] for line in report.splitlines() if line.strip()}
        assert flagged <= set(OVMS_METRICS), report
