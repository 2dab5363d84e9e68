"""Faults on the KServe server: bugs in user code become 500s with a request id (traceback in the
log only), ids travel in X-Request-Id / x-request-id, and a model version that failed to load is
retried until it loads while the old version serves."""

from __future__ import annotations

import re
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

import grpc
import httpx
import numpy as np
import pytest

from graphrt.kserve import grpc_predict_v2_pb2 as pb
from graphrt.kserve import grpc_predict_v2_pb2_grpc as pb_grpc

if TYPE_CHECKING:
    from conftest import KServeServer, Repository

NEGATIVE = {"inputs": [{"name": "value", "datatype": "INT32", "shape": [1], "data": [-3]}]}


def assert_no_internals(text: str) -> None:
    assert "Traceback" not in text and 'File "' not in text and ".py" not in text, text


def log_lines_of(server: KServeServer, request_id: str) -> str:
    return "\n".join(
        line for line in server.process.log().splitlines() if f"[request {request_id}]" in line
    )


def test_a_bug_in_an_openai_graph_is_a_500_with_the_request_id(
    kserve_server: KServeServer,
) -> None:
    url = f"http://{kserve_server.rest_url}"
    body = {"model": "buggy_http", "messages": [{"role": "user", "content": "hi"}]}
    response = httpx.post(f"{url}/v3/chat/completions", json=body)
    assert response.status_code == 500
    request_id = response.headers["X-Request-Id"]
    error = response.json()["error"]
    assert set(error) == {"message", "type", "param", "code"}
    assert error["type"] == "server_error"
    assert f"(request id {request_id})" in error["message"]
    assert "injected failure in a user calculator" in error["message"]
    assert_no_internals(response.text)
    # The log has the traceback under the same id (the lines that follow the first are the
    # traceback's own, written with the record).
    log = kserve_server.process.log()
    first = log.index(f"[request {request_id}]")
    assert "Traceback" in log[first:] and "RuntimeError: injected failure" in log[first:]


def test_an_incoming_request_id_is_kept(kserve_server: KServeServer) -> None:
    url = f"http://{kserve_server.rest_url}"
    response = httpx.post(
        f"{url}/v2/models/explode/infer", json=NEGATIVE, headers={"X-Request-Id": "trace-me-42"}
    )
    assert response.status_code == 500
    assert response.headers["X-Request-Id"] == "trace-me-42"
    message = response.json()["error"]
    assert 'node "checker" failed' in message and "(request id trace-me-42)" in message
    assert_no_internals(message)
    assert "negative values are not allowed here" in log_lines_of(kserve_server, "trace-me-42")
    # Every response carries an id, successes and client errors too; unreasonable ones are
    # replaced.
    ok = httpx.get(f"{url}/v2/health/live", headers={"X-Request-Id": "bad id with spaces"})
    assert re.fullmatch(r"[0-9a-f]{32}", ok.headers["X-Request-Id"])
    missing = httpx.post(f"{url}/v3/chat/completions", json={"model": "nope"})
    assert missing.status_code == 404 and missing.headers["X-Request-Id"]


def explode_request(value: int) -> Any:
    request = pb.ModelInferRequest(model_name="explode")
    request.inputs.add(name="value", datatype="INT32", shape=[1])
    request.raw_input_contents.append(np.array([value], np.int32).tobytes())
    return request


def test_grpc_errors_carry_the_request_id(kserve_server: KServeServer) -> None:
    with grpc.insecure_channel(kserve_server.grpc_url) as channel:
        stub = pb_grpc.GRPCInferenceServiceStub(channel)
        with pytest.raises(grpc.RpcError) as caught:
            stub.ModelInfer(explode_request(-1), metadata=[("x-request-id", "grpc-id-7")])
        error: Any = caught.value
        assert error.code() == grpc.StatusCode.INTERNAL
        assert "(request id grpc-id-7)" in error.details()
        assert ("x-request-id", "grpc-id-7") in tuple(error.trailing_metadata())
        # Without one of the client's, the error names the id the server made, in both places.
        with pytest.raises(grpc.RpcError) as caught:
            stub.ModelInfer(explode_request(-1))
        error = caught.value
        made = dict(error.trailing_metadata())["x-request-id"]
        assert re.fullmatch(r"[0-9a-f]{32}", made) and f"(request id {made})" in error.details()


def test_a_grpc_success_echoes_only_the_clients_request_id(kserve_server: KServeServer) -> None:
    with grpc.insecure_channel(kserve_server.grpc_url) as channel:
        stub = pb_grpc.GRPCInferenceServiceStub(channel)
        _, call = stub.ModelInfer.with_call(
            explode_request(2), metadata=[("x-request-id", "grpc-ok-8")]
        )
        assert ("x-request-id", "grpc-ok-8") in tuple(call.trailing_metadata())
        # An id the client did not send is the server's own (its logs): not sent on success.
        _, call = stub.ModelInfer.with_call(explode_request(2))
        assert "x-request-id" not in dict(call.trailing_metadata() or ())


def wait_for(condition: Any, what: str, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.1)


def test_a_failed_version_is_retried_until_it_loads_while_the_old_one_serves(
    kserve_server: KServeServer, growing_versions: Path, kserve_repository: Repository
) -> None:
    url = f"http://{kserve_server.rest_url}"
    x = np.random.default_rng(5).standard_normal((1, 4)).astype(np.float32)
    body = {
        "inputs": [{"name": "x", "datatype": "FP32", "shape": [1, 4], "data": x.ravel().tolist()}]
    }

    def statuses() -> dict[str, str]:
        found = httpx.get(f"{url}/v1/config").json()["growing"]["model_version_status"]
        return {entry["version"]: entry["state"] for entry in found}

    def answer() -> tuple[str, list[float]]:
        reply = httpx.post(f"{url}/v2/models/growing/infer", json=body).json()
        return reply["model_version"], reply["outputs"][0]["data"]

    broken = growing_versions / "9"
    broken.mkdir()
    (broken / "model.xml").write_text("<half a model/>")  # a copy still in progress
    wait_for(lambda: statuses().get("9") == "UNAVAILABLE", "version 9 to fail")
    version, _ = answer()
    assert version == "1"  # the old version serves meanwhile
    kserve_server.process.wait_for_log("model growing version 9 failed to load (attempt 2")

    kserve_repository.save_linear_model(broken, seed=99)  # the copy completes
    wait_for(lambda: statuses().get("9") == "AVAILABLE", "version 9 to load on a retry")
    wait_for(lambda: answer()[0] == "9", "version 9 to take over")
    expected = kserve_repository.run("growing", 9, {"x": x})["y"]
    np.testing.assert_allclose(answer()[1], expected.ravel(), rtol=1e-5)
    assert statuses()["1"] == "END"
