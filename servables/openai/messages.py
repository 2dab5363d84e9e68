"""The prompt of an OpenAI request: chat messages with their image parts, or a completions prompt.

Checked the way OVMS checks them (its messages where it has them). Image parts become OVMS's
`<ov_genai_image_N>` tags in the text the chat template sees, with the images listed beside it.
servables.openai.protocol parses the rest of the request.
"""

from __future__ import annotations

from typing import Any

from servables.errors import InvalidRequest
from servables.io.request_fields import is_integer
from servables.llm.request import ImageInput

INT32_MAX = 2_147_483_647
# openvino-genai's model-independent image placeholder is `<ov_genai_image_N>`; clients may not
# write it themselves (they could point at another request's image slot or break the count).
IMAGE_TAG_PREFIX = "<ov_genai_image_"


def _image_url(part: dict[str, Any], index: int, position: int) -> str:
    image_url = part.get("image_url")
    url = image_url.get("url") if isinstance(image_url, dict) else None
    if not isinstance(url, str) or not url:
        raise InvalidRequest(
            f"Invalid message structure - image_url part in message {index} has no url string",
            param=f"messages[{index}].content[{position}].image_url",
        )
    return url


def _content_of_parts(parts: list[Any], index: int, images: list[ImageInput]) -> tuple[str, str]:
    """(text only, content for the template) of a content-part list; appends its images.

    As in OVMS, each image becomes the text `<ov_genai_image_N>` (N counts images across the
    whole conversation), which openvino-genai replaces with the model's own image placeholder;
    a message with images joins its parts with newlines, OVMS's flattening. The text alone is
    what the restricted-tag check looks at.
    """
    texts: list[str] = []
    pieces: list[str] = []
    for position, part in enumerate(parts):
        if not isinstance(part, dict):
            raise InvalidRequest(
                f"Invalid message structure - content part in message {index} is not an object",
                param=f"messages[{index}].content",
            )
        kind = part.get("type")
        if kind == "text":
            text = part.get("text")
            if not isinstance(text, str):
                raise InvalidRequest(
                    f"Invalid message structure - text part in message {index} has no text string",
                    param=f"messages[{index}].content",
                )
            texts.append(text)
            pieces.append(text)
        elif kind == "image_url":
            url = _image_url(part, index, position)
            pieces.append(f"{IMAGE_TAG_PREFIX}{len(images)}>")
            images.append(ImageInput(url, f"messages[{index}].content[{position}].image_url.url"))
        elif kind == "input_audio":
            raise InvalidRequest(
                "This model reads text and images only: input_audio parts need a graph that "
                "transcribes them (a ChatTranscriptionCalculator node, see examples/voice_chat)",
                param=f"messages[{index}].content[{position}]",
            )
        else:
            raise InvalidRequest(
                f"Unsupported content type: {kind!r}", param=f"messages[{index}].content"
            )
    text_only = "".join(texts)
    if len(pieces) == len(texts):
        return text_only, text_only
    return text_only, "\n".join(pieces)


def parse_messages(body: dict[str, Any]) -> tuple[list[dict[str, Any]], list[ImageInput]]:
    """A chat request's messages, checked and ready for the template, and their images."""
    messages = body.get("messages")
    if messages is None:
        raise InvalidRequest("Messages missing in request", param="messages")
    if not isinstance(messages, list):
        raise InvalidRequest("Messages are not an array", param="messages")
    if not messages:
        raise InvalidRequest("Messages array cannot be empty", param="messages")
    normalized: list[dict[str, Any]] = []
    images: list[ImageInput] = []
    for index, message in enumerate(messages):
        if not isinstance(message, dict):
            raise InvalidRequest("Message is not a JSON object", param=f"messages[{index}]")
        role = message.get("role")
        if role is None:
            raise InvalidRequest("Every message must have 'role' field", param=f"messages[{index}]")
        if not isinstance(role, str):
            raise InvalidRequest("role is not a string", param=f"messages[{index}].role")
        content = message.get("content")
        if content is None:
            content = text = ""
        elif isinstance(content, list):
            text, content = _content_of_parts(content, index, images)
        elif isinstance(content, str):
            text = content
        else:
            raise InvalidRequest(
                "Invalid message structure - content should be a string or an array",
                param=f"messages[{index}].content",
            )
        if IMAGE_TAG_PREFIX[:-1] in text:
            raise InvalidRequest(
                "Message contains restricted <ov_genai_image> tag", param=f"messages[{index}]"
            )
        entry = {key: value for key, value in message.items() if key != "content"}
        entry["content"] = content
        calls = entry.get("tool_calls")
        if isinstance(calls, list):
            # Templates expect `arguments`; add it to copies so the caller's body is untouched.
            entry["tool_calls"] = [
                {**call, "function": {"arguments": "{}", **call["function"]}}
                if isinstance(call, dict) and isinstance(call.get("function"), dict)
                else call
                for call in calls
            ]
        normalized.append(entry)
    return normalized, images


def token_ids(prompt: list[Any], where: str) -> list[int] | None:
    """`prompt` as token ids when it is a non-empty list of integers (None when it is not); ids
    out of range are refused, naming the prompt `where`."""
    if not prompt or not all(is_integer(t) for t in prompt):
        return None
    if not all(0 <= t <= INT32_MAX for t in prompt):
        raise InvalidRequest(f"{where} token ids must be between 0 and {INT32_MAX}", param="prompt")
    return list(prompt)


def parse_prompt(body: dict[str, Any]) -> str | list[int]:
    """A completions request's prompt: one string, or one list of token ids."""
    prompt = body.get("prompt")
    if prompt is None:
        raise InvalidRequest("prompt is missing", param="prompt")
    if isinstance(prompt, list) and len(prompt) == 1 and isinstance(prompt[0], (str, list)):
        prompt = prompt[0]
    if isinstance(prompt, str):
        if not prompt:
            raise InvalidRequest("prompt is missing", param="prompt")
        return prompt
    if isinstance(prompt, list):
        ids = token_ids(prompt, "prompt")
        if ids is not None:
            return ids
        if prompt and all(isinstance(p, (str, list)) for p in prompt):
            raise InvalidRequest("only one prompt per request is supported", param="prompt")
    raise InvalidRequest("prompt is not a string", param="prompt")
