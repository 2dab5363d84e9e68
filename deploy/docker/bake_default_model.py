"""Build step of the image: put the default model and its tokenizer IR into $GRAPHRT_CACHE.

`graphrt serve` with no model arguments then finds both and needs no network. The tokenizer cache
is keyed by the GGUF's path, size and mtime in nanoseconds, and image layers keep whole seconds
only, so the GGUF's mtime is rounded down first; otherwise the key would not match in the final
image and the engine would convert the tokenizer again at every container start.
"""

from __future__ import annotations

import os

from graphrt.serving.default_model import default_model_path
from servables.llm.model_files import tokenizer_location


def main() -> None:
    gguf = default_model_path()
    seconds = int(gguf.stat().st_mtime)
    os.utime(gguf, (seconds, seconds))
    print(f"default model {gguf}, tokenizer {tokenizer_location(gguf)}")


if __name__ == "__main__":
    main()
