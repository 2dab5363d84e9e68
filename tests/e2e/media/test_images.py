"""Image generation and edits through the OpenAI SDK, compared with the pipelines run directly.

The server's images must be the pipeline's pixels exactly (PNG is lossless): same prompt, seed,
steps and size give the same image whether the tiny Stable Diffusion runs in the server or in
this process. Bad requests get OpenAI's error object with status 400 and the field's name.
"""

from __future__ import annotations

import base64
import io
from typing import TYPE_CHECKING, Any

import httpx
import numpy as np
import openai
import pytest
from PIL import Image

if TYPE_CHECKING:
    from conftest import ExactServer, Pipelines

IMAGE_MODEL = "tiny-sd"
STEPS = {"num_inference_steps": 4}


def pixels(b64: str | None) -> np.ndarray[Any, Any]:
    assert b64 is not None
    return np.asarray(Image.open(io.BytesIO(base64.b64decode(b64))).convert("RGB"))


def png(array: np.ndarray[Any, Any]) -> bytes:
    buffer = io.BytesIO()
    Image.fromarray(array).save(buffer, format="PNG")
    return buffer.getvalue()


def test_generation_equals_the_pipeline(media_server: ExactServer, pipelines: Pipelines) -> None:
    with media_server.client() as client:
        reply = client.images.generate(
            model=IMAGE_MODEL,
            prompt="a red fox in the snow",
            n=2,
            size="64x64",
            extra_body={**STEPS, "rng_seed": 7},
        )
    expected = pipelines.images(
        "a red fox in the snow",
        num_images_per_prompt=2,
        width=64,
        height=64,
        rng_seed=7,
        **STEPS,
    )
    got = np.stack([pixels(image.b64_json) for image in reply.data or []])
    assert got.shape == (2, 64, 64, 3)
    assert np.array_equal(got, expected)
    assert reply.created > 0 and reply.output_format == "png"
    assert reply.usage is not None and reply.usage.input_tokens > 0


def test_prompt_seed_and_size_change_the_image(media_server: ExactServer) -> None:
    def image(prompt: str, seed: int, size: str = "64x64") -> np.ndarray[Any, Any]:
        with media_server.client() as client:
            reply = client.images.generate(
                model=IMAGE_MODEL,
                prompt=prompt,
                size=size,
                extra_body={**STEPS, "rng_seed": seed},
            )
        return pixels((reply.data or [])[0].b64_json)

    first = image("a red fox", 1)
    assert np.array_equal(first, image("a red fox", 1))
    assert not np.array_equal(first, image("a red fox", 2))
    assert not np.array_equal(first, image("a blue whale", 1))
    assert image("a red fox", 1, "96x64").shape == (64, 96, 3)


def test_edit_and_inpainting_equal_the_pipelines(
    media_server: ExactServer, pipelines: Pipelines
) -> None:
    source = np.random.default_rng(3).integers(0, 256, (64, 64, 3), dtype=np.uint8)
    # OpenAI's masks: transparent where the image is to change (the pipeline: white).
    mask = np.full((64, 64, 4), 255, dtype=np.uint8)
    mask[16:48, 16:48, 3] = 0
    repaint = np.zeros((64, 64, 3), dtype=np.uint8)
    repaint[16:48, 16:48] = 255
    options = {**STEPS, "rng_seed": 5}
    with media_server.client() as client:
        edited = client.images.edit(
            model=IMAGE_MODEL,
            prompt="a watercolor",
            image=("in.png", png(source), "image/png"),
            extra_body={**options, "strength": 0.7},
        )
        inpainted = client.images.edit(
            model=IMAGE_MODEL,
            prompt="a watercolor",
            image=("in.png", png(source), "image/png"),
            mask=("mask.png", png(mask), "image/png"),
            extra_body=options,
        )
    expected_edit = pipelines.images(
        "a watercolor", source, width=64, height=64, strength=0.7, **options
    )
    expected_inpainting = pipelines.images(
        "a watercolor", source, repaint, width=64, height=64, **options
    )
    assert np.array_equal(pixels((edited.data or [])[0].b64_json), expected_edit[0])
    assert np.array_equal(pixels((inpainted.data or [])[0].b64_json), expected_inpainting[0])
    assert not np.array_equal(expected_edit[0], expected_inpainting[0])


