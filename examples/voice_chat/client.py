"""Ask the voice chat graph a spoken question with the OpenAI SDK; get text and speech back.

python client.py question.wav [--url http://127.0.0.1:8000/v3] [--model voice-chat]
    [--voice alloy] [--stream] [--max-tokens 80] [--out answer.wav]

Unary: prints the answer and writes its audio (WAV) to --out. Streaming: prints the text as it
is generated, and writes each spoken sentence as it arrives (16-bit PCM at 24 kHz, OpenAI's
pcm16), then wraps them into --out.
"""

from __future__ import annotations

import argparse
import base64
import wave
from pathlib import Path

from openai import OpenAI


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("audio", type=Path, help="the spoken question (wav or mp3)")
    parser.add_argument("--url", default="http://127.0.0.1:8000/v3")
    parser.add_argument("--model", default="voice-chat")
    parser.add_argument("--voice", default="alloy")
    parser.add_argument("--max-tokens", type=int, default=80)
    parser.add_argument("--stream", action="store_true")
    parser.add_argument("--out", type=Path, default=Path("answer.wav"))
    args = parser.parse_args()
    client = OpenAI(base_url=args.url, api_key="unused")
    question = {
        "type": "input_audio",
        "input_audio": {
            "data": base64.b64encode(args.audio.read_bytes()).decode("ascii"),
            "format": args.audio.suffix.lstrip(".") or "wav",
        },
    }
    messages = [{"role": "user", "content": [question]}]
    if not args.stream:
        reply = client.chat.completions.create(
            model=args.model,
            messages=messages,  # type: ignore[list-item]
            modalities=["text", "audio"],
            audio={"voice": args.voice, "format": "wav"},
            max_tokens=args.max_tokens,
            temperature=0,
        )
        message = reply.choices[0].message
        print(message.content)
        assert message.audio is not None
        args.out.write_bytes(base64.b64decode(message.audio.data))
        return
    pcm = bytearray()
    stream = client.chat.completions.create(
        model=args.model,
        messages=messages,  # type: ignore[list-item]
        modalities=["text", "audio"],
        audio={"voice": args.voice, "format": "pcm16"},
        max_tokens=args.max_tokens,
        temperature=0,
        stream=True,
    )
    for chunk in stream:
        if not chunk.choices:
            continue
        delta = chunk.choices[0].delta
        if delta.content:
            print(delta.content, end="", flush=True)
        audio = getattr(delta, "audio", None)
        if audio is not None and audio.data:
            pcm += base64.b64decode(audio.data)
    print()
    with wave.open(str(args.out), "wb") as file:
        file.setnchannels(1)
        file.setsampwidth(2)
        file.setframerate(24_000)
        file.writeframes(bytes(pcm))


if __name__ == "__main__":
    main()
