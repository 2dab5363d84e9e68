"""The pair layout of a cross-encoder: read from the tokenizer's own template, or OVMS's."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from servables.encoders.tokenizer import EncoderTokenizer
from servables.rerank.pairs import ovms_template, probe_template
from servables.rerank.servable import to_scores

TINY_CROSS_ENCODER = (
    Path(__file__).resolve().parents[2] / "fixtures" / "models" / "tiny-cross-encoder"
)


def test_bert_template_matches_the_tokenizers_own_pairs() -> None:
    tokenizer = EncoderTokenizer(TINY_CROSS_ENCODER, paired=True)
    template = probe_template(tokenizer, typed=True)
    assert template is not None and template.source == "tokenizer"
    (single,) = tokenizer.encode(["x"])
    cls, sep = int(single[0]), int(single[-1])
    assert (template.prefix, template.middle, template.suffix) == ((cls,), (sep,), (sep,))
    query, document = "what is the capital of france?", "paris is the capital"
    q_ids, d_ids = tokenizer.encode([query, document], add_special_tokens=False)
    built = template.build(q_ids, d_ids)
    (expected,) = tokenizer.encode_pairs([query], [document])
    assert built.ids.tolist() == expected.tolist()
    assert built.type_ids is not None
    assert built.type_ids.tolist() == [0] * (len(q_ids) + 2) + [1] * (len(d_ids) + 1)


def test_without_pair_support_there_is_no_probed_template() -> None:
    assert probe_template(EncoderTokenizer(TINY_CROSS_ENCODER), typed=True) is None


class Vocab:
    """A tokenizer that knows only whole special tokens."""

    def __init__(self, vocab: dict[str, int]) -> None:
        self._vocab = vocab

    def encode(self, texts: list[str], add_special_tokens: bool) -> list[Any]:
        return [np.array([self._vocab[text]]) for text in texts]


def test_ovms_layout_from_config_files(tmp_path: Path) -> None:
    (tmp_path / "config.json").write_text(json.dumps({"bos_token_id": 0, "eos_token_id": 2}))
    (tmp_path / "tokenizer_config.json").write_text(
        json.dumps({"bos_token": "<s>", "sep_token": {"content": "</s>"}})
    )
    tokenizer: Any = Vocab({"<s>": 0, "</s>": 2, "<pad>": 1})
    template = ovms_template(tmp_path, tokenizer)
    assert (template.prefix, template.middle, template.suffix) == ((0,), (2, 2), (2,))
    row = template.build(np.array([7, 8]), np.array([9]))
    assert row.ids.tolist() == [0, 7, 8, 2, 2, 9, 2] and row.type_ids is None


def test_scores_are_sigmoid_or_softmax_of_label_one() -> None:
    assert to_scores(np.array([[0.0], [2.0]])) == pytest.approx([0.5, 1 / (1 + np.exp(-2.0))])
    two = to_scores(np.array([[1.0, 3.0]]))
    assert two == pytest.approx([np.exp(3.0) / (np.exp(1.0) + np.exp(3.0))])
