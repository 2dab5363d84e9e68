"""OpenAI routes: chat/completions, completions and models under /v3/ and /v1/.

A generation request runs the graph named by its `model` field. The first response chunk decides
the reply: a unary body is sent as JSON; a stream gets SSE headers and then every chunk as it is
produced. An error before the first chunk is an ordinary error response with the right status; an
error after it (headers are already sent) ends the stream as its API does, which the route table
knows by path (servables.openai.stream_failure): chat completions and completions with one SSE
error frame and `[DONE]`, the Responses API with a `response.failed` event and no `[DONE]`. A
client that goes away cancels the handler (the app runs with handler cancellation), which cancels
the graph run and aborts the engine requests.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import AsyncGenerator, Awaitable, Callable
from typing import Any

from aiohttp import web

from calculators.llm.payload import HttpPayload, HttpReply
from graphrt.error_map import to_client_error
from graphrt.errors import RequestTooLarge
from graphrt.http.prompt_batch import joined, split_prompts
from graphrt.http.state import STATE
from graphrt.observability.metrics import RequestRecord
from servables.errors import InvalidRequest, ServableError
from servables.openai.stream_failure import (
    ChatStreamFailure,
    ResponsesStreamFailure,
    StreamFailure,
)
from servables.request_fields import Form

logger = logging.getLogger(__name__)

# Each generative path, and how a stream of its API ends when the graph fails mid-stream; None for
# a path that never streams (its one JSON body is sent as such, whatever "stream" says).
GENERATIVE_PATHS: dict[str, Callable[[str], StreamFailure] | None] = {
    "/chat/completions": ChatStreamFailure,
    "/completions": ChatStreamFailure,
    "/responses": ResponsesStreamFailure,
    "/tokenize": None,
}
PREFIXES = ("/v3", "/v1", "/v3/v1")
SSE_HEADERS = {
    "Content-Type": "text/event-stream",
    "Cache-Control": "no-cache",
    "Connection": "keep-alive",
    "X-Accel-Buffering": "no",
}


class RequestConnection:
    """`ClientConnection` over an aiohttp request: lets calculators see a disconnect."""

    def __init__(self, request: web.Request) -> None:
        self._request = request
        self._callbacks: list[Callable[[], None]] = []
        self._gone = False

    def is_disconnected(self) -> bool:
        transport = self._request.transport
        return self._gone or transport is None or transport.is_closing()

    def on_disconnect(self, callback: Callable[[], None]) -> None:
        self._callbacks.append(callback)

    def disconnected(self) -> None:
        if not self._gone:
            self._gone = True
            for callback in self._callbacks:
                callback()


async def read_json(request: web.Request) -> tuple[bytes, Any]:
    try:
        raw = await request.read()
    except web.HTTPRequestEntityTooLarge as error:
        limit = request.app[STATE].settings.max_request_size
        raise RequestTooLarge(
            f"Request body is larger than the limit of {limit} bytes (see --max_request_size)"
        ) from error
    if not raw:
        raise InvalidRequest("Request body is empty; expected a JSON object")
    try:
        body = json.loads(raw)
    except (ValueError, UnicodeDecodeError) as error:
        raise InvalidRequest(f"The request body is not valid JSON: {error}") from error
    if not isinstance(body, dict):
        raise InvalidRequest("JSON body must be an object")
    return raw, body


def http_payload(
    request: web.Request,
    raw: bytes,
    body: Any,
    connection: RequestConnection,
    form: Form | None = None,
) -> HttpPayload:
    """The request as a graph's input packet: body, parsed JSON (or the multipart form), path,
    headers, connection."""
    return HttpPayload(
        uri=request.path,
        headers=dict(request.headers),
        body=raw,
        parsed_json=body,
        client=connection,
        form=form,
    )


def model_name(body: dict[str, Any]) -> str:
    model = body.get("model")
    if model is None:
        raise InvalidRequest("model missing in request", param="model")
    if not isinstance(model, str):
        raise InvalidRequest("model is not a string", param="model")
    return model


async def generate(
    request: web.Request, stream_failure: Callable[[str], StreamFailure] | None
) -> web.StreamResponse:
    """Run the graph the request's `model` names; `stream_failure` is the path's API's."""
    raw, body = await read_json(request)
    model = model_name(body)
    streaming = stream_failure is not None and body.get("stream") is True
    ending = stream_failure(model) if stream_failure is not None else None
    return await run_graph(request, model, streaming, ending, raw, body)


async def run_graph(
    request: web.Request,
    model: str,
    streaming: bool,
    stream_failure: StreamFailure | None,
    raw: bytes = b"",
    body: Any = None,
    form: Form | None = None,
) -> web.StreamResponse:
    """Run the graph `model` names on the request (its JSON body, or its multipart form) and
    send what it answers (see `respond`), counted in OVMS's request metrics."""
    state = request.app[STATE]
    servable = state.repository.get(model)
    connection = RequestConnection(request)
    several = _is_completions(request.path) and isinstance(body, dict)
    prompts = split_prompts(body) if several else None
    if prompts:  # several prompts: one graph run each, joined (prompt_batch.py)

        def run_one(one: dict[str, Any]) -> AsyncGenerator[bytes | HttpReply, None]:
            encoded = json.dumps(one, ensure_ascii=False).encode()
            return servable.run_http(http_payload(request, encoded, one, connection))

        chunks = joined(prompts, run_one, streaming)
    else:
        chunks = servable.run_http(http_payload(request, raw, body, connection, form))
    method = "Stream" if streaming else "Unary"
    with state.metrics.request(
        "V3", "REST", method, servable.name, available=servable.available
    ) as record:
        return await respond(request, chunks, streaming, connection, record, stream_failure)


