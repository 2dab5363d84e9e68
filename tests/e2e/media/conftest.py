"""Image and audio fixtures: tiny random models, one server serving them beside an LLM, and the
same pipelines driven directly for golden outputs.

tools/media_models.py builds (once per machine, cached by its inputs, in the export venv that
tools/rag_models.py makes) a tiny Stable Diffusion, a tiny Whisper and a tiny SpeechT5 from
random weights, each converted by `graphrt export` into OVMS's layout with its graph.pbtxt. The
server here is configured as an OVMS user would: one config.json listing the three exported
graphs (the speech graph once with two voices, once as exported: no voices) and the SmolLM2
LLM. `Pipelines` holds the same openvino-genai pipelines in the test process, built with the
same properties, so a test compares what the server answers with what the pipeline gives for the
same inputs and settings.
"""

from __future__ import annotations

import importlib
import importlib.util
import io
import json
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import pytest

from graphrt.export.image_audio_graphs import TextToSpeechSettings, text2speech_graph
from graphrt.export.text_graphs import TextGenerationSettings, text_generation_graph
from tests.conftest import KeptResults

if TYPE_CHECKING:
    from conftest import ExactServer, LaunchExact

ROOT = Path(__file__).resolve().parents[3]
IMAGE_MODEL = "tiny-sd"
BOUNDED_IMAGE_MODEL = "tiny-sd-no-queue"
LORA_IMAGE_MODEL = "tiny-sd-lora"
LORA_ALIAS, LORA_ALPHA = "tiny-style", 0.8
BLEND_ALIAS, BLEND_ALPHA = "tiny-blend", 0.4
WHISPER_MODEL = "tiny-whisper"
SPEECH_MODEL = "tiny-speecht5"
PLAIN_SPEECH_MODEL = "tiny-speecht5-plain"  # as exported: no voices
LLM_MODEL = "smollm2"
VOICES = ("alloy", "echo")
PROPERTIES = {"NUM_STREAMS": "1"}  # what the exported graphs' plugin_config says


