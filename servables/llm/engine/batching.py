"""The continuous-batching loop: many requests at once through a ContinuousBatchingPipeline.

Between steps the loop drains the command pipe (add / abort), then calls `step()` and collects
what every live request produced into one `StepOutputs` message. Handles are read only when
`can_read()` says so (a blocking `read()` holds the GIL and deadlocks the process), kept
referenced until their request ends (dropping a handle stops its request), and request ids come
from the frontend's never-reused counter (reusing a live id breaks the pipeline for good).

Vision prompts arrive as rendered text plus RGB uint8 images. They are added with
`apply_chat_template` off (the frontend already rendered the template; genai would otherwise wrap
the prompt in it a second time), and their exact prompt token count, known only to the engine, is
read from the request's VLM perf metrics once it finishes.

Grammars are compiled inside `step()`, by the step that first samples a request, and a grammar
that fails to compile there breaks the pipeline: that step and every later one raise
(openvino-genai 2026.4.1: "this function cannot be called when we are already in scheduling
phase"). The frontend refuses what it knows the compiler refuses (servables/llm/grammar_check.py);
for anything it misses, this loop contains the damage. At most one grammar not yet seen to
compile is on trial at a time (requests with another new grammar wait a step or so), so when a step
raises while a grammar is on trial, that grammar is to blame: its requests fail as invalid (400,
with the engine's message), the frontend remembers the grammar and refuses it at once next time,
and the loop builds a new pipeline in place, without the worker exiting, so supervision never
counts it as a crash. The other requests go on in the new pipeline: those with no output yet start
over, those with output continue from a prompt extended by what they produced (token prompts
without a grammar); the rest (vision prompts, grammars with output) fail retryably.

If `step()` raises with no grammar on trial, the pipeline cannot be trusted any more: the loop
reports `EngineFailed` and returns, so the worker exits; the frontend fails the in-flight requests
and marks the servable unavailable (and its supervisor restarts the engine).

Its own module because the scheduling and the grammar containment are one piece of state (live
requests, grammars on trial, deferred requests) that only this loop has.
"""

from __future__ import annotations

import gc
import logging
import time
from collections import OrderedDict
from collections.abc import Callable
from multiprocessing.connection import Connection
from typing import Any

from servables.llm.engine.messages import (
    Abort,
    AddRequest,
    EngineFailed,
    EngineMetrics,
    Outbox,
    RequestFailed,
    SequenceDelta,
    Shutdown,
    StepOutputs,
    receive_command,
)
from servables.llm.engine.pipeline import (
    engine_message,
    finish_reason,
    generation_config,
    grammar_key,
    image_tensors,
    vlm_prompt_tokens,
)
from servables.llm.engine.refill import RefillWindow

logger = logging.getLogger("graphrt.engine")

SETTLE_STEPS = 2
# Grammars seen to compile, remembered so that they never wait for a trial again.
COMPILED_GRAMMARS = 1024


class _Live:
    """A request inside the continuous-batching pipeline."""

    __slots__ = (
        "decoding",
        "echo_tokens",
        "echoed",
        "final_only",
        "finished",
        "generated",
        "handle",
        "message",
        "prompt_tokens",
        "request_id",
        "text_prompt",
    )

    def __init__(
        self,
        request_id: int,
        handle: Any,
        final_only: bool,
        prompt_tokens: int,
        text_prompt: bool = False,
        message: AddRequest | None = None,
    ) -> None:
        self.request_id = request_id
        self.handle = handle
        self.final_only = final_only
        self.prompt_tokens = prompt_tokens
        self.text_prompt = text_prompt  # counted by the engine: read the count when finished
        self.finished: set[int] = set()
        # To add it again to a rebuilt pipeline: the request (token prompts only, so no images
        # are kept) and the tokens sequence 0 has produced so far.
        self.message = message
        self.generated: list[int] = []
        # With `echo`, genai puts the prompt before a sequence's first tokens (and its logprobs
        # before theirs); the frontend gets them apart (see `_delta`).
        self.echo_tokens = 0
        self.echoed: set[int] = set()
        self.decoding = False  # its prompt is done: it holds KV blocks and generates


