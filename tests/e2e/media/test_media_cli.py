"""`graphrt serve --model_path DIR` for image and audio models, with OVMS's task flags.

A model directory without graph.pbtxt gets OVMS's graph for the task its files show
(model_index.json: image generation; a Whisper config: speech to text), written from the flags
given, so an OVMS command line for these tasks works unchanged.
"""

from __future__ import annotations

import base64
import io
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
from PIL import Image

if TYPE_CHECKING:
    from conftest import Audio, LaunchExact


def without_graph(model: Path, target: Path) -> Path:
    """`model`'s files, linked, without its graph.pbtxt."""
    target.mkdir()
    for entry in model.iterdir():
        if entry.name != "graph.pbtxt":
            (target / entry.name).symlink_to(entry)
    return target


def test_image_flags_shape_the_generated_graph(
    media_models: dict[str, Path], launch_exact: LaunchExact, tmp_path: Path
) -> None:
    model = without_graph(media_models["stable_diffusion"], tmp_path / "sd")
    args = [
        "--model_path",
        str(model),
        "--model_name",
        "sd",
        "--default_num_inference_steps",
        "2",
        "--max_num_inference_steps",
        "3",
        "--max_resolution",
        "128x128",
        "--max_num_images_per_prompt",
        "2",
    ]
    with launch_exact(args, model="sd") as server, server.http() as http:
        ok = http.post("/v3/images/generations", json={"model": "sd", "prompt": "a boat"})
        assert ok.status_code == 200, ok.text
        too_many_steps = http.post(
            "/v3/images/generations",
            json={"model": "sd", "prompt": "a boat", "num_inference_steps": 4},
        )
        too_big = http.post(
            "/v3/images/generations", json={"model": "sd", "prompt": "x", "size": "256x256"}
        )
        too_many = http.post("/v3/images/generations", json={"model": "sd", "prompt": "x", "n": 3})
        buffer = io.BytesIO()
        Image.new("RGB", (400, 200), "teal").save(buffer, format="PNG")
        edit = http.post(
            "/v3/images/edits",
            data={"model": "sd", "prompt": "x"},
            files={"image": ("big.png", buffer.getvalue(), "image/png")},
        )
    # An edit without a size keeps its image's shape, scaled down into --max_resolution.
    edited = Image.open(io.BytesIO(base64.b64decode(edit.json()["data"][0]["b64_json"])))
    assert edited.size == (128, 64)
    image = Image.open(io.BytesIO(base64.b64decode(ok.json()["data"][0]["b64_json"])))
    assert image.size == (64, 64)  # the model's own
    assert "maxNumInferenceSteps: 3" in too_many_steps.json()["error"]["message"]
    assert "maximum resolution 128x128" in too_big.json()["error"]["message"]
    assert "maxNumImagesPerPrompt: 2" in too_many.json()["error"]["message"]
    assert "as a image_generation model" in server.log()


@pytest.mark.parametrize("word_timestamps", [False, True])
def test_speech_to_text_is_inferred_and_streams(
    media_models: dict[str, Path],
    launch_exact: LaunchExact,
    tmp_path: Path,
    audio: Audio,
    word_timestamps: bool,
) -> None:
    model = without_graph(media_models["whisper"], tmp_path / "whisper")
    args = ["--model_path", str(model), "--model_name", "whisper", "--max_audio_seconds", "2"]
    if word_timestamps:
        args.append("--enable_word_timestamps")
    wav = audio.wav(audio.speech_like(1.0, seed=9))
    with launch_exact(args, model="whisper") as server, server.client() as client:
        events = list(
            client.audio.transcriptions.create(
                model="whisper", file=("a.wav", wav, "audio/wav"), stream=True
            )
        )
        assert events[-1].type == "transcript.text.done" and len(events) > 2
        with server.http() as http:
            words = http.post(
                "/v3/audio/transcriptions",
                data={"model": "whisper", "timestamp_granularities[]": "word"},
                files={"file": ("a.wav", wav, "audio/wav")},
            )
            long_wav = audio.wav(audio.speech_like(3.0, seed=1))
            too_long = http.post(
                "/v3/audio/transcriptions",
                data={"model": "whisper"},
                files={"file": ("long.wav", long_wav, "audio/wav")},
            )
    assert words.status_code == (200 if word_timestamps else 400), words.text
    if word_timestamps:
        assert len(words.json()["words"]) > 0
    assert too_long.status_code == 400
    assert "longer than the limit of 2 s" in too_long.json()["error"]["message"]
