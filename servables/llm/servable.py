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
"""

from __future__ import annotations

import asyncio
import enum
import json
import logging
import random
import time
from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from servables.admission import Admission
from servables.engine.client import EngineClient, RequestStream
from servables.engine.messages import AddRequest, EngineSpec
from servables.errors import InvalidRequest, ServableLoadError, ServableNotReady
from servables.llm.chat_template import ChatTemplate, find_template, special_token
from servables.llm.detokenizer import DecodeBatcher, IncrementalDetokenizer, TokenTexts
from servables.llm.grammar_check import check_json_schema
from servables.llm.model_files import (
    PipelineType,
    generation_defaults,
    infer_pipeline_type,
    is_gguf,
    max_model_length,
    vocabulary_size,
)
from servables.llm.output_parsers import (
    OutputParser,
    ParsedDelta,
    ToolCallDelta,
    detect_parsers,
    make_output_parser,
    prompt_opens_reasoning,
    tool_call_structural_tag,
    validate_parser_names,
)
from servables.media.images import ImageArray
from servables.media.sources import MediaPolicy, load_images
from servables.openai.protocol import GenerationRequest, Limits
from servables.openai.responses import TokenLogprob, Usage
from servables.openai.structured_output import OutputConstraint
from servables.openai.tokenize import TokenizeRequest, encode
from servables.openai.tools import ForcedCallParser, forced_call_constraint
from servables.supervision import Supervisor

logger = logging.getLogger(__name__)

# Used as max_new_tokens when neither the request, the graph nor the model bounds the output.
FALLBACK_MAX_NEW_TOKENS = 4096
USAGE_LOG_SECONDS = 5.0
SPECULATIVE_TOKENS = 5
PROMPT_LOOKUP_NGRAM = 3
DEFAULT_SAMPLING_FIELDS = ("temperature", "top_p", "top_k", "repetition_penalty", "do_sample")


# Images one request may carry. Each decodes to at most 4096x4096 RGB (48 MiB, see
# servables/media/images.py), and a small PNG of one colour can be that big once decoded, so
# without a cap one request within the body limit could ask for gigabytes.
MAX_IMAGES_PER_REQUEST = 32


def check_image_count(kind: PipelineType, device: str, count: int) -> None:
    """OVMS's rule for VLMs on NPU (docs/llm/reference.md): exactly one image per request;
    elsewhere at most MAX_IMAGES_PER_REQUEST. Checked before any image is fetched."""
    if count > MAX_IMAGES_PER_REQUEST:
        raise InvalidRequest(
            f"A request may carry at most {MAX_IMAGES_PER_REQUEST} images, but {count} were "
            "provided",
            param="messages",
        )
    if kind is PipelineType.VLM and device.upper().startswith("NPU") and count != 1:
        raise InvalidRequest(
            f"VLM servables on NPU accept exactly one image per request, but {count} were provided",
            param="messages",
        )


class ServableState(enum.Enum):
    LOADING = "LOADING"
    AVAILABLE = "AVAILABLE"
    UNAVAILABLE = "UNAVAILABLE"


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
    # OVMS's parser options: None = detect from the chat template, "none" = off.
    tool_parser: str | None = None
    reasoning_parser: str | None = None
    enable_tool_guided_generation: bool = False


@dataclass
class ChoiceUpdate:
    index: int
    text: str  # content (with a parser: what it left of the text)
    logprobs: list[TokenLogprob] | None = None
    finish_reason: str | None = None
    prefix: str = ""  # the echoed prompt, on a choice's first update (completions with echo)
    reasoning: str = ""
    tool_calls: list[ToolCallDelta] = field(default_factory=list)


@dataclass
class GenerationEvent:
    """What one engine step produced for a request; `usage` is set on the last event."""

    updates: list[ChoiceUpdate]
    usage: Usage | None = None


@dataclass
class _Choice:
    index: int
    detokenizer: IncrementalDetokenizer
    tokens: int = 0
    finish_reason: str | None = None
    prefix: str = ""  # sent once, with the choice's first update
    parser: OutputParser | None = None
    max_calls: int | None = None  # 1 when parallel_tool_calls is false
    calls: int = 0  # tool calls started so far

    def parse(self, text: str, finished: bool) -> ParsedDelta:
        """Run the parser over new text; drop calls beyond `max_calls`."""
        assert self.parser is not None
        parsed = self.parser.feed(text) if text else ParsedDelta()
        if finished:
            tail = self.parser.finish()
            parsed.content += tail.content
            parsed.reasoning += tail.reasoning
            parsed.tool_calls += tail.tool_calls
        if self.max_calls is not None:
            parsed.tool_calls = [c for c in parsed.tool_calls if c.index < self.max_calls]
        self.calls = max([self.calls, *(call.index + 1 for call in parsed.tool_calls)])
        return parsed


@dataclass(frozen=True)
class OutputPlan:
    """How a request's output is constrained and parsed (see LLMServable.output_plan)."""

    constraint: OutputConstraint | None = None
    make_parser: Callable[[], OutputParser | None] = lambda: None
    keep_special_tokens: bool = False


