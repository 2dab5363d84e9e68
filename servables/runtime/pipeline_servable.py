"""What the image and audio servables share: a pipeline loaded off the loop, run by a runner.

Each loads its openvino-genai pipeline(s) on a worker thread at `start()` (seconds), then runs
requests through its PipelineRunner; the server finds `admission` (the queue bound) and the
metrics collector `runner` on any of them. Subclasses say what their model is (`kind`, the
words of the load log line) and how it loads and unloads.
"""

from __future__ import annotations

import asyncio
import logging
import time
from abc import ABC, abstractmethod
from typing import Any, ClassVar

from servables.runtime.admission import Admission
from servables.runtime.thread_runner import PipelineRunner


class PipelineServable(ABC):
    """See the module docstring. `config` has at least `name` and `models_path`."""

    kind: ClassVar[str]  # image_generation, speech2text, text2speech: metrics and thread names
    description: ClassVar[str]  # "image generation", ...: the load log line

    def __init__(self, config: Any) -> None:
        self.config = config
        self.name: str = config.name
        self.runner = PipelineRunner(config.name, self.kind)
        # The subclass's module logger, so log names (and their configuration) stay per kind.
        self._logger = logging.getLogger(type(self).__module__)

    @property
    def admission(self) -> Admission:
        return self.runner.admission

    def aliases(self) -> list[str]:
        """Model names besides the graph's that route to this servable."""
        return []

    async def start(self) -> None:
        started = time.perf_counter()
        await asyncio.to_thread(self._load)
        self.runner.start()
        self._logger.info(
            "%s: %s model %s loaded in %.1f s (%s)",
            self.name,
            self.description,
            self.config.models_path,
            time.perf_counter() - started,
            self._describe(),
        )

    async def stop(self) -> None:
        await self.runner.stop()
        self._unload()

    @abstractmethod
    def _load(self) -> None:
        """Blocking (a worker thread): build and compile the pipeline(s); raise
        ServableLoadError with the reason when the model cannot be served."""

    @abstractmethod
    def _unload(self) -> None:
        """Drop the pipeline(s)."""

    @abstractmethod
    def _describe(self) -> str:
        """What the load is logged with (pipelines, voices, devices...)."""
