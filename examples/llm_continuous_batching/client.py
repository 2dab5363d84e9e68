"""Ask the served model one question with the OpenAI SDK, unary or streaming.

python client.py [--url http://127.0.0.1:8000/v3] [--model SmolLM2-135M-Instruct]
    [--stream] [--max-tokens 60] "What is the capital of France?"
"""

from __future__ import annotations

import argparse

from openai import OpenAI


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("question")
    parser.add_argument("--url", default="http://127.0.0.1:8000/v3")
    parser.add_argument("--model", default="SmolLM2-135M-Instruct")
    parser.add_argument("--max-tokens", type=int, default=60)
    parser.add_argument("--stream", action="store_true")
    args = parser.parse_args()
    client = OpenAI(base_url=args.url, api_key="unused")
    messages = [{"role": "user", "content": args.question}]
    if not args.stream:
        reply = client.chat.completions.create(
            model=args.model, messages=messages, max_tokens=args.max_tokens, temperature=0
        )
        print(reply.choices[0].message.content)
        return
    stream = client.chat.completions.create(
        model=args.model,
        messages=messages,
        max_tokens=args.max_tokens,
        temperature=0,
        stream=True,
    )
    for chunk in stream:
        if chunk.choices and chunk.choices[0].delta.content:
            print(chunk.choices[0].delta.content, end="", flush=True)
    print()


if __name__ == "__main__":
    main()
