"""Fuzzing KServe's REST infer endpoint with generated request bodies (the Open Inference
Protocol's JSON form, tests/fixtures/kserve_infer_openapi.json, with this repository's model and
tensor names so that many cases get past the lookups). Never a 5xx (except from `explode`,
whose calculator fails on purpose and is left out), every 4xx OVMS's `{"error": "..."}`, and a
healthy server afterwards."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import httpx

if TYPE_CHECKING:
    from conftest import Fuzzer, KServeServer

DOCUMENT = Path(__file__).resolve().parents[2] / "fixtures" / "kserve_infer_openapi.json"


def well_formed_now_and_then(case: Any, dice: int) -> None:
    """One case in five asks `linear` for a well-formed x, keeping the generated rest."""
    if dice < 2 and isinstance(case.body, dict):
        case.path_parameters = {"name": "linear"}
        case.body["inputs"] = [
            {"name": "x", "datatype": "FP32", "shape": [1, 4], "data": [dice, 2, 3, 4]}
        ]
        case.body.pop("outputs", None)


def check_kserve_answer(case: Any, response: Any) -> None:
    status = response.status_code
    sent = json.dumps(case.body, default=str)[:1000]
    where = f"{case.path_parameters}: {sent}"
    assert status < 500, f"{status} for {where}:\n{response.text[:1000]}"
    if status >= 400:
        error = response.json()["error"]
        assert isinstance(error, str) and error, response.text


def test_fuzzed_infer_requests_never_break_the_server(
    kserve_server: KServeServer, fuzzer: Callable[[str, dict[str, Any]], Fuzzer]
) -> None:
    url = f"http://{kserve_server.rest_url}"
    document = json.loads(DOCUMENT.read_text(encoding="utf-8"))
    report = fuzzer(url, document).run(
        "/v2/models/{name}/infer", check_kserve_answer, well_formed_now_and_then
    )
    print(f"KServe REST infer: {report}")
    assert 200 in report.statuses, "no case reached a model"
    assert httpx.get(f"{url}/v2/health/ready").status_code == 200
    body = {"inputs": [{"name": "x", "datatype": "FP32", "shape": [1, 4], "data": [1, 2, 3, 4]}]}
    assert httpx.post(f"{url}/v2/models/linear/infer", json=body).status_code == 200
