"""Vision-language chat on VLM_CB (continuous batching) through the openai SDK and raw HTTP.

One server for the module: the committed tiny Qwen2-VL, local images allowed from a folder made
here, image URLs allowed from 127.0.0.1 only (served by a tiny HTTP server in this process), a 1 s
download limit. Answers are compared with the engine run directly (`vlm_golden`); like the main
LLM server, this one takes whole bursts in one step and keeps prefix caching off, so concurrent
greedy answers are reproducible (see conftest.server).
"""

from __future__ import annotations

import asyncio
import contextlib
import io
import json
import os
import socket
import struct
import threading
import time
import zlib
from collections.abc import Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import openai
import pytest
from openai.types.chat import ChatCompletionMessageParam
from PIL import Image

if TYPE_CHECKING:
    from conftest import EngineEvent, Expected, LaunchExact, Pictures, Server, VlmGolden

MODEL = "tiny-vlm"
MAX_TOKENS = 24
PROMPT = "Describe what is on the picture."
# Sizes give different vision token counts: (width, height).
SIZES = [(100, 140), (64, 80), (200, 90)]
PARAM = "messages[0].content[1].image_url.url"


# ------------------------------------------------------------------------------------ fixtures


@dataclass
class Media:
    folder: Path  # --allowed_local_media_path
    zebra: Path  # a JPEG inside it
    zebra_pixels: Any  # what a decoder makes of it
    outside: Path  # a PNG outside the folder
    escape_link: Path  # a symlink inside the folder to `outside`


@pytest.fixture(scope="module")
def media(tmp_path_factory: pytest.TempPathFactory, pictures: Pictures) -> Media:
    root = tmp_path_factory.mktemp("media")
    folder = root / "allowed"
    folder.mkdir()
    data = pictures.encode(pictures.make(160, 120, seed=7), "JPEG", quality=90)
    zebra = folder / "zebra.jpeg"
    zebra.write_bytes(data)
    outside = root / "secret.png"
    outside.write_bytes(pictures.encode(pictures.make(32, 32, seed=8)))
    link = folder / "link.png"
    link.symlink_to(outside)
    return Media(folder, zebra, pictures.decoded(data), outside, link)


