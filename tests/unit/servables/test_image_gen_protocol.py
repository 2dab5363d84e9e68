"""OpenAI's image API on an image generation servable: generations (JSON) and edits (forms)
checked with OVMS's refusals, images encoded, previews spread over the denoising, and the
response and stream events valid against OpenAI's published schemas.
"""

from __future__ import annotations

import base64
import io
import json
from functools import cache
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
import pytest
from PIL import Image

from servables.errors import InvalidRequest
from servables.image_gen.config import ImageGenConfig, Resolution
from servables.image_gen.protocol import (
    ImageRequest,
    OutputFormat,
    Usage,
    completed_event,
    encode_image,
    parse_edit,
    parse_generation,
    partial_image_event,
    preview_steps,
    response_body,
)
from servables.io.images.images import ImageLimits
from servables.io.request_fields import RequestFields, UploadedFile

SCHEMAS_FILE = Path(__file__).resolve().parents[2] / "fixtures" / "openai_schemas.json"
jsonschema: Any = __import__("jsonschema")  # ships no stubs

Pixels = npt.NDArray[np.uint8]


@pytest.fixture
def config(tmp_path: Path) -> ImageGenConfig:
    (tmp_path / "model_index.json").write_text("{}")
    return ImageGenConfig(name="sd", models_path=tmp_path)


def generation(config: ImageGenConfig, **body: Any) -> ImageRequest:
    return parse_generation({"prompt": "a cat", **body}, config)


def refused_generation(config: ImageGenConfig, **body: Any) -> InvalidRequest:
    with pytest.raises(InvalidRequest) as caught:
        generation(config, **body)
    return caught.value


# -------------------------------------------------------------------------- schema validation


@cache
def _schemas() -> dict[str, Any]:
    document: dict[str, Any] = json.loads(SCHEMAS_FILE.read_text(encoding="utf-8"))
    return document


def schema_errors(name: str, body: Any) -> list[str]:
    """`body`'s violations of OpenAI's schema `name`, after a JSON round trip."""
    document = _schemas()
    assert name in document["components"]["schemas"], (
        f"{name} is not in tests/fixtures/openai_schemas.json: add it to ROOT_SCHEMAS in "
        "tools/extract_openai_schemas.py and regenerate the fixture"
    )
    schema = {"$ref": f"#/components/schemas/{name}", "components": document["components"]}
    validator = jsonschema.Draft202012Validator(schema)
    return [
        f"{'/'.join(map(str, error.absolute_path)) or '<root>'}: {error.message}"
        for error in validator.iter_errors(json.loads(json.dumps(body)))
    ]


def assert_schema_valid(name: str, body: Any) -> None:
    problems = schema_errors(name, body)
    assert not problems, f"{name} violations:\n" + "\n".join(problems)


# ----------------------------------------------------------------------------------------- size


@pytest.mark.parametrize(
    ("body", "size"),
    [
        ({"size": "512x256"}, Resolution(512, 256)),
        ({"size": "auto"}, None),
        ({}, None),
        ({"width": 640, "height": 320}, Resolution(640, 320)),
        ({"size": "auto", "width": 64, "height": 32}, Resolution(64, 32)),
    ],
)
def test_sizes(config: ImageGenConfig, body: dict[str, Any], size: Resolution | None) -> None:
    assert generation(config, **body).size == size


@pytest.mark.parametrize(
    ("body", "param", "message"),
    [
        ({"size": "512"}, "size", "size field is not in correct format - WxH"),
        ({"size": "512x"}, "size", "size field is not in correct format - WxH"),
        ({"size": " 512x512"}, "size", "size field is not in correct format - WxH"),
        ({"size": "aXb"}, "size", "size field is not in correct format - WxH"),
        ({"size": 512}, "size", "size field is not a string"),
        ({"size": "0x512"}, "size", "size field values must be greater than 0"),
        ({"size": "512x-1"}, "size", "size field values must be greater than 0"),
        (
            {"size": "512x512", "width": 512},
            "width",
            "Key: width already exists in request options.",
        ),
        (
            {"size": "64x64", "height": 64},
            "height",
            "Key: height already exists in request options.",
        ),
        ({"width": 512}, "height", "height is missing: give both width and height"),
        ({"height": 512}, "width", "width is missing: give both width and height"),
        ({"width": 0, "height": 5}, "width", "width must be higher than 0"),
        ({"width": 5, "height": -5}, "height", "height must be higher than 0"),
        ({"width": "5", "height": 5}, "width", "width field is not a int"),
    ],
)
def test_size_refusals(
    config: ImageGenConfig, body: dict[str, Any], param: str, message: str
) -> None:
    error = refused_generation(config, **body)
    assert (error.param, error.message) == (param, message)