@dataclass
class RequestStats:
    """Timings of one request, for logs and metrics."""

    submitted: float
    first_token: float | None = None
    last_token: float | None = None
    prompt_tokens: int = 0
    completion_tokens: int = 0
    inter_token: list[float] = field(default_factory=list)
    # The engine step that produced the first token: its prefill (ends a request's queue wait).
    first_step_seconds: float = 0.0


class LLMServable:
    """See the module docstring."""

    def __init__(self, config: LLMServableConfig) -> None:
        self.config = config
        self.name = config.name
        self.state = ServableState.LOADING
        self.error: str | None = None
        self.kind = infer_pipeline_type(config.models_path, config.device, config.pipeline_type)
        self.limits = Limits(config.max_tokens_limit, config.best_of_limit)
        self.max_length = max_model_length(config.models_path)
        model_dir = None if is_gguf(config.models_path) else config.models_path
        self.defaults = {
            key: value
            for key, value in generation_defaults(config.models_path).items()
            if key in DEFAULT_SAMPLING_FIELDS
        }
        self._model_dir = model_dir
        # openvino-genai refuses requests to a prompt-lookup or draft-model pipeline that do not
        # say how many tokens to propose; OVMS's defaults (5 tokens, 3-token n-grams).
        self.speculation: dict[str, Any] = {}
        if config.draft or config.properties.get("prompt_lookup"):
            self.speculation["num_assistant_tokens"] = SPECULATIVE_TOKENS
        if config.properties.get("prompt_lookup"):
            self.speculation["max_ngram_size"] = PROMPT_LOOKUP_NGRAM
        self.engine = EngineClient(
            EngineSpec(
                kind=self.kind.value,
                models_path=str(config.models_path),
                device=config.device,
                properties=dict(config.properties),
                scheduler=dict(config.scheduler),
                draft=config.draft,
                log_level=config.log_level,
            ),
            config.name,
        )
        self.tokenizer: Any = None
        self.vocabulary_size = vocabulary_size(config.models_path)
        self.token_texts: TokenTexts | None = None
        self.batcher = DecodeBatcher(self._decode_many)
        self.template: ChatTemplate | None = None
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
        try:
            ready = await self.engine.start()
            # The engine process prepared a tokenizer that loads in milliseconds (see
            # model_files.tokenizer_location); still, keep even that off the event loop.
            await asyncio.to_thread(self._load_tokenizer, Path(ready.tokenizer_path))
        except ServableLoadError as error:
            self.state = ServableState.UNAVAILABLE
            self.error = error.message
            await self.engine.close()
            raise
        except Exception as error:
            self.state = ServableState.UNAVAILABLE
            self.error = str(error)
            await self.engine.close()
            raise ServableLoadError(f"{self.name}: {error}") from error
        self.state = ServableState.AVAILABLE
        logger.info(
            "loaded %s in %.1f s (engine %.1f s); context length %s; chat template from %s",
            self.name,
            time.perf_counter() - started,
            ready.load_seconds,
            self.max_length,
            self.template.source.origin if self.template else "-",
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
        self.template = ChatTemplate(source, bos, eos)
        self.tokenizer = tokenizer
        self.token_texts = self._token_texts()
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

    def _token_texts(self) -> TokenTexts | None:
        """Texts that let most engine steps skip the tokenizer (see servables.llm.detokenizer)."""
        started = time.perf_counter()
        try:
            texts = TokenTexts.build(self._decode_many, len(self.tokenizer.get_vocab()))
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
        await self.engine.close()

    @property
    def available(self) -> bool:
        return self.state is ServableState.AVAILABLE and self.engine.alive

    @property
    def supervisor(self) -> Supervisor:
        """Restarts the engine process when it dies (servables.supervision)."""
        return self.engine.supervisor

    @property
    def admission(self) -> Admission:
        """Bounds the requests waiting for the engine (servables.admission)."""
        return self.engine.admission

    # ------------------------------------------------------------------------------ requests

    def _decode(self, ids: Sequence[int], skip_special: bool = True) -> str:
        text: str = self.tokenizer.decode(list(ids), skip_special_tokens=skip_special)
        return text

    def _decode_many(self, windows: list[list[int]], skip_special: bool) -> list[str]:
        texts: list[str] = self.tokenizer.decode(windows, skip_special_tokens=skip_special)
        return texts

    def tokenize(self, request: TokenizeRequest) -> list[list[int]]:
        """`/v3/tokenize`: the servable's own tokenizer, as the engine uses it."""
        if not self.available:
            raise ServableNotReady(
                f"Model {self.name} is not available: {self.error or self.state.value}"
            )
        return encode(self.tokenizer, request)

    def _encode(self, text: str, add_special_tokens: bool) -> list[int]:
        encoded = self.tokenizer.encode(text, add_special_tokens=add_special_tokens)
        return [int(token) for token in encoded.input_ids.data[0]]

    def _prompt(self, request: GenerationRequest) -> tuple[list[int], str]:
        """Token ids and text of the prompt (text is what `echo` repeats)."""
        if request.has_images and not self.kind.vision:
            raise InvalidRequest(
                "This servable supports only text input, but image_url has been provided",
                param="messages",
            )
        if request.endpoint == "completions":
            if self.kind.vision:
                raise InvalidRequest(
                    "VLM Servable does not support the /completions endpoint. Use "
                    "/chat/completions or /responses."
                )
            if isinstance(request.prompt, list):
                vocabulary = self.vocabulary_size
                if vocabulary is not None and any(t >= vocabulary for t in request.prompt):
                    raise InvalidRequest(
                        f"prompt token ids must be below the vocabulary size {vocabulary}",
                        param="prompt",
                    )
                return list(request.prompt), self._decode(request.prompt)
            assert request.prompt is not None
            return self._encode(request.prompt, True), request.prompt
        assert self.template is not None
        kwargs = dict(request.chat_template_kwargs)
        add_generation_prompt = bool(kwargs.pop("add_generation_prompt", True))
        text = self.template.render(
            request.messages,
            tools=request.tools,
            add_generation_prompt=add_generation_prompt,
            extra=kwargs,
        )
        return self._encode(text, False), text

    def _max_new_tokens(self, request: GenerationRequest, prompt_tokens: int) -> int:
        requested = request.sampling.max_tokens
        limit = self.max_length
        if limit is not None:
            if prompt_tokens >= limit:
                raise InvalidRequest(
                    f"Number of prompt tokens: {prompt_tokens} exceeds model max length: {limit}",
                    param="messages" if request.endpoint == "chat" else "prompt",
                )
            if requested is not None and prompt_tokens + requested > limit:
                raise InvalidRequest(
                    f"Number of prompt tokens: {prompt_tokens} + max tokens value: {requested} "
                    f"exceeds model max length: {limit}",
                    param="max_tokens",
                )
        if requested is not None:
            return requested
        if self.limits.max_tokens_limit is not None:
            bound = self.limits.max_tokens_limit
            return min(bound, limit - prompt_tokens) if limit is not None else bound
        return limit - prompt_tokens if limit is not None else FALLBACK_MAX_NEW_TOKENS

    def output_plan(self, request: GenerationRequest, prompt_text: str) -> OutputPlan:
        """The grammar and the per-choice parser of a request.

        A forced tool choice ("required" or a named function) gets its own grammar and parser,
        whatever the model's family (servables/openai/tools.py). Otherwise the family's parsers
        run on chat output unless the request asked for special tokens (`skip_special_tokens:
        false`, OVMS's way to get the raw text); with `enable_tool_guided_generation` and
        tools, the family's triggered structural tag keeps calls to the tools' schemas.
        """
        constraint = request.constraint
        tools = request.tools
        choice = request.tool_choice
        if request.endpoint != "chat":
            return OutputPlan(constraint)
        if tools and choice.forced:
            name = choice.name if choice.mode == "function" else None
            return OutputPlan(
                forced_call_constraint(tools, choice, request.parallel_tool_calls),
                lambda: ForcedCallParser(name),
            )
        if not request.sampling.skip_special_tokens:
            return OutputPlan(constraint)
        tool_parser = self.tool_parser if tools else None
        reasoning_parser = self.reasoning_parser
        guided = self.config.enable_tool_guided_generation
        if tools and tool_parser and constraint is None and guided:
            constraint = self._tool_guidance(tool_parser, tools, request.parallel_tool_calls)
        starts = reasoning_parser is not None and prompt_opens_reasoning(
            prompt_text, reasoning_parser
        )

        def make_parser() -> OutputParser | None:
            return make_output_parser(
                tool_parser, reasoning_parser, tools=tools, starts_in_reasoning=starts
            )

        probe = make_parser()
        if probe is None:
            return OutputPlan(constraint)
        return OutputPlan(constraint, make_parser, probe.keep_special_tokens)

    def _tool_guidance(
        self, tool_parser: str, tools: list[dict[str, Any]], parallel: bool
    ) -> OutputConstraint | None:
        for index, tool in enumerate(tools):
            check_json_schema(tool["function"]["parameters"], f"tools[{index}].function.parameters")
        tag = tool_call_structural_tag(
            tool_parser, tools, require_call=False, single_call=not parallel
        )
        if tag is None:
            return None
        return OutputConstraint("structural_tags_config", json.dumps(tag), "tools")

    def _config(self, request: GenerationRequest, max_new_tokens: int) -> dict[str, Any]:
        sampling = request.sampling
        config: dict[str, Any] = {"max_new_tokens": max_new_tokens, **self.speculation}
        temperature = sampling.temperature
        if temperature is None:
            defaults = self.defaults
            if defaults.get("do_sample") and isinstance(defaults.get("temperature"), (int, float)):
                temperature = float(defaults["temperature"])
            for key in ("top_p", "top_k", "repetition_penalty"):
                if key in defaults:
                    config[key] = defaults[key]
        if temperature:
            config["do_sample"] = True
            config["temperature"] = temperature
        else:
            config["do_sample"] = False
        for key in (
            "top_p",
            "min_p",
            "repetition_penalty",
            "length_penalty",
            "frequency_penalty",
            "presence_penalty",
        ):
            value = getattr(sampling, key)
            if value is not None:
                config[key] = value
        if sampling.top_k is not None:
            config["top_k"] = sampling.top_k if sampling.top_k > 0 else 0
        if sampling.stop:
            # The engine stops on whole tokens; keeping the stop string lets the detokenizer
            # cut the text exactly where the string starts.
            config["stop_strings"] = sorted(set(sampling.stop))
            config["include_stop_str_in_output"] = True
        if sampling.ignore_eos:
            config["ignore_eos"] = True
        if sampling.logprobs:
            config["logprobs"] = 1
        return config

    def _check_capabilities(self, request: GenerationRequest) -> None:
        sampling = request.sampling
        if not self.kind.continuous_batching:
            kind = self.kind.value
            if sampling.logprobs:
                raise InvalidRequest(
                    f"logprobs are not supported by {kind} servables", param="logprobs"
                )
            if sampling.n > 1 or sampling.best_of:
                raise InvalidRequest(
                    f"n and best_of are not supported by {kind} servables", param="n"
                )

    def _requests(
        self,
        request: GenerationRequest,
        prompt_ids: list[int],
        prompt_text: str,
        config: dict[str, Any],
        images: list[ImageArray],
    ) -> list[AddRequest]:
        sampling = request.sampling
        engine = self.engine
        text_prompt = prompt_text if self.kind.vision else None
        ids = None if self.kind.vision else prompt_ids
        pictures = tuple(images)
        if sampling.best_of:
            beams = dict(config)
            beams.update(
                num_beams=sampling.best_of, num_return_sequences=sampling.n, do_sample=False
            )
            beams.pop("temperature", None)
            return [
                AddRequest(
                    engine.new_request_id(),
                    ids,
                    text_prompt,
                    beams,
                    final_only=True,
                    images=pictures,
                )
            ]
        seed = sampling.seed
        requests = []
        for index in range(sampling.n):
            choice_config = dict(config)
            if config.get("do_sample"):
                choice_config["rng_seed"] = (
                    seed + index if seed is not None else random.getrandbits(31)
                )
            requests.append(
                AddRequest(
                    engine.new_request_id(), ids, text_prompt, choice_config, images=pictures
                )
            )
        return requests

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
    ) -> AsyncIterator[GenerationEvent]:
        """Run a validated request; see the module docstring.

        `media` says where images may come from (the server's --allowed_local_media_path and
        --allowed_media_domains); without it only base64 data URLs are accepted.
        """
        if not self.available:
            raise ServableNotReady(
                f"Model {self.name} is not available: "
                f"{self.error or self.engine.dead or self.state.value}",
                retry_after=self.engine.retry_after(),
            )
        self._check_capabilities(request)
        prompt_ids, prompt_text = self._prompt(request)
        check_image_count(self.kind, self.config.device, len(request.images))
        max_new_tokens = self._max_new_tokens(request, len(prompt_ids))
        config = self._config(request, max_new_tokens)
        plan = self.output_plan(request, prompt_text)
        if plan.constraint is not None:
            config["structured_output"] = plan.constraint.engine_fields()
        # Last: everything cheap to refuse has been checked before any image is fetched.
        images = await self._images(request, media)
        engine_requests = self._requests(request, prompt_ids, prompt_text, config, images)
        del images  # the requests hold them until they are sent, then the worker has its copy
        request_id = engine_requests[0].request_id
        sampling = request.sampling
        stats = RequestStats(submitted=time.perf_counter(), prompt_tokens=len(prompt_ids))
        logger.debug(
            "%s: request %s, %s%d prompt tokens, %d image(s), max_new_tokens %d, n %d, stream %s",
            self.name,
            request_id,
            "~" if self.kind.vision else "",
            len(prompt_ids),
            len(request.images),
            max_new_tokens,
            sampling.n,
            request.stream,
        )
        skip_special = sampling.skip_special_tokens and not plan.keep_special_tokens
        echo = prompt_text if request.echo else ""
        if max_new_tokens == 0:  # echo only (the protocol allows 0 only with echo)
            yield GenerationEvent(
                [ChoiceUpdate(index, "", None, "length", echo) for index in range(sampling.n)],
                Usage(len(prompt_ids), 0),
            )
            return

        def decode(ids: Sequence[int]) -> str:
            return self._decode(ids, skip_special)

        choices = {
            index: _Choice(
                index,
                IncrementalDetokenizer(
                    decode,
                    sampling.stop,
                    sampling.include_stop_str_in_output,
                    # The texts are those of skipped special tokens.
                    texts=self.token_texts if skip_special else None,
                ),
                prefix=echo,
                parser=plan.make_parser(),
                max_calls=None if request.parallel_tool_calls else 1,
            )
            for index in range(sampling.n)
        }
        if sampling.best_of:  # one beam search: its sequences are the choices
            choice_of_request = {request_id: -1}
        else:
            choice_of_request = {r.request_id: i for i, r in enumerate(engine_requests)}
        for listener in self.request_listeners:
            listener.started(self, stats)
        stream = self.engine.submit(engine_requests)
        del engine_requests  # sent: no decoded pixels kept for the rest of the generation
        try:
            async for event in self._events(
                stream, choices, choice_of_request, sampling.logprobs, skip_special, stats
            ):
                yield event
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

    async def _events(
        self,
        stream: RequestStream,
        choices: dict[int, _Choice],
        choice_of_request: dict[int, int],
        want_logprobs: bool,
        skip_special: bool,
        stats: RequestStats,
    ) -> AsyncIterator[GenerationEvent]:
        unfinished = set(choices)
        while unfinished:
            batch = await stream.next_batch()
            now = time.perf_counter()
            updates: dict[int, ChoiceUpdate] = {}
            for delta in batch:
                mapped = choice_of_request.get(delta.request_id)
                index = delta.index if mapped == -1 else mapped
                if index is None or index not in unfinished:
                    continue
                choice = choices[index]
                update = updates.get(index)
                if update is None:
                    update = updates[index] = ChoiceUpdate(index, "", prefix=choice.prefix)
                    choice.prefix = ""
                if delta.prompt_tokens:  # the engine's exact count (vision prompts)
                    stats.prompt_tokens = delta.prompt_tokens
                tokens = delta.token_ids
                if tokens:
                    if stats.first_token is None:
                        stats.first_token = now
                        stats.first_step_seconds = self.engine.last_step_seconds
                    elif stats.last_token is not None:
                        stats.inter_token.append(now - stats.last_token)
                    stats.last_token = now
                    choice.tokens += len(tokens)
                    stats.completion_tokens += len(tokens)
                    detokenizer = choice.detokenizer
                    text = detokenizer.add_plain(tokens)
                    if text is None:
                        windows = detokenizer.windows(tokens)
                        text = detokenizer.deliver(await self.batcher.decode(windows, skip_special))
                    update.text += text
                    if want_logprobs:
                        pieces = await self.batcher.decode([[t] for t in tokens], False)
                        update.logprobs = (update.logprobs or []) + [
                            TokenLogprob(piece, logprob)
                            for piece, logprob in zip(pieces, delta.logprobs, strict=False)
                        ]
                finished = choice.detokenizer.stopped or delta.finish_reason is not None
                if finished:
                    update.text += choice.detokenizer.finish()
                    reason = "stop" if choice.detokenizer.stopped else delta.finish_reason
                    choice.finish_reason = update.finish_reason = reason or "stop"
                    unfinished.discard(index)
                    if mapped != -1:
                        stream.finish(delta.request_id)
            for update in updates.values():
                self._parse(choices[update.index], update)
            usage = None
            if not unfinished:
                usage = Usage(stats.prompt_tokens, stats.completion_tokens)
            if updates or usage:
                yield GenerationEvent(sorted(updates.values(), key=lambda u: u.index), usage)

    @staticmethod
    def _parse(choice: _Choice, update: ChoiceUpdate) -> None:
        """Split an update's text into content, reasoning and tool calls (if parsing)."""
        if choice.parser is None:
            return
        parsed = choice.parse(update.text, update.finish_reason is not None)
        update.text = parsed.content
        update.reasoning = parsed.reasoning
        update.tool_calls = parsed.tool_calls
        if update.finish_reason == "stop" and choice.calls:
            update.finish_reason = choice.finish_reason = "tool_calls"

    def metrics_snapshot(self) -> dict[str, float]:
        metrics = self.engine.metrics
        return {
            "requests": metrics.requests,
            "scheduled_requests": metrics.scheduled_requests,
            "cache_usage": metrics.cache_usage,
            "kv_cache_bytes": metrics.kv_cache_bytes,
        }