def _is_completions(path: str) -> bool:
    return path.endswith("/completions") and not path.endswith("/chat/completions")


def generative_route(
    stream_failure: Callable[[str], StreamFailure] | None,
) -> Callable[[web.Request], Awaitable[web.StreamResponse]]:
    """The handler of one generative path, whose streams end as `stream_failure` renders."""

    async def handler(request: web.Request) -> web.StreamResponse:
        return await generate(request, stream_failure)

    return handler


async def respond(
    request: web.Request,
    chunks: AsyncGenerator[bytes | HttpReply, None],
    streaming: bool,
    connection: RequestConnection,
    record: RequestRecord,
    stream_failure: StreamFailure | None = None,
) -> web.StreamResponse:
    """Send the graph's chunks as one JSON body or as SSE; see the module docstring.

    `stream_failure` sees every chunk sent and renders the end of a stream that fails after its
    first chunk (the frames of the request's API; chat completions' when not given). A unary
    answer that is an HttpReply (speech audio) is sent with its own content type and headers; a
    stream whose first chunk is an HttpReply (of SSE frames) sends its headers with the stream's.
    """
    ending = stream_failure if stream_failure is not None else ChatStreamFailure()
    response: web.StreamResponse | None = None
    try:
        try:
            first = await chunks.__anext__()
        except StopAsyncIteration:
            raise ServableError("the graph produced no response") from None
        record.responded()
        if not streaming:
            async for _ in chunks:
                pass
            record.succeeded = True
            if isinstance(first, HttpReply):
                return web.Response(
                    body=first.body, content_type=first.content_type, headers=first.headers
                )
            return web.Response(body=first, content_type="application/json")
        headers = {**SSE_HEADERS, **first.headers} if isinstance(first, HttpReply) else SSE_HEADERS
        response = web.StreamResponse(status=200, headers=headers)
        await response.prepare(request)
        await response.write(_frames(first))
        ending.sent(_frames(first))
        async for chunk in chunks:
            record.responded()
            await response.write(_frames(chunk))
            ending.sent(_frames(chunk))
        await response.write_eof()
        record.succeeded = True
        return response
    except asyncio.CancelledError:
        connection.disconnected()
        raise
    except (ConnectionResetError, ConnectionError):
        connection.disconnected()
        assert response is not None
        return response
    except Exception as error:  # typed errors, and bugs: converted (and logged) once
        record.graph_failed()
        if response is None:
            raise
        failure = to_client_error(error)
        await response.write(
            ending.frames(failure.message, failure.error_type, failure.param, failure.code)
        )
        await response.write_eof()
        return response
    finally:
        await chunks.aclose()


def _frames(chunk: bytes | HttpReply) -> bytes:
    if isinstance(chunk, HttpReply):
        if chunk.content_type != SSE_HEADERS["Content-Type"]:
            raise ServableError("the graph answered a streaming request with a non-SSE reply")
        return chunk.body
    return chunk


def model_entry(name: str, created: float, parent: str | None = None) -> dict[str, Any]:
    """OpenAI's Model; a name that selects an adapter of another model (a LoRA) also names that
    model as `parent`, as vLLM lists its adapters."""
    entry: dict[str, Any] = {
        "id": name,
        "object": "model",
        "created": int(created),
        "owned_by": "graphrt",
    }
    if parent is not None:
        entry["parent"] = parent
    return entry


async def list_models(request: web.Request) -> web.Response:
    state = request.app[STATE]
    entries: dict[str, dict[str, Any]] = {}  # a name once: a graph's own before another's alias
    for name, servable in sorted(state.repository.servables.items()):
        if servable.available:
            entries[name] = model_entry(name, servable.loaded_at or state.started_at)
    for name, servable in state.repository.servables.items():
        if servable.available:
            for alias in servable.aliases:
                created = servable.loaded_at or state.started_at
                entries.setdefault(alias, model_entry(alias, created, name))
    return web.json_response({"object": "list", "data": list(entries.values())})


async def get_model(request: web.Request) -> web.Response:
    state = request.app[STATE]
    name = request.match_info["name"]
    servable = state.repository.get(name)
    parent = None if state.repository.servables.get(name) is servable else servable.name
    return web.json_response(model_entry(name, servable.loaded_at or state.started_at, parent))


def add_routes(app: web.Application) -> None:
    for prefix in PREFIXES:
        for path, stream_failure in GENERATIVE_PATHS.items():
            app.router.add_post(prefix + path, generative_route(stream_failure))
        app.router.add_get(prefix + "/models", list_models)
        app.router.add_get(prefix + "/models/{name}", get_model)


def is_openai_path(path: str) -> bool:
    return path.startswith(
        ("/v3/", "/v1/chat", "/v1/completions", "/v1/models", "/v1/responses", "/v1/tokenize")
    )
