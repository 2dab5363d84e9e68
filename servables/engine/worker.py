"""The engine process: owns one openvino-genai pipeline and drives it.

Continuous batching: between steps the worker drains the command pipe (add / abort), then calls
`step()` and collects what every live request produced into one `StepOutputs` message. Handles are
read only when `can_read()` says so (a blocking `read()` holds the GIL and deadlocks the process),
kept referenced until their request ends (dropping a handle stops its request), and request ids
come from the frontend's never-reused counter (reusing a live id breaks the pipeline for good).

Stateful pipelines (LLMPipeline / VLMPipeline, chosen for NPU or `pipeline_type: LM`) serve one
request at a time: `generate()` runs on the main thread (it releases the GIL) while a reader thread
takes commands, so an abort reaches the streamer callback, which then returns CANCEL.

Vision prompts arrive as rendered text plus RGB uint8 images. They are added with
`apply_chat_template` off (the frontend already rendered the template; genai would otherwise wrap
the prompt in it a second time), and their exact prompt token count, known only to the engine, is
read from the request's VLM perf metrics once it finishes.

If `step()` raises, the pipeline cannot be trusted any more: the worker reports `EngineFailed` and
exits; the frontend fails the in-flight requests and marks the servable unavailable.
"""

from __future__ import annotations

import contextlib
import logging
import os
import queue
import sys
import threading
import time
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

from servables.engine.lifetime import die_with_parent, ignore_stop_signals
from servables.engine.messages import (
    Abort,
    AddRequest,
    EngineFailed,
    EngineMetrics,
    EngineSpec,
    LoadFailed,
    Outbox,
    Ready,
    RequestFailed,
    SequenceDelta,
    Shutdown,
    StepOutputs,
    receive_command,
)
from servables.llm.model_files import openable_gguf, tokenizer_location

logger = logging.getLogger("graphrt.engine")

# GenerationConfig fields the frontend may set; anything else is a programming error.
CONFIG_FIELDS = frozenset(
    {
        "max_new_tokens",
        "max_length",
        "ignore_eos",
        "min_new_tokens",
        "echo",
        "logprobs",
        "stop_strings",
        "include_stop_str_in_output",
        "stop_token_ids",
        "do_sample",
        "temperature",
        "top_p",
        "top_k",
        "min_p",
        "repetition_penalty",
        "presence_penalty",
        "frequency_penalty",
        "length_penalty",
        "rng_seed",
        "num_return_sequences",
        "num_beams",
        "num_beam_groups",
        "diversity_penalty",
        "no_repeat_ngram_size",
        "num_assistant_tokens",
        "assistant_confidence_threshold",
        "max_ngram_size",
    }
)


SETTLE_STEPS = 2


def _finish_reason(reason: Any) -> str | None:
    name = getattr(reason, "name", str(reason))
    if name == "LENGTH":
        return "length"
    if name in ("STOP", "TOOL_CALL"):
        return "stop"
    return None


def _scheduler_config(settings: dict[str, Any]) -> Any:
    import openvino_genai

    config = openvino_genai.SchedulerConfig()
    for name, value in settings.items():
        if name == "cache_eviction_config":
            eviction = dict(value)
            mode = getattr(
                openvino_genai.AggregationMode, eviction.pop("aggregation_mode", "NORM_SUM")
            )
            config.cache_eviction_config = openvino_genai.CacheEvictionConfig(
                aggregation_mode=mode, **eviction
            )
            config.use_cache_eviction = True
        elif name == "sparse_attention_config":
            sparse = dict(value)
            mode = getattr(openvino_genai.SparseAttentionMode, sparse.pop("mode", "TRISHAPE"))
            attention = openvino_genai.SparseAttentionConfig(mode=mode)
            for key, item in sparse.items():
                setattr(attention, key, item)
            config.sparse_attention_config = attention
            config.use_sparse_attention = True
        else:
            setattr(config, name, value)
    return config


def _properties(spec: EngineSpec) -> dict[str, Any]:
    import openvino_genai

    properties = dict(spec.properties)
    if spec.draft:
        draft = dict(spec.draft)
        path = str(openable_gguf(Path(draft.pop("models_path"))))
        device = draft.pop("device", "") or spec.device
        scheduler = draft.pop("scheduler", None)
        if scheduler:
            draft["scheduler_config"] = _scheduler_config(scheduler)
        properties["draft_model"] = openvino_genai.draft_model(path, device, **draft)
    return properties


def build_pipeline(spec: EngineSpec) -> Any:
    import openvino_genai

    properties = _properties(spec)
    models_path = str(openable_gguf(Path(spec.models_path)))
    if spec.kind in ("LM_CB", "VLM_CB"):
        return openvino_genai.ContinuousBatchingPipeline(
            models_path, _scheduler_config(spec.scheduler), spec.device, properties
        )
    if spec.kind == "LM":
        return openvino_genai.LLMPipeline(models_path, spec.device, **properties)
    if spec.kind == "VLM":
        return openvino_genai.VLMPipeline(models_path, spec.device, **properties)
    raise ValueError(f"unsupported pipeline type {spec.kind}")