class _ImageHost(BaseHTTPRequestHandler):
    """Routes for the URL tests; `files` and `stop` are set on the server object."""

    server: _HostServer

    def log_message(self, format: str, *args: Any) -> None:
        return None

    def _send(self, status: int, body: bytes, headers: dict[str, str] | None = None) -> None:
        self.send_response(status)
        for key, value in (headers or {"Content-Length": str(len(body))}).items():
            self.send_header(key, value)
        self.end_headers()
        with contextlib.suppress(BrokenPipeError, ConnectionResetError):
            self.wfile.write(body)

    def do_GET(self) -> None:
        host = self.server
        if self.path in host.files:
            self._send(200, host.files[self.path])
        elif self.path == "/slow.png":
            host.stop.wait(5.0)  # longer than the server's --media_download_timeout 1
            self._send(200, host.files["/zebra.png"])
        elif self.path == "/moved.png":
            self._send(302, b"", {"Location": "/zebra.png", "Content-Length": "0"})
        elif self.path == "/huge-declared.png":
            self._send(200, b"\x89PNG" * 16, {"Content-Length": str(25_000_000)})
        elif self.path == "/huge-streamed.png":
            self.send_response(200)
            self.end_headers()  # no Content-Length: the body runs until the connection closes
            chunk = b"\0" * 65536
            try:
                for _ in range(21_000_000 // len(chunk) + 1):
                    self.wfile.write(chunk)
            except (BrokenPipeError, ConnectionResetError):
                pass
        else:
            self._send(404, b"not here")


class _HostServer(ThreadingHTTPServer):
    daemon_threads = True
    block_on_close = False
    files: dict[str, bytes]
    stop: threading.Event


@dataclass
class ImageHost:
    port: int
    zebra_pixels: Any

    def url(self, path: str, host: str = "127.0.0.1") -> str:
        return f"http://{host}:{self.port}{path}"


@pytest.fixture(scope="module")
def image_host(pictures: Pictures) -> Iterator[ImageHost]:
    pixels = pictures.make(120, 90, seed=11)
    server = _HostServer(("127.0.0.1", 0), _ImageHost)
    server.files = {"/zebra.png": pictures.encode(pixels), "/text.png": b"just some text"}
    server.stop = threading.Event()
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield ImageHost(server.server_address[1], pixels)
    finally:
        server.stop.set()
        server.shutdown()
        server.server_close()
        thread.join(5)


@pytest.fixture(scope="module")
def vlm_server(tiny_vlm_dir: Path, media: Media, launch_exact: LaunchExact) -> Iterator[Server]:
    args = [
        "--model_path",
        str(tiny_vlm_dir),
        "--model_name",
        MODEL,
        "--allowed_local_media_path",
        str(media.folder),
        "--allowed_media_domains",
        "127.0.0.1",
        "--media_download_timeout",
        "1",
        "--enable_prefix_caching",
        "false",
        "--max_num_batched_tokens",
        "8192",
        "--log_level",
        "DEBUG",
    ]
    with launch_exact(args, model=MODEL) as server:
        yield server


@pytest.fixture(scope="module")
def client(vlm_server: Server) -> Iterator[openai.OpenAI]:
    with vlm_server.client() as sdk:
        yield sdk


# ------------------------------------------------------------------------------------- helpers


def image_part(url: str) -> dict[str, Any]:
    return {"type": "image_url", "image_url": {"url": url}}


def text_part(text: str) -> dict[str, Any]:
    return {"type": "text", "text": text}


def conversation(urls: Sequence[str]) -> list[Any]:
    """1 image: text then image; 2: image, text, image; 3: two images, a reply, one more image
    in a second user message (images across messages, in order)."""
    if len(urls) == 1:
        return [{"role": "user", "content": [text_part(PROMPT), image_part(urls[0])]}]
    if len(urls) == 2:
        parts = [image_part(urls[0]), text_part("Compare these two."), image_part(urls[1])]
        return [{"role": "user", "content": parts}]
    return [
        {"role": "user", "content": [text_part("Two pictures:"), *map(image_part, urls[:2])]},
        {"role": "assistant", "content": "I see them."},
        {"role": "user", "content": [image_part(urls[2]), text_part("And this one?")]},
    ]


def ask(client: openai.OpenAI, messages: list[Any], **options: Any) -> Any:
    return client.chat.completions.create(
        model=MODEL, messages=messages, temperature=0, **{"max_tokens": MAX_TOKENS, **options}
    )


def assert_answer(response: Any, expected: Expected) -> None:
    choice = response.choices[0]
    assert choice.message.content == expected.text
    assert choice.finish_reason == expected.finish_reason
    assert response.usage.prompt_tokens == expected.prompt_tokens
    assert response.usage.completion_tokens == expected.completion_tokens


def stream_text(client: openai.OpenAI, messages: list[Any]) -> tuple[str, Any, str]:
    """(content, usage, last finish_reason) of a streamed answer."""
    stream = ask(client, messages, stream=True, stream_options={"include_usage": True})
    texts: list[str] = []
    usage, reason = None, ""
    with stream:
        for chunk in stream:
            if chunk.usage is not None:
                usage = chunk.usage
            for choice in chunk.choices:
                texts.append(choice.delta.content or "")
                reason = choice.finish_reason or reason
    return "".join(texts), usage, reason


def refused(server: Server, body: dict[str, Any], path: str = "/v3/chat/completions") -> Any:
    """The `error` object of a 400 answer in OpenAI's shape."""
    with server.http() as http:
        response = http.post(path, json={"model": MODEL, "max_tokens": 4, **body})
    assert response.status_code == 400, response.text
    assert response.headers["content-type"].startswith("application/json")
    payload = response.json()
    assert set(payload) == {"error"}, payload
    error = payload["error"]
    assert set(error) >= {"message", "type", "param", "code"}, error
    assert error["type"] == "invalid_request_error"
    return error


def refused_image(server: Server, url: str) -> Any:
    messages = [{"role": "user", "content": [text_part(PROMPT), image_part(url)]}]
    error = refused(server, {"messages": messages})
    assert error["param"] == PARAM
    return error


def png_with_size(width: int, height: int) -> bytes:
    """A PNG whose header claims width x height but holds almost no data (a bomb's header)."""

    def chunk(kind: bytes, data: bytes) -> bytes:
        body = kind + data
        return struct.pack(">I", len(data)) + body + struct.pack(">I", zlib.crc32(body))

    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    return (
        b"\x89PNG\r\n\x1a\n"
        + chunk(b"IHDR", header)
        + chunk(b"IDAT", zlib.compress(b"\0" * 64))
        + chunk(b"IEND", b"")
    )


# --------------------------------------------------------------------- answers match the engine


@pytest.mark.parametrize("stream", [False, True], ids=["unary", "stream"])
@pytest.mark.parametrize("count", [1, 2, 3])
def test_images_match_the_engine(
    client: openai.OpenAI,
    pictures: Pictures,
    vlm_golden: VlmGolden,
    count: int,
    stream: bool,
) -> None:
    images = [pictures.make(*SIZES[i], seed=i) for i in range(count)]
    messages = conversation([pictures.png_url(image) for image in images])
    expected = vlm_golden.chat(messages, images, MAX_TOKENS)

    if stream:
        text, usage, reason = stream_text(client, messages)
        assert (text, reason) == (expected.text, "length")
        assert usage.prompt_tokens == expected.prompt_tokens
        assert usage.completion_tokens == expected.completion_tokens
    else:
        assert_answer(ask(client, messages), expected)


def test_image_order_is_kept(
    client: openai.OpenAI, pictures: Pictures, vlm_golden: VlmGolden
) -> None:
    """Swapping two images changes the engine's answer (checked first); the server's answers
    follow the order of the parts."""
    first, second = pictures.make(*SIZES[0], seed=90), pictures.make(*SIZES[1], seed=91)
    forward = conversation([pictures.png_url(first), pictures.png_url(second)])
    backward = conversation([pictures.png_url(second), pictures.png_url(first)])
    expected_forward = vlm_golden.chat(forward, [first, second], 40)
    expected_backward = vlm_golden.chat(backward, [second, first], 40)
    assert expected_forward.text != expected_backward.text

    assert_answer(ask(client, forward, max_tokens=40), expected_forward)
    assert_answer(ask(client, backward, max_tokens=40), expected_backward)


def test_stream_chunk_sequence(
    vlm_server: Server, pictures: Pictures, vlm_golden: VlmGolden
) -> None:
    image = pictures.make(*SIZES[0], seed=0)
    messages = conversation([pictures.png_url(image)])
    expected = vlm_golden.chat(messages, [image], MAX_TOKENS)
    body = {
        "model": MODEL,
        "messages": messages,
        "temperature": 0,
        "max_tokens": MAX_TOKENS,
        "stream": True,
    }

    frames = vlm_server.sse("/v3/chat/completions", body)

    assert frames[-1] == "[DONE]"
    chunks = [json.loads(frame) for frame in frames[:-1]]
    assert chunks[0]["choices"][0]["delta"]["role"] == "assistant"
    assert all(chunk["object"] == "chat.completion.chunk" for chunk in chunks)
    assert [c["choices"][0]["finish_reason"] for c in chunks[:-1]] == [None] * (len(chunks) - 1)
    assert chunks[-1]["choices"][0]["finish_reason"] == "length"
    text = "".join(c["choices"][0]["delta"].get("content") or "" for c in chunks)
    assert text == expected.text


def test_an_image_changes_the_prompt_token_count(
    client: openai.OpenAI, pictures: Pictures, vlm_golden: VlmGolden
) -> None:
    """28x28 is scaled up to the model's minimum (4 vision tokens), 112x112 is its maximum (16)."""
    text_only = [{"role": "user", "content": PROMPT}]
    small, large = pictures.make(28, 28, seed=3), pictures.make(112, 112, seed=4)
    with_small = conversation([pictures.png_url(small)])
    with_large = conversation([pictures.png_url(large)])

    counts = [
        ask(client, messages).usage.prompt_tokens
        for messages in (text_only, with_small, with_large)
    ]

    assert counts == [
        vlm_golden.chat(text_only, [], MAX_TOKENS).prompt_tokens,
        vlm_golden.chat(with_small, [small], MAX_TOKENS).prompt_tokens,
        vlm_golden.chat(with_large, [large], MAX_TOKENS).prompt_tokens,
    ]
    assert counts[0] < counts[1] < counts[2]


def test_image_only_message(
    client: openai.OpenAI, pictures: Pictures, vlm_golden: VlmGolden
) -> None:
    image = pictures.make(*SIZES[1], seed=5)
    messages = [{"role": "user", "content": [image_part(pictures.png_url(image))]}]
    assert_answer(ask(client, messages), vlm_golden.chat(messages, [image], MAX_TOKENS))


def test_deterministic_at_temperature_zero(client: openai.OpenAI, pictures: Pictures) -> None:
    messages = conversation([pictures.png_url(pictures.make(*SIZES[2], seed=6))])
    first, second = ask(client, messages), ask(client, messages)
    assert first.choices[0].message.content == second.choices[0].message.content


@pytest.mark.parametrize(
    ("image_format", "media_type", "options"),
    [
        ("JPEG", "image/jpeg", {"quality": 85}),
        ("WEBP", "image/webp", {"quality": 80}),
        ("BMP", "image/bmp", {}),
        ("GIF", "image/gif", {}),
    ],
)
def test_image_formats(
    client: openai.OpenAI,
    pictures: Pictures,
    vlm_golden: VlmGolden,
    image_format: str,
    media_type: str,
    options: dict[str, Any],
) -> None:
    """Each format decodes to what Pillow (the reference decoder) makes of it; a GIF's first
    frame counts (the second frame here is different, so using it would change the answer)."""
    image = pictures.make(*SIZES[0], seed=9)
    if image_format == "GIF":
        frames = [Image.fromarray(image), Image.fromarray(255 - image)]
        buffer = io.BytesIO()
        frames[0].save(buffer, format="GIF", save_all=True, append_images=frames[1:])
        data = buffer.getvalue()
    else:
        data = pictures.encode(image, image_format, **options)
    messages = conversation([pictures.data_url(data, media_type)])
    expected = vlm_golden.chat(messages, [pictures.decoded(data)], MAX_TOKENS)
    assert_answer(ask(client, messages), expected)


def test_huge_image_is_scaled_down(
    client: openai.OpenAI, pictures: Pictures, vlm_golden: VlmGolden
) -> None:
    """20 MP is over the 16.7 MP cap: the server shrinks it (aspect kept) instead of refusing;
    the model's own preprocessing then sees the same grid as for any picture of that shape."""
    ramp = np.linspace(0, 255, 5000, dtype=np.uint8)
    huge = np.repeat(np.repeat(ramp[None, :, None], 4000, axis=0), 3, axis=2)
    same_shape = pictures.make(500, 400, seed=10)
    messages = conversation([pictures.png_url(huge)])

    response = ask(client, messages)

    expected = vlm_golden.chat(conversation(["x"]), [same_shape], MAX_TOKENS)
    assert response.usage.prompt_tokens == expected.prompt_tokens
    assert response.usage.completion_tokens == MAX_TOKENS


# ------------------------------------------------------------------------------- concurrency


async def test_eight_concurrent_image_requests(
    vlm_server: Server, pictures: Pictures, vlm_golden: VlmGolden
) -> None:
    images = [pictures.make(*SIZES[i % 3], seed=20 + i) for i in range(8)]
    conversations = [conversation([pictures.png_url(image)]) for image in images]
    expected = [
        vlm_golden.chat(m, [i], MAX_TOKENS) for m, i in zip(conversations, images, strict=True)
    ]

    async with vlm_server.async_client() as sdk:

        async def one(index: int) -> str:
            messages = conversations[index]
            if index % 2:
                stream = await sdk.chat.completions.create(
                    model=MODEL,
                    messages=messages,
                    temperature=0,
                    max_tokens=MAX_TOKENS,
                    stream=True,
                )
                async with stream:
                    return "".join(
                        [c.choices[0].delta.content or "" async for c in stream if c.choices]
                    )
            response = await sdk.chat.completions.create(
                model=MODEL, messages=messages, temperature=0, max_tokens=MAX_TOKENS
            )
            return response.choices[0].message.content or ""

        texts = await asyncio.wait_for(asyncio.gather(*(one(i) for i in range(8))), 60)

    assert texts == [e.text for e in expected]


# Long enough that a short request sent once it runs usually reaches the engine well before it
# ends; on a machine too busy for that, the scenario is run again (ATTEMPTS).
LONG_TOKENS = 3000
ATTEMPTS = 3


def test_image_request_joins_while_another_runs(
    vlm_server: Server, pictures: Pictures, vlm_golden: VlmGolden
) -> None:
    """Continuous batching: a short image request sent while a long one runs is added to the
    running batch: its first tokens and its end both come before the long one ends, and neither
    answer changes. Judged from the server's DEBUG log (when each request was submitted to the
    engine, and the order in which the engine's outputs arrived), never from how fast a client
    thread read its socket, which on a busy machine says little about what the server did.

    The long request is unary: streamed, its thousands of SSE chunks kept the server's event
    loop so busy on two loaded cores that the short request was read only after it ended. The
    short one is sent once the server has the long one's first tokens; the check needs it
    submitted with at least a tenth of the long one's time left, and a machine too busy for
    that runs the scenario again."""
    long_image, short_image = pictures.make(*SIZES[0], seed=30), pictures.make(*SIZES[1], seed=31)
    long_messages = conversation([pictures.png_url(long_image)])
    short_messages = conversation([pictures.png_url(short_image)])
    long_expected = vlm_golden.chat(long_messages, [long_image], LONG_TOKENS)
    short_expected = vlm_golden.chat(short_messages, [short_image], 4)

    def ask(messages: list[Any], max_tokens: int) -> str | None:
        with vlm_server.client() as sdk:
            answer = sdk.chat.completions.create(
                model=MODEL, messages=messages, temperature=0, max_tokens=max_tokens
            )
        return answer.choices[0].message.content

    tried: list[list[EngineEvent]] = []
    for _ in range(ATTEMPTS):
        since = len(vlm_server.log())
        with ThreadPoolExecutor(1) as pool:
            long_answer = pool.submit(ask, long_messages, LONG_TOKENS)
            deadline = time.monotonic() + 60
            while not any(e.kind == "first" for e in vlm_server.engine_events(since)):
                assert time.monotonic() < deadline, "the long request produced no tokens"
                time.sleep(0.01)
            assert ask(short_messages, 4) == short_expected.text
            assert long_answer.result(120) == long_expected.text

        events = vlm_server.engine_events(since)
        at = {(e.kind, e.request): e for e in events}
        long_id, short_id = [e.request for e in events if e.kind == "submitted"]
        long_start, long_end = at[("first", long_id)].seconds, at[("finished", long_id)].seconds
        if at[("submitted", short_id)].seconds > long_end - (long_end - long_start) / 10:
            tried.append(events)  # the short one came (nearly) too late to join: again
            continue
        order = [events.index(at[event]) for event in (("first", long_id), ("first", short_id))]
        order += [events.index(at[("finished", short_id)]), events.index(at[("finished", long_id)])]
        assert order == sorted(order), f"the short request did not join the long one: {events}"
        return
    pytest.fail(f"the short request never reached the server in time: {tried}")


def test_default_settings_keep_same_text_different_images_apart(
    tiny_vlm_dir: Path, launch_exact: LaunchExact, pictures: Pictures, vlm_golden: VlmGolden
) -> None:
    """With the CLI defaults (prefix caching on), requests whose prompts tokenize identically
    (same text, same image size) but carry different images must not share cached KV blocks."""
    images = [pictures.make(*SIZES[0], seed=80 + i) for i in range(3)]
    conversations = [conversation([pictures.png_url(image)]) for image in images]
    expected = [
        vlm_golden.chat(m, [i], MAX_TOKENS).text for m, i in zip(conversations, images, strict=True)
    ]
    assert len(set(expected)) == 3
    args = ["--model_path", str(tiny_vlm_dir), "--model_name", MODEL]
    with launch_exact(args, model=MODEL) as server, server.client() as sdk:
        answers = [ask(sdk, messages).choices[0].message.content for messages in conversations]
    assert answers == expected


# ------------------------------------------------------------------------- local files and URLs


def test_seed_zebra_request_from_local_path(
    client: openai.OpenAI, media: Media, vlm_golden: VlmGolden
) -> None:
    """The seeds' request, with the picture given as a path under --allowed_local_media_path."""
    messages: list[ChatCompletionMessageParam] = [
        {
            "role": "user",
            "content": [
                {"type": "text", "text": "Describe what is on the picture."},
                {"type": "image_url", "image_url": {"url": str(media.zebra)}},
            ],
        }
    ]
    response = client.chat.completions.create(
        model=MODEL,
        messages=messages,
        max_completion_tokens=16,
        temperature=0,
    )
    assert_answer(response, vlm_golden.chat(messages, [media.zebra_pixels], 16))


@pytest.mark.parametrize("form", ["relative", "inner-dotdot", "file-url"])
def test_other_local_path_forms(
    client: openai.OpenAI, media: Media, vlm_golden: VlmGolden, form: str
) -> None:
    url = {
        "relative": media.zebra.name,
        "inner-dotdot": str(media.folder / "sub" / ".." / media.zebra.name),
        "file-url": media.zebra.as_uri(),
    }[form]
    messages = conversation([url])
    expected = vlm_golden.chat(messages, [media.zebra_pixels], MAX_TOKENS)
    assert_answer(ask(client, messages), expected)


def test_seed_request_with_base64_jpeg_over_raw_http(
    vlm_server: Server, media: Media, pictures: Pictures, vlm_golden: VlmGolden
) -> None:
    """The seeds' `requests` example: a base64 JPEG data URL, POSTed to /v1/chat/completions."""
    data = media.zebra.read_bytes()
    messages = [
        {
            "role": "user",
            "content": [
                {"type": "text", "text": "Describe what is on the picture."},
                image_part(pictures.data_url(data, "image/jpeg")),
            ],
        }
    ]
    body = {"model": MODEL, "messages": messages, "max_completion_tokens": 16, "temperature": 0}
    with vlm_server.http() as http:
        response = http.post("/v1/chat/completions", json=body)
    assert response.status_code == 200, response.text
    answer = response.json()
    expected = vlm_golden.chat(messages, [media.zebra_pixels], 16)
    assert answer["object"] == "chat.completion"
    message = answer["choices"][0]["message"]
    assert (message["role"], message["content"]) == ("assistant", expected.text)
    assert answer["usage"]["prompt_tokens"] == expected.prompt_tokens


def test_url_from_an_allowed_domain(
    client: openai.OpenAI, image_host: ImageHost, vlm_golden: VlmGolden
) -> None:
    messages = conversation([image_host.url("/zebra.png")])
    expected = vlm_golden.chat(messages, [image_host.zebra_pixels], MAX_TOKENS)
    assert_answer(ask(client, messages), expected)


# ----------------------------------------------------------------------------------- refusals

BAD_BASE64 = "data:image/png;base64,iVBORw0K!!!notbase64"


def test_invalid_base64(vlm_server: Server) -> None:
    error = refused_image(vlm_server, BAD_BASE64)
    assert error["message"] == "Invalid base64 string in request"


def test_data_url_without_base64(vlm_server: Server) -> None:
    error = refused_image(vlm_server, "data:image/png,rawbytes")
    assert "base64" in error["message"]


def test_not_an_image(vlm_server: Server, pictures: Pictures) -> None:
    error = refused_image(vlm_server, pictures.data_url(b"%PDF-1.4 hello", "image/png"))
    assert error["message"] == (
        "Image parsing failed: the data is not a JPEG, PNG, WebP, GIF or BMP image"
    )


def test_unsupported_format(vlm_server: Server, pictures: Pictures) -> None:
    tiff = pictures.encode(pictures.make(16, 16, seed=1), "TIFF")
    error = refused_image(vlm_server, pictures.data_url(tiff, "image/tiff"))
    assert error["message"].startswith("Image parsing failed: the data is not a JPEG")


def test_truncated_image(vlm_server: Server, pictures: Pictures) -> None:
    data = pictures.encode(pictures.make(*SIZES[0], seed=12))
    error = refused_image(vlm_server, pictures.data_url(data[: len(data) // 2]))
    assert error["message"].startswith("Image parsing failed: the image data is truncated")


@pytest.mark.parametrize("side", [10_000, 20_000], ids=["pillow-warns", "pillow-raises"])
def test_decompression_bomb(vlm_server: Server, pictures: Pictures, side: int) -> None:
    """Pillow warns above 89.5 MP and raises above twice that; both are a 400 here."""
    error = refused_image(vlm_server, pictures.data_url(png_with_size(side, side)))
    assert error["message"].startswith("Image parsing failed: the image ")
    assert "pixels" in error["message"] or "too large" in error["message"]


def test_path_outside_the_allowed_folder(vlm_server: Server, media: Media) -> None:
    for url in (str(media.outside), f"{media.folder}/../{media.outside.name}", "../secret.png"):
        error = refused_image(vlm_server, url)
        assert error["message"] == "Given filepath is not subpath of allowed_local_media_path"


def test_symlink_out_of_the_allowed_folder(vlm_server: Server, media: Media) -> None:
    error = refused_image(vlm_server, str(media.escape_link))
    assert error["message"] == "Given filepath is not subpath of allowed_local_media_path"


def test_missing_local_file(vlm_server: Server, media: Media) -> None:
    error = refused_image(vlm_server, str(media.folder / "nope.png"))
    assert error["message"].startswith("Image file parsing failed: ")
    assert "does not exist" in error["message"]


def test_folder_is_not_an_image(vlm_server: Server, media: Media) -> None:
    os.makedirs(media.folder / "dir", exist_ok=True)
    error = refused_image(vlm_server, str(media.folder / "dir"))
    assert error["message"].startswith("Image file parsing failed: ")


def test_disallowed_domain(vlm_server: Server, image_host: ImageHost) -> None:
    for url in (image_host.url("/zebra.png", host="localhost"), "https://example.com/a.png"):
        error = refused_image(vlm_server, url)
        assert error["message"] == (
            "Given url does not match any allowed domain from allowed_media_domains"
        )


def test_unsupported_url_scheme(vlm_server: Server) -> None:
    error = refused_image(vlm_server, "ftp://127.0.0.1/zebra.png")
    assert "scheme" in error["message"]


@pytest.mark.parametrize(
    ("path", "reason"),
    [
        ("/missing.png", "the server answered HTTP 404"),
        ("/moved.png", "the server answered HTTP 302 (redirects are not followed)"),
        ("/slow.png", "no complete answer within 1 s"),
        ("/huge-declared.png", "the image is larger than the limit of 20000000 bytes"),
        ("/huge-streamed.png", "the image is larger than the limit of 20000000 bytes"),
    ],
)
def test_download_failures(
    vlm_server: Server, image_host: ImageHost, path: str, reason: str
) -> None:
    started = time.monotonic()
    error = refused_image(vlm_server, image_host.url(path))
    assert error["message"] == f"Image downloading failed: {reason}"
    assert time.monotonic() - started < 4.0  # the 5 s route is cut at the 1 s limit


def test_unreachable_url(vlm_server: Server) -> None:
    with socket.socket() as sock:  # a port nobody listens on
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    error = refused_image(vlm_server, f"http://127.0.0.1:{port}/zebra.png")
    assert error["message"].startswith("Image downloading failed: ")


def test_downloaded_bytes_that_are_not_an_image(vlm_server: Server, image_host: ImageHost) -> None:
    error = refused_image(vlm_server, image_host.url("/text.png"))
    assert error["message"].startswith("Image parsing failed: the data is not")


def test_image_url_without_url(vlm_server: Server) -> None:
    messages = [{"role": "user", "content": [{"type": "image_url", "image_url": {}}]}]
    error = refused(vlm_server, {"messages": messages})
    assert error["param"] == "messages[0].content[0].image_url"
    assert "no url string" in error["message"]


def test_restricted_image_tag(vlm_server: Server) -> None:
    messages = [{"role": "user", "content": "look at <ov_genai_image_0>"}]
    error = refused(vlm_server, {"messages": messages})
    assert error["message"] == "Message contains restricted <ov_genai_image> tag"


def test_completions_endpoint_is_refused(vlm_server: Server) -> None:
    error = refused(vlm_server, {"prompt": "hello"}, "/v3/completions")
    assert error["message"] == (
        "VLM Servable does not support the /completions endpoint. Use /chat/completions or "
        "/responses."
    )


def test_one_bad_image_fails_the_whole_request(vlm_server: Server, pictures: Pictures) -> None:
    good = pictures.png_url(pictures.make(*SIZES[0], seed=13))
    messages = [{"role": "user", "content": [image_part(good), image_part(BAD_BASE64)]}]
    error = refused(vlm_server, {"messages": messages})
    assert error["param"] == "messages[0].content[1].image_url.url"


# ------------------------------------------------------------------------------- still healthy


def test_requests_are_logged_at_debug(vlm_server: Server) -> None:
    log = vlm_server.log()
    assert "image(s), max_new_tokens" in log  # one line per request, with its image count
    assert "loaded 1 image(s) in" in log  # how long fetching and decoding took


def test_still_serves_after_refusals(
    client: openai.OpenAI, pictures: Pictures, vlm_golden: VlmGolden
) -> None:
    images = [pictures.make(*SIZES[i], seed=40 + i) for i in range(2)]
    messages = conversation([pictures.png_url(image) for image in images])
    assert_answer(ask(client, messages), vlm_golden.chat(messages, images, MAX_TOKENS))


def test_bad_media_folder_stops_the_server_at_start(
    tiny_vlm_dir: Path, tmp_path: Path, run_graphrt: Any
) -> None:
    missing = tmp_path / "missing"
    result = run_graphrt(
        "serve",
        "--model_path",
        str(tiny_vlm_dir),
        "--rest_port",
        "0",
        "--allowed_local_media_path",
        str(missing),
        cwd=tmp_path,
        timeout=60,
    )
    assert result.returncode == 1
    assert "--allowed_local_media_path" in result.stderr and "not a directory" in result.stderr
