"""OVMS's options graphrt used to refuse or drop, on one server started with all of them, as an
OVMS user would: the server flags --log_path, --cache_dir, --cpu_extension,
--grpc_channel_arguments and --grpc_max_threads (graphrt/cli/ovms_server_flags.py), --version;
and the LLM graph options chat_template_mode and cache_eviction_config's kv_crush_config.

The server serves an LLM graph (the tiny random llama, with those options) and a classic model
that needs a custom operation: a string model whose StringTensorUnpack comes from the
openvino_tokenizers extension library, which OpenVINO cannot read without that library
(--cpu_extension). It logs at DEBUG, so the engine's scheduler settings are in its log.
"""

from __future__ import annotations

import json
import queue
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import grpc
import pytest

from graphrt.export.text_graphs import TextGenerationSettings, text_generation_graph
from graphrt.kserve import grpc_predict_v2_pb2 as pb
from graphrt.kserve import grpc_predict_v2_pb2_grpc as pb_grpc
from tests.conftest import genai_loadable

if TYPE_CHECKING:
    from conftest import ExactServer, LaunchExact

LLM, CLASSIC = "tiny-llm", "unpack"
MAX_MESSAGE = 4096  # --grpc_channel_arguments grpc.max_receive_message_length
EVICTION = {"start_size": 32, "recent_size": 32, "max_cache_size": 128}
KV_CRUSH = {"budget": 2, "anchor_point_mode": "MEAN", "rng_seed": 5}
LLM_OPTIONS = (
    "chat_template_mode: MINJA\n"
    "cache_eviction_config { "
    + " ".join(f"{key}: {value}" for key, value in EVICTION.items())
    + " kv_crush_config { "
    + " ".join(f"{key}: {value}" for key, value in KV_CRUSH.items())
    + " } }\n"
)


def extension_library() -> Path:
    import openvino_tokenizers

    return Path(openvino_tokenizers._ext_path)


def save_string_model(path: Path) -> None:
    """text (string) -> StringTensorUnpack, an openvino_tokenizers operation."""
    import openvino as ov
    import openvino.opset13 as ops
    from openvino_tokenizers import _get_factory

    text = ops.parameter(ov.PartialShape([-1]), ov.Type.string, name="text")
    unpacked = _get_factory().create("StringTensorUnpack", text.outputs()).outputs()
    model = ov.Model([ops.result(output) for output in unpacked], [text], "unpack")
    ov.save_model(model, str(path / "1" / "model.xml"))


