"""End-to-end fixtures: real `graphrt serve` processes and golden outputs from openvino-genai.

Every server here is a separate `python -m graphrt.cli.main serve ...` process on a free
port, started once per session or module (a model load takes seconds), waited for through
/v2/health/ready, and stopped with SIGTERM at teardown, which must exit with code 0.

Expected texts are never pasted into tests: `Golden` runs the same model in this process with
openvino-genai's ContinuousBatchingPipeline, greedy, with the prompt the server should build
(the tokenizer's chat template for chat, the raw prompt for completions), and tests compare the
server's answers with that. Each answer is computed once per machine and kept in the test cache
(`KeptResults`, keyed by the model's bytes, the engine's version, Golden's source and the
request); the pipeline is loaded only for an answer not kept yet.
"""

from __future__ import annotations

import contextlib
import datetime
import functools
import hashlib
import importlib
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO

import httpx
import openai
import pytest
from prometheus_client.parser import text_string_to_metric_families

from tests.conftest import KeptResults, genai_loadable

MODEL_NAME = "smollm2"
# The main server refuses max_tokens above this (tests of --max_tokens_limit).
MAX_TOKENS_LIMIT = 2000
# The main server refuses bodies above this (tests of --max_request_size).
MAX_REQUEST_SIZE = 1 << 20
READY_TIMEOUT = 120.0
STOP_TIMEOUT = 60.0
# The server's DEBUG lines of an LLM request: submitted (servables/llm/servable.py), its first
# tokens and its end as the engine sent them (servables/llm/engine/client.py); with their times.
ENGINE_EVENT = re.compile(
    r"^(\S+ \S+) DEBUG .*?(?:: request (\d+), |engine request (\d+): (first tokens|sequence))",
    re.MULTILINE,
)


@dataclass(frozen=True)
class EngineEvent:
    kind: str  # "submitted", "first" (tokens), "finished"
    request: int
    seconds: float  # the server's clock (its log line's time)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    here = Path(__file__).parent
    for item in items:
        if here in item.path.parents:
            item.add_marker(pytest.mark.e2e)


# ------------------------------------------------------------------------------------ servers


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


@pytest.fixture(scope="session")
def unused_port() -> Callable[[], int]:
    """A function returning a free TCP port (for servers' extra ports, like gRPC)."""
    return free_port


class Server:
    """A running `graphrt serve` process; see the module docstring."""

    def __init__(self, args: Sequence[str], log_path: Path, model: str = MODEL_NAME) -> None:
        self.port = free_port()
        self.model = model
        self.log_path = log_path
        self.args = [
            sys.executable,
            "-m",
            "graphrt.cli.main",
            "serve",
            "--rest_port",
            str(self.port),
            "--model_name",
            model,
            *args,
        ]
        self._log: TextIO = log_path.open("w", encoding="utf-8")
        # Output goes to a file, never a pipe: a full pipe would block the server.
        self.process = subprocess.Popen(
            self.args, stdout=self._log, stderr=subprocess.STDOUT, cwd=log_path.parent
        )

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def log(self) -> str:
        if not self._log.closed:
            self._log.flush()
        return self.log_path.read_text(encoding="utf-8", errors="replace")

    def engine_events(self, since: int = 0) -> list[EngineEvent]:
        """Each LLM request submitted to its engine, its first tokens and its end, in the order
        the server saw them, from the log past offset `since` (the server must log at DEBUG):
        what the server did, which a client's read times only approximate on a busy machine."""
        events = []
        for stamp, submitted, request, what in ENGINE_EVENT.findall(self.log()[since:]):
            moment = datetime.datetime.strptime(stamp, "%Y-%m-%d %H:%M:%S,%f").timestamp()
            if submitted:
                events.append(EngineEvent("submitted", int(submitted), moment))
            else:
                kind = "first" if what == "first tokens" else "finished"
                events.append(EngineEvent(kind, int(request), moment))
        return events

    def wait_ready(self, timeout: float = READY_TIMEOUT) -> None:
        deadline = time.monotonic() + timeout
        with httpx.Client(base_url=self.base_url, timeout=5.0) as http:
            while time.monotonic() < deadline:
                code = self.process.poll()
                if code is not None:
                    pytest.fail(f"graphrt serve exited with {code} before ready:\n{self.log()}")
                with contextlib.suppress(httpx.TransportError):
                    if http.get("/v2/health/ready").status_code == 200:
                        return
                time.sleep(0.1)
        self.process.kill()
        self.process.wait()
        self._log.close()
        pytest.fail(f"graphrt serve was not ready within {timeout:.0f} s:\n{self.log()}")

    def stop(self) -> int:
        """SIGTERM, wait, return the exit code (kills and fails if it hangs)."""
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(STOP_TIMEOUT)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
                self._log.close()
                pytest.fail(f"graphrt serve ignored SIGTERM ({STOP_TIMEOUT:.0f} s):\n{self.log()}")
        self._log.close()
        return self.process.returncode

    # clients -------------------------------------------------------------------------------

    def client(self, prefix: str = "/v3") -> openai.OpenAI:
        return openai.OpenAI(
            base_url=self.base_url + prefix, api_key="unused", max_retries=0, timeout=120.0
        )

    def async_client(self, prefix: str = "/v3") -> openai.AsyncOpenAI:
        return openai.AsyncOpenAI(
            base_url=self.base_url + prefix, api_key="unused", max_retries=0, timeout=120.0
        )

    def http(self) -> httpx.Client:
        return httpx.Client(base_url=self.base_url, timeout=120.0)

    def sse(self, path: str, body: dict[str, Any]) -> list[str]:
        """POST a streaming request with raw HTTP; the `data:` payloads in order ([DONE] too)."""
        with self.http() as http, http.stream("POST", path, json=body) as response:
            assert response.status_code == 200, response.read().decode()
            assert response.headers["content-type"].startswith("text/event-stream")
            return [
                line[len("data:") :].strip()
                for line in response.iter_lines()
                if line.startswith("data:")
            ]

    def metrics(self) -> dict[str, float]:
        """Samples of /metrics for this model, by sample name (labels other than name dropped;
        samples of the same name are summed)."""
        with self.http() as http:
            response = http.get("/metrics")
        assert response.status_code == 200, response.text
        values: dict[str, float] = {}
        for family in text_string_to_metric_families(response.text):
            for sample in family.samples:
                if sample.labels.get("name", self.model) != self.model:
                    continue
                values[sample.name] = values.get(sample.name, 0.0) + sample.value
        return values


