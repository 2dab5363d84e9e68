"""Typed application state shared by the routes."""

from __future__ import annotations

from dataclasses import dataclass

from aiohttp import web

from graphruntime.server.kserve.dataplane import KServeDataPlane
from graphruntime.server.metrics import Metrics
from graphruntime.server.model_repository import ModelRepository
from graphruntime.server.settings import ServerSettings


@dataclass
class ServerState:
    repository: ModelRepository
    settings: ServerSettings
    started_at: float
    metrics: Metrics
    dataplane: KServeDataPlane


STATE = web.AppKey("state", ServerState)