@pytest.fixture(scope="module")
def repository(tiny_llm_gguf: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("ovms_flags")
    (root / LLM).mkdir()
    graph = text_generation_graph(TextGenerationSettings(models_path=str(tiny_llm_gguf)))
    anchor = "      cache_size: 0,\n"
    assert anchor in graph
    (root / LLM / "graph.pbtxt").write_text(
        graph.replace(anchor, anchor + LLM_OPTIONS), encoding="utf-8"
    )
    save_string_model(root / CLASSIC)
    config = {
        "model_config_list": [{"config": {"name": CLASSIC, "base_path": CLASSIC}}],
        "mediapipe_config_list": [{"name": LLM, "base_path": LLM}],
    }
    (root / "config.json").write_text(json.dumps(config), encoding="utf-8")
    return root


@pytest.fixture(scope="module")
def flagged(
    repository: Path, launch_exact: LaunchExact, unused_port: Callable[[], int]
) -> Iterator[tuple[ExactServer, int]]:
    port = unused_port()
    args = [
        "--config_path",
        str(repository / "config.json"),
        "--port",
        str(port),
        "--log_path",
        str(repository / "server.log"),
        "--cache_dir",
        str(repository / "cache" / "new"),  # OpenVINO creates it
        "--cpu_extension",
        str(extension_library()),
        "--grpc_channel_arguments",
        f"grpc.max_receive_message_length={MAX_MESSAGE},grpc.keepalive_time_ms=60000",
        "--grpc_max_threads",
        "1",
        "--log_level",
        "DEBUG",
    ]
    with launch_exact(args, model=LLM) as server:
        server.wait_for_log(f"loaded {LLM}")
        yield server, port


def test_the_log_file_has_the_servers_and_its_engines_lines(
    flagged: tuple[ExactServer, int], repository: Path
) -> None:
    server, _ = flagged
    with server.client() as client:
        client.completions.create(model=LLM, prompt="Hi", max_tokens=2)
    written = (repository / "server.log").read_text(encoding="utf-8")
    assert f"loaded {LLM}" in written  # the server's own line
    assert "engine[" in written and "pipeline of" in written  # its engine process's
    assert "Model cache is enabled" in written
    console = server.log()
    assert f"loaded {LLM}" in console  # the console keeps them (OVMS writes both)


def test_the_cache_dir_holds_the_compiled_models(
    flagged: tuple[ExactServer, int], repository: Path
) -> None:
    blobs = list((repository / "cache" / "new").glob("*.blob"))
    # One for the LLM's engine, one for the classic model (and its single-threaded twin).
    assert len(blobs) >= 2, blobs


def test_the_cpu_extension_lets_the_classic_model_load(flagged: tuple[ExactServer, int]) -> None:
    server, _ = flagged
    with server.http() as http:
        assert http.get(f"/v2/models/{CLASSIC}/ready").status_code == 200
        metadata = http.get(f"/v2/models/{CLASSIC}").json()
    assert metadata["inputs"] == [{"name": "text", "datatype": "BYTES", "shape": [-1]}]


def test_grpc_channel_arguments_reach_the_grpc_server(flagged: tuple[ExactServer, int]) -> None:
    _, port = flagged
    request = pb.ModelInferRequest(model_name=CLASSIC, raw_input_contents=[b"x" * 2 * MAX_MESSAGE])
    with grpc.insecure_channel(f"127.0.0.1:{port}") as channel:
        stub = pb_grpc.GRPCInferenceServiceStub(channel)
        assert stub.ServerLive(pb.ServerLiveRequest()).live
        with pytest.raises(grpc.RpcError) as refused:
            stub.ModelInfer(request)
    assert refused.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
    assert "larger than max" in (refused.value.details() or "")


def test_grpc_max_threads_bounds_the_calls_in_progress(flagged: tuple[ExactServer, int]) -> None:
    """With --grpc_max_threads 1, an open stream is the one call in progress: another call is
    refused (RESOURCE_EXHAUSTED, as OVMS's full thread pool refuses it) until it ends."""
    _, port = flagged
    pending: queue.Queue[Any] = queue.Queue()

    def requests() -> Iterator[Any]:
        while (item := pending.get()) is not None:
            yield item

    with grpc.insecure_channel(f"127.0.0.1:{port}") as channel:
        stub = pb_grpc.GRPCInferenceServiceStub(channel)
        stream = stub.ModelStreamInfer(requests())
        # A request the server refuses in turn, answering on the stream, which goes on.
        tensor = pb.ModelInferRequest.InferInputTensor(name="text", datatype="NOPE", shape=[1])
        pending.put(pb.ModelInferRequest(model_name=CLASSIC, inputs=[tensor]))
        assert "NOPE" in next(stream).error_message  # the stream is in progress on the server
        with pytest.raises(grpc.RpcError) as refused:
            stub.ServerLive(pb.ServerLiveRequest())
        assert refused.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
        pending.put(None)
        assert list(stream) == []
        assert stub.ServerLive(pb.ServerLiveRequest()).live


def test_kv_crush_reaches_the_engine(flagged: tuple[ExactServer, int]) -> None:
    """cache_eviction_config's kv_crush_config was parsed and dropped: the engine's scheduler
    (its DEBUG line, genai's own description of it) now has it."""
    server, _ = flagged
    (line,) = [line for line in server.log().splitlines() if "scheduler:" in line]
    assert "use_cache_eviction: 1" in line or "max_cache_size: 128" in line, line
    assert "KVCrushConfig { budget: 2 rng_seed: 5 anchor_point_mode: MEAN }" in line


def test_chat_template_mode_minja_renders_with_genai(
    flagged: tuple[ExactServer, int], tiny_llm_gguf: Path
) -> None:
    """The answer is the engine's for the prompt openvino-genai's template engine renders, with
    the graph's scheduler settings."""
    import openvino_genai

    server, _ = flagged
    assert "rendered by openvino-genai (minja)" in server.log()
    # 41 tokens once templated: openvino-genai 2026.4's cache eviction fails the engine step of
    # a prompt of 33 to 39 tokens ("new_scores_size >= num_snapkv_scores"), with or without
    # KVCrush, in the pipeline alone too.
    messages = [{"role": "user", "content": "Name the capital of France and say why it matters."}]
    with server.client() as client:
        answer = client.chat.completions.create(
            model=LLM,
            messages=messages,  # type: ignore[arg-type]
            max_tokens=8,
            temperature=0,
            extra_body={"ignore_eos": True},
        )
    scheduler = openvino_genai.SchedulerConfig()
    scheduler.cache_eviction_config = openvino_genai.CacheEvictionConfig(
        aggregation_mode=openvino_genai.AggregationMode.NORM_SUM,
        kvcrush_config=openvino_genai.KVCrushConfig(
            KV_CRUSH["budget"],
            anchor_point_mode=openvino_genai.KVCrushAnchorPointMode.MEAN,
            rng_seed=KV_CRUSH["rng_seed"],
        ),
        **EVICTION,
    )
    scheduler.use_cache_eviction = True
    pipeline = openvino_genai.ContinuousBatchingPipeline(
        str(genai_loadable(tiny_llm_gguf)), scheduler, "CPU"
    )
    tokenizer = pipeline.get_tokenizer()
    prompt = tokenizer.apply_chat_template(messages, add_generation_prompt=True)
    config = openvino_genai.GenerationConfig(max_new_tokens=8, ignore_eos=True)
    ids = tokenizer.encode(prompt, add_special_tokens=False).input_ids
    (result,) = pipeline.generate([ids], [config])
    expected = tokenizer.decode(list(result.m_generation_ids[0]))
    assert answer.choices[0].message.content == expected


def test_version_prints_graphrt_and_its_backends(tmp_path: Path) -> None:
    import openvino
    import openvino_genai

    done = subprocess.run(
        [sys.executable, "-m", "graphrt", "--version"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0].startswith("graphrt ")
    assert lines[1:] == [
        f"OpenVINO backend {openvino.get_version()}",
        f"OpenVINO GenAI backend {openvino_genai.__version__}",
    ]