@contextlib.contextmanager
def running_server(args: Sequence[str], log_dir: Path, model: str = MODEL_NAME) -> Iterator[Server]:
    """Start a server, wait until ready, yield it; on exit SIGTERM it and check exit code 0."""
    server = Server(args, log_dir / "server.log", model)
    try:
        server.wait_ready()
        yield server
    finally:
        code = server.stop()
    assert code == 0, f"graphrt serve exited with {code} after SIGTERM:\n{server.log()}"


Launch = Callable[[Sequence[str]], AbstractContextManager[Server]]


@pytest.fixture(scope="session")
def launch(tmp_path_factory: pytest.TempPathFactory) -> Launch:
    """`with launch([...serve args...]) as server:` runs a server for the block (its own logs)."""

    def start(args: Sequence[str]) -> AbstractContextManager[Server]:
        return running_server(args, tmp_path_factory.mktemp("server"))

    return start


@pytest.fixture(scope="session")
def start_server(tmp_path_factory: pytest.TempPathFactory) -> Callable[[Sequence[str]], Server]:
    """`start_server([...serve args...])`: a server process, not waited for (for tests of
    servers that never become ready); the test stops it."""

    def start(args: Sequence[str]) -> Server:
        return Server(args, tmp_path_factory.mktemp("server") / "server.log")

    return start


@pytest.fixture(scope="session")
def server(smollm2_gguf: Path, launch: Launch) -> Iterator[Server]:
    """The main server: the GGUF, continuous batching, metrics on, a max_tokens limit.

    Greedy answers must be reproducible under concurrency, and two engine features make the
    engine's arithmetic depend on how requests happen to be scheduled: prefix caching (a prompt
    whose prefix blocks come from another in-flight request) and chunked prefill (a prompt split
    over two steps when a burst exceeds max_num_batched_tokens; the second chunk attends to the
    u8-quantized KV of the first). Either can flip a close greedy choice; with the engine alone
    and bursts of up to 16 staggered requests, 4-18 of 128 answers changed with them and none
    without. So this server turns prefix caching off and takes a whole burst's prompts in one step;
    the other servers of this suite keep the defaults.
    """
    args = [
        "--model_path",
        str(smollm2_gguf),
        "--metrics_enable",
        "--enable_prefix_caching",
        "false",
        "--max_num_batched_tokens",
        "8192",
        "--max_tokens_limit",
        str(MAX_TOKENS_LIMIT),
        "--max_request_size",
        str(MAX_REQUEST_SIZE),
    ]
    with launch(args) as running:
        yield running


@pytest.fixture(scope="session")
def max_tokens_limit() -> int:
    return MAX_TOKENS_LIMIT


@pytest.fixture(scope="session")
def max_request_size() -> int:
    return MAX_REQUEST_SIZE


@pytest.fixture(scope="session")
def client(server: Server) -> Iterator[openai.OpenAI]:
    with server.client() as sdk:
        yield sdk


# ------------------------------------------------------------------------------------ golden


@dataclass(frozen=True)
class Expected:
    """What the server must answer for a greedy request."""

    text: str
    prompt_tokens: int
    completion_tokens: int  # generated ids, the EOS included
    finish_reason: str


