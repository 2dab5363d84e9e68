"""The LLM servable: OpenAI requests in, streamed choices out, an engine process underneath.

The frontend half of text generation lives here: chat templating, tokenization and prompt-length
checks before a request reaches the engine; incremental detokenization, exact stop strings,
logprobs and usage after. `n` > 1 runs as n engine requests (each streams; prefix caching shares
the prompt), `best_of` as one beam search whose results arrive at the end.

Requests are streamed as `GenerationEvent`s, one per engine step that touched them. Closing the
async iterator early (client gone) aborts the engine requests, which frees their KV cache at the
next engine step.

Vision-language servables (VLM_CB, VLM) take the rendered prompt as text, with OVMS's
`<ov_genai_image_N>` tags where the images were, plus the images as RGB uint8 arrays: openvino-genai
swaps each tag for the model's own placeholder and tokenizes inside the engine. So the frontend's
token count of such a prompt is only an estimate for the length checks (an image's tokens depend on
its size and the model's preprocessing); usage reports the engine's exact count.

This module holds the servable's lifecycle and the order of a request's steps; the steps before
the engine are in engine_requests.py, those after it in choices.py. What is left is one request's
path from admission to its last event, kept in one place to be read in order, which is why the
module stays a little above 400 lines.
"""

from __future__ import annotations

import asyncio
import enum
import logging
import time
from collections.abc import AsyncGenerator, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from servables.errors import (
    GrammarNotCompiled,
    InvalidRequest,
    ServableLoadError,
    ServableNotReady,
)
from servables.io.images.images import ImageArray
from servables.io.images.sources import MediaPolicy, load_images
from servables.io.text.tokenize import TokenizeRequest, encode
from servables.llm.chat_template import (
    ChatTemplate,
    PromptTemplate,
    find_template,
    special_token,
)
from servables.llm.choices import (
    ChoiceUpdate,
    GenerationEvent,
    RequestStats,
    Usage,
    choice_events,
    new_choices,
)
from servables.llm.detokenizer import TokenTexts
from servables.llm.engine.client import EngineClient
from servables.llm.engine.messages import EngineSpec
from servables.llm.engine_requests import (
    DEFAULT_SAMPLING_FIELDS,
    check_capabilities,
    check_image_count,
    encode_many,
    engine_requests,
    generation_fields,
    max_new_tokens,
    output_plan,
    prompt,
    speculation_fields,
)
from servables.llm.genai_template import GenAiChatTemplate
from servables.llm.lora import LoadedAdapter
from servables.llm.model_files import (
    PipelineType,
    converted_tokenizer,
    generation_defaults,
    infer_pipeline_type,
    is_gguf,
    max_model_length,
    vocabulary_size,
)
from servables.llm.output_parsers import detect_parsers, validate_parser_names
from servables.llm.request import GenerationRequest, Limits
from servables.llm.token_texts_cache import cached_token_texts
from servables.llm.tokenizer_batcher import TokenizerBatcher
from servables.runtime.admission import Admission
from servables.runtime.supervision import Supervisor

logger = logging.getLogger(__name__)

USAGE_LOG_SECONDS = 5.0


class ServableState(enum.Enum):
    LOADING = "LOADING"
    AVAILABLE = "AVAILABLE"
    UNAVAILABLE = "UNAVAILABLE"


# Scheduler options a stateful pipeline (LLMPipeline, VLMPipeline) has no use for.
CONTINUOUS_BATCHING_ONLY = ("cache_eviction_config", "sparse_attention_config")


@dataclass(frozen=True)
class LLMServableConfig:
    """Servable settings; calculators/llm builds this from LLMCalculatorOptions."""

    name: str
    models_path: Path
    device: str = "CPU"
    pipeline_type: PipelineType = PipelineType.AUTO
    properties: dict[str, Any] = field(default_factory=dict)
    scheduler: dict[str, Any] = field(default_factory=dict)
    draft: dict[str, Any] | None = None
    max_tokens_limit: int | None = None
    best_of_limit: int = 20
    log_level: int = logging.INFO
    # OVMS's chat_template_mode: "MINJA" renders with openvino-genai (genai_template.py); None
    # or "JINJA" with Jinja2 (chat_template.py).
    chat_template_mode: str | None = None
    # OVMS's parser options: None = detect from the chat template, "none" = off.
    tool_parser: str | None = None
    reasoning_parser: str | None = None
    enable_tool_guided_generation: bool = False
    # LoRA adapters, each served under its alias by an engine of its own (see `generate`).
    adapters: tuple[LoadedAdapter, ...] = ()
    # A GGUF's weights as genai builds them ("genai") or requantized ("int4_channelwise",
    # "int8_channelwise": servables/llm/gguf_requantize.py).
    gguf_weights: str = "genai"