def test_a_stream_sends_previews_then_the_image(media_server: ExactServer) -> None:
    options = {"num_inference_steps": 8, "rng_seed": 11}
    with media_server.client() as client:
        unary = client.images.generate(
            model=IMAGE_MODEL, prompt="a lighthouse", size="64x64", extra_body=options
        )
        events = list(
            client.images.generate(
                model=IMAGE_MODEL,
                prompt="a lighthouse",
                size="64x64",
                stream=True,
                partial_images=2,
                extra_body=options,
            )
        )
    kinds = [event.type for event in events]
    assert kinds == [
        "image_generation.partial_image",
        "image_generation.partial_image",
        "image_generation.completed",
    ]
    assert [getattr(event, "partial_image_index", None) for event in events[:2]] == [0, 1]
    final = pixels(events[-1].b64_json)
    assert np.array_equal(final, pixels((unary.data or [])[0].b64_json))
    previews = [pixels(event.b64_json) for event in events[:2]]
    assert all(p.shape == final.shape and not np.array_equal(p, final) for p in previews)


@pytest.mark.parametrize(
    ("body", "param", "message"),
    [
        ({"prompt": "x", "size": "64"}, "size", "size field is not in correct format - WxH"),
        ({"prompt": "x", "size": "0x64"}, "size", "size field values must be greater than 0"),
        ({"prompt": "x", "size": "8192x8192"}, "size", "larger than the maximum resolution"),
        ({"prompt": "x", "size": "60x64"}, "size", "multiples of 8"),
        ({"prompt": "x", "n": 11}, "n", "greater than maxNumImagesPerPrompt: 10"),
        ({"prompt": "x", "n": 0}, "n", "must be higher than 0"),
        (
            {"prompt": "x", "num_inference_steps": 101},
            "num_inference_steps",
            "greater than maxNumInferenceSteps: 100",
        ),
        ({"prompt": "x", "response_format": "url"}, "response_format", "Only b64_json"),
        ({"prompt": "x", "style": "vivid"}, "style", "Unhandled parameter: style"),
        ({"prompt": "x", "partial_images": 4}, "partial_images", "at most 3"),
        ({"size": "64x64"}, "prompt", "prompt field is missing in JSON body"),
        ({"prompt": 3}, "prompt", "prompt field is not a string"),
    ],
)
def test_bad_generation_requests_are_400(
    media_server: ExactServer, body: dict[str, Any], param: str, message: str
) -> None:
    with media_server.http() as http:
        response = http.post("/v3/images/generations", json={"model": IMAGE_MODEL, **body})
    assert response.status_code == 400, response.text
    error = response.json()["error"]
    assert error["type"] == "invalid_request_error"
    assert error["param"] == param
    assert message in error["message"]


def bomb() -> bytes:
    """A small PNG that decodes to 400 megapixels."""
    buffer = io.BytesIO()
    Image.new("1", (20_000, 20_000)).save(buffer, format="PNG")
    return buffer.getvalue()


def zeros(height: int) -> bytes:
    return png(np.zeros((height, 64, 3), np.uint8))


# Form files per case, made when the test runs (the bomb takes a moment to compress).
EDIT_CASES: dict[str, tuple[Any, str, str]] = {
    "no image": (lambda: {}, "image", "image field is missing in multipart body"),
    "not an image": (
        lambda: {"image": ("a.png", b"not an image", "image/png")},
        "image",
        "Image parsing failed",
    ),
    "bomb": (lambda: {"image": ("a.png", bomb(), "image/png")}, "image", "decompression bomb"),
    "mask size": (
        lambda: {
            "image": ("a.png", zeros(64), "image/png"),
            "mask": ("m.png", zeros(32), "image/png"),
        },
        "mask",
        "must be the same size",
    ),
}


