"""KServe v2 over REST (/v2/...): JSON tensors, and the binary-data extension Triton clients use.

A request whose body carries binary tensors says where its JSON ends with the
Inference-Header-Content-Length header; a response with binary outputs does the same. Errors
are OVMS's `{"error": "<message>"}` with the status of the error class (the app's middleware).
"""

from __future__ import annotations

import dataclasses

from aiohttp import web

from graphrt.http.state import STATE
from graphrt.kserve.dataplane import KServeDataPlane
from graphrt.kserve.types import (
    BINARY_HEADER,
    request_from_rest,
    response_to_rest,
)
from servables.errors import InvalidRequest

INTERFACE = "REST"


def dataplane(request: web.Request) -> KServeDataPlane:
    return request.app[STATE].dataplane


def _name_version(request: web.Request) -> tuple[str, str]:
    return request.match_info["name"], request.match_info.get("version", "")


async def server_metadata(request: web.Request) -> web.Response:
    return web.json_response(dataclasses.asdict(dataplane(request).server_metadata()))


async def live(request: web.Request) -> web.Response:
    return web.Response(status=200 if dataplane(request).server_live() else 503)


async def ready(request: web.Request) -> web.Response:
    return web.Response(status=200 if dataplane(request).server_ready() else 503)


async def model_ready(request: web.Request) -> web.Response:
    ok = dataplane(request).model_ready(*_name_version(request), INTERFACE)
    return web.Response(status=200 if ok else 503)


async def model_metadata(request: web.Request) -> web.Response:
    found = dataplane(request).model_metadata(*_name_version(request), INTERFACE)
    return web.json_response(
        {
            "name": found.name,
            "versions": found.versions,
            "platform": found.platform,
            "inputs": [
                {"name": t.name, "datatype": t.datatype, "shape": list(t.shape)}
                for t in found.inputs
            ],
            "outputs": [
                {"name": t.name, "datatype": t.datatype, "shape": list(t.shape)}
                for t in found.outputs
            ],
        }
    )


async def infer(request: web.Request) -> web.Response:
    name, version = _name_version(request)
    header = request.headers.get(BINARY_HEADER)
    try:
        header_length = int(header) if header is not None else None
    except ValueError:
        raise InvalidRequest(f"{BINARY_HEADER} must be an integer, got {header!r}") from None
    body = await request.read()
    infer_request = request_from_rest(name, version, body, header_length)
    response = await dataplane(request).infer(infer_request, INTERFACE)
    payload, json_length = response_to_rest(response, infer_request)
    if json_length is None:
        return web.Response(body=payload, content_type="application/json")
    return web.Response(
        body=payload,
        content_type="application/octet-stream",
        headers={BINARY_HEADER: str(json_length)},
    )


def add_routes(app: web.Application) -> None:
    app.router.add_get("/v2", server_metadata)
    app.router.add_get("/v2/health/live", live)
    app.router.add_get("/v2/health/ready", ready)
    for base in ("/v2/models/{name}", "/v2/models/{name}/versions/{version}"):
        app.router.add_get(base, model_metadata)
        app.router.add_get(base + "/ready", model_ready)
        app.router.add_post(base + "/infer", infer)