class LLMServable:
    """See the module docstring."""

    def __init__(self, config: LLMServableConfig) -> None:
        self.config = config
        self.name = config.name
        self.state = ServableState.LOADING
        self.error: str | None = None
        self.kind = infer_pipeline_type(config.models_path, config.device, config.pipeline_type)
        for option in CONTINUOUS_BATCHING_ONLY:
            if option in config.scheduler and not self.kind.continuous_batching:
                logger.warning(
                    "%s: %s applies to continuous-batching pipelines only; the %s pipeline "
                    "ignores it",
                    config.name,
                    option,
                    self.kind.value,
                )
        self.limits = Limits(config.max_tokens_limit, config.best_of_limit)
        self.verbose_response = False  # the server's --verbose_response (graphrt/serving/policy.py)
        self.max_length = max_model_length(config.models_path)
        model_dir = None if is_gguf(config.models_path) else config.models_path
        self.defaults = {
            key: value
            for key, value in generation_defaults(config.models_path).items()
            if key in DEFAULT_SAMPLING_FIELDS
        }
        self._model_dir = model_dir
        self.speculation = speculation_fields(config.draft, config.properties)
        spec = EngineSpec(
            kind=self.kind.value,
            models_path=str(config.models_path),
            device=config.device,
            properties=dict(config.properties),
            scheduler=dict(config.scheduler),
            draft=config.draft,
            log_level=config.log_level,
            gguf_weights=config.gguf_weights,
        )
        self.engine = EngineClient(spec, config.name)
        if config.adapters and self.kind.vision:
            raise ServableLoadError(
                f"{config.name}: LoRA adapters are supported on text models only",
                param="lora_adapters",
            )
        # genai 2026.4 applies one adapter set per pipeline step (ContinuousBatchingPipeline
        # refuses mixed adapters in generate() and ignores them in add_request), so each adapter
        # has its own engine process: its requests batch together, beside the base model's.
        self.adapter_engines = {
            adapter.alias: EngineClient(
                replace(spec, adapter=adapter), f"{config.name} adapter {adapter.alias}"
            )
            for adapter in config.adapters
        }
        self.tokenizer: Any = None
        self.vocabulary_size = vocabulary_size(config.models_path)
        self.token_texts: TokenTexts | None = None
        # Tokenizer calls of concurrent requests, one call per event-loop turn (tokenizer_batcher).
        self.decodes = TokenizerBatcher(self._decode_many)
        self.encodes = TokenizerBatcher(self._encode_many)
        self.template: PromptTemplate | None = None
        # Resolved at load (detected from the template when the options leave them unset).
        self.tool_parser: str | None = None
        self.reasoning_parser: str | None = None
        self.request_listeners: list[Any] = []
        self._last_usage_log = -USAGE_LOG_SECONDS
        self._logged_busy = False
        self.engine.step_listeners.append(self._log_usage)

    # -------------------------------------------------------------------------------- lifecycle

    async def start(self) -> None:
        """Start the engine and, alongside, the frontend tokenizer and chat template."""
        started = time.perf_counter()
        logger.info(
            "loading %s: %s from %s on %s",
            self.name,
            self.kind.value,
            self.config.models_path,
            self.config.device,
        )
        for engine in self.adapter_engines.values():  # the server's queue bound, set on the base
            engine.admission.max_queued = self.engine.admission.max_queued
        # The frontend's tokenizer, template and token texts take seconds of their own; when the
        # tokenizer needs no conversion (a model directory, or a GGUF's converted before) they
        # load while the engine process compiles, else after it (it converts; see
        # model_files.tokenizer_location). Off the event loop either way.
        early = converted_tokenizer(self.config.models_path)
        frontend = (
            asyncio.ensure_future(asyncio.to_thread(self._load_tokenizer, early))
            if early is not None
            else None
        )
        try:
            try:
                ready, *_ = await asyncio.gather(
                    self.engine.start(), *(e.start() for e in self.adapter_engines.values())
                )
            except BaseException:
                if frontend is not None:  # its thread cannot be cancelled: let it end first
                    await asyncio.gather(frontend, return_exceptions=True)
                raise
            if frontend is None:
                await asyncio.to_thread(self._load_tokenizer, Path(ready.tokenizer_path))
            else:
                await frontend
        except ServableLoadError as error:
            self.state = ServableState.UNAVAILABLE
            self.error = error.message
            await self._close_engines()
            raise
        except Exception as error:
            self.state = ServableState.UNAVAILABLE
            self.error = str(error)
            await self._close_engines()
            raise ServableLoadError(f"{self.name}: {error}") from error
        self.state = ServableState.AVAILABLE
        logger.info(
            "loaded %s in %.1f s (engine %.1f s); context length %s; chat template from %s, "
            "rendered by %s",
            self.name,
            time.perf_counter() - started,
            ready.load_seconds,
            self.max_length,
            self.template.source.origin if self.template else "-",
            "openvino-genai (minja)" if isinstance(self.template, GenAiChatTemplate) else "Jinja2",
        )

    def _load_tokenizer(self, path: Path) -> None:
        import openvino_genai

        # One thread: the frontend decodes a few tokens at a time, and OpenVINO's default thread
        # pool spins after every call, burning CPU the engine process needs (measured: 0.56 ms
        # of CPU per decode by default, 0.16 ms with one thread).
        tokenizer = openvino_genai.Tokenizer(str(path), INFERENCE_NUM_THREADS=1)
        source = find_template(self._model_dir, tokenizer.chat_template)
        bos = special_token(self._model_dir, "bos_token") or tokenizer.get_bos_token()
        eos = special_token(self._model_dir, "eos_token") or tokenizer.get_eos_token()
        self.template = (
            GenAiChatTemplate(source, tokenizer)
            if self.config.chat_template_mode == "MINJA"
            else ChatTemplate(source, bos, eos)
        )
        self.tokenizer = tokenizer
        self.token_texts = self._token_texts(path)
        self._resolve_parsers(source.tool_text or source.text)

    def _resolve_parsers(self, template_text: str) -> None:
        """OVMS's rule: a parser option left unset is detected from the chat template; "none"
        turns it off."""
        detected_tool, detected_reasoning = detect_parsers(template_text)
        tool = self.config.tool_parser
        reasoning = self.config.reasoning_parser
        self.tool_parser = detected_tool if tool is None else (None if tool == "none" else tool)
        self.reasoning_parser = (
            detected_reasoning
            if reasoning is None
            else (None if reasoning == "none" else reasoning)
        )
        validate_parser_names(self.tool_parser, self.reasoning_parser)
        logger.info(
            "%s: tool parser %s, reasoning parser %s%s",
            self.name,
            self.tool_parser or "none",
            self.reasoning_parser or "none",
            ", tool-guided generation" if self.config.enable_tool_guided_generation else "",
        )

    def _token_texts(self, tokenizer_dir: Path) -> TokenTexts | None:
        """Texts that let most engine steps skip the tokenizer (see servables.llm.detokenizer);
        built at the first start with this tokenizer, read from graphrt's cache after."""
        started = time.perf_counter()
        try:
            texts = cached_token_texts(
                tokenizer_dir,
                lambda: TokenTexts.build(self._decode_many, len(self.tokenizer.get_vocab())),
            )
        except (RuntimeError, ValueError, TypeError, UnicodeDecodeError) as error:
            logger.debug("%s: every step decodes with the tokenizer (%s)", self.name, error)
            return None
        logger.debug(
            "%s: token texts %s in %.1f s",
            self.name,
            "ready" if texts else "not usable (the tokenizer does not concatenate)",
            time.perf_counter() - started,
        )
        return texts

    def _log_usage(self, step: Any) -> None:
        """OVMS's periodic INFO line, every few seconds while the engine is busy.

        A busy period always ends with one idle line if any busy line was logged during it.
        """
        metrics = step.metrics
        busy = metrics.requests > 0
        now = time.monotonic()
        due = busy and now - self._last_usage_log >= USAGE_LOG_SECONDS
        if due or (self._logged_busy and not busy):
            if busy:
                self._last_usage_log = now
            self._logged_busy = busy
            logger.info(
                "%s: All requests: %d; Scheduled requests: %d; Cache usage %.1f%% of %.1f MB",
                self.name,
                metrics.requests,
                metrics.scheduled_requests,
                metrics.cache_usage,
                metrics.kv_cache_bytes / 2**20,
            )

    async def stop(self) -> None:
        self.state = ServableState.UNAVAILABLE
        self.error = "unloaded"
        await self._close_engines()

    async def _close_engines(self) -> None:
        await asyncio.gather(
            self.engine.close(), *(e.close() for e in self.adapter_engines.values())
        )

    def more_supervisors(self) -> list[Supervisor]:
        """The adapter engines' supervisors (the server sets their policy, counts restarts)."""
        return [engine.supervisor for engine in self.adapter_engines.values()]

    def aliases(self) -> list[str]:
        """The LoRA adapters' names: a request's `model` chooses one (or the base model)."""
        return list(self.adapter_engines)

    def engine_for(self, model: str) -> EngineClient:
        """The engine that serves `model`: its adapter's, else the base model's."""
        return self.adapter_engines.get(model, self.engine)

    def engines(self) -> list[tuple[str, EngineClient]]:
        """Every engine with the model name it serves: the base model's, then each adapter's."""
        return [(self.name, self.engine), *self.adapter_engines.items()]

    @property
    def available(self) -> bool:
        return self.state is ServableState.AVAILABLE and self.engine.alive

    @property
    def supervisor(self) -> Supervisor:
        """Restarts the engine process when it dies (servables.runtime.supervision)."""
        return self.engine.supervisor

    @property
    def admission(self) -> Admission:
        """Bounds the requests waiting for the engine (servables.runtime.admission)."""
        return self.engine.admission

    # ------------------------------------------------------------------------------ requests

    def _decode(self, ids: Sequence[int], skip_special: bool = True) -> str:
        text: str = self.tokenizer.decode(list(ids), skip_special_tokens=skip_special)
        return text

    def _decode_many(self, windows: list[list[int]], skip_special: bool) -> list[str]:
        texts: list[str] = self.tokenizer.decode(windows, skip_special_tokens=skip_special)
        return texts

    def _encode_many(self, texts: list[str], add_special_tokens: bool) -> list[list[int]]:
        return encode_many(self.tokenizer, texts, add_special_tokens)

    async def _encode(self, text: str, add_special_tokens: bool) -> list[int]:
        (ids,) = await self.encodes.run([text], add_special_tokens)
        return ids

    def tokenize(self, request: TokenizeRequest) -> list[list[int]]:
        """`/v3/tokenize`: the servable's own tokenizer, as the engine uses it."""
        if not self.available:
            raise ServableNotReady(
                f"Model {self.name} is not available: {self.error or self.state.value}"
            )
        return encode(self.tokenizer, request)

    async def _images(
        self, request: GenerationRequest, media: MediaPolicy | None
    ) -> list[ImageArray]:
        if not request.images:
            return []
        loaded = await load_images(
            [(image.url, image.param) for image in request.images], media or MediaPolicy()
        )
        return [image.pixels for image in loaded]

    async def generate(
        self, request: GenerationRequest, media: MediaPolicy | None = None
    ) -> AsyncGenerator[GenerationEvent, None]:
        """Run a validated request; see the module docstring.

        `media` says where images may come from (the server's --allowed_local_media_path and
        --allowed_media_domains); without it only base64 data URLs are accepted.
        """
        engine = self.engine_for(request.model)
        if not (self.available and engine.alive):
            raise ServableNotReady(
                f"Model {request.model or self.name} is not available: "
                f"{self.error or engine.dead or self.state.value}",
                retry_after=engine.retry_after(),
            )
        check_capabilities(self.kind, request.sampling)
        prompt_ids, prompt_text = await prompt(
            request, self.kind, self.template, self.tokenizer, self._encode, self.vocabulary_size
        )
        check_image_count(self.kind, self.config.device, len(request.images))
        max_tokens = max_new_tokens(
            request, len(prompt_ids), self.max_length, self.limits.max_tokens_limit
        )
        config = generation_fields(request.sampling, max_tokens, self.defaults, self.speculation)
        # echo with logprobs scores the prompt too: the engine echoes it with its logprobs.
        score_prompt = (
            request.echo and request.sampling.logprobs and self.kind is PipelineType.LM_CB
        )
        if score_prompt:
            config["echo"] = True
        plan = output_plan(
            request,
            prompt_text,
            self.tool_parser,
            self.reasoning_parser,
            self.config.enable_tool_guided_generation,
        )
        constraint = plan.constraint
        if constraint is not None:
            config["structured_output"] = constraint.engine_fields()
            known = engine.grammar_failure(constraint.engine_fields())
            if (
                known is not None
            ):  # it broke an engine step before (servables/llm/engine/batching.py)
                raise InvalidRequest(f"{constraint.param}: {known}", param=constraint.param)
        # Last: everything cheap to refuse has been checked before any image is fetched.
        images = await self._images(request, media)
        requests = engine_requests(
            request.sampling,
            self.kind.vision,
            prompt_ids,
            prompt_text,
            config,
            images,
            engine.new_request_id,
        )
        del images  # the requests hold them until they are sent, then the worker has its copy
        request_id = requests[0].request_id
        sampling = request.sampling
        stats = RequestStats(submitted=time.perf_counter(), prompt_tokens=len(prompt_ids))
        logger.debug(
            "%s: request %s, %s%d prompt tokens, %d image(s), max_new_tokens %d, n %d, stream %s",
            self.name,
            request_id,
            "~" if self.kind.vision else "",
            len(prompt_ids),
            len(request.images),
            max_tokens,
            sampling.n,
            request.stream,
        )
        skip_special = sampling.skip_special_tokens and not plan.keep_special_tokens
        echo = prompt_text if request.echo else ""
        if max_tokens == 0 and not score_prompt:  # echo only (allowed only with echo)
            yield GenerationEvent(
                [ChoiceUpdate(index, "", None, "length", echo) for index in range(sampling.n)],
                Usage(len(prompt_ids), 0),
            )
            return

        def decode(ids: Sequence[int]) -> str:
            return self._decode(ids, skip_special)

        # The texts are those of skipped special tokens.
        texts = self.token_texts if skip_special else None
        choices = new_choices(
            sampling, decode, texts, echo, plan.make_parser, request.parallel_tool_calls
        )
        for choice in choices.values():
            if self.verbose_response:
                choice.raw_ids = []
            if score_prompt:
                choice.prompt_ids = prompt_ids
        if sampling.best_of:  # one beam search: its sequences are the choices
            choice_of_request = {request_id: -1}
        else:
            choice_of_request = {r.request_id: i for i, r in enumerate(requests)}
        for listener in self.request_listeners:
            listener.started(self, stats)
        stream = engine.submit(requests)
        del requests  # sent: no decoded pixels kept for the rest of the generation
        try:
            async for event in choice_events(
                stream,
                choices,
                choice_of_request,
                sampling.logprobs,
                skip_special,
                stats,
                engine,
                self.decodes,
            ):
                if event.usage is not None and self.verbose_response:
                    raw = choices[min(choices)].raw_ids or []
                    event.verbose = {"prompt": prompt_text, "content": self._decode(raw, False)}
                yield event
        except GrammarNotCompiled as error:
            param = constraint.param if constraint is not None else None
            raise InvalidRequest(
                f"{param}: {error.message}" if param else error.message, param=param
            ) from error
        finally:
            stream.close()
            for listener in self.request_listeners:
                listener.finished(self, stats)
            logger.debug(
                "%s: request %s done, %d completion tokens, ttft %s ms",
                self.name,
                request_id,
                stats.completion_tokens,
                f"{(stats.first_token - stats.submitted) * 1e3:.1f}" if stats.first_token else "-",
            )

    def metrics_snapshot(self) -> dict[str, float]:
        metrics = self.engine.metrics
        return {
            "requests": metrics.requests,
            "scheduled_requests": metrics.scheduled_requests,
            "cache_usage": metrics.cache_usage,
            "kv_cache_bytes": metrics.kv_cache_bytes,
        }