def test_max_resolution_is_enforced_on_each_side(config: ImageGenConfig) -> None:
    config.max_resolution = Resolution(1024, 768)
    assert generation(config, size="1024x768").size == Resolution(1024, 768)
    error = refused_generation(config, size="768x1024")
    assert error.param == "size"
    assert error.message == "size 768x1024 is larger than the maximum resolution 1024x768"
    assert refused_generation(config, width=1025, height=8).param == "width"


def test_default_resolution_applies_to_requests_without_a_size(config: ImageGenConfig) -> None:
    config.default_resolution = Resolution(256, 128)
    assert generation(config).size == Resolution(256, 128)
    assert generation(config, size="auto").size == Resolution(256, 128)
    assert generation(config, size="64x64").size == Resolution(64, 64)


def test_static_resolutions(config: ImageGenConfig) -> None:
    config.static_resolutions = (Resolution(512, 512), Resolution(768, 512))
    assert generation(config).size == Resolution(512, 512)  # the first one by default
    assert generation(config, size="768x512").size == Resolution(768, 512)
    error = refused_generation(config, size="512x768")
    assert error.param == "size"
    assert error.message == (
        "size 512x768 is not supported: the model is compiled for 512x512, 768x512 only"
    )


# -------------------------------------------------------------------------- counts and steps


def test_n_and_num_images_per_prompt(config: ImageGenConfig) -> None:
    assert generation(config).n == 1
    assert generation(config, n=3).n == 3
    assert generation(config, num_images_per_prompt=4).n == 4
    assert generation(config, n=10).n == 10
    error = refused_generation(config, n=2, num_images_per_prompt=2)
    assert error.message == "Key: num_images_per_prompt already exists in request options."
    error = refused_generation(config, n=11)
    assert error.param == "n"
    assert error.message == "num_images_per_prompt/n is greater than maxNumImagesPerPrompt: 10"
    config.max_images = 2
    error = refused_generation(config, num_images_per_prompt=3)
    assert error.message == "num_images_per_prompt/n is greater than maxNumImagesPerPrompt: 2"
    error = refused_generation(config, n=0)
    assert error.message == "num_images_per_prompt/n must be higher than 0"


def test_a_static_batch_is_the_only_count(config: ImageGenConfig) -> None:
    config.static_images = 2
    config.max_images = 2
    assert generation(config).n == 2
    error = refused_generation(config, n=1)
    assert error.param == "n"
    assert error.message == "n must be 2: the model is compiled for that many images"


def test_steps(config: ImageGenConfig) -> None:
    config.default_steps, config.max_steps = 20, 30
    assert generation(config).steps == 20
    assert generation(config, num_inference_steps=30).steps == 30
    error = refused_generation(config, num_inference_steps=31)
    assert error.param == "num_inference_steps"
    assert error.message == "num_inference_steps is greater than maxNumInferenceSteps: 30"
    error = refused_generation(config, num_inference_steps=0)
    assert error.message == "num_inference_steps must be higher than 0"


# ------------------------------------------------------------------------------- other fields


def test_response_format_url_is_refused_as_ovms_does(config: ImageGenConfig) -> None:
    assert generation(config, response_format="b64_json").prompt == "a cat"
    error = refused_generation(config, response_format="url")
    assert error.param == "response_format"
    assert error.message == "Unsupported response_format: url. Only b64_json is supported."


def test_seed_and_rng_seed(config: ImageGenConfig) -> None:
    assert generation(config).seed is None
    assert generation(config, seed=7).seed == 7
    assert generation(config, rng_seed=8).seed == 8
    error = refused_generation(config, seed=1, rng_seed=2)
    assert (error.param, error.message) == (
        "seed",
        "Key: rng_seed already exists in request options.",
    )
    assert refused_generation(config, rng_seed=-1).message == "rng_seed must be at least 0; got -1"


def test_ovms_extensions_pass_through(config: ImageGenConfig) -> None:
    request = generation(
        config,
        negative_prompt="blurry",
        prompt_2="a dog",
        guidance_scale=7,
        max_sequence_length=77,
        model="sd-lora",
    )
    assert request.texts == {"negative_prompt": "blurry", "prompt_2": "a dog"}
    assert request.guidance_scale == 7.0  # a whole number is a float here (OVMS wants 7.0)
    assert request.max_sequence_length == 77 and request.model == "sd-lora"
    assert generation(config).model == "sd"  # the graph's name when none is sent
    assert refused_generation(config, max_sequence_length=0).param == "max_sequence_length"


