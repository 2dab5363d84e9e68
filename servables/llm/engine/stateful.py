"""The stateful loop: one request at a time through LLMPipeline / VLMPipeline.generate().

Stateful pipelines are chosen for NPU or `pipeline_type: LM`. `generate()` runs on the main thread
(it releases the GIL) while a reader thread takes commands, so an abort reaches the streamer
callback, which then returns CANCEL.

Vision prompts are generated with `apply_chat_template` off (the frontend already rendered the
template), and their prompt token count is read from the results' perf metrics.

Stateful pipelines survive a grammar that does not compile: generate() raises, the request fails
as invalid and the frontend remembers the grammar (as it does for the continuous-batching loop,
servables.llm.engine.batching). Its own module because it shares no state or control flow with that
loop, only the conversions in servables.llm.engine.pipeline.
"""

from __future__ import annotations

import queue
import threading
from multiprocessing.connection import Connection
from typing import Any

from servables.llm.engine.messages import (
    Abort,
    AddRequest,
    EngineMetrics,
    RequestFailed,
    SequenceDelta,
    Shutdown,
    StepOutputs,
    receive_command,
)
from servables.llm.engine.pipeline import (
    engine_message,
    generation_config,
    grammar_key,
    image_tensors,
    vlm_prompt_tokens,
)


class StatefulLoop:
    """One request at a time through LLMPipeline / VLMPipeline.generate()."""

    def __init__(self, pipeline: Any, commands: Connection, events: Connection) -> None:
        self.pipeline = pipeline
        self.commands = commands
        self.events = events
        self.pending: queue.Queue[AddRequest | None] = queue.Queue()
        self.aborted: set[int] = set()
        self.lock = threading.Lock()
        self.current: int | None = None

    def reader(self) -> None:
        while True:
            try:
                message = receive_command(self.commands)
            except (EOFError, OSError):
                message = Shutdown()
            if isinstance(message, Shutdown):
                self.pending.put(None)
                with self.lock:
                    if self.current is not None:
                        self.aborted.add(self.current)
                return
            if isinstance(message, Abort):
                with self.lock:
                    self.aborted.add(message.request_id)
            elif isinstance(message, AddRequest):
                self.pending.put(message)

    def run(self) -> None:
        threading.Thread(target=self.reader, name="engine-commands", daemon=True).start()
        while True:
            request = self.pending.get()
            if request is None:
                return
            with self.lock:
                if request.request_id in self.aborted:
                    self.aborted.discard(request.request_id)
                    continue
                self.current = request.request_id
            self.serve(request)
            with self.lock:
                self.current = None
                self.aborted.discard(request.request_id)

    def counts(self, running: int) -> EngineMetrics:
        """`running` (0 or 1) request in the pipeline; the others wait in the queue."""
        waiting = self.pending.qsize()
        return EngineMetrics(
            requests=running + waiting, scheduled_requests=running, running=running, waiting=waiting
        )

    def serve(self, request: AddRequest) -> None:
        import numpy as np
        import openvino as ov
        import openvino_genai

        loop = self
        produced = 0
        prompt_tokens = len(request.prompt_ids) if request.prompt_ids is not None else 0

        class Streamer(openvino_genai.StreamerBase):  # type: ignore[misc]
            def write(self, token: Any) -> Any:
                nonlocal produced
                tokens = list(token) if isinstance(token, list) else [int(token)]
                produced += len(tokens)
                loop.events.send(
                    StepOutputs(
                        [SequenceDelta(request.request_id, 0, tokens, [], None, prompt_tokens)],
                        [],
                        loop.counts(1),
                    )
                )
                with loop.lock:
                    cancelled = request.request_id in loop.aborted
                return (
                    openvino_genai.StreamingStatus.CANCEL
                    if cancelled
                    else openvino_genai.StreamingStatus.RUNNING
                )

            def end(self) -> None:
                return None

        try:
            config = generation_config(self.pipeline, request.config)
            if request.prompt_ids is not None:
                ids = ov.Tensor(np.asarray([request.prompt_ids], dtype=np.int64))
                mask = ov.Tensor(np.ones((1, len(request.prompt_ids)), dtype=np.int64))
                prompt = openvino_genai.TokenizedInputs(ids, mask)
                self.pipeline.generate(prompt, config, Streamer())
            else:  # VLMPipeline: rendered text and images
                config.apply_chat_template = False
                results = self.pipeline.generate(
                    request.prompt_text,
                    images=image_tensors(request.images),
                    generation_config=config,
                    streamer=Streamer(),
                )
                prompt_tokens = vlm_prompt_tokens(results)
        except (RuntimeError, ValueError, TypeError) as error:
            # A grammar that does not compile fails generate() and leaves the pipeline usable
            # (measured); XGrammar's errors name its sources.
            key = grammar_key(request.config)
            grammar = key if key is not None and "xgrammar" in str(error) else None
            message = engine_message(error)
            if grammar is not None:
                message = f"the grammar engine could not compile the grammar: {message}"
            failure = RequestFailed(request.request_id, message, True, grammar=grammar)
            self.events.send(StepOutputs([], [failure], self.counts(0)))
            return
        limit = request.config.get("max_new_tokens")
        reason = "length" if limit is not None and produced >= limit else "stop"
        self.events.send(
            StepOutputs(
                [SequenceDelta(request.request_id, 0, [], [], reason, prompt_tokens)],
                [],
                self.counts(0),
            )
        )
