"""Typed application state shared by the routes."""

from __future__ import annotations

from dataclasses import dataclass

from aiohttp import web

from graphrt.kserve.dataplane import KServeDataPlane
from graphrt.observability.metrics import Metrics
from graphrt.serving.model_repository import ModelRepository
from graphrt.serving.settings import ServerSettings


@dataclass
class ServerState:
    repository: ModelRepository
    settings: ServerSettings
    started_at: float
    metrics: Metrics
    dataplane: KServeDataPlane


STATE = web.AppKey("state", ServerState)
