"""Worker threads for calculators whose sync hooks may block.

Blocking work runs on thread pools so the event loop stays responsive. Graphs share one default
pool unless they set `num_threads` or declare named executors, so a server running many concurrent
graph runs does not create threads per request.
"""

from __future__ import annotations

import os
import threading
from concurrent.futures import Executor, ThreadPoolExecutor
from typing import TYPE_CHECKING

from graphruntime._proto.stream_handler_options_pb2 import ThreadPoolExecutorOptions

if TYPE_CHECKING:
    from graphruntime.validation import ValidatedGraph

_lock = threading.Lock()
_default: ThreadPoolExecutor | None = None


def default_executor() -> ThreadPoolExecutor:
    global _default
    with _lock:
        if _default is None:
            _default = ThreadPoolExecutor(
                max_workers=max(4, os.cpu_count() or 1), thread_name_prefix="graphrt-worker"
            )
        return _default


class ExecutorSet:
    """The executors of one validated graph, created on first use and reused by all its runs."""

    def __init__(self, graph: ValidatedGraph) -> None:
        self._graph = graph
        self._pools: dict[str, Executor | None] = {}
        self._lock = threading.Lock()

    def get(self, name: str) -> Executor | None:
        """The pool for executor `name` ("" = default); None means run on the event loop."""
        with self._lock:
            if name not in self._pools:
                self._pools[name] = self._create(name)
            return self._pools[name]

    def _create(self, name: str) -> Executor | None:
        config = self._graph.executor_configs.get(name)
        if config is None:
            if name == "" and self._graph.num_threads:
                return ThreadPoolExecutor(
                    self._graph.num_threads, thread_name_prefix="graphrt-default"
                )
            return default_executor()
        if config.type == "ApplicationThreadExecutor":
            return None
        options = config.options.Extensions[ThreadPoolExecutorOptions.ext]
        threads = options.num_threads if options.num_threads > 0 else (os.cpu_count() or 1)
        prefix = options.thread_name_prefix or f"graphrt-{name}"
        return ThreadPoolExecutor(threads, thread_name_prefix=prefix)

    def shutdown(self) -> None:
        with self._lock:
            for pool in self._pools.values():
                if pool is not None and pool is not _default:
                    pool.shutdown(wait=False)
            self._pools.clear()
