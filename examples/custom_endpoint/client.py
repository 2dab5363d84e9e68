"""Call the summarize endpoint with plain HTTP: `python client.py TEXT [--stream] [--url URL]`.

Prints the summary (streamed as it is written with --stream); exits 1 with the server's message
when the request is refused.
"""

from __future__ import annotations

import argparse
import json
import sys

import httpx


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("text")
    parser.add_argument("--stream", action="store_true")
    parser.add_argument("--url", default="http://127.0.0.1:8000/v3")
    args = parser.parse_args()
    body = {"model": "summarizer", "text": args.text, "stream": args.stream}
    with httpx.Client(timeout=120) as client:
        if not args.stream:
            response = client.post(f"{args.url}/summarize", json=body)
            if response.status_code != 200:
                print("refused:", response.json()["error"]["message"])
                return 1
            print(response.json()["summary"])
            return 0
        with client.stream("POST", f"{args.url}/summarize", json=body) as response:
            if response.status_code != 200:
                print("refused:", json.loads(response.read())["error"]["message"])
                return 1
            for line in response.iter_lines():
                if line.startswith("data: "):
                    event = json.loads(line[len("data: ") :])
                    if event.get("type") == "summary.delta":
                        print(event["delta"], end="", flush=True)
                    elif "error" in event:
                        print("\nfailed:", event["error"]["message"])
                        return 1
            print()
    return 0


if __name__ == "__main__":
    sys.exit(main())
