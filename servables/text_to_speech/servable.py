"""The text-to-speech servable: SpeechT5 or Kokoro through openvino-genai's Text2SpeechPipeline.

The text is spoken one sentence per `generate()` call, on the servable's own thread, one request
at a time (servables.runtime.thread_runner; `generate()` releases the GIL). Sentence by sentence
because it bounds what one call holds, lets a cancelled request stop between sentences, and lets
a stream send each sentence's audio as soon as it is spoken; never several texts in one call,
which 2026.4 answers with the last text's waveform for every entry. Each waveform is copied out
of the pipeline's output buffer at once (the next call overwrites it).

Voices are speaker embeddings: raw little-endian float32 files whose length must match what the
model takes (SpeechT5: 512 values), from the graph's `voices` and the model's `voices/*.bin`
(OVMS's rules). A request without a voice uses the model's default speaker, and so does every
voice name when the model has no named voices: OpenAI's clients must send a voice and many send
one of OpenAI's names ("alloy"), which OVMS refuses unless a file of that name exists. With
voices, an unknown name is refused with the list. Answers say which voice spoke in the
`X-Voice` header (`VOICE_HEADER`): the voice's name, or `default` for the model's own speaker.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncGenerator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from servables.errors import InvalidRequest, ServableLoadError, readable_message
from servables.io.audio.codec import Samples
from servables.io.text.sentences import sentences
from servables.runtime.pipeline_servable import PipelineServable
from servables.runtime.thread_runner import Finished, Job
from servables.text_to_speech.protocol import SpeechRequest

logger = logging.getLogger(__name__)

VOICE_HEADER = "X-Voice"
DEFAULT_VOICE = "default"  # the header's value when the model's own speaker spoke


@dataclass
class SpeechConfig:
    name: str
    models_path: Path
    device: str = "CPU"
    properties: dict[str, Any] = field(default_factory=dict)
    voices: dict[str, Path] = field(default_factory=dict)  # the graph's; voices/ is read too
    speed_range: tuple[float, float] = (0.25, 4.0)


@dataclass(frozen=True)
class SpokenSentence:
    """One sentence's audio, as the model made it."""

    samples: Samples
    rate: int


def voice_files(config: SpeechConfig) -> dict[str, Path]:
    """OVMS's order: every `voices/*.bin` of the model (named by stem), then the graph's."""
    found: dict[str, Path] = {}
    directory = config.models_path / "voices"
    if directory.is_dir():
        found.update(
            {path.stem: path for path in sorted(directory.glob("*.bin")) if path.is_file()}
        )
    for name, path in config.voices.items():
        if not path.is_file():
            raise ServableLoadError(
                f"Requested voice speaker embeddings file does not exist: {path}", param="voices"
            )
        found[name] = path
    return found


def read_embedding(path: Path, size: int) -> Samples:
    data = path.read_bytes()
    if len(data) % 4:
        raise ServableLoadError(f"{path}: File size is not a multiple of float size.")
    values = np.frombuffer(data, dtype="<f4")
    if values.size != size:
        raise ServableLoadError(
            f"{path}: File must contain speaker embedding with {size} 32-bit floats. "
            f"Got: {values.size}"
        )
    return values.astype(np.float32)


class SpeechServable(PipelineServable):
    """See the module docstring."""

    kind = "text2speech"
    description = "text-to-speech"
    config: SpeechConfig

    def __init__(self, config: SpeechConfig) -> None:
        super().__init__(config)
        self.pipeline: Any = None
        self.voices: dict[str, Any] = {}  # name -> openvino.Tensor of the speaker embedding

    def _describe(self) -> str:
        if not self.voices:
            return "voices: none, every voice name is spoken by the model's default speaker"
        return "voices: " + ", ".join(sorted(self.voices))

    def _unload(self) -> None:
        self.pipeline = None

    def _load(self) -> None:
        import openvino
        import openvino_genai

        config = self.config
        files = voice_files(config)
        try:
            self.pipeline = openvino_genai.Text2SpeechPipeline(
                str(config.models_path), config.device, **config.properties
            )
        except RuntimeError as error:
            raise ServableLoadError(
                f"{self.name}: cannot load the text-to-speech model: {readable_message(str(error))}"
            ) from error
        shape = [int(d) for d in self.pipeline.get_speaker_embedding_shape()]
        size = int(np.prod(shape))
        for name, path in files.items():
            values = read_embedding(path, size)
            self.voices[name] = openvino.Tensor(np.ascontiguousarray(values.reshape(shape)))

    def voice(self, name: str | None, param: str = "voice") -> Any:
        """The speaker embedding for voice `name`, None for the model's default speaker (no
        name, or a model without named voices); InvalidRequest naming `param` for a name the
        model's voices do not have."""
        if name is None or not self.voices:
            return None
        voice = self.voices.get(name)
        if voice is None:
            known = ", ".join(sorted(self.voices))
            raise InvalidRequest(
                f"Requested voice '{name}' not found in available voices ({known})", param=param
            )
        return voice

    def spoken_voice(self, name: str | None) -> str:
        """Who speaks a request for voice `name` (checked by `voice`): the X-Voice header."""
        return name if name is not None and name in self.voices else DEFAULT_VOICE

    def speak(
        self, request: SpeechRequest, *, admitted: bool = False
    ) -> AsyncGenerator[SpokenSentence | Finished[int], None]:
        """Each sentence's audio as it is spoken, then Finished(the number of sentences).
        `admitted`: part of a request admitted before (see runner.stream)."""
        voice = self.voice(request.voice)
        if not admitted:
            self.runner.admit()
        pieces = sentences(request.text)
        options: dict[str, Any] = {"speed": request.speed}
        if request.language:
            options["language"] = request.language
        logger.debug("%s: %d sentences, voice %s", self.name, len(pieces), request.voice)

        def work(job: Job[SpokenSentence]) -> int:
            for piece in pieces:
                job.check()
                try:
                    result = self.pipeline.generate(piece, voice, **options)
                except RuntimeError as error:
                    raise InvalidRequest(
                        f"Speech generation failed: {readable_message(str(error))}"
                    ) from error
                samples = np.array(result.speeches[0].data, dtype=np.float32, copy=True)
                job.step()
                job.emit(SpokenSentence(samples.reshape(-1), int(result.output_sample_rate)))
            return len(pieces)

        return self.runner.stream(work, admitted=admitted)
