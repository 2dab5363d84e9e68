"""Image and audio routes: OpenAI's images and audio APIs, each run through the model's graph.

    POST /v3/images/generations     JSON           ImageGenCalculator
    POST /v3/images/edits           multipart      ImageGenCalculator (image, optional mask)
    POST /v3/audio/transcriptions   multipart      S2tCalculator
    POST /v3/audio/translations     multipart      S2tCalculator
    POST /v3/audio/speech           JSON           T2sCalculator

(and the same under /v1/ and /v3/v1/). As for chat, the request's `model` (a JSON member or a
form field) names the graph, and the graph's calculator answers: one body (JSON, or audio bytes
with their content type), or server-sent events when the request streams (`stream` true;
`stream_format: "sse"` for speech). A multipart form is read here, bounded by
--max_request_size, and reaches the graph as the payload's `form`.
"""

from __future__ import annotations

from typing import Any

from aiohttp import web

from graphrt.http.multipart import read_form
from graphrt.http.openai_routes import model_name, read_json, run_graph
from graphrt.http.state import STATE
from servables.errors import InvalidRequest
from servables.openai.stream_failure import EventStreamFailure
from servables.request_fields import RequestFields

PREFIXES = ("/v3", "/v1", "/v3/v1")
JSON_PATHS = ("/images/generations", "/audio/speech")
FORM_PATHS = ("/images/edits", "/audio/transcriptions", "/audio/translations")


def _streams(body: dict[str, Any]) -> bool:
    return body.get("stream") is True or body.get("stream_format") == "sse"


async def json_route(request: web.Request) -> web.StreamResponse:
    raw, body = await read_json(request)
    model = model_name(body)
    return await run_graph(request, model, _streams(body), EventStreamFailure(model), raw, body)


async def form_route(request: web.Request) -> web.StreamResponse:
    form = await read_form(request, request.app[STATE].settings.max_request_size)
    models = [value for value in form.get("model", []) if isinstance(value, str) and value]
    if not models:
        raise InvalidRequest("model field is missing in multipart body", param="model")
    try:  # read as the calculators read it, so both agree on whether the answer streams
        stream = bool(RequestFields(form=form).boolean("stream"))
    except InvalidRequest:
        stream = False  # the calculator refuses the field with its own message
    model = models[-1]
    return await run_graph(request, model, stream, EventStreamFailure(model), form=form)


def is_media_path(path: str) -> bool:
    """Paths with OpenAI's error shape and API keys (as the OpenAI routes)."""
    return any(path == prefix + tail for prefix in PREFIXES for tail in JSON_PATHS + FORM_PATHS)


def add_routes(app: web.Application) -> None:
    for prefix in PREFIXES:
        for path in JSON_PATHS:
            app.router.add_post(prefix + path, json_route)
        for path in FORM_PATHS:
            app.router.add_post(prefix + path, form_route)