def test_lora_alphas(config: ImageGenConfig) -> None:
    assert generation(config).lora_alphas is None
    assert generation(config, lora_alphas={"a": 1, "b": 0.5}).lora_alphas == {"a": 1.0, "b": 0.5}
    for value, message in (
        ([1], "lora_alphas must be an object"),
        ("a", "lora_alphas must be an object"),
        ({"a": "1"}, "lora_alphas value for 'a' must be a number"),
        ({"a": True}, "lora_alphas value for 'a' must be a number"),
    ):
        error = refused_generation(config, lora_alphas=value)
        assert (error.param, error.message) == ("lora_alphas", message)


def test_lora_alphas_in_a_form_are_json(config: ImageGenConfig) -> None:
    fields = edit_form(lora_alphas='{"a": 0.25}')
    assert parse_edit(fields, config, ImageLimits()).lora_alphas == {"a": 0.25}
    with pytest.raises(InvalidRequest, match="lora_alphas field must be valid JSON"):
        parse_edit(edit_form(lora_alphas="{a"), config, ImageLimits())


def test_unknown_fields_are_refused_but_user_is_ignored(config: ImageGenConfig) -> None:
    error = refused_generation(config, foo=1)
    assert (error.param, error.message) == ("foo", "Unhandled parameter: foo")
    assert generation(config, user="u-1").prompt == "a cat"


def test_prompt_is_required(config: ImageGenConfig) -> None:
    with pytest.raises(InvalidRequest, match="prompt field is missing in JSON body"):
        parse_generation({}, config)
    with pytest.raises(InvalidRequest, match="prompt field is not a string"):
        parse_generation({"prompt": 1}, config)
    with pytest.raises(InvalidRequest, match="JSON body must be an object"):
        parse_generation(["a cat"], config)


@pytest.mark.parametrize(
    ("name", "accepted", "other"),
    [
        ("quality", ["auto"], "high"),
        ("background", ["auto", "opaque"], "transparent"),
        ("moderation", ["auto", "low"], "strict"),
    ],
)
def test_openai_fields_with_neutral_values(
    config: ImageGenConfig, name: str, accepted: list[str], other: str
) -> None:
    for value in accepted:
        generation(config, **{name: value})
    error = refused_generation(config, **{name: other})
    assert error.param == name
    assert error.message == f"{name} {other!r} is not supported (accepted: {', '.join(accepted)})"


def test_output_format_and_compression(config: ImageGenConfig) -> None:
    request = generation(config, output_format="webp", output_compression=40)
    assert (request.output_format, request.output_compression) == ("webp", 40)
    assert generation(config).output_format == "png"
    error = refused_generation(config, output_format="gif")
    assert error.message == "output_format must be one of png, jpeg, webp; got 'gif'"
    error = refused_generation(config, output_compression=101)
    assert error.message == "output_compression must be at most 100; got 101"
    assert refused_generation(config, output_compression=-1).param == "output_compression"


def test_stream_and_partial_images(config: ImageGenConfig) -> None:
    request = generation(config, stream=True, partial_images=3)
    assert request.stream and request.partial_images == 3
    assert generation(config, stream=False).partial_images == 0
    error = refused_generation(config, partial_images=4)
    assert (error.param, error.message) == (
        "partial_images",
        "partial_images must be at most 3; got 4",
    )
    assert refused_generation(config, partial_images=-1).param == "partial_images"
    assert refused_generation(config, stream="yes").message == "stream field is not a boolean"


def test_strength_is_refused_on_generations(config: ImageGenConfig) -> None:
    error = refused_generation(config, strength=0.5)
    assert error.param == "strength"
    assert error.message.startswith("strength applies to /images/edits only")


def test_a_static_guidance_scale(config: ImageGenConfig) -> None:
    config.static_guidance_scale = 7.5
    assert generation(config, guidance_scale=7.5).guidance_scale == 7.5
    assert generation(config).guidance_scale is None
    error = refused_generation(config, guidance_scale=5)
    assert error.param == "guidance_scale"
    assert error.message == "guidance_scale must be 7.5: the model is compiled for it"


# ---------------------------------------------------------------------------------------- edits


def png(pixels: Any, mode: str | None = None) -> bytes:
    buffer = io.BytesIO()
    Image.fromarray(np.asarray(pixels, dtype=np.uint8), mode=mode).save(buffer, format="PNG")
    return buffer.getvalue()


