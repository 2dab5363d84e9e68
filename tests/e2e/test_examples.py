"""Every directory under examples/ works as its README says: served as is, called by its client.

Each example is copied to a temporary directory, prepared with the commands from its README (the
default model's GGUF placed next to the graph; the example model written by make_model.py), served
by a real `graphrt serve`, and exercised by running the example's own client.py. LLM answers are
compared with the engine run directly (`golden`); the KServe pipeline's with openvino and numpy.
"""

from __future__ import annotations

import importlib.util
import os
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

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


def test_kserve_pipeline(
    tmp_path: Path, launch_exact: LaunchExact, unused_port: Callable[[], int]
) -> None:
    example = copy_example("kserve_pipeline", tmp_path)
    made = subprocess.run(
        [sys.executable, "make_model.py", "models"], cwd=example, capture_output=True, text=True
    )
    assert made.returncode == 0, made.stderr
    flowers = ["5.1,3.5,1.4,0.2", "6.0,2.9,4.5,1.5", "6.7,3.0,5.2,2.3"]
    grpc_port = unused_port()
    args = [
        "--config_path",
        str(example / "config.json"),
        "--port",
        str(grpc_port),
        "--python_path",
        str(example),
    ]
    with launch_exact(args, model="iris_pipeline") as server:
        over_grpc = run_client(example, "--url", f"127.0.0.1:{grpc_port}", *flowers)
        over_rest = run_client(example, "--rest", "--url", f"127.0.0.1:{server.port}", *flowers)
    assert over_grpc.returncode == 0, over_grpc.stderr
    assert over_grpc.stdout == over_rest.stdout
    assert over_grpc.stdout.splitlines() == expected_iris(example, flowers)


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
