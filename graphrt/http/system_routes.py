"""OVMS's system routes: servable status (/v1/config) and reload."""

from __future__ import annotations

import logging
from typing import Any

from aiohttp import web

from graphrt.http.state import STATE
from graphrt.serving.graph_servable import GraphServable
from graphrt.serving.model_repository import ConfigFileError
from servables.ov_model.versions import VersionedModel

logger = logging.getLogger(__name__)


def version_status(version: int, state: str, error: str | None) -> dict[str, Any]:
    return {
        "version": str(version),
        "state": state,
        "status": {
            "error_code": "OK" if error is None else "UNKNOWN",
            "error_message": "OK" if error is None else error,
        },
    }


def servable_status(servable: GraphServable) -> dict[str, Any]:
    state, error = servable.status()
    return {"model_version_status": [version_status(servable.definition.version, state, error)]}


def model_status(model: VersionedModel) -> dict[str, Any]:
    return {
        "model_version_status": [
            version_status(v.number, v.state.value, v.error)
            for v in sorted(model.versions.values(), key=lambda v: v.number, reverse=True)
        ]
    }


def config_status(request: web.Request) -> dict[str, Any]:
    repository = request.app[STATE].repository
    status = {name: servable_status(s) for name, s in repository.servables.items()}
    status.update((name, model_status(m)) for name, m in repository.models.items())
    status.update(
        (name, {"model_version_status": [version_status(1, "LOADING", None)]})
        for name in repository.pending
    )
    return dict(sorted(status.items()))


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


def add_routes(app: web.Application) -> None:
    app.router.add_get("/v1/config", get_config)
    app.router.add_post("/v1/config/reload", reload_config)
