"""OVMS's system routes: health (KServe v2), servable status (/v1/config) and reload."""

from __future__ import annotations

import logging
from typing import Any

from aiohttp import web

from graphruntime.server.graph_servable import GraphServable
from graphruntime.server.http.state import STATE
from graphruntime.server.model_repository import ConfigFileError

logger = logging.getLogger(__name__)


def servable_status(servable: GraphServable) -> dict[str, Any]:
    ok = servable.available
    return {
        "model_version_status": [
            {
                "version": str(servable.definition.version),
                "state": servable.state.value,
                "status": {
                    "error_code": "OK" if ok or servable.error is None else "UNKNOWN",
                    "error_message": "OK" if ok or servable.error is None else servable.error,
                },
            }
        ]
    }


def config_status(request: web.Request) -> dict[str, Any]:
    repository = request.app[STATE].repository
    return {name: servable_status(s) for name, s in sorted(repository.servables.items())}


async def get_config(request: web.Request) -> web.Response:
    return web.json_response(config_status(request))


async def reload_config(request: web.Request) -> web.Response:
    repository = request.app[STATE].repository
    if repository.config_path is None:
        return web.json_response(
            {"error": "Reload needs --config_path; this server was started from a model path"},
            status=400,
        )
    try:
        changed = await repository.reload()
    except ConfigFileError as error:
        logger.error("configuration not reloaded: %s", error.message)
        return web.json_response({"error": error.message}, status=400)
    repository.config_changed()  # the poller need not reload the same text again
    return web.json_response(config_status(request), status=201 if changed else 200)


async def live(request: web.Request) -> web.Response:
    return web.Response(status=200)


async def ready(request: web.Request) -> web.Response:
    state = request.app[STATE]
    servables = state.repository.servables.values()
    ok = not state.shutting_down and all(s.available for s in servables)
    return web.Response(status=200 if ok else 503)


async def model_ready(request: web.Request) -> web.Response:
    servable = request.app[STATE].repository.servables.get(request.match_info["name"])
    if servable is None:
        return web.json_response({"error": "Model with requested name is not found"}, status=404)
    return web.Response(status=200 if servable.available else 503)


def add_routes(app: web.Application) -> None:
    app.router.add_get("/v1/config", get_config)
    app.router.add_post("/v1/config/reload", reload_config)
    app.router.add_get("/v2/health/live", live)
    app.router.add_get("/v2/health/ready", ready)
    app.router.add_get("/v2/models/{name}/ready", model_ready)
    app.router.add_get("/v2/models/{name}/versions/{version}/ready", model_ready)
