"""OpenAI's model list: `GET /v3/models` and `/v3/models/{name}` (and under /v1/, /v3/v1/).

Every available graph is a model, and so is each name that selects an adapter of one (a LoRA),
listed with its graph as `parent`, as vLLM lists its adapters.
"""

from __future__ import annotations

from typing import Any

from aiohttp import web

from calculators.http.apis import PREFIXES
from graphrt.http.state import STATE


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
        app.router.add_get(prefix + "/models", list_models)
        app.router.add_get(prefix + "/models/{name}", get_model)