def noise(width: int, height: int) -> Pixels:
    return np.random.default_rng(1).integers(0, 256, (height, width, 3), dtype=np.uint8)


IMAGE = noise(32, 16)


def edit_form(
    image: list[bytes] | None = None, mask: list[bytes] | None = None, **fields: str
) -> RequestFields:
    parts: dict[str, list[str | UploadedFile]] = {"prompt": ["make it blue"]}
    parts["image"] = [
        UploadedFile(f"i{i}.png", "image/png", data)
        for i, data in enumerate([png(IMAGE)] if image is None else image)
    ]
    if mask is not None:
        parts["mask"] = [
            UploadedFile(f"m{i}.png", "image/png", data) for i, data in enumerate(mask)
        ]
    for name, value in fields.items():
        parts[name] = [value]
    return RequestFields(form=parts)


def refused_edit(config: ImageGenConfig, fields: RequestFields) -> InvalidRequest:
    with pytest.raises(InvalidRequest) as caught:
        parse_edit(fields, config, ImageLimits())
    return caught.value


def test_an_edit_decodes_its_image(config: ImageGenConfig) -> None:
    request = parse_edit(edit_form(n="2", strength="0.75", size="64x32"), config, ImageLimits())
    assert request.edit and request.event_prefix == "image_edit"
    assert request.image is not None and np.array_equal(request.image, IMAGE)
    assert request.mask is None
    assert request.n == 2 and request.strength == 0.75 and request.size == Resolution(64, 32)


def test_an_edit_needs_exactly_one_image(config: ImageGenConfig) -> None:
    fields = RequestFields(form={"prompt": ["p"]})
    error = refused_edit(config, fields)
    assert (error.param, error.message) == ("image", "image field is missing in multipart body")
    error = refused_edit(config, edit_form(image=[png(IMAGE), png(IMAGE)]))
    assert (error.param, error.message) == ("image", "image: send one image to edit (got 2)")
    error = refused_edit(config, edit_form(image=[b"not an image"]))
    assert error.param == "image" and error.message.startswith("Image parsing failed")


def test_form_numbers_are_strict(config: ImageGenConfig) -> None:
    error = refused_edit(config, edit_form(n="1.5"))
    assert (error.param, error.message) == ("n", "n field is not a int")
    error = refused_edit(config, edit_form(strength="half"))
    assert (error.param, error.message) == ("strength", "strength field is not a float")


def test_the_mask_must_match_the_image(config: ImageGenConfig) -> None:
    error = refused_edit(config, edit_form(mask=[png(np.zeros((8, 16), np.uint8))]))
    assert error.param == "mask"
    assert error.message == "mask is 16x8 but the image is 32x16: they must be the same size"
    mask = png(np.zeros((16, 32), np.uint8))
    error = refused_edit(config, edit_form(mask=[mask, mask]))
    assert (error.param, error.message) == ("mask", "mask: send one mask (got 2)")


def test_a_transparent_mask_marks_what_to_repaint(config: ImageGenConfig) -> None:
    """OpenAI's convention: transparent pixels are repainted (255), opaque ones kept (0)."""
    rgba = np.zeros((16, 32, 4), np.uint8)
    rgba[..., :3] = 255  # white everywhere: the colour does not matter with an alpha channel
    rgba[:, 16:, 3] = 255  # right half opaque
    request = parse_edit(edit_form(mask=[png(rgba, "RGBA")]), config, ImageLimits())
    assert request.mask is not None and request.mask.shape == (16, 32, 3)
    assert (request.mask[:, :16] == 255).all()
    assert (request.mask[:, 16:] == 0).all()


def test_an_opaque_mask_marks_white_as_repaint(config: ImageGenConfig) -> None:
    """diffusers' and OVMS's convention: white is repainted, black kept."""
    gray = np.zeros((16, 32), np.uint8)
    gray[:8] = 255
    request = parse_edit(edit_form(mask=[png(gray, "L")]), config, ImageLimits())
    assert request.mask is not None
    assert (request.mask[:8] == 255).all() and (request.mask[8:] == 0).all()


@pytest.mark.parametrize(
    ("strength", "message"),
    [
        ("1.5", "strength is greater than maxStrength: 1"),
        ("-0.1", "strength is less than minStrength: 0"),
    ],
)
def test_strength_bounds(config: ImageGenConfig, strength: str, message: str) -> None:
    error = refused_edit(config, edit_form(strength=strength))
    assert (error.param, error.message) == ("strength", message)


def test_edits_refuse_unknown_fields(config: ImageGenConfig) -> None:
    error = refused_edit(config, edit_form(style="vivid"))
    assert (error.param, error.message) == ("style", "Unhandled parameter: style")


