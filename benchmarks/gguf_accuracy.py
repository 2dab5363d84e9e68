"""What requantizing a GGUF costs in accuracy: each `gguf_weights` layout against genai's graph
of the file (the default), on the next-token distributions of a fixed text.

The graphs are the ones the engine runs: openvino-genai's graph of the GGUF (the file's own
quantization blocks, the default path; exact for Q4_0, while Q4_1's block minimums become integer
zero points) and the same graph with its weights requantized
(servables/llm/gguf_requantize.py, the cached directories the server loads). Each reads the text
in one pass, and at every position the script compares the next-token distributions: the KL
divergence KL(exact || requantized) (what llama.cpp's `llama-perplexity --kl-divergence`
reports for its quantization types), how often the most likely token is the same, and each
side's perplexity on the text. Both run with `INFERENCE_PRECISION_HINT: f32`, so
the difference is the weights' alone.

Random-weight models (the 1B benchmark fixture) have nearly flat distributions, which makes any
KL small: the figures that say something about accuracy come from a trained model (the default,
SmolLM2-135M-Instruct Q4_1).

    python benchmarks/gguf_accuracy.py [--model PATH.gguf] [--layout int4_channelwise ...]
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))
from host import describe

TEXT = (
    "The history of the printing press begins in the fifteenth century, when Johannes "
    "Gutenberg combined movable metal type, an oil-based ink and a wooden press adapted from "
    "those used to make wine. Before that, books in Europe were copied by hand, mostly in "
    "monasteries, and a single Bible could take a scribe more than a year. Within fifty years "
    "of Gutenberg's first prints, presses were running in more than two hundred cities, and "
    "millions of books had been printed. Prices fell, literacy spread beyond the clergy and the "
    "nobility, and ideas travelled faster than ever before: scientists could compare their "
    "results, reformers could reach the public directly, and governments learned to fear the "
    "pamphlet. Historians still argue about how much of the modern world grew out of that "
    "workshop in Mainz, but few doubt that it changed how knowledge was made and shared."
)
PROPERTIES = {"INFERENCE_PRECISION_HINT": "f32"}


def log_probabilities(model_xml: Path, ids: npt.NDArray[np.int64]) -> npt.NDArray[np.float64]:
    """Log-softmax of the logits at every position of one pass over `ids`."""
    import openvino as ov

    compiled = ov.Core().compile_model(str(model_xml), "CPU", PROPERTIES)
    request = compiled.create_infer_request()
    for state in request.query_state():
        state.reset()
    length = ids.shape[0]
    request.infer(
        {
            "input_ids": ids[None],
            "attention_mask": np.ones((1, length), np.int64),
            "position_ids": np.arange(length, dtype=np.int64)[None],
            "beam_idx": np.zeros(1, np.int32),
        }
    )
    logits = np.asarray(request.get_tensor("logits").data[0], dtype=np.float64)
    shifted = logits - logits.max(axis=-1, keepdims=True)
    result: npt.NDArray[np.float64] = shifted - np.log(np.exp(shifted).sum(axis=-1, keepdims=True))
    return result


def compare(exact: Any, other: Any, ids: npt.NDArray[np.int64]) -> dict[str, float]:
    """KL(exact || other) per position (mean, p99, max), top-1 agreement, perplexities."""
    kl = (np.exp(exact) * (exact - other)).sum(axis=-1)
    targets = ids[1:]
    positions = np.arange(len(targets))
    return {
        "kl_mean": float(kl.mean()),
        "kl_p99": float(np.percentile(kl, 99)),
        "kl_max": float(kl.max()),
        "top1_same": float((exact.argmax(-1) == other.argmax(-1)).mean()),
        "ppl_exact": float(np.exp(-exact[positions, targets].mean())),
        "ppl_other": float(np.exp(-other[positions, targets].mean())),
    }


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--model", type=Path, help="a GGUF file (default: SmolLM2-135M Q4_1)")
    parser.add_argument("--layout", nargs="+", help="gguf_weights layouts (default: all)")
    args = parser.parse_args(argv)
    import openvino_genai

    from servables.llm.gguf_graph import MODEL_XML, genai_model_dir
    from servables.llm.gguf_requantize import LAYOUTS, requantized_model_dir

    if args.model is None:
        from graphrt.serving.default_model import default_model_path

        args.model = default_model_path()
    print(describe(PROPERTIES))
    exact_dir = genai_model_dir(args.model)  # genai's graph of the file, as the server loads it
    tokenizer = openvino_genai.Tokenizer(str(exact_dir))
    ids = np.asarray(tokenizer.encode(TEXT).input_ids.data[0], dtype=np.int64)
    exact = log_probabilities(exact_dir / MODEL_XML, ids)[:-1]
    print(f"model: {args.model}; {len(ids)} tokens of a fixed text")
    for layout in args.layout or list(LAYOUTS):
        other = log_probabilities(requantized_model_dir(args.model, layout) / MODEL_XML, ids)
        found = compare(exact, other[:-1], ids)
        print(
            f"{layout}: KL(genai's graph || {layout}) per token: mean {found['kl_mean']:.4f}, "
            f"p99 {found['kl_p99']:.4f}, max {found['kl_max']:.4f} nats; same most likely "
            f"token {100 * found['top1_same']:.1f}%; perplexity {found['ppl_exact']:.2f} "
            f"(genai's graph) vs {found['ppl_other']:.2f}",
            flush=True,
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
