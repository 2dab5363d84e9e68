"""Ask the guarded LLM a question; a blocked topic comes back as an OpenAI 400 error.

python client.py [--url http://127.0.0.1:8000/v3] "What is Zorblax?"
"""

from __future__ import annotations

import argparse
import sys

import openai


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("question")
    parser.add_argument("--url", default="http://127.0.0.1:8000/v3")
    parser.add_argument("--max-tokens", type=int, default=40)
    args = parser.parse_args()
    client = openai.OpenAI(base_url=args.url, api_key="unused")
    try:
        reply = client.chat.completions.create(
            model="guarded_llm",
            messages=[{"role": "user", "content": args.question}],
            max_tokens=args.max_tokens,
            temperature=0,
        )
    except openai.BadRequestError as error:
        print(f"refused: {error.body['message'] if isinstance(error.body, dict) else error}")
        return 1
    print(reply.choices[0].message.content)
    return 0


if __name__ == "__main__":
    sys.exit(main())
