"""The API routes: every path of calculators.http.apis, and any other POST under /v3/ or /v1/,
runs the graph its request names.

    POST /v3/chat/completions, /v3/completions, /v3/responses, /v3/tokenize     JSON
    POST /v3/embeddings, /v3/rerank (and Cohere's /v2/rerank)                   JSON
    POST /v3/images/generations, /v3/audio/speech                               JSON
    POST /v3/images/edits, /v3/audio/transcriptions, /v3/audio/translations     multipart form

(and the same under /v1/ and /v3/v1/). The request's `model` (a JSON member or a form field) names
the graph. Any other POST under /v3/ or /v1/ is a custom endpoint, as in OVMS: a JSON body or a
form names its graph the same way; a body of another content type (or an empty `model`) names it
by the rest of the path (`POST /v3/my_graph`).

The request reaches the graph as an HttpPayload packet and its replies come back as they are made
(calculators.http.replies): a JsonReply or HttpReply is the whole response; SseEvents start a
stream (SSE headers and the first step's own, then every step as it comes). A graph written for
OVMS answers with bytes:
one JSON body, or SSE frames when the request asked to stream. An error before the first reply is
an ordinary error response with the right status; an error after it (headers are out) ends the
stream as its API does (stream_endings.py). A client that goes away cancels the handler (the app
runs with handler cancellation), which cancels the graph run and aborts the engine requests.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import AsyncGenerator, Awaitable, Callable
from typing import Any

from aiohttp import web

from calculators.http.apis import Api, served_paths
from calculators.http.payload import HttpPayload
from calculators.http.replies import HttpReply, JsonReply, Reply, SseEvents, StreamStep, encode
from graphrt.error_map import to_client_error
from graphrt.errors import RequestTooLarge
from graphrt.http.multipart import read_form
from graphrt.http.prompt_batch import joined, split_prompts
from graphrt.http.state import STATE
from graphrt.http.stream_endings import (
    ChatStreamFailure,
    EventStreamFailure,
    ResponsesStreamFailure,
    StreamFailure,
)
from graphrt.observability.metrics import RequestRecord
from servables.errors import InvalidRequest, ServableError
from servables.io.request_fields import Form, RequestFields, model_of

logger = logging.getLogger(__name__)

# How a stream of each API ends when its graph fails mid-stream; an API absent never streams.
STREAM_ENDINGS: dict[Api, Callable[[str], StreamFailure]] = {
    Api.CHAT: ChatStreamFailure,
    Api.COMPLETIONS: ChatStreamFailure,
    Api.RESPONSES: ResponsesStreamFailure,
    Api.IMAGE_GENERATIONS: EventStreamFailure,
    Api.IMAGE_EDITS: EventStreamFailure,
    Api.TRANSCRIPTIONS: EventStreamFailure,
    Api.TRANSLATIONS: EventStreamFailure,
    Api.SPEECH: EventStreamFailure,
}
CUSTOM_PREFIXES = ("/v3/", "/v1/")
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


async def read_json(request: web.Request) -> tuple[bytes, dict[str, Any]]:
    """The body and its JSON object."""
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
    method, headers, connection."""
    return HttpPayload(
        uri=request.path_qs,
        headers=dict(request.headers),
        body=raw,
        parsed_json=body,
        client=connection,
        form=form,
        method=request.method,
    )


def api_route(api: Api) -> Callable[[web.Request], Awaitable[web.StreamResponse]]:
    """The handler of `api`'s paths."""
    ending = STREAM_ENDINGS.get(api)

    async def handler(request: web.Request) -> web.StreamResponse:
        if api.takes_form:
            form = await read_form(request, request.app[STATE].settings.max_request_size)
            models = [value for value in form.get("model", []) if isinstance(value, str) and value]
            if not models:
                raise InvalidRequest("model field is missing in multipart body", param="model")
            model = models[-1]
            return await run_graph(
                request, model, ending is not None and _form_streams(form), ending, form=form
            )
        raw, body = await read_json(request)
        model = model_of(body)
        streams = ending is not None and _json_streams(api, body)
        return await run_graph(request, model, streams, ending, raw, body, api=api)

    return handler


def _json_streams(api: Api, body: dict[str, Any]) -> bool:
    """Whether the request asks to stream (speech asks with `stream_format: "sse"`)."""
    return body.get("stream") is True or (api is Api.SPEECH and body.get("stream_format") == "sse")


def _form_streams(form: Form) -> bool:
    try:  # read as the calculators read it, so both agree on whether the answer streams
        return bool(RequestFields(form=form).boolean("stream"))
    except InvalidRequest:
        return False  # the calculator refuses the field with its own message