# StructuredOutputConfig fields, each given as text (a JSON schema / structural tag as JSON).
STRUCTURED_OUTPUT_FIELDS = frozenset({"json_schema", "regex", "grammar", "structural_tags_config"})


def structured_output_config(fields: dict[str, str]) -> Any:
    """The engine's StructuredOutputConfig, built here because it does not pickle.

    The frontend checked the grammar (servables/llm/grammar_check.py): one that fails to compile
    inside a step would break the pipeline for every request.
    """
    import openvino_genai

    unknown = set(fields) - STRUCTURED_OUTPUT_FIELDS
    if unknown or len(fields) != 1:
        raise ValueError(f"bad structured output fields {sorted(fields)}")
    return openvino_genai.StructuredOutputConfig(**fields)


def generation_config(pipeline: Any, fields: dict[str, Any]) -> Any:
    config = (
        pipeline.get_generation_config()
        if hasattr(pipeline, "get_generation_config")
        else (pipeline.get_config())
    )
    for name, value in fields.items():
        if name == "structured_output":
            config.structured_output_config = structured_output_config(value)
            continue
        if name not in CONFIG_FIELDS:
            raise ValueError(f"unknown generation config field {name}")
        if name in ("stop_strings", "stop_token_ids"):
            value = set(value)
        setattr(config, name, value)
    config.validate()
    return config


def image_tensors(images: tuple[Any, ...]) -> list[Any]:
    """ov.Tensors over the RGB HWC uint8 arrays, sharing their memory (genai encodes the images
    inside add_request / generate, while the message that owns the arrays is still alive)."""
    import openvino as ov

    return [ov.Tensor(image, shared_memory=True) for image in images]


def vlm_prompt_tokens(results_or_handle: Any) -> int:
    """The engine's prompt token count of a finished vision request (0 if unavailable)."""
    try:
        getter = getattr(results_or_handle, "get_vlm_perf_metrics", None)
        metrics = getter() if getter is not None else results_or_handle.perf_metrics
        return int(metrics.get_num_input_tokens())
    except (RuntimeError, AttributeError):
        return 0


class _Live:
    """A request inside the continuous-batching pipeline."""

    __slots__ = ("final_only", "finished", "handle", "prompt_tokens", "request_id", "text_prompt")

    def __init__(
        self,
        request_id: int,
        handle: Any,
        final_only: bool,
        prompt_tokens: int,
        text_prompt: bool = False,
    ) -> None:
        self.request_id = request_id
        self.handle = handle
        self.final_only = final_only
        self.prompt_tokens = prompt_tokens
        self.text_prompt = text_prompt  # counted by the engine: read the count when finished
        self.finished: set[int] = set()


