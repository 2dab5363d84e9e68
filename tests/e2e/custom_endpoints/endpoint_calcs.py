"""Calculators a user would write to serve endpoints of their own (loaded with --python_path)."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncGenerator
from pathlib import Path
from typing import Any, ClassVar

from calculators.http.payload import HttpPayload, request_body
from calculators.http.replies import HttpReply, JsonReply, Reply, SseEvents
from calculators.http.streaming import HttpStreamCalculator
from graphruntime import CalculatorContext, CalculatorContract, calculator_function
from servables.errors import InvalidRequest


@calculator_function(inputs=["HTTP_REQUEST_PAYLOAD"], outputs=["HTTP_RESPONSE_PAYLOAD"])
def EchoCalculator(payload: HttpPayload) -> JsonReply:
    """The request as the graph saw it."""
    form = {
        name: [v if isinstance(v, str) else f"{v.filename}:{len(v.data)}" for v in values]
        for name, values in (payload.form or {}).items()
    }
    return JsonReply(
        {
            "uri": payload.uri,
            "method": payload.method,
            "json": payload.parsed_json,
            "body": payload.body.decode(errors="replace"),
            "content_type": payload.headers.get("Content-Type"),
            "form": form,
        }
    )


@calculator_function(inputs=["HTTP_REQUEST_PAYLOAD"], outputs=["HTTP_RESPONSE_PAYLOAD"])
def CreatedCalculator(payload: HttpPayload) -> HttpReply:
    """Any content type, status and headers."""
    return HttpReply(b"made it", "text/plain", status=201, headers={"X-Made-By": "graph"})


@calculator_function(inputs=["HTTP_REQUEST_PAYLOAD"], outputs=["HTTP_RESPONSE_PAYLOAD"])
def RefusingCalculator(payload: HttpPayload) -> JsonReply:
    body = request_body(payload)
    if body.get("crash"):
        raise RuntimeError("a bug in user code")
    raise InvalidRequest("the answer is no", param="question")


class CountdownCalculator(HttpStreamCalculator):
    """{"count": n, "delay": s, "fail_at": k?, "marker": path?}: n events, one per LOOPBACK cycle;
    writes to `marker` how it ended (what a test reads to see a disconnect reach the graph)."""

    loopback_required: ClassVar[bool] = True

    @classmethod
    def get_contract(cls, cc: CalculatorContract) -> None:
        cls.declare_http_streams(cc)

    def open(self, cc: CalculatorContext) -> None:
        super().open(cc)
        self.sent = 0
        self.marker: Path | None = None

    async def replies(self, payload: HttpPayload) -> AsyncGenerator[Reply, None]:
        body: dict[str, Any] = request_body(payload)
        self.marker = Path(body["marker"]) if body.get("marker") else None
        for step in range(int(body["count"])):
            if step == body.get("fail_at"):
                raise InvalidRequest("counted too far", param="fail_at")
            await asyncio.sleep(float(body.get("delay", 0)))
            self.sent += 1
            yield SseEvents.of([{"type": "tick", "left": int(body["count"]) - step - 1}])
        yield SseEvents.of([{"type": "liftoff"}])

    async def close(self, cc: CalculatorContext) -> None:
        await super().close(cc)
        if self.marker is not None:
            client = self.payload.client if self.payload else None
            gone = client is not None and client.is_disconnected()
            self.marker.write_text(json.dumps({"sent": self.sent, "disconnected": gone}))


@calculator_function(inputs=["HTTP_REQUEST_PAYLOAD"], outputs=["HTTP_RESPONSE_PAYLOAD"])
def OvmsStyleCalculator(payload: HttpPayload) -> bytes:
    """As a graph written for OVMS answers: bytes, SSE frames when the request streams."""
    body = request_body(payload)
    if body.get("stream"):
        return b'data: {"n":1}\n\ndata: {"n":2}\n\ndata: [DONE]\n\n'
    return json.dumps({"n": 0}).encode()