async def run_graph(
    request: web.Request,
    model: str,
    streaming: bool,
    ending: Callable[[str], StreamFailure] | None,
    raw: bytes = b"",
    body: Any = None,
    api: Api | None = None,
    form: Form | None = None,
) -> web.StreamResponse:
    """Run the graph `model` names on the request (its JSON body, or its multipart form) and
    send what it answers (see `respond`), counted in OVMS's request metrics. `streaming` is what
    the request asked for: the method in the metrics, and how bytes from a graph are sent."""
    state = request.app[STATE]
    servable = state.repository.get(model)
    connection = RequestConnection(request)
    prompts = split_prompts(body) if api is Api.COMPLETIONS and isinstance(body, dict) else None
    if prompts:  # several prompts: one graph run each, joined (prompt_batch.py)

        def run_one(one: dict[str, Any]) -> AsyncGenerator[Reply, None]:
            encoded = json.dumps(one, ensure_ascii=False).encode()
            return servable.run_http(http_payload(request, encoded, one, connection))

        replies = joined(prompts, run_one, streaming)
    else:
        replies = servable.run_http(http_payload(request, raw, body, connection, form))
    method = "Stream" if streaming else "Unary"
    with state.metrics.request(
        "V3", "REST", method, servable.name, available=servable.available
    ) as record:
        failure = ending(model) if ending is not None else None
        return await respond(request, replies, streaming, connection, record, failure)


async def respond(
    request: web.Request,
    replies: AsyncGenerator[Reply, None],
    streaming: bool,
    connection: RequestConnection,
    record: RequestRecord,
    stream_failure: StreamFailure | None = None,
) -> web.StreamResponse:
    """Send the graph's replies as one response or as a stream; see the module docstring.

    `stream_failure` sees every step sent and renders the end of a stream that fails after its
    first step (the events of the request's API; chat completions' when not given).
    """
    ending = stream_failure if stream_failure is not None else ChatStreamFailure()
    response: web.StreamResponse | None = None
    try:
        try:
            first = await replies.__anext__()
        except StopAsyncIteration:
            raise ServableError("the graph produced no response") from None
        record.responded()
        if not isinstance(first, SseEvents) and not (streaming and isinstance(first, bytes)):
            async for _ in replies:
                pass
            record.succeeded = True
            return _whole(first)
        headers = {**SSE_HEADERS, **first.headers} if isinstance(first, SseEvents) else SSE_HEADERS
        response = web.StreamResponse(status=200, headers=headers)
        await response.prepare(request)
        await _send(response, first, ending)
        async for reply in replies:
            record.responded()
            await _send(response, reply, ending)
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
        last = ending.frames(failure.message, failure.error_type, failure.param, failure.code)
        await response.write(last.encode())
        await response.write_eof()
        return response
    finally:
        await replies.aclose()


def _whole(reply: Reply) -> web.Response:
    """A unary answer: a JsonReply or an HttpReply with its status, or a graph's bytes (JSON)."""
    if isinstance(reply, HttpReply):
        return web.Response(
            body=reply.body,
            status=reply.status,
            content_type=reply.content_type,
            headers=reply.headers or None,
        )
    return web.Response(
        body=encode(reply),
        status=reply.status if isinstance(reply, JsonReply) else 200,
        content_type="application/json",
        headers=(reply.headers or None) if isinstance(reply, JsonReply) else None,
    )


async def _send(response: web.StreamResponse, reply: Reply, ending: StreamFailure) -> None:
    step = _stream_step(reply)
    await response.write(encode(step))
    ending.sent(step)


def _stream_step(reply: Reply) -> StreamStep:
    if isinstance(reply, SseEvents | bytes):
        return reply
    raise ServableError("the graph answered a streaming request with a whole response")


async def custom_route(request: web.Request) -> web.StreamResponse:
    """A POST under /v3/ or /v1/ that no API route claims; see the module docstring."""
    raw, body, form, model = b"", None, None, ""
    if request.content_type == "application/json":
        raw, body = await read_json(request)
        model = model_of(body)
    elif request.content_type.startswith("multipart/"):
        form = await read_form(request, request.app[STATE].settings.max_request_size)
        model = next((v for v in reversed(form.get("model", [])) if isinstance(v, str)), "")
    else:
        raw = await _read_raw(request)
    if not model:  # OVMS's routing by URI: the graph's name is the rest of the path
        model = request.path[len("/v3/") :]
        if not model:
            raise InvalidRequest("No model named: send its name in `model` or in the path")
    streams = _form_streams(form) if form is not None else _asks_ovms_stream(request, body)
    return await run_graph(request, model, streams, EventStreamFailure, raw, body, form=form)


async def _read_raw(request: web.Request) -> bytes:
    try:
        return await request.read()
    except web.HTTPRequestEntityTooLarge as error:
        limit = request.app[STATE].settings.max_request_size
        raise RequestTooLarge(
            f"Request body is larger than the limit of {limit} bytes (see --max_request_size)"
        ) from error


def _asks_ovms_stream(request: web.Request, body: Any) -> bool:
    """OVMS's rule for a graph that answers with bytes: a JSON request to a path that names
    completions or responses streams when `stream` is true."""
    generative = "completions" in request.path or "responses" in request.path
    return generative and isinstance(body, dict) and body.get("stream") is True


def add_routes(app: web.Application) -> None:
    for path, api in served_paths().items():
        app.router.add_post(path, api_route(api))


def add_custom_routes(app: web.Application) -> None:
    """The routes of custom endpoints: registered after every other route, which they yield to."""
    for prefix in CUSTOM_PREFIXES:
        app.router.add_post(prefix + "{path:.+}", custom_route)
