"""Build step of the image: put the default model, its tokenizer IR and openvino-genai's saved
graph of it into $GRAPHRT_CACHE.

`graphrt serve` with no model arguments then finds them all, needs no network and loads the
saved graph (half the start of building it from the file). Both caches are keyed by the GGUF's
path, size and mtime in nanoseconds, and image layers keep whole seconds only, so the GGUF's mtime
is rounded down first; otherwise the keys would not match in the final image and the engine would
convert the tokenizer and save the graph again at every container start.
"""

from __future__ import annotations

import os

from graphrt.serving.default_model import default_model_path
from servables.llm.gguf_graph import genai_model_dir
from servables.llm.model_files import tokenizer_location


def main() -> None:
    gguf = default_model_path()
    seconds = int(gguf.stat().st_mtime)
    os.utime(gguf, (seconds, seconds))
    print(f"default model {gguf}, tokenizer {tokenizer_location(gguf)}")
    print(f"openvino-genai's graph of it: {genai_model_dir(gguf)}")


if __name__ == "__main__":
    main()