class Golden:
    """Greedy outputs of the same model, computed in this process (or kept from an earlier
    session); see the module docstring."""

    def __init__(self, gguf: Path) -> None:
        self.genai: Any = importlib.import_module("openvino_genai")
        self.ov: Any = importlib.import_module("openvino")
        self.model = genai_loadable(gguf)
        self.tokenizer: Any = self.genai.Tokenizer(str(self.model))
        self.kept = KeptResults(Golden, gguf)

    @functools.cached_property
    def pipeline(self) -> Any:
        """Loaded at the first answer not kept yet (SmolLM2's takes ~6 s)."""
        scheduler = self.genai.SchedulerConfig()
        scheduler.cache_size = 1
        return self.genai.ContinuousBatchingPipeline(str(self.model), scheduler, "CPU", {})

    def chat_prompt(self, messages: Sequence[Mapping[str, Any]]) -> str:
        plain = [dict(message) for message in messages]
        prompt: str = self.tokenizer.apply_chat_template(plain, add_generation_prompt=True)
        return prompt

    def encode(self, text: str, add_special_tokens: bool) -> list[int]:
        encoded = self.tokenizer.encode(text, add_special_tokens=add_special_tokens)
        return [int(token) for token in encoded.input_ids.data[0]]

    def chat(
        self,
        messages: Sequence[Mapping[str, Any]],
        max_tokens: int,
        structured: Mapping[str, str] | None = None,
    ) -> Expected:
        """`structured`: StructuredOutputConfig fields (json_schema / regex / grammar text)."""
        prompt = self.chat_prompt(messages)
        ids = self.encode(prompt, False)
        return self._generate("chat", prompt, ids, max_tokens, structured)

    def completion(self, prompt: str, max_tokens: int) -> Expected:
        return self._generate("completions", prompt, self.encode(prompt, True), max_tokens)

    def prompt_logprobs(self, prompt: str) -> list[float]:
        """The engine's logprob of each prompt token after the first (genai's echo, scoring
        the prompt alone: max_new_tokens 0)."""
        return self.kept.get(["prompt_logprobs", prompt], lambda: self._prompt_logprobs(prompt))

    def _prompt_logprobs(self, prompt: str) -> list[float]:
        import numpy as np

        config = self.pipeline.get_config()
        config.max_new_tokens = 0
        config.echo = True
        config.logprobs = 1
        ids = self.encode(prompt, True)
        tensor = self.ov.Tensor(np.asarray([ids], dtype=np.int64))
        handle = self.pipeline.add_request(1 << 30, tensor, config)
        scores: list[float] = []
        while self.pipeline.has_non_finished_requests():
            self.pipeline.step()
            while handle.can_read():
                for output in handle.read().values():
                    scores.extend(output.generated_log_probs)
        assert len(scores) == len(ids), (scores, ids)
        return scores[1:]  # the first is genai's placeholder: nothing predicts it

    def _generate(
        self,
        kind: str,
        prompt: str,
        ids: list[int],
        max_tokens: int,
        structured: Mapping[str, str] | None = None,
    ) -> Expected:
        call = [kind, prompt, ids, max_tokens, structured]
        kept = self.kept.get(call, lambda: self._greedy(ids, max_tokens, structured))
        return Expected(*kept)

    def _greedy(
        self, ids: list[int], max_tokens: int, structured: Mapping[str, str] | None
    ) -> tuple[str, int, int, str]:
        import numpy as np

        config = self.pipeline.get_config()
        config.max_new_tokens = max_tokens
        config.do_sample = False
        if structured:
            config.structured_output_config = self.genai.StructuredOutputConfig(**structured)
        tensor = self.ov.Tensor(np.asarray([ids], dtype=np.int64))
        (result,) = self.pipeline.generate([tensor], [config])
        generated = [int(token) for token in result.m_generation_ids[0]]
        if generated and generated[-1] == int(self.tokenizer.get_eos_token_id()):
            reason = "stop"
        else:
            assert len(generated) == max_tokens, generated
            reason = "length"
        text: str = self.tokenizer.decode(generated, skip_special_tokens=True)
        return text, len(ids), len(generated), reason


@pytest.fixture(scope="session")
def golden(smollm2_gguf: Path) -> Golden:
    return Golden(smollm2_gguf)


@pytest.fixture(scope="session")
def tiny_golden(tiny_llm_gguf: Path) -> Golden:
    """Golden outputs of the tiny random llama: for tests whose point is the server's handling of
    a model (pulled, exported, replaced), where any deterministic model shows it."""
    return Golden(tiny_llm_gguf)


# ----------------------------------------------------------------------------------- model dirs


IR_FILES = [
    f"{stem}.{ext}"
    for stem in ("openvino_model", "openvino_tokenizer", "openvino_detokenizer")
    for ext in ("xml", "bin")
]


