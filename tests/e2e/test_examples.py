"""Every directory under examples/ works as its README says: served as is, called by its client.

Each example is copied to a temporary directory, prepared with the commands from its README (the
default model's GGUF placed next to the graph; the example model written by make_model.py), served
by a real `graphrt serve`, and exercised by running the example's own client.py. LLM answers are
compared with the engine run directly (`golden`); the KServe pipeline's with openvino and numpy.
"""

from __future__ import annotations

import contextlib
import importlib.util
import os
import shutil
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import httpx
import numpy as np
import pytest

if TYPE_CHECKING:
    from conftest import Golden, LaunchExact

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def copy_example(name: str, tmp_path: Path) -> Path:
    target = tmp_path / name
    shutil.copytree(EXAMPLES / name, target)
    return target


def run_client(example: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(example / "client.py"), *args],
        cwd=example,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def test_llm_continuous_batching(
    tmp_path: Path, smollm2_gguf: Path, launch_exact: LaunchExact, golden: Golden
) -> None:
    example = copy_example("llm_continuous_batching", tmp_path)
    os.symlink(smollm2_gguf, example / "models" / "SmolLM2-135M-Instruct" / smollm2_gguf.name)
    args = ["--config_path", str(example / "models" / "config.json")]
    question = "What is the capital of France?"
    expected = golden.chat([{"role": "user", "content": question}], 60)
    with launch_exact(args, model="SmolLM2-135M-Instruct") as server:
        url = f"{server.base_url}/v3"
        for mode in ([], ["--stream"]):
            done = run_client(example, "--url", url, *mode, question)
            assert done.returncode == 0, done.stderr
            assert done.stdout == expected.text + "\n"


@contextlib.contextmanager
def kserve_example(
    tmp_path: Path, launch_exact: LaunchExact, unused_port: Callable[[], int]
) -> Iterator[tuple[Path, Any, int]]:
    """The KServe example prepared as its README says and served: (directory, server, gRPC port)."""
    example = copy_example("kserve_pipeline", tmp_path)
    made = subprocess.run(
        [sys.executable, "make_model.py", "models"], cwd=example, capture_output=True, text=True
    )
    assert made.returncode == 0, made.stderr
    grpc_port = unused_port()
    args = [
        "--config_path",
        str(example / "config.json"),
        "--port",
        str(grpc_port),
        "--python_path",
        str(example),
        "--import",
        "iris_calculators",
    ]
    with launch_exact(args, model="iris_pipeline") as server:
        yield example, server, grpc_port


def test_kserve_pipeline(
    tmp_path: Path, launch_exact: LaunchExact, unused_port: Callable[[], int]
) -> None:
    flowers = ["5.1,3.5,1.4,0.2", "6.0,2.9,4.5,1.5", "6.7,3.0,5.2,2.3"]
    with kserve_example(tmp_path, launch_exact, unused_port) as (example, server, grpc_port):
        over_grpc = run_client(example, "--url", f"127.0.0.1:{grpc_port}", *flowers)
        over_rest = run_client(example, "--rest", "--url", f"127.0.0.1:{server.port}", *flowers)
        # The same pipeline composed of a Python subgraph and a subgraph file.
        from_subgraphs = run_client(
            example, "--url", f"127.0.0.1:{grpc_port}", "--model", "iris_subgraphs", *flowers
        )
        page = httpx.get(f"{server.base_url}/graphs/iris_subgraphs", timeout=30).text
    assert over_grpc.returncode == 0, over_grpc.stderr
    assert over_grpc.stdout == over_rest.stdout
    assert over_grpc.stdout.splitlines() == expected_iris(example, flowers)
    assert from_subgraphs.returncode == 0, from_subgraphs.stderr
    assert from_subgraphs.stdout == over_grpc.stdout
    # The graph page draws the expanded nodes inside their subgraphs' groups, nested.
    assert 'data-subgraph="IrisClassifier"' in page
    assert 'data-subgraph="irisclassifier__OpenVINOClassifier"' in page
    assert "irisclassifier__openvinoclassifier__OpenVINOInferenceCalculator" in page


@pytest.mark.system
def test_the_graph_page_shows_subgraphs_in_a_browser(
    tmp_path: Path, launch_exact: LaunchExact, unused_port: Callable[[], int], browser: Any
) -> None:
    with kserve_example(tmp_path, launch_exact, unused_port) as (example, server, grpc_port):
        page = browser.new_page()
        page.goto(f"{server.base_url}/graphs/iris_subgraphs")
        outer = page.locator('.group[data-subgraph="IrisClassifier"]')
        inner = page.locator('.group[data-subgraph="irisclassifier__OpenVINOClassifier"]')
        assert outer.text_content() == "IrisClassifier"
        assert inner.text_content() == "OpenVINOClassifier (irisclassifier__OpenVINOClassifier)"
        # The inner group lies inside the outer one, and holds the model's two nodes.
        box, inside = outer.locator("rect").bounding_box(), inner.locator("rect").bounding_box()
        assert box is not None and inside is not None
        assert box["x"] < inside["x"] and box["y"] < inside["y"]
        assert inside["x"] + inside["width"] < box["x"] + box["width"]
        session = page.locator(".node", has_text="OpenVINOModelServerSessionCalculator")
        node_box = session.bounding_box()
        assert node_box is not None and inside["y"] < node_box["y"]
        assert node_box["y"] + node_box["height"] < inside["y"] + inside["height"]
        session.click()
        details = page.locator("#details").inner_text()
        assert "in subgraph IrisClassifier > OpenVINOClassifier" in details
        # The page still counts requests: one call reaches the expanded nodes.
        page.wait_for_selector("#live.on")
        done = run_client(example, "--url", f"127.0.0.1:{grpc_port}", "--model",
                          "iris_subgraphs", "5.1,3.5,1.4,0.2")  # fmt: skip
        assert done.returncode == 0, done.stderr
        page.wait_for_function(
            "[...document.querySelectorAll('.node')].some("
            "n => Number(n.getAttribute('data-calls')) > 0)",
            timeout=20_000,
        )