@pytest.mark.parametrize("case", list(EDIT_CASES))
def test_bad_edits_are_400(media_server: ExactServer, case: str) -> None:
    make_files, param, message = EDIT_CASES[case]
    files = make_files() or {"note": ("note.txt", b"", "text/plain")}
    with media_server.http() as http:
        response = http.post(
            "/v3/images/edits", data={"model": IMAGE_MODEL, "prompt": "x"}, files=files
        )
    assert response.status_code == 400, response.text
    error = response.json()["error"]
    assert error["param"] == param
    assert message in error["message"]


def test_an_oversized_upload_is_413_and_the_server_goes_on(media_server: ExactServer) -> None:
    big = b"\0" * 5_000_000  # the media server's --max_request_size is 4,000,000
    with media_server.http() as http:
        response = http.post(
            "/v3/images/edits",
            data={"model": IMAGE_MODEL, "prompt": "x"},
            files={"image": ("a.png", big, "image/png")},
        )
        assert response.status_code == 413
        assert response.json()["error"]["param"] == "image"
        assert http.get("/v2/health/ready").status_code == 200


def test_the_sdk_raises_the_error(media_server: ExactServer) -> None:
    with media_server.client() as client, pytest.raises(openai.BadRequestError) as raised:
        client.images.generate(model=IMAGE_MODEL, prompt="x", n=20)
    assert raised.value.status_code == 400


def test_unknown_model_is_404(media_server: ExactServer) -> None:
    with media_server.http() as http:
        response = http.post("/v1/images/generations", json={"model": "nope", "prompt": "x"})
    assert response.status_code == 404
    assert isinstance(response.json()["error"]["message"], str)
    assert httpx.codes.is_client_error(response.status_code)


LORA_IMAGE_MODEL = "tiny-sd-lora"
LORA_ALIAS, LORA_ALPHA = "tiny-style", 0.8
BLEND_ALIAS, BLEND_ALPHA = "tiny-blend", 0.4


def test_lora_adapters_are_chosen_by_model_name(
    media_server: ExactServer, pipelines: Pipelines
) -> None:
    """The graph exported with --source_loras answers to its adapter's alias (the adapter at
    its alpha), its blend's alias (the blend's alpha) and its own name (no adapter), and
    lora_alphas overrides an alpha; each image is the pipeline's with the same adapter."""
    options = {**STEPS, "rng_seed": 21}

    def image(model: str, **extra: Any) -> np.ndarray[Any, Any]:
        with media_server.client() as client:
            reply = client.images.generate(
                model=model, prompt="a castle", size="64x64", extra_body={**options, **extra}
            )
        return pixels((reply.data or [])[0].b64_json)

    with media_server.http() as http:
        names = {entry["id"] for entry in http.get("/v3/models").json()["data"]}
    assert {LORA_IMAGE_MODEL, LORA_ALIAS, BLEND_ALIAS} <= names
    expected = {
        alpha: pipelines.lora_images("a castle", alpha, width=64, height=64, **options)[0]
        for alpha in (0.0, LORA_ALPHA, BLEND_ALPHA, 0.2)
    }
    assert np.array_equal(image(LORA_IMAGE_MODEL), expected[0.0])
    assert np.array_equal(image(LORA_ALIAS), expected[LORA_ALPHA])
    assert np.array_equal(image(BLEND_ALIAS), expected[BLEND_ALPHA])
    assert np.array_equal(image(LORA_ALIAS, lora_alphas={LORA_ALIAS: 0.2}), expected[0.2])
    assert not np.array_equal(expected[0.0], expected[LORA_ALPHA])
    with media_server.http() as http:
        response = http.post(
            "/v3/images/generations",
            json={"model": LORA_ALIAS, "prompt": "x", "lora_alphas": {"other": 1.0}},
        )
    assert response.status_code == 400
    assert response.json()["error"]["param"] == "lora_alphas"