def ir_model_dir(gguf: Path, target: Path) -> Path:
    """An OpenVINO IR model directory (model + tokenizer/detokenizer) of `gguf`, as genai saves
    it (`enable_save_ov_model`, made once per machine: genai_loadable), hard-linked (else
    copied) into `target`: a directory of its own for each session, nothing else in it."""
    saved = genai_loadable(gguf)
    target.mkdir(parents=True, exist_ok=True)
    for name in IR_FILES:
        assert (saved / name).is_file(), f"enable_save_ov_model did not write {name}"
        try:
            os.link(saved / name, target / name)
        except OSError:
            shutil.copyfile(saved / name, target / name)
    return target


@pytest.fixture(scope="session")
def tiny_llm_ir_dir(tiny_llm_gguf: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The tiny random llama as an OpenVINO IR model directory."""
    return ir_model_dir(tiny_llm_gguf, tmp_path_factory.mktemp("tiny_ir_model"))


# ------------------------------------------------------------------------ exact command lines


class ExactServer(Server):
    """A `graphrt serve` run with exactly `args` (no --model_name added) and extra environment.

    For the modes `Server` cannot express: config.json, the default model (no model arguments),
    API_KEY from the environment, and servers that never become ready (a broken servable).
    """

    def __init__(
        self,
        args: Sequence[str],
        log_path: Path,
        model: str = MODEL_NAME,
        env: Mapping[str, str] | None = None,
        new_session: bool = False,
    ) -> None:
        # Not Server.__init__: that one adds --model_name and starts the process itself.
        self.port = free_port()
        self.model = model
        self.log_path = log_path
        self.args = [
            sys.executable,
            "-m",
            "graphrt.cli.main",
            "serve",
            "--rest_port",
            str(self.port),
            *args,
        ]
        environment = {key: value for key, value in os.environ.items() if key != "API_KEY"}
        environment.update(env or {})
        self._log = log_path.open("w", encoding="utf-8")
        self.process = subprocess.Popen(
            self.args,
            stdout=self._log,
            stderr=subprocess.STDOUT,
            cwd=log_path.parent,
            env=environment,
            # Its own process group, so a test can signal the group without hitting pytest.
            start_new_session=new_session,
        )

    def wait_for(
        self, condition: Callable[[httpx.Client], bool], what: str, timeout: float = READY_TIMEOUT
    ) -> None:
        """Poll `condition` (given a client of this server) until true; fail with the log."""
        deadline = time.monotonic() + timeout
        with httpx.Client(base_url=self.base_url, timeout=30.0) as http:
            while time.monotonic() < deadline:
                code = self.process.poll()
                if code is not None:
                    pytest.fail(
                        f"graphrt serve exited with {code} waiting for {what}:\n{self.log()}"
                    )
                with contextlib.suppress(httpx.TransportError):
                    if condition(http):
                        return
                time.sleep(0.1)
        pytest.fail(f"waited {timeout:.0f} s for {what}:\n{self.log()}")

    def engine_pids(self, servable: str) -> list[int]:
        """Pids of the engine processes started for `servable`, oldest first (from the log)."""
        pattern = re.compile(rf"engine of {re.escape(servable)} is running \(pid (\d+)\)")
        return [int(pid) for pid in pattern.findall(self.log())]

    def wait_for_log(self, text: str, timeout: float = 30.0) -> None:
        deadline = time.monotonic() + timeout
        while text not in self.log():
            if time.monotonic() > deadline:
                pytest.fail(
                    f"{text!r} did not appear in the server log in {timeout:.0f} s:\n" + self.log()
                )
            time.sleep(0.1)


@contextlib.contextmanager
def running_exact_server(
    args: Sequence[str],
    log_dir: Path,
    model: str = MODEL_NAME,
    env: Mapping[str, str] | None = None,
    wait_ready: bool = True,
) -> Iterator[ExactServer]:
    """Like `running_server`; with wait_ready=False the caller decides what to wait for."""
    server = ExactServer(args, log_dir / "server.log", model, env)
    try:
        if wait_ready:
            server.wait_ready()
        yield server
    finally:
        code = server.stop()
    assert code == 0, f"graphrt serve exited with {code} after SIGTERM:\n{server.log()}"


class LaunchExact:
    """`with launch_exact([...serve args...], model=..., env=...) as server:`; see ExactServer."""

    def __init__(self, tmp_path_factory: pytest.TempPathFactory) -> None:
        self._tmp = tmp_path_factory

    def __call__(
        self,
        args: Sequence[str],
        model: str = MODEL_NAME,
        env: Mapping[str, str] | None = None,
        wait_ready: bool = True,
    ) -> AbstractContextManager[ExactServer]:
        return running_exact_server(args, self._tmp.mktemp("server"), model, env, wait_ready)

    def start(
        self,
        args: Sequence[str],
        model: str = MODEL_NAME,
        env: Mapping[str, str] | None = None,
        new_session: bool = False,
    ) -> ExactServer:
        """A started server the caller owns (wait_ready, then stop, or kill it and reap it):
        for tests where a server has to die. `new_session` starts it in a process group of its
        own (for tests that signal the group)."""
        return ExactServer(args, self._tmp.mktemp("server") / "server.log", model, env, new_session)


@pytest.fixture(scope="session")
def launch_exact(tmp_path_factory: pytest.TempPathFactory) -> LaunchExact:
    return LaunchExact(tmp_path_factory)


def graphrt_command(
    *args: str, cwd: Path, timeout: float = 120.0
) -> subprocess.CompletedProcess[str]:
    """Run `graphrt ARGS...` (as `python -m graphrt.cli.main`) to completion."""
    return subprocess.run(
        [sys.executable, "-m", "graphrt.cli.main", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


@pytest.fixture(scope="session")
def run_graphrt() -> Callable[..., subprocess.CompletedProcess[str]]:
    """`run_graphrt("export", ..., cwd=path)`: a finished `graphrt` command (stdout, stderr)."""
    return graphrt_command


# ------------------------------------------------------------------------------ graph files

# OVMS's text-generation graph; {options} are LLMCalculatorOptions fields, one per line.
LLM_GRAPH = """input_stream: "HTTP_REQUEST_PAYLOAD:input"
output_stream: "HTTP_RESPONSE_PAYLOAD:output"
node: {{
  name: "LLMExecutor"
  calculator: "{calculator}"
  input_stream: "LOOPBACK:loopback"
  input_stream: "HTTP_REQUEST_PAYLOAD:input"
  input_side_packet: "LLM_NODE_RESOURCES:llm"
  output_stream: "LOOPBACK:loopback"
  output_stream: "HTTP_RESPONSE_PAYLOAD:output"
  input_stream_info: {{
    tag_index: 'LOOPBACK:0',
    back_edge: true
  }}
  node_options: {{
    [type.googleapis.com / mediapipe.LLMCalculatorOptions]: {{
{options}
    }}
  }}
  input_stream_handler {{
    input_stream_handler: "SyncSetInputStreamHandler",
    options {{
      [mediapipe.SyncSetInputStreamHandlerOptions.ext] {{
        sync_set {{
          tag_index: "LOOPBACK:0"
        }}
      }}
    }}
  }}
}}
"""


def llm_graph(
    models_path: str, calculator: str = "HttpLLMCalculator", **options: str | int | bool
) -> str:
    """graph.pbtxt text of OVMS's LLM graph; `options` become LLMCalculatorOptions fields."""
    fields: dict[str, str | int | bool] = {"models_path": models_path, **options}
    lines = []
    for key, value in fields.items():
        if isinstance(value, bool):
            text = "true" if value else "false"
        elif isinstance(value, int):
            text = str(value)
        else:
            text = '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'
        lines.append(f"      {key}: {text}")
    return LLM_GRAPH.format(calculator=calculator, options="\n".join(lines))


@pytest.fixture(scope="session")
def make_llm_graph() -> Callable[..., str]:
    """`make_llm_graph("../models/x.gguf", max_tokens_limit=5)`: see `llm_graph`."""
    return llm_graph


@dataclass
class GraphRepository:
    """An OVMS model repository: config.json next to one directory per servable, each with an
    LLM graph.pbtxt over the same GGUF."""

    root: Path
    graph: Callable[..., str]
    model: str

    @property
    def config(self) -> Path:
        return self.root / "config.json"

    def add_graph(self, name: str, **options: str | int | bool) -> None:
        (self.root / name).mkdir(exist_ok=True)
        (self.root / name / "graph.pbtxt").write_text(
            self.graph(self.model, **options), encoding="utf-8"
        )

    def serve(self, names: Sequence[str]) -> None:
        entries = [{"name": name, "base_path": name} for name in names]
        self.write({"model_config_list": [], "mediapipe_config_list": entries})

    def write(self, config: dict[str, Any] | str) -> None:
        text = config if isinstance(config, str) else json.dumps(config, indent=2)
        # Replace the file in one step, so a polling server never reads half of it.
        scratch = self.config.with_suffix(".tmp")
        scratch.write_text(text, encoding="utf-8")
        scratch.replace(self.config)


@pytest.fixture(scope="session")
def graph_repository(
    tiny_llm_gguf: Path, tmp_path_factory: pytest.TempPathFactory
) -> Callable[[str], GraphRepository]:
    """`graph_repository("name")`: a fresh repository with graphs `base` and `added`, of which
    config.json serves `base`. Its graphs serve the tiny llama: the tests around it load,
    replace, kill and drain servables (several engine loads each), and never read answers."""

    def make(name: str) -> GraphRepository:
        root = tmp_path_factory.mktemp(name)
        (root / "models").mkdir()
        os.symlink(tiny_llm_gguf, root / "models" / tiny_llm_gguf.name)
        repository = GraphRepository(root, llm_graph, f"../models/{tiny_llm_gguf.name}")
        repository.add_graph("base")
        repository.add_graph("added")
        repository.serve(["base"])
        return repository

    return make


# ------------------------------------------------------------------------- vision-language model

TINY_VLM = Path(__file__).resolve().parents[1] / "fixtures" / "models" / "tiny-qwen2-vl"
IMAGE_TAG = "<ov_genai_image_{}>"


@pytest.fixture(scope="session")
def tiny_vlm_dir() -> Path:
    """The committed tiny random Qwen2-VL (tools/make_tiny_vlm.py): gibberish, never EOS."""
    return TINY_VLM


def flatten_vlm_messages(messages: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """OVMS's flattening, written out independently of the server: each image_url part becomes
    `<ov_genai_image_N>` (N counting images over the conversation), and the parts of a message
    with images are joined by newlines (text-only part lists are joined as they are)."""
    flat: list[dict[str, Any]] = []
    count = 0
    for message in messages:
        content = message.get("content")
        if isinstance(content, list):
            pieces = []
            for part in content:
                if part["type"] == "image_url":
                    pieces.append(IMAGE_TAG.format(count))
                    count += 1
                else:
                    pieces.append(part["text"])
            has_image = any(part["type"] == "image_url" for part in content)
            content = ("\n" if has_image else "").join(pieces)
        flat.append({**message, "content": content})
    return flat


class VlmGolden:
    """Greedy outputs of the tiny VLM, computed in this process as the server must produce them.

    The prompt is openvino-genai's own chat template applied to the OVMS-flattened conversation,
    added with `apply_chat_template` off (it is already templated); images are the pixel arrays
    the test encoded. `stateful=False` runs a ContinuousBatchingPipeline (what VLM_CB serves),
    `stateful=True` a VLMPipeline (what `pipeline_type: VLM` serves).
    """

    def __init__(self, model_dir: Path, stateful: bool) -> None:
        self.genai: Any = importlib.import_module("openvino_genai")
        self.ov: Any = importlib.import_module("openvino")
        self.model_dir = model_dir
        self.stateful = stateful
        self.tokenizer: Any = self.genai.Tokenizer(str(model_dir))
        self.kept = KeptResults(VlmGolden, model_dir, stateful)

    @functools.cached_property
    def pipeline(self) -> Any:
        """Loaded at the first answer not kept yet."""
        if self.stateful:
            return self.genai.VLMPipeline(str(self.model_dir), "CPU")
        scheduler = self.genai.SchedulerConfig()
        scheduler.cache_size = 1
        return self.genai.ContinuousBatchingPipeline(str(self.model_dir), scheduler, "CPU", {})

    def prompt(self, messages: Sequence[Mapping[str, Any]]) -> str:
        flat = flatten_vlm_messages(messages)
        text: str = self.tokenizer.apply_chat_template(flat, add_generation_prompt=True)
        return text

    def chat(
        self, messages: Sequence[Mapping[str, Any]], images: Sequence[Any], max_tokens: int
    ) -> Expected:
        # The prompt, not the messages: image URLs (a test server's port) do not decide it.
        prompt = self.prompt(messages)
        call = [prompt, list(images), max_tokens]
        return Expected(*self.kept.get(call, lambda: self._greedy(prompt, images, max_tokens)))

    def _greedy(
        self, prompt: str, images: Sequence[Any], max_tokens: int
    ) -> tuple[str, int, int, str]:
        config = (
            self.pipeline.get_generation_config() if self.stateful else self.pipeline.get_config()
        )
        config.max_new_tokens = max_tokens
        config.do_sample = False
        config.apply_chat_template = False
        tensors = [self.ov.Tensor(image) for image in images]
        if self.stateful:
            result = self.pipeline.generate(prompt, images=tensors, generation_config=config)
        else:
            (result,) = self.pipeline.generate(
                [prompt], images=[tensors], generation_config=[config]
            )
        metrics = result.perf_metrics
        generated = int(metrics.get_num_generated_tokens())
        assert generated == max_tokens, "the tiny VLM never stops early (no EOS)"
        return str(result.texts[0]), int(metrics.get_num_input_tokens()), generated, "length"


class Pictures:
    """Test pictures and their encodings (a fixture: test modules cannot import conftest)."""

    @staticmethod
    def make(width: int, height: int, seed: int) -> Any:
        """A deterministic RGB picture: seeded full-range noise with dark zebra stripes (uint8,
        HWC). The tiny random model's answers depend only weakly on pixels; full-range noise
        makes different seeds (and image orders) change the answer within a few dozen tokens."""
        import numpy as np

        rng = np.random.default_rng(seed)
        pixels = rng.integers(0, 256, (height, width, 3), dtype=np.uint8)
        stripes = (np.arange(width) // max(2, width // 12)) % 2 == 0
        pixels[:, stripes] //= 4
        return pixels

    @staticmethod
    def encode(pixels: Any, image_format: str = "PNG", **options: Any) -> bytes:
        import io

        from PIL import Image

        buffer = io.BytesIO()
        Image.fromarray(pixels).save(buffer, format=image_format, **options)
        return buffer.getvalue()

    @staticmethod
    def data_url(data: bytes, media_type: str = "image/png") -> str:
        import base64

        return f"data:{media_type};base64," + base64.b64encode(data).decode()

    def png_url(self, pixels: Any) -> str:
        """A base64 PNG data URL (lossless: the server must decode exactly these pixels)."""
        return self.data_url(self.encode(pixels))

    @staticmethod
    def decoded(data: bytes) -> Any:
        """What a reference decoder (Pillow, first frame, RGB) makes of encoded bytes."""
        import io

        import numpy as np
        from PIL import Image

        with Image.open(io.BytesIO(data)) as image:
            return np.array(image.convert("RGB"))


@pytest.fixture(scope="session")
def pictures() -> Pictures:
    return Pictures()


@pytest.fixture(scope="session")
def vlm_golden(tiny_vlm_dir: Path) -> VlmGolden:
    """Golden outputs of the continuous-batching engine (what VLM_CB serves)."""
    return VlmGolden(tiny_vlm_dir, stateful=False)


@pytest.fixture(scope="session")
def vlm_stateful_golden(tiny_vlm_dir: Path) -> VlmGolden:
    """Golden outputs of VLMPipeline (what `pipeline_type: VLM` serves)."""
    return VlmGolden(tiny_vlm_dir, stateful=True)


# ------------------------------------------------------------------------------------ fuzzing

# Cases per fuzzed endpoint; CI runs the default, GRAPHRT_FUZZ_CASES=20000 runs a longer search.
FUZZ_CASES = int(os.environ.get("GRAPHRT_FUZZ_CASES", "500"))
FUZZ_SEED = 20261125
FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"


@dataclass
class FuzzReport:
    cases: int = 0
    statuses: dict[int, int] = field(default_factory=dict)
    seconds: float = 0.0

    def __str__(self) -> str:
        rate = self.cases / self.seconds if self.seconds else 0.0
        counts = ", ".join(f"{status}: {n}" for status, n in sorted(self.statuses.items()))
        return f"{self.cases} cases in {self.seconds:.1f} s ({rate:.0f}/s); {counts}"


class Fuzzer:
    """Requests generated by schemathesis from an OpenAPI document, sent to a live server.

    Three in four cases follow the schema ("positive"), one in four breaks it ("negative"); a
    `prepare` hook may steer bodies toward the served model. The seed is fixed, so CI runs the
    same cases every time. Cases are sent `CONCURRENCY` at a time (the engine batches the valid
    ones); `check` sees every response, and the first failure is raised at the end with the body
    that caused it.

    Generating the cases is most of a fuzz test's time (~35 ms a case for OpenAI's chat schema,
    in this process, on a core the server needs), so they are generated once and kept in the test
    cache, keyed by everything that decides them: the document, the path, the count, the seed and
    the versions of Hypothesis and schemathesis. (Hypothesis also mixes in constants it finds in
    the modules loaded at the time; a kept set has those of its first run. A new seed or count, or
    GRAPHRT_FUZZ_CASES, generates a new set.)
    """

    CONCURRENCY = 8

    def __init__(self, base_url: str, document: dict[str, Any]) -> None:
        self.base_url = base_url
        self.document = document

    def run(
        self,
        path: str,
        check: Callable[[Any, Any], None],
        prepare: Callable[[Any, int], None] | None = None,
        cases: int = FUZZ_CASES,
    ) -> FuzzReport:
        import threading
        from concurrent.futures import ThreadPoolExecutor

        import requests

        report = FuzzReport()
        sessions = threading.local()
        failures: list[BaseException] = []

        def send(case: Any) -> None:
            if not hasattr(sessions, "session"):
                sessions.session = requests.Session()
            response = case.call(base_url=self.base_url, session=sessions.session, timeout=60)
            report.statuses[response.status_code] = report.statuses.get(response.status_code, 0) + 1
            try:
                check(case, response)
            except AssertionError as error:
                failures.append(error)

        started = time.monotonic()
        drawn = self.cases(path, cases)
        with ThreadPoolExecutor(self.CONCURRENCY) as pool:
            sent = []
            for case, dice in drawn:
                if prepare is not None:
                    prepare(case, dice)
                sent.append(pool.submit(send, case))
            for future in sent:
                future.result()
        report.cases = len(drawn)
        report.seconds = time.monotonic() - started
        if failures:
            raise failures[0]
        return report

    def cases(self, path: str, count: int) -> list[tuple[Any, int]]:
        """`count` cases for `path`, each with a die (0-9) for `prepare`: from the cache, or
        generated and kept there."""
        import hypothesis
        import schemathesis

        schema = schemathesis.openapi.from_dict(self.document)
        (operation,) = [
            result.ok() for result in schema.get_all_operations() if result.ok().path == path
        ]
        # Kept with the reference outputs: decided by the document, the path, the count, the
        # seed, the code that draws them and the versions of Hypothesis and schemathesis.
        kept = KeptResults(draw, case_fields, hypothesis.__version__, schemathesis.__version__)
        fields = kept.get(
            [self.document, path, count, FUZZ_SEED],
            lambda: [(case_fields(case), dice) for case, dice in draw(operation, count)],
        )
        return [(operation.Case(**values), dice) for values, dice in fields]


def draw(operation: Any, count: int) -> list[tuple[Any, int]]:
    """`count` schemathesis cases for `operation` (one in four negative), with a die each."""
    import schemathesis
    from hypothesis import HealthCheck, Phase, given, seed, settings
    from hypothesis import strategies as st

    positive = operation.as_strategy(generation_mode=schemathesis.GenerationMode.POSITIVE)
    negative = operation.as_strategy(generation_mode=schemathesis.GenerationMode.NEGATIVE)
    strategy = st.tuples(
        st.integers(0, 3).flatmap(lambda k: negative if k == 0 else positive),
        st.integers(0, 9),
    )
    drawn: list[tuple[Any, int]] = []

    @seed(FUZZ_SEED)
    @settings(
        max_examples=count,
        deadline=None,
        database=None,
        suppress_health_check=list(HealthCheck),
        phases=[Phase.generate],
    )
    @given(strategy)
    def one(case_and_dice: tuple[Any, int]) -> None:
        drawn.append(case_and_dice)

    one()
    return drawn


def case_fields(case: Any) -> dict[str, Any]:
    """What a schemathesis case sends: `operation.Case(**fields)` makes it again."""
    from schemathesis.core import NOT_SET

    fields = {
        "method": case.method,
        "path_parameters": case.path_parameters,
        "headers": dict(case.headers),
        "cookies": case.cookies,
        "query": case.query,
        "media_type": case.media_type,
        "multipart_content_types": case.multipart_content_types,
    }
    if case.body is not NOT_SET:
        fields["body"] = case.body
    return fields


@pytest.fixture(scope="session")
def openai_request_schemas() -> dict[str, Any]:
    """OpenAI's request schemas, bounded for generation (tools/extract_openai_schemas.py)."""
    document: dict[str, Any] = json.loads(
        (FIXTURES / "openai_request_schemas.json").read_text(encoding="utf-8")
    )
    return document


@pytest.fixture(scope="session")
def fuzzer() -> Callable[[str, dict[str, Any]], Fuzzer]:
    """`fuzzer(base_url, openapi_document).run(path, check, prepare)`; see Fuzzer."""
    return Fuzzer


# ------------------------------------------------------------------------------ a real browser

CHROMIUM = "/usr/bin/chromium"
# What this machine's closed network needs (background connections are refused, many at a time).
CHROMIUM_FLAGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]


@pytest.fixture
def browser() -> Iterator[Any]:
    """A headless Debian Chromium driven by Playwright (a playwright BrowserContext): for the
    `system` tests of the pages the server serves. Fails, never skips, without chromium."""
    if not (os.path.exists(CHROMIUM) or shutil.which("chromium")):
        pytest.fail("this test needs Debian's chromium package (apt-get install chromium)")
    executable = CHROMIUM if os.path.exists(CHROMIUM) else str(shutil.which("chromium"))
    from playwright.sync_api import sync_playwright

    with tempfile.TemporaryDirectory() as profile, sync_playwright() as playwright:
        context = playwright.chromium.launch_persistent_context(
            profile,
            executable_path=executable,
            headless=True,
            args=CHROMIUM_FLAGS,
            viewport={"width": 1100, "height": 540},
        )
        try:
            yield context
        finally:
            context.close()


# ------------------------------------------------------------------------ Hugging Face cache


def place_in_hf_cache(home: Path, repo_id: str, files: Mapping[str, Path]) -> None:
    """Put `files` (name in the repository → file here) into a Hugging Face cache under `home`
    (HF_HOME) exactly as huggingface_hub's snapshot_download leaves them: blobs named by hash,
    a snapshot of links to them, refs/main naming the snapshot. With HF_HUB_OFFLINE=1 a pull
    then finds them through huggingface_hub's own offline path, with no network."""
    repo = home / "hub" / ("models--" + repo_id.replace("/", "--"))
    commit = hashlib.sha1(repo_id.encode()).hexdigest()
    snapshot = repo / "snapshots" / commit
    for name, source in files.items():
        blob = repo / "blobs" / hashlib.sha256(f"{repo_id}/{name}".encode()).hexdigest()
        blob.parent.mkdir(parents=True, exist_ok=True)
        if not blob.exists():
            os.symlink(source.resolve(), blob)
        link = snapshot / name
        link.parent.mkdir(parents=True, exist_ok=True)
        os.symlink(os.path.relpath(blob, link.parent), link)
    (repo / "refs").mkdir(parents=True, exist_ok=True)
    (repo / "refs" / "main").write_text(commit)