# ------------------------------------------------------------------------------------ encoding


def decoded(text: str) -> Image.Image:
    image = Image.open(io.BytesIO(base64.b64decode(text)))
    image.load()
    return image


def test_png_round_trip_is_exact_and_ignores_compression() -> None:
    text = encode_image(IMAGE, "png", None)
    image = decoded(text)
    assert image.format == "PNG" and np.array_equal(np.array(image), IMAGE)
    assert encode_image(IMAGE, "png", 90) == text


@pytest.mark.parametrize("output_format", ["jpeg", "webp"])
def test_lossy_formats_and_their_compression(output_format: OutputFormat) -> None:
    smooth = np.repeat(np.linspace(0, 255, 64, dtype=np.uint8)[None, :, None], 48, axis=0)
    pixels = np.ascontiguousarray(np.repeat(smooth, 3, axis=2))
    best = encode_image(pixels, output_format, None)
    image = decoded(best)
    assert image.format == output_format.upper() and image.size == (64, 48)
    assert np.abs(np.array(image.convert("RGB"), np.int16) - pixels).max() <= 8
    small = encode_image(pixels, output_format, 95)
    assert len(base64.b64decode(small)) < len(base64.b64decode(best))
    assert decoded(encode_image(pixels, output_format, 100)).size == (64, 48)  # quality 1


# ------------------------------------------------------------------------------------ previews


def test_preview_steps_are_spread_before_the_last_step() -> None:
    steps = preview_steps(21, 3)
    assert len(steps) == 3 and len(set(steps)) == 3
    assert steps == sorted(steps) and all(0 <= step < 20 for step in steps)
    assert steps[0] > 0 and steps[-1] < 19  # spread, not bunched at either end
    assert preview_steps(50, 1) == [24]


@pytest.mark.parametrize(
    ("steps", "partial", "expected"),
    [(1, 3, []), (20, 0, []), (2, 3, [0]), (3, 3, [0, 1]), (4, 3, [0, 1, 2])],
)
def test_preview_steps_edge_cases(steps: int, partial: int, expected: list[int]) -> None:
    assert preview_steps(steps, partial) == expected


def test_preview_steps_never_repeat() -> None:
    for steps in range(1, 60):
        for partial in range(4):
            chosen = preview_steps(steps, partial)
            assert len(chosen) == len(set(chosen)) == min(partial, max(0, steps - 1))
            assert all(0 <= step < steps - 1 for step in chosen)


# ------------------------------------------------------------------------ responses and events


def test_response_body(config: ImageGenConfig) -> None:
    request = generation(config, output_format="jpeg")
    body = response_body(request, ["aaaa", "bbbb"], Usage(9), created=123)
    assert body["created"] == 123
    assert body["data"] == [{"b64_json": "aaaa"}, {"b64_json": "bbbb"}]
    assert body["output_format"] == "jpeg"
    assert body["usage"]["input_tokens"] == 9 and body["usage"]["total_tokens"] == 9
    assert_schema_valid("ImagesResponse", body)


@pytest.mark.parametrize("size", ["1024x1024", "512x512", "auto"])
def test_generation_events_are_openai_events(config: ImageGenConfig, size: str) -> None:
    request = generation(config, size=size, stream=True, partial_images=2)
    partial = partial_image_event(request, "aaaa", 1)
    assert partial["type"] == "image_generation.partial_image"
    assert partial["partial_image_index"] == 1
    assert partial["size"] == (size if size == "1024x1024" else "auto")  # the schema's sizes
    assert_schema_valid("ImageGenPartialImageEvent", partial)
    done = completed_event(request, "bbbb", Usage(3))
    assert done["type"] == "image_generation.completed" and done["b64_json"] == "bbbb"
    assert_schema_valid("ImageGenCompletedEvent", done)


def test_edit_events_are_openai_events(config: ImageGenConfig) -> None:
    request = parse_edit(edit_form(stream="true", partial_images="1"), config, ImageLimits())
    partial = partial_image_event(request, "aaaa", 0)
    assert partial["type"] == "image_edit.partial_image"
    assert_schema_valid("ImageEditPartialImageEvent", partial)
    done = completed_event(request, "bbbb", Usage(3))
    assert done["type"] == "image_edit.completed"
    assert_schema_valid("ImageEditCompletedEvent", done)


def test_the_schemas_are_live() -> None:
    """A wrong event fails validation (guards against a vacuous schema)."""
    assert schema_errors("ImageGenCompletedEvent", {"type": "image_generation.completed"})