def _delta(live: _Live, index: int, output: Any, reason: str | None) -> SequenceDelta:
    """What sequence `index` of a live request produced, as sent to the frontend.

    An echoing request's first output starts with its prompt: those ids are dropped and their
    logprobs sent as `prompt_logprobs`, the first one None (genai's placeholder 1.0: nothing
    predicts the first token). genai scores only the prompt tokens it computes, so tokens whose
    KV came from the prefix cache have no logprob: they are the leading ones, and None.
    """
    ids = list(output.generated_ids)
    logprobs: list[float] = list(output.generated_log_probs)
    prompt_logprobs: list[float | None] | None = None
    count = live.echo_tokens
    if count and index not in live.echoed:
        live.echoed.add(index)
        generated = len(ids) - count
        scored = logprobs[: len(logprobs) - generated]
        prompt_logprobs = [None] * (count - len(scored)) + list(scored)
        prompt_logprobs[0] = None
        ids, logprobs = ids[count:], logprobs[len(scored) :]
    return SequenceDelta(
        live.request_id, index, ids, logprobs, reason, live.prompt_tokens, prompt_logprobs
    )


class ContinuousBatchingLoop:
    def __init__(
        self,
        pipeline: Any,
        commands: Connection,
        events: Connection,
        rebuild: Callable[[], Any] | None = None,
    ) -> None:
        import openvino_genai

        self.pipeline = pipeline
        self.commands = commands
        self.events = events
        self.rebuild = rebuild  # builds a new pipeline after a grammar broke this one
        self.live: dict[int, _Live] = {}
        # Requests whose grammar is on trial (not yet seen to compile), and that grammar.
        self.unproven: dict[int, tuple[str, str]] = {}
        self.compiled: OrderedDict[tuple[str, str], None] = OrderedDict()
        self.deferred: list[AddRequest] = []  # requests with a new grammar waiting for a trial
        self.rebuilds = 0
        self.status = openvino_genai.GenerationStatus
        self.metrics = EngineMetrics()
        # Steps still to run once idle: an aborted request's KV blocks are freed by the next
        # step, and the engine's metrics show it only one step after that.
        self.settle_steps = 0
        # After a step that finished requests: how long to wait for new ones, and for how many.
        self.refill = RefillWindow()
        self.refill_wait = 0.0
        self.refill_expected = 0

    def run(self) -> None:
        outbox = Outbox()
        while True:
            busy = bool(self.live) or self.settle_steps > 0 or bool(self.deferred)
            if not self.receive(outbox, block=not busy):
                return
            self.admit_deferred(outbox)
            if not (self.live or self.settle_steps):
                if outbox.failures:
                    self.flush(outbox, 0.0)
                continue
            started = time.perf_counter()
            try:
                self.pipeline.step()
            except Exception as error:
                if self.recover(error, outbox):
                    self.flush(outbox, time.perf_counter() - started)
                    continue
                logger.exception("engine step failed")
                self.events.send(EngineFailed(f"engine step failed: {engine_message(error)}"))
                return
            finished = self.collect(outbox)
            if self.live:
                self.refill_wait = self.refill.seconds(finished, time.perf_counter() - started)
                self.refill_expected = finished
            # A trial request gone without output (aborted, or ignored): no longer on trial,
            # now that a step has run without it breaking.
            for request_id in [r for r in self.unproven if r not in self.live]:
                del self.unproven[request_id]
            if self.live:
                self.settle_steps = SETTLE_STEPS
            else:
                self.settle_steps -= 1
            self.flush(outbox, time.perf_counter() - started)

    def receive(self, outbox: Outbox, block: bool) -> bool:
        """Handle the commands waiting on the pipe (`block`: idle, wait for the first one),
        then, after a step that finished requests, wait for their successors a little (see
        servables.llm.engine.refill). False on Shutdown."""
        wait, expected = self.refill_wait, self.refill_expected
        self.refill_wait, self.refill_expected = 0.0, 0
        started = time.perf_counter()
        deadline = started + wait
        arrived = 0
        timeout: float | None = None if block else 0
        while True:
            if not self.commands.poll(timeout):
                remaining = deadline - time.perf_counter()
                if arrived >= expected or remaining <= 0 or not self.commands.poll(remaining):
                    break
            message = receive_command(self.commands)
            if isinstance(message, Shutdown):
                return False
            arrived += isinstance(message, AddRequest)
            self.handle(message, outbox)
            timeout = 0
        if wait > 0:
            self.refill.waited(arrived)
            if logger.isEnabledFor(logging.DEBUG):
                logger.debug(
                    "refill window: %d of %d new request(s) in %.1f ms (window %.1f ms)",
                    arrived,
                    expected,
                    (time.perf_counter() - started) * 1e3,
                    wait * 1e3,
                )
        return True

    def flush(self, outbox: Outbox, step_seconds: float) -> None:
        metrics = self.pipeline.get_metrics()
        running = self.running(metrics.scheduled_requests)
        self.metrics = EngineMetrics(
            requests=metrics.requests,
            scheduled_requests=metrics.scheduled_requests,
            running=running,
            waiting=max(0, metrics.requests - running) + len(self.deferred),
            cache_usage=float(metrics.cache_usage),
            max_cache_usage=float(metrics.max_cache_usage),
            kv_cache_bytes=int(metrics.kv_cache_size_in_bytes),
        )
        self.events.send(StepOutputs(outbox.deltas, outbox.failures, self.metrics, step_seconds))
        outbox.deltas = []
        outbox.failures = []

    def running(self, scheduled: int) -> int:
        """Requests in the batch: those the latest step scheduled, or, if more, those decoding.

        genai counts only what one step scheduled. With dynamic_split_fuse a step schedules
        every decoding sequence and the prompt chunks that fit beside them, so that count is
        the batch; without it, a step that runs new prompts schedules only those, and the
        sequences decoding meanwhile (they hold their KV blocks and resume next step) would
        count as waiting. So are sequences the step's token budget left out.
        """
        decoding = sum(1 for live in self.live.values() if live.decoding)
        return max(scheduled, decoding)

    def handle(self, message: Any, outbox: Outbox) -> None:
        if isinstance(message, Abort):
            live = self.live.pop(message.request_id, None)
            if live is not None:
                live.handle.cancel()
                self.settle_steps = SETTLE_STEPS
            self.deferred = [d for d in self.deferred if d.request_id != message.request_id]
            return
        if not isinstance(message, AddRequest):
            return
        if self.scoring_waits(message):
            self.deferred.append(message)
            return
        key = grammar_key(message.config)
        if key is not None and key not in self.compiled:
            on_trial = set(self.unproven.values())
            if on_trial and key not in on_trial:
                self.deferred.append(message)  # one new grammar at a time: see the docstring
                return
        self.admit(message, outbox)

    def scoring_waits(self, message: AddRequest) -> bool:
        """Whether `message` must wait because of a prompt being scored (echo with logprobs).

        genai 2026.4 reads an echoing request's prompt logprobs at an offset into the step's
        logits that counts only the echoing requests before it in the batch, so any other
        request scheduled ahead of it in that step shifts its scores onto another request's
        logits. So a scoring request is added only to an idle pipeline (new requests wait
        behind it while the running ones drain), and nothing joins it until its prompt is
        scored (its prefill done).
        """
        if any(live.echo_tokens and not live.echoed for live in self.live.values()):
            return True
        if message.config.get("echo"):
            return bool(self.live)
        return any(waiting.config.get("echo") for waiting in self.deferred)

    def admit_deferred(self, outbox: Outbox) -> None:
        """Add the waiting requests whose grammar may now go on trial (or has compiled)."""
        if not self.deferred or self.unproven:
            return
        waiting, self.deferred = self.deferred, []
        for message in waiting:
            self.handle(message, outbox)

    def admit(
        self, message: AddRequest, outbox: Outbox, generated: list[int] | None = None
    ) -> None:
        """Add a request to the pipeline; `generated`: the tokens it already produced in a
        pipeline that was rebuilt, to continue from (token prompts only)."""
        import numpy as np
        import openvino as ov

        fields = message.config
        prompt_ids = message.prompt_ids
        if generated:
            assert prompt_ids is not None
            fields = dict(fields)
            fields["max_new_tokens"] = int(fields["max_new_tokens"]) - len(generated)
            if "min_new_tokens" in fields:
                fields["min_new_tokens"] = max(0, int(fields["min_new_tokens"]) - len(generated))
            prompt_ids = prompt_ids + generated
            fields["echo"] = False  # echoed by the pipeline this request started in
        try:
            config = generation_config(self.pipeline, fields)
            if prompt_ids is not None:
                prompt = ov.Tensor(np.asarray([prompt_ids], dtype=np.int64))
                handle = self.pipeline.add_request(message.request_id, prompt, config)
                prompt_tokens = len(message.prompt_ids or ())
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
        live = _Live(
            message.request_id,
            handle,
            message.final_only,
            prompt_tokens,
            text_prompt=message.prompt_ids is None,
            message=message if message.prompt_ids is not None else None,
        )
        live.generated = list(generated or ())
        if fields.get("echo") and message.prompt_ids is not None:
            live.echo_tokens = len(message.prompt_ids)
        self.live[message.request_id] = live
        key = grammar_key(message.config)
        if key is not None and key not in self.compiled:
            self.unproven[message.request_id] = key

    def compiled_grammar(self, request_id: int) -> None:
        """The request got past sampling: its grammar compiled."""
        key = self.unproven.pop(request_id, None)
        if key is not None:
            self.compiled[key] = None
            self.compiled.move_to_end(key)
            while len(self.compiled) > COMPILED_GRAMMARS:
                self.compiled.popitem(last=False)

    def recover(self, error: Exception, outbox: Outbox) -> bool:
        """A step raised: if a grammar was on trial, fail its requests, build a new pipeline
        and carry the other requests over (see the module docstring). False: not a grammar's
        fault, or no new pipeline could be built."""
        blamed = dict(self.unproven)
        if not blamed or self.rebuild is None:
            return False
        reason = engine_message(error)
        logger.warning(
            "engine step failed while a new grammar was on trial (request(s) %s): %s; failing "
            "them and rebuilding the pipeline",
            sorted(blamed),
            reason,
        )
        message = f"the grammar engine could not compile the grammar: {reason}"
        for request_id, key in blamed.items():
            outbox.failures.append(RequestFailed(request_id, message, True, grammar=key))
        others = [live for request_id, live in self.live.items() if request_id not in blamed]
        for live in self.live.values():
            live.handle = None
        self.live.clear()
        self.unproven.clear()
        self.settle_steps = 0
        # Every later step of this pipeline raises (measured), so it is replaced; the old one
        # goes first, with its KV cache.
        self.pipeline = None
        gc.collect()
        started = time.perf_counter()
        try:
            self.pipeline = self.rebuild()
        except Exception:
            logger.exception("could not rebuild the pipeline")
            return False
        self.rebuilds += 1
        logger.warning("pipeline rebuilt in %.1f s", time.perf_counter() - started)
        for live in others:
            self.carry_over(live, outbox)
        return True

    def carry_over(self, live: _Live, outbox: Outbox) -> None:
        """Add a request of the broken pipeline to the new one, or fail it retryably."""
        message = live.message
        if message is not None and not live.generated:
            self.handle(message, outbox)  # nothing was sent yet: start over
            return
        if (
            message is not None
            and not live.final_only
            and grammar_key(message.config) is None
            and int(message.config["max_new_tokens"]) > len(live.generated)
        ):
            self.admit(message, outbox, generated=live.generated)
            return
        outbox.failures.append(
            RequestFailed(
                live.request_id,
                "the request was interrupted when the engine was rebuilt after another "
                "request's grammar failed to compile; send it again",
                False,
                retryable=True,
            )
        )

    def collect(self, outbox: Outbox) -> int:
        """Read what the step produced; returns how many requests finished."""
        status = self.status
        finished = 0
        for request_id, live in list(self.live.items()):
            handle = live.handle
            state = handle.get_status()
            if live.text_prompt and state == status.FINISHED and not live.prompt_tokens:
                live.prompt_tokens = vlm_prompt_tokens(handle)
            if live.final_only:
                if state == status.FINISHED:
                    self.compiled_grammar(request_id)
                    for index, output in enumerate(handle.read_all()):
                        ended = finish_reason(output.finish_reason) or "stop"
                        outbox.deltas.append(_delta(live, index, output, ended))
                    del self.live[request_id]
                    finished += 1
                elif state == status.IGNORED:
                    self._ignored(live, outbox)
                continue
            while handle.can_read():
                self.compiled_grammar(request_id)
                live.decoding = True
                for index, output in handle.read().items():
                    reason = finish_reason(output.finish_reason)
                    if reason:
                        live.finished.add(index)
                    delta = _delta(live, index, output, reason)
                    if index == 0:
                        live.generated.extend(delta.token_ids)
                    outbox.deltas.append(delta)
            if state == status.FINISHED:
                self.compiled_grammar(request_id)
                if 0 not in live.finished:  # genai gives no reason to an echo-only request
                    echo_only = live.message and live.message.config.get("max_new_tokens") == 0
                    reason = "length" if echo_only else "stop"
                    outbox.deltas.append(
                        SequenceDelta(request_id, 0, [], [], reason, live.prompt_tokens)
                    )
                del self.live[request_id]
                finished += 1
            elif state == status.IGNORED:
                self._ignored(live, outbox)
            elif state in (status.STOP, status.CANCEL):
                del self.live[request_id]
        return finished

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