def expected_iris(example: Path, flowers: list[str]) -> list[str]:
    """The example's own preprocessing, its model run with openvino alone, then softmax."""
    import openvino

    spec = importlib.util.spec_from_file_location("make_model", example / "make_model.py")
    assert spec is not None and spec.loader is not None
    make_model: Any = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(make_model)
    raw = np.array([[float(v) for v in f.split(",")] for f in flowers], np.float32)
    mean = np.array([5.84, 3.06, 3.76, 1.20], np.float32)
    std = np.array([0.83, 0.44, 1.77, 0.76], np.float32)
    compiled = openvino.Core().compile_model(make_model.build(), "CPU")
    scores = compiled({"features": (raw - mean) / std})[0]
    probabilities = np.exp(scores) / np.exp(scores).sum(axis=-1, keepdims=True)
    names = ["setosa", "versicolor", "virginica"]
    return [f"{names[p.argmax()]} {p.max():.3f}" for p in probabilities]


def test_custom_endpoint(
    tmp_path: Path, smollm2_gguf: Path, launch_exact: LaunchExact, golden: Golden
) -> None:
    """POST /v3/summarize, an endpoint no route has: the graph its body names answers it, once
    or streamed, with the LLM's own greedy text inside its own JSON; refusals are OpenAI's
    error object; the graph is on the graph page like any other."""
    example = copy_example("custom_endpoint", tmp_path)
    os.symlink(smollm2_gguf, example / "models" / "summarizer" / smollm2_gguf.name)
    args = ["--config_path", str(example / "models" / "config.json"), "--python_path", str(example)]
    text = "Graphs of small nodes make model servers easy to extend."
    instruction = "Summarize the user's text in one short sentence."
    expected = golden.chat(
        [{"role": "system", "content": instruction}, {"role": "user", "content": text}], 60
    )
    with launch_exact(args, model="summarizer") as server:
        url = f"{server.base_url}/v3"
        unary = run_client(example, "--url", url, text)
        streamed = run_client(example, "--url", url, "--stream", text)
        with httpx.Client(base_url=server.base_url, timeout=60) as http:
            body = {"model": "summarizer", "text": text}
            answer = http.post("/v3/summarize", json=body).json()
            refused = http.post("/v3/summarize", json={"model": "summarizer", "text": " "})
            page = http.get("/graphs/summarizer")
            stats = http.get("/graphs/summarizer/stats").json()
    assert unary.returncode == 0, unary.stderr
    assert unary.stdout == expected.text + "\n"
    assert streamed.returncode == 0, streamed.stderr
    assert streamed.stdout == expected.text + "\n"
    assert answer["summary"] == expected.text
    assert answer["usage"]["completion_tokens"] == expected.completion_tokens
    assert refused.status_code == 400
    assert refused.json()["error"]["param"] == "text"
    assert page.status_code == 200
    assert all(f">{node}<" in page.text for node in ("Ask", "LLM", "Reply")), page.text[:500]
    assert stats["state"] == "AVAILABLE"


def test_llm_prompt_guard(
    tmp_path: Path, smollm2_gguf: Path, launch_exact: LaunchExact, golden: Golden
) -> None:
    example = copy_example("llm_prompt_guard", tmp_path)
    os.symlink(smollm2_gguf, example / "models" / "guarded_llm" / smollm2_gguf.name)
    args = ["--config_path", str(example / "models" / "config.json"), "--python_path", str(example)]
    question = "What is Zorblax?"
    fact = "Zorblax is the capital of the fictional planet Quux, founded in the year 3021."
    expected = golden.chat(
        [
            {"role": "system", "content": f"Use these facts: {fact}"},
            {"role": "user", "content": question},
        ],
        40,
    )
    with launch_exact(args, model="guarded_llm") as server:
        url = f"{server.base_url}/v3"
        answered = run_client(example, "--url", url, question)
        refused = run_client(example, "--url", url, "Tell me the lottery numbers for Friday")
        plain = run_client(example, "--url", url, "Say hello")
    assert answered.returncode == 0, answered.stderr
    assert answered.stdout == expected.text + "\n"
    assert refused.returncode == 1
    assert refused.stdout == "refused: This assistant does not discuss lottery numbers.\n"
    assert plain.returncode == 0, plain.stderr
    assert plain.stdout == golden.chat([{"role": "user", "content": "Say hello"}], 40).text + "\n"
