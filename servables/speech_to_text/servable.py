"""The speech-to-text servable: Whisper through openvino-genai's WhisperPipeline.

Uploads are decoded and resampled to Whisper's 16 kHz on a worker thread (servables.io.audio), then
transcribed on the servable's own thread, one request at a time (servables.runtime.thread_runner;
`generate()` releases the GIL). The pipeline's streamer sees every piece of text as it is
decoded: it counts steps for /metrics, sends the pieces as transcript deltas when the request
streams, and stops the generation once the request is cancelled. Timestamps come from the
pipeline (`return_timestamps` for segments; word timestamps need the pipeline built with them,
S2tCalculatorOptions.enable_word_timestamps, as in OVMS).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncGenerator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from servables.errors import InvalidRequest, ServableLoadError, readable_message
from servables.io.audio.codec import (
    AudioLimits,
    Samples,
    audio_seconds,
    decode_audio,
    probe_audio,
)
from servables.runtime.pipeline_servable import PipelineServable
from servables.runtime.thread_runner import Finished, Job
from servables.speech_to_text.protocol import Segment, Transcript, TranscriptionRequest, Word

logger = logging.getLogger(__name__)

SAMPLE_RATE = 16_000  # what Whisper's feature extractor takes


@dataclass
class TranscriptionConfig:
    name: str
    models_path: Path
    device: str = "CPU"
    properties: dict[str, Any] = field(default_factory=dict)
    word_timestamps: bool = False


class TranscriptionServable(PipelineServable):
    """See the module docstring."""

    kind = "speech2text"
    description = "speech-to-text"
    config: TranscriptionConfig

    def __init__(self, config: TranscriptionConfig) -> None:
        super().__init__(config)
        self.audio_limits = AudioLimits()  # the server sets its own (--max_audio_seconds)
        self.pipeline: Any = None
        self.languages: frozenset[str] = frozenset()

    def _describe(self) -> str:
        words = ", word timestamps" if self.config.word_timestamps else ""
        return f"{len(self.languages)} languages{words}"

    def _unload(self) -> None:
        self.pipeline = None

    def _load(self) -> None:
        import openvino_genai

        config = self.config
        properties = dict(config.properties)
        if config.word_timestamps:
            properties["word_timestamps"] = True
        try:
            self.pipeline = openvino_genai.WhisperPipeline(
                str(config.models_path), config.device, **properties
            )
        except RuntimeError as error:
            raise ServableLoadError(
                f"{self.name}: cannot load the speech-to-text model: {readable_message(str(error))}"
            ) from error
        tokens = self.pipeline.get_generation_config().lang_to_id
        self.languages = frozenset(token.strip("<|>") for token in tokens)

    def _options(self, request: TranscriptionRequest) -> dict[str, Any]:
        options: dict[str, Any] = {"task": "translate" if request.translate else "transcribe"}
        if request.language is not None:
            if self.languages and request.language not in self.languages:
                raise InvalidRequest("Invalid language code.", param="language")
            options["language"] = f"<|{request.language}|>"
        if request.prompt:
            options["initial_prompt"] = request.prompt
        if request.temperature:  # 0 (and unset) is greedy
            options["do_sample"] = True
            options["temperature"] = request.temperature
        if request.segments:
            options["return_timestamps"] = True
        if request.words:
            options["word_timestamps"] = True
        return options

    async def transcribe(
        self, request: TranscriptionRequest
    ) -> AsyncGenerator[str | Finished[Transcript], None]:
        """Text pieces as they are decoded (when the request streams), then the transcript.
        The upload's header is checked now; its samples are decoded on the pipeline's thread
        when the request's turn comes, so waiting requests hold only their uploads."""
        options = self._options(request)
        self.runner.admit()  # a full queue refuses before any work
        limit = self.audio_limits.max_seconds
        header = await asyncio.to_thread(probe_audio, request.audio.data, max_seconds=limit)
        logger.debug(
            "%s: %.1f s of %s audio, %s", self.name, header.seconds, header.format, options
        )

        def work(job: Job[str]) -> Transcript:
            samples = decode_audio(request.audio.data, SAMPLE_RATE, max_seconds=limit)

            def streamer(piece: str) -> bool:
                # An exception here would be printed and swallowed by openvino-genai, and with
                # it the stop signal: nothing may escape.
                try:
                    job.step()
                    if request.stream and piece:
                        job.emit(piece)
                except Exception:  # the loop is gone (shutdown): stop
                    logger.debug("streamer failed", exc_info=True)
                    return True
                return job.cancelled  # True stops the generation

            duration = audio_seconds(samples, SAMPLE_RATE)
            return self._run(samples, options, streamer, job, request, duration)

        return self.runner.stream(work)

    def _reset(self) -> None:
        """A generate() that failed midway leaves decoder state behind that spoils the next
        request's text (openvino-genai 2026.4): a throw-away request clears it."""
        try:
            self.pipeline.generate(np.zeros(SAMPLE_RATE // 10, dtype=np.float32), max_new_tokens=1)
        except RuntimeError:
            logger.warning("%s: the pipeline did not recover from a failed request", self.name)

    def _run(
        self,
        samples: Samples,
        options: dict[str, Any],
        streamer: Any,
        job: Job[str],
        request: TranscriptionRequest,
        duration: float,
    ) -> Transcript:
        try:
            result = self.pipeline.generate(samples, streamer=streamer, **options)
        except RuntimeError as error:
            self._reset()
            raise InvalidRequest(
                f"Response generation failed: {readable_message(str(error))}"
            ) from error
        job.check()
        segments = [
            Segment(float(chunk.start_ts), float(chunk.end_ts), chunk.text)
            for chunk in (result.chunks or [])
        ]
        words = [
            Word(word.word, float(word.start_ts), float(word.end_ts))
            for word in (getattr(result, "words", None) or [])
        ]
        return Transcript(
            text=result.texts[0] if result.texts else "",
            duration=duration,
            language=request.language or "",
            segments=segments,
            words=words,
            temperature=request.temperature or 0.0,
        )