def _load_media_models() -> Any:
    spec = importlib.util.spec_from_file_location(
        "media_models", ROOT / "tools" / "media_models.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="session")
def media_models() -> dict[str, Path]:
    """The exported model directories (built once per machine, see the module docstring)."""
    built = _load_media_models().build_all()
    return {name: Path(path) for name, path in built.items()}


def voice_embedding(name: str) -> np.ndarray[Any, np.dtype[np.float32]]:
    """A speaker embedding for SpeechT5 (512 floats), different for each voice name."""
    seed = sum(name.encode())
    return np.random.default_rng(seed).standard_normal(512).astype("<f4")


@pytest.fixture(scope="session")
def media_config(
    media_models: dict[str, Path],
    tiny_llm_gguf: Path,
    tmp_path_factory: pytest.TempPathFactory,
    run_graphrt: Callable[..., subprocess.CompletedProcess[str]],
) -> Path:
    """config.json of the media server: the three exported graphs as `graphrt export` wrote
    them, the speech graph also naming two voices, and an LLM graph (the tiny random llama: its
    tests are of serving beside images and of refusals, not of answers); one image graph with a
    LoRA adapter exported here (`--source_loras`); one image graph that lets no request wait."""
    root = tmp_path_factory.mktemp("media_repository")
    speech = root / SPEECH_MODEL
    speech.mkdir()
    voices = {}
    for name in VOICES:
        path = speech / f"{name}.bin"
        voice_embedding(name).tofile(path)
        voices[name] = path.name
    (speech / "graph.pbtxt").write_text(
        text2speech_graph(
            TextToSpeechSettings(models_path=str(media_models["speecht5"]), voices=voices)
        ),
        encoding="utf-8",
    )
    llm = root / LLM_MODEL
    llm.mkdir()
    (llm / "graph.pbtxt").write_text(
        text_generation_graph(TextGenerationSettings(models_path=str(tiny_llm_gguf))),
        encoding="utf-8",
    )
    # The same image model behind a graph that lets no request wait (GRAPHRT_MAX_QUEUED_REQUESTS).
    bounded = root / BOUNDED_IMAGE_MODEL
    bounded.mkdir()
    exported = (media_models["stable_diffusion"] / "graph.pbtxt").read_text(encoding="utf-8")
    (bounded / "graph.pbtxt").write_text(
        "# GRAPHRT_MAX_QUEUED_REQUESTS: 0\n"
        + exported.replace(
            'models_path: "./"', f'models_path: "{media_models["stable_diffusion"]}"'
        ),
        encoding="utf-8",
    )
    # The image model with a LoRA adapter and a blend of it, exported as a user would.
    export = run_graphrt(
        "export",
        "image_generation",
        "--source_model",
        str(media_models["stable_diffusion"]),
        "--model_name",
        LORA_IMAGE_MODEL,
        "--model_repository_path",
        str(root),
        "--source_loras",
        f"{LORA_ALIAS}={media_models['stable_diffusion_lora']}:{LORA_ALPHA},"
        f"{BLEND_ALIAS}=@{LORA_ALIAS}:{BLEND_ALPHA}",
        cwd=root,
    )
    assert export.returncode == 0, export.stderr
    graphs = [
        {"name": IMAGE_MODEL, "base_path": str(media_models["stable_diffusion"])},
        {"name": LORA_IMAGE_MODEL, "base_path": LORA_IMAGE_MODEL},
        {"name": BOUNDED_IMAGE_MODEL, "base_path": str(bounded)},
        {"name": WHISPER_MODEL, "base_path": str(media_models["whisper"])},
        {"name": SPEECH_MODEL, "base_path": str(speech)},
        {"name": PLAIN_SPEECH_MODEL, "base_path": str(media_models["speecht5"])},
        {"name": LLM_MODEL, "base_path": str(llm)},
    ]
    config = root / "config.json"
    config.write_text(
        json.dumps({"model_config_list": [], "mediapipe_config_list": graphs}, indent=2),
        encoding="utf-8",
    )
    return config


@pytest.fixture(scope="session")
def media_server(media_config: Path, launch_exact: LaunchExact) -> Iterator[ExactServer]:
    args = ["--config_path", str(media_config), "--metrics_enable", "--max_request_size", "4000000"]
    with launch_exact(args, model=IMAGE_MODEL) as server:
        yield server


class Pipelines:
    """The openvino-genai pipelines of the served models, driven directly (golden outputs)."""

    def __init__(self, models: dict[str, Path]) -> None:
        self.genai: Any = importlib.import_module("openvino_genai")
        self.ov: Any = importlib.import_module("openvino")
        self.models = models
        self._cache: dict[str, Any] = {}
        self.kept = KeptResults(Pipelines, PROPERTIES)

    def _pipeline(self, kind: str) -> Any:
        if kind not in self._cache:
            genai = self.genai
            path = {
                "text2image": "stable_diffusion",
                "image2image": "stable_diffusion",
                "inpainting": "stable_diffusion",
                "whisper": "whisper",
                "speech": "speecht5",
            }[kind]
            model = str(self.models[path])
            factory = {
                "text2image": genai.Text2ImagePipeline,
                "image2image": genai.Image2ImagePipeline,
                "inpainting": genai.InpaintingPipeline,
                "whisper": genai.WhisperPipeline,
                "speech": genai.Text2SpeechPipeline,
            }[kind]
            self._cache[kind] = factory(model, "CPU", **PROPERTIES)
        return self._cache[kind]

    def lora_images(self, prompt: str, alpha: float, **options: Any) -> np.ndarray[Any, Any]:
        """Text-to-image with the LoRA adapter at `alpha` (the pipeline compiled with it, as
        the server compiles every adapter of a graph)."""
        models = [self.models["stable_diffusion"], self.models["stable_diffusion_lora"]]
        call = ["lora_images", models, LORA_ALPHA, prompt, alpha, options]
        return self.kept.get(call, lambda: self._lora_images(prompt, alpha, **options))

    def _lora_images(self, prompt: str, alpha: float, **options: Any) -> np.ndarray[Any, Any]:
        genai = self.genai
        if "lora" not in self._cache:
            adapter = genai.Adapter(str(self.models["stable_diffusion_lora"]))
            compiled = genai.AdapterConfig(genai.AdapterConfig.Mode.MODE_DYNAMIC)
            compiled.add(adapter, LORA_ALPHA)
            pipe = genai.Text2ImagePipeline(str(self.models["stable_diffusion"]))
            pipe.compile("CPU", adapters=compiled, **PROPERTIES)
            self._cache["lora"] = (pipe, adapter)
        pipe, adapter = self._cache["lora"]
        chosen = genai.AdapterConfig()
        chosen.add(adapter, alpha)
        return np.array(pipe.generate(prompt, adapters=chosen, **options).data, copy=True)

    def images(
        self, prompt: str, *inputs: np.ndarray[Any, Any], **options: Any
    ) -> np.ndarray[Any, Any]:
        """Images (n, H, W, 3) uint8 of text-to-image, or of an edit when given an image (and a
        mask: inpainting)."""
        call = ["images", self.models["stable_diffusion"], prompt, list(inputs), options]
        return self.kept.get(call, lambda: self._images(prompt, *inputs, **options))

    def _images(self, prompt: str, *inputs: np.ndarray[Any, Any], **options: Any) -> Any:
        kind = ("text2image", "image2image", "inpainting")[len(inputs)]
        tensors = [self.ov.Tensor(np.ascontiguousarray(a[np.newaxis])) for a in inputs]
        result = self._pipeline(kind).generate(prompt, *tensors, **options)
        return np.array(result.data, copy=True)

    def transcribe(self, samples: np.ndarray[Any, Any], **options: Any) -> Any:
        return self._pipeline("whisper").generate(samples, **options)

    def speak(
        self, text: str, voice: str | None, **options: Any
    ) -> np.ndarray[Any, np.dtype[np.float32]]:
        """`text` spoken in `voice` (None: the model's default speaker)."""
        call = ["speak", self.models["speecht5"], text, voice, options]
        return self.kept.get(call, lambda: self._speak(text, voice, **options))

    def _speak(
        self, text: str, voice: str | None, **options: Any
    ) -> np.ndarray[Any, np.dtype[np.float32]]:
        speaker = None if voice is None else self.ov.Tensor(voice_embedding(voice).reshape(1, 512))
        result = self._pipeline("speech").generate(text, speaker, **options)
        return np.array(result.speeches[0].data, dtype=np.float32, copy=True).reshape(-1)


@pytest.fixture(scope="session")
def pipelines(media_models: dict[str, Path]) -> Pipelines:
    return Pipelines(media_models)


class Audio:
    """Test audio: waveforms and the files clients upload."""

    @staticmethod
    def wav(samples: np.ndarray[Any, Any], rate: int = 16_000) -> bytes:
        soundfile = importlib.import_module("soundfile")
        buffer = io.BytesIO()
        soundfile.write(buffer, samples, rate, format="WAV", subtype="FLOAT")
        return buffer.getvalue()

    @staticmethod
    def speech_like(seconds: float, seed: int) -> np.ndarray[Any, np.dtype[np.float32]]:
        """A waveform with some structure (tones that change, and noise): different seeds give
        different audio, so the tiny Whisper gives different text."""
        rng = np.random.default_rng(seed)
        t = np.arange(int(16_000 * seconds)) / 16_000
        tones = sum(
            0.2 * np.sin(2 * np.pi * rng.uniform(100, 900) * t + rng.uniform(0, 6))
            for _ in range(3)
        )
        envelope = 0.5 + 0.5 * np.sin(2 * np.pi * rng.uniform(1, 4) * t)
        return (tones * envelope + 0.02 * rng.standard_normal(t.size)).astype(np.float32)


@pytest.fixture(scope="session")
def audio() -> Audio:
    return Audio()