class ContinuousBatchingLoop:
    def __init__(self, pipeline: Any, commands: Connection, events: Connection) -> None:
        import openvino_genai

        self.pipeline = pipeline
        self.commands = commands
        self.events = events
        self.live: dict[int, _Live] = {}
        self.status = openvino_genai.GenerationStatus
        self.metrics = EngineMetrics()
        # Steps still to run once idle: an aborted request's KV blocks are freed by the next
        # step, and the engine's metrics show it only one step after that.
        self.settle_steps = 0

    def run(self) -> None:
        outbox = Outbox()
        while True:
            busy = bool(self.live) or self.settle_steps > 0
            timeout: float | None = 0 if busy else None
            while self.commands.poll(timeout):
                message = receive_command(self.commands)
                if isinstance(message, Shutdown):
                    return
                self.handle(message, outbox)
                timeout = 0
            if not (self.live or self.settle_steps):
                if outbox.failures:
                    self.flush(outbox, 0.0)
                continue
            started = time.perf_counter()
            try:
                self.pipeline.step()
            except Exception as error:
                logger.exception("engine step failed")
                self.events.send(EngineFailed(f"engine step failed: {error}"))
                return
            self.collect(outbox)
            if self.live:
                self.settle_steps = SETTLE_STEPS
            else:
                self.settle_steps -= 1
            self.flush(outbox, time.perf_counter() - started)

    def flush(self, outbox: Outbox, step_seconds: float) -> None:
        metrics = self.pipeline.get_metrics()
        self.metrics = EngineMetrics(
            requests=metrics.requests,
            scheduled_requests=metrics.scheduled_requests,
            cache_usage=float(metrics.cache_usage),
            max_cache_usage=float(metrics.max_cache_usage),
            kv_cache_bytes=int(metrics.kv_cache_size_in_bytes),
        )
        self.events.send(StepOutputs(outbox.deltas, outbox.failures, self.metrics, step_seconds))
        outbox.deltas = []
        outbox.failures = []

    def handle(self, message: Any, outbox: Outbox) -> None:
        if isinstance(message, Abort):
            live = self.live.pop(message.request_id, None)
            if live is not None:
                live.handle.cancel()
                self.settle_steps = SETTLE_STEPS
            return
        if not isinstance(message, AddRequest):
            return
        import numpy as np
        import openvino as ov

        try:
            config = generation_config(self.pipeline, message.config)
            if message.prompt_ids is not None:
                prompt = ov.Tensor(np.asarray([message.prompt_ids], dtype=np.int64))
                handle = self.pipeline.add_request(message.request_id, prompt, config)
                prompt_tokens = len(message.prompt_ids)
            else:
                config.apply_chat_template = False
                handle = self.pipeline.add_request(
                    message.request_id,
                    message.prompt_text,
                    image_tensors(message.images),
                    config,
                )
                prompt_tokens = 0
        except (RuntimeError, ValueError, TypeError) as error:
            outbox.failures.append(RequestFailed(message.request_id, str(error), True))
            return
        self.live[message.request_id] = _Live(
            message.request_id,
            handle,
            message.final_only,
            prompt_tokens,
            text_prompt=message.prompt_ids is None,
        )

    def collect(self, outbox: Outbox) -> None:
        status = self.status
        for request_id, live in list(self.live.items()):
            handle = live.handle
            state = handle.get_status()
            if live.text_prompt and state == status.FINISHED and not live.prompt_tokens:
                live.prompt_tokens = vlm_prompt_tokens(handle)
            if live.final_only:
                if state == status.FINISHED:
                    for index, output in enumerate(handle.read_all()):
                        outbox.deltas.append(
                            SequenceDelta(
                                request_id,
                                index,
                                list(output.generated_ids),
                                list(output.generated_log_probs),
                                _finish_reason(output.finish_reason) or "stop",
                                live.prompt_tokens,
                            )
                        )
                    del self.live[request_id]
                elif state == status.IGNORED:
                    self._ignored(live, outbox)
                continue
            while handle.can_read():
                for index, output in handle.read().items():
                    reason = _finish_reason(output.finish_reason)
                    if reason:
                        live.finished.add(index)
                    outbox.deltas.append(
                        SequenceDelta(
                            request_id,
                            index,
                            list(output.generated_ids),
                            list(output.generated_log_probs),
                            reason,
                            live.prompt_tokens,
                        )
                    )
            if state == status.FINISHED:
                if 0 not in live.finished:
                    outbox.deltas.append(
                        SequenceDelta(request_id, 0, [], [], "stop", live.prompt_tokens)
                    )
                del self.live[request_id]
            elif state == status.IGNORED:
                self._ignored(live, outbox)
            elif state in (status.STOP, status.CANCEL):
                del self.live[request_id]

    def _ignored(self, live: _Live, outbox: Outbox) -> None:
        outbox.failures.append(
            RequestFailed(
                live.request_id,
                "the engine could not schedule the request: the KV cache is too small for it "
                "(raise cache_size) or it was preempted when the cache ran out",
                False,
            )
        )
        del self.live[live.request_id]


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
                        EngineMetrics(requests=1, scheduled_requests=1),
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
            self.events.send(
                StepOutputs(
                    [], [RequestFailed(request.request_id, str(error), True)], EngineMetrics()
                )
            )
            return
        limit = request.config.get("max_new_tokens")
        reason = "length" if limit is not None and produced >= limit else "stop"
        self.events.send(
            StepOutputs(
                [SequenceDelta(request.request_id, 0, [], [], reason, prompt_tokens)],
                [],
                EngineMetrics(),
            )
        )


def main(commands: Connection, events: Connection) -> None:
    """Process entry point: the first command is the EngineSpec."""
    spec = receive_command(commands)
    assert isinstance(spec, EngineSpec)
    logging.basicConfig(
        level=spec.log_level,
        format=f"%(asctime)s %(levelname)s engine[{os.getpid()}]: %(message)s",
    )
    started = time.perf_counter()
    try:
        pipeline = build_pipeline(spec)
        tokenizer = pipeline.get_tokenizer()
        eos = int(tokenizer.get_eos_token_id())
        tokenizer_path = tokenizer_location(Path(spec.models_path))
    except Exception as error:  # anything the engine throws at load is the user's model problem
        events.send(LoadFailed(str(error).strip() or type(error).__name__))
        return
    events.send(Ready(time.perf_counter() - started, eos, str(tokenizer_path)))
    loop: ContinuousBatchingLoop | StatefulLoop
    if spec.kind in ("LM_CB", "VLM_CB"):
        loop = ContinuousBatchingLoop(pipeline, commands, events)
    else:
        loop = StatefulLoop(pipeline, commands, events)
    with contextlib.suppress(EOFError, BrokenPipeError):  # the frontend went away
        loop.run()


if __name__ == "__main__":
    # argv: command pipe fd, event pipe fd, the frontend's pid (see servables.engine.lifetime)
    ignore_stop_signals()
    die_with_parent(int(sys.argv[3]))
    main(
        Connection(int(sys.argv[1]), writable=False),
        Connection(int(sys.argv[2]), readable=False),
    )
