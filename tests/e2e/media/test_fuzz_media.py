"""Fuzzing the multipart routes with forms generated from OpenAI's own request schemas.

The media server (one per session, see conftest.py) takes transcriptions, translations and image
edits as multipart forms. schemathesis writes forms from OpenAI's schemas: valid ones, and (one in
four) broken ones: fields of any name, control characters included, or a body that is not a form
at all, which aiohttp's form reader refuses (those were 500s, on all three routes, before
multipart.py turned the reader's errors into 400s). Whatever the form, the server must answer
with no 5xx,
every 4xx an OpenAI error object; and stay healthy. Forms name the served model in 9 cases of
10, and one in two carries a real upload (a short WAV, a small PNG) instead of the generated
bytes, so that cases get past the model lookup and the decoders into the pipelines.
"""

from __future__ import annotations

import copy
import io
import json
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import numpy as np
import pytest
from PIL import Image

if TYPE_CHECKING:
    from conftest import Audio, ExactServer, Fuzzer

CASES = 100  # per route: a valid case runs a pipeline (0.3-0.5 s)
WHISPER_MODEL, IMAGE_MODEL = "tiny-whisper", "tiny-sd"
ROUTES = {
    "/v3/audio/transcriptions": ("CreateTranscriptionRequest", WHISPER_MODEL),
    "/v3/audio/translations": ("CreateTranslationRequest", WHISPER_MODEL),
    "/v3/images/edits": ("CreateImageEditRequest", IMAGE_MODEL),
}
# A small edit in two steps is cheap on the tiny model; the sizes clients ask for are not.
EDIT_SIZES = ("64x64", "32x64")
EDIT_STEPS = 2


def openapi(schemas: dict[str, Any]) -> dict[str, Any]:
    def operation(root: str) -> dict[str, Any]:
        body = {"schema": {"$ref": f"#/components/schemas/{root}"}}
        return {
            "post": {
                "requestBody": {"required": True, "content": {"multipart/form-data": body}},
                "responses": {"200": {"description": "an answer"}},
            }
        }

    components = copy.deepcopy(schemas["components"])
    # `image` is one file or a list of them; schemathesis sends only a plain binary property as
    # a file part (with a filename), so the edits take the one-file form.
    edit = components["schemas"]["CreateImageEditRequest"]["properties"]
    (edit["image"],) = [option for option in edit["image"]["anyOf"] if "format" in option]
    return {
        "openapi": "3.1.0",
        "info": {"title": "graphrt multipart routes", "version": "1"},
        "paths": {path: operation(root) for path, (root, _) in ROUTES.items()},
        "components": components,
    }


def png(size: int = 32) -> bytes:
    pixels = np.random.default_rng(size).integers(0, 256, (size, size, 3), dtype=np.uint8)
    buffer = io.BytesIO()
    Image.fromarray(pixels).save(buffer, format="PNG")
    return buffer.getvalue()


def prepare_for(path: str, audio: Audio) -> Callable[[Any, int], None]:
    _, model = ROUTES[path]
    upload = png() if path.endswith("edits") else audio.wav(audio.speech_like(0.3, seed=7))
    field = "image" if path.endswith("edits") else "file"

    def prepare(case: Any, dice: int) -> None:
        if not isinstance(case.body, dict):
            return
        if dice < 9:
            case.body["model"] = model
        if dice % 2 == 0:
            case.body[field] = upload
            if path.endswith("edits"):
                case.body.pop("mask", None)
                case.body["size"] = EDIT_SIZES[dice % len(EDIT_SIZES)]
                case.body["n"] = 1
                case.body["num_inference_steps"] = EDIT_STEPS

    return prepare


def check_answer(case: Any, response: Any) -> None:
    status = response.status_code
    sent = json.dumps(case.body, default=repr)[:2000]
    assert status < 500, f"{status} for {sent}:\n{response.text[:2000]}"
    if status >= 400:
        error = response.json()["error"]
        assert isinstance(error["message"], str) and error["message"], response.text
        assert error["type"] == "invalid_request_error" and "param" in error and "code" in error
    elif "text/event-stream" in str(response.headers.get("content-type")):
        assert '"error"' not in response.text, f"a stream failed for {sent}:\n{response.text}"


@pytest.mark.parametrize("path", list(ROUTES))
def test_fuzzed_forms_never_break_the_server(
    path: str,
    media_server: ExactServer,
    fuzzer: Callable[[str, dict[str, Any]], Fuzzer],
    openai_request_schemas: dict[str, Any],
    audio: Audio,
) -> None:
    report = fuzzer(media_server.base_url, openapi(openai_request_schemas)).run(
        path, check_answer, prepare_for(path, audio), cases=CASES
    )
    print(f"{path}: {report}")
    assert 200 in report.statuses, "no case reached a pipeline"
    with media_server.http() as http:
        assert http.get("/v2/health/ready").status_code == 200
