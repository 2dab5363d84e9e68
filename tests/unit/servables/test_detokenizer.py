"""IncrementalDetokenizer: UTF-8-safe streaming deltas and text-level stop strings.

Round-trip vectors run through the real SmolLM2 tokenizer of openvino-genai, whose detokenizer
drops incomplete UTF-8 bytes silently; fake byte-level decoders cover tokenizers that produce
U+FFFD instead, and a fake decoder joining string pieces covers the stop-string logic.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Iterator, Sequence
from typing import Any, Protocol

import pytest

from servables.llm.detokenizer import IncrementalDetokenizer, TokenTexts

Decode = Callable[[Sequence[int]], str]


class Tokenizer(Protocol):
    """The part of `openvino_genai.Tokenizer` used here (fixture `smollm2_tokenizer`)."""

    def encode(self, prompt: str) -> Any: ...
    def decode(self, tokens: list[int], skip_special_tokens: bool = True) -> str: ...
    def get_eos_token_id(self) -> int: ...
    def get_vocab(self) -> dict[str, int]: ...


ROUND_TRIP_TEXTS = {
    "ascii": "Hello world! The quick brown fox jumps over the lazy dog.",
    "code": 'def f(x):\n    return {"a": x**2}  # ok\n\nprint(f(3))\n',
    "emoji": "Hello 🐉 dragon",
    "cjk": "你好\uff0c世界",  # with a fullwidth comma
    "accented": "café, naïve, Zürich, señor",
    "whitespace": "\ttab\n\nnl  \r\n  indented\n\t\tdone",
    "emoji_oddly_split": "a🐉b🇫🇷👨\u200d👩\u200d👧x🐉🐉",
    "mixed": "Résumé: 北京 🐉🔥 — ok\n\t✓ 日本語テキスト 😀!",
}
# Texts where decoding token by token loses characters (the detokenizer drops partial bytes).
LOSSY_PER_TOKEN = ["emoji", "cjk", "emoji_oddly_split", "mixed"]
CHUNKINGS = ["1", "2", "3", "random0", "random1", "random2", "all"]


def chunked(ids: Sequence[int], chunking: str) -> Iterator[list[int]]:
    """Split ids into engine steps: fixed sizes, seeded random sizes, or one step."""
    rng = random.Random(chunking)
    i = 0
    while i < len(ids):
        if chunking == "all":
            n = len(ids)
        elif chunking.startswith("random"):
            n = rng.randint(1, 5)
        else:
            n = int(chunking)
        yield list(ids[i : i + n])
        i += n


def run(detok: IncrementalDetokenizer, steps: Iterator[list[int]]) -> list[str]:
    """Feed all steps, then finish; return every delta (empty ones included)."""
    deltas = [detok.add(step) for step in steps]
    deltas.append(detok.finish())
    return deltas


def real_decode(tok: Tokenizer) -> Decode:
    def decode(ids: Sequence[int]) -> str:
        return tok.decode(list(ids), skip_special_tokens=True)

    return decode


def encode(tok: Tokenizer, text: str) -> list[int]:
    return [int(i) for i in tok.encode(text).input_ids.data[0]]


def pieces_decode(vocab: Sequence[str]) -> Decode:
    """A fake tokenizer whose token i is the string vocab[i]."""

    def decode(ids: Sequence[int]) -> str:
        return "".join(vocab[i] for i in ids)

    return decode


def bytes_decode(vocab: Sequence[bytes], errors: str) -> Decode:
    """A fake byte-level tokenizer: errors="replace" gives U+FFFD, "ignore" drops bytes."""

    def decode(ids: Sequence[int]) -> str:
        return b"".join(vocab[i] for i in ids).decode("utf-8", errors)

    return decode


def tokenize_pieces(pieces: Sequence[str]) -> tuple[Decode, list[int]]:
    """A fake vocabulary made of exactly these pieces, and the ids spelling them in order."""
    return pieces_decode(pieces), list(range(len(pieces)))


# -- round trips with the real tokenizer ------------------------------------------------------


@pytest.mark.parametrize("chunking", CHUNKINGS)
@pytest.mark.parametrize("name", sorted(ROUND_TRIP_TEXTS))
def test_real_tokenizer_round_trip(smollm2_tokenizer: Tokenizer, name: str, chunking: str) -> None:
    text = ROUND_TRIP_TEXTS[name]
    ids = encode(smollm2_tokenizer, text)
    decode = real_decode(smollm2_tokenizer)
    assert decode(ids) == text
    detok = IncrementalDetokenizer(decode)

    deltas = run(detok, chunked(ids, chunking))

    assert "".join(deltas) == decode(ids)
    assert not any("\ufffd" in d for d in deltas), deltas
    assert detok.text == text
    assert detok.token_count == len(ids)
    assert not detok.stopped


@pytest.mark.parametrize("name", LOSSY_PER_TOKEN)
def test_real_tokenizer_naive_per_token_decoding_loses_text(
    smollm2_tokenizer: Tokenizer, name: str
) -> None:
    """The round trips above would fail without the window: per-token decoding drops bytes."""
    text = ROUND_TRIP_TEXTS[name]
    ids = encode(smollm2_tokenizer, text)
    decode = real_decode(smollm2_tokenizer)
    naive = "".join(decode([i]) for i in ids)
    assert naive != text
    assert len(naive) < len(text)
    assert "\ufffd" not in naive  # dropped silently, not replaced


def test_real_tokenizer_streams_each_character_once_it_is_complete(
    smollm2_tokenizer: Tokenizer,
) -> None:
    ids = encode(smollm2_tokenizer, "Hello 🐉 dragon")
    assert ids == [19556, 15107, 234, 227, 17422]  # 🐉 is split over three tokens
    detok = IncrementalDetokenizer(real_decode(smollm2_tokenizer))
    assert [detok.add([i]) for i in ids] == ["Hello", " ", "", "🐉", " dragon"]
    assert detok.finish() == ""


def test_real_tokenizer_window_is_bounded(smollm2_tokenizer: Tokenizer) -> None:
    """At most two decode calls per add, each on a few ids, however long the output gets."""
    text = "Hello 🐉 dragon, 你好\uff0c世界! café 👨\u200d👩\u200d👧 " * 40
    ids = encode(smollm2_tokenizer, text)
    assert len(ids) > 500
    decode = real_decode(smollm2_tokenizer)
    calls: list[int] = []

    def spy(window: Sequence[int]) -> str:
        calls.append(len(window))
        return decode(window)

    detok = IncrementalDetokenizer(spy)
    total_calls = 0
    for step in chunked(ids, "1"):
        calls.clear()
        detok.add(step)
        total_calls += len(calls)
        assert len(calls) <= 2
        # up to 16 ids of context + an incomplete character, never the history
        assert max(calls) <= 20
    calls.clear()
    detok.finish()
    assert len(calls) <= 2
    assert detok.text == text
    # The context's text is reused between trims, so most steps cost one decode, not two.
    assert total_calls < 1.4 * len(ids)


def test_real_tokenizer_skipped_special_tokens(
    smollm2_tokenizer: Tokenizer,
) -> None:
    """Ids that decode to nothing (skipped EOS) neither break nor grow the window."""
    eos = smollm2_tokenizer.get_eos_token_id()
    hello, dragon = encode(smollm2_tokenizer, "Hello 🐉"), encode(smollm2_tokenizer, " dragon")
    ids = [*hello, *[eos] * 50, *dragon, eos]
    decode = real_decode(smollm2_tokenizer)
    sizes: list[int] = []

    def spy(window: Sequence[int]) -> str:
        sizes.append(len(window))
        return decode(window)

    detok = IncrementalDetokenizer(spy)
    deltas = run(detok, chunked(ids, "1"))
    assert "".join(deltas) == decode(ids) == "Hello 🐉 dragon"
    assert max(sizes) <= 25  # up to 16 ids of context + up to 9 silent ones


@pytest.mark.parametrize("chunking", ["1", "2", "random0", "all"])
@pytest.mark.parametrize(
    ("stop", "include", "expected"),
    [
        # "of Fr" lies inside the tokens " of" + " France": the cut is on text, not tokens.
        (["of Fr"], False, "The capital "),
        (["of Fr"], True, "The capital of Fr"),
        (["is Par"], False, "The capital of France "),
        (["is Par"], True, "The capital of France is Par"),
        (["The"], False, ""),
        (["Paris", "capital"], False, "The "),
        (["nowhere"], False, "The capital of France is Paris."),
    ],
)
def test_real_tokenizer_stop_strings(
    smollm2_tokenizer: Tokenizer,
    stop: list[str],
    include: bool,
    expected: str,
    chunking: str,
) -> None:
    ids = encode(smollm2_tokenizer, "The capital of France is Paris.")
    detok = IncrementalDetokenizer(real_decode(smollm2_tokenizer), stop, include)
    deltas = run(detok, chunked(ids, chunking))
    assert "".join(deltas) == detok.text == expected
    assert detok.stopped == (stop != ["nowhere"])


# -- the window with fake byte-level tokenizers -----------------------------------------------

# "a", "é" (2 bytes), "你" (3 bytes) and "🐉" (4 bytes), each byte its own token, plus two
# multi-byte tokens that straddle character boundaries.
BYTE_VOCAB: list[bytes] = [
    *(bytes([b]) for b in range(256)),
    "b🐉".encode()[:3],  # 256: "b" + the first two bytes of 🐉
    "🐉c".encode()[2:],  # 257: the last two bytes of 🐉 + "c"
]
BYTE_TEXT_IDS = [
    *"xé你🐉y".encode(),
    256,
    257,
    *"ő 世界 ".encode(),
    256,
    257,
]


@pytest.mark.parametrize("chunking", CHUNKINGS)
@pytest.mark.parametrize("errors", ["replace", "ignore"])
def test_fake_byte_tokenizer_round_trip(errors: str, chunking: str) -> None:
    decode = bytes_decode(BYTE_VOCAB, errors)
    assert decode(BYTE_TEXT_IDS) == "xé你🐉yb🐉cő 世界 b🐉c"
    detok = IncrementalDetokenizer(decode)
    deltas = run(detok, chunked(BYTE_TEXT_IDS, chunking))
    assert "".join(deltas) == decode(BYTE_TEXT_IDS)
    assert not any("\ufffd" in d for d in deltas), deltas


@pytest.mark.parametrize("errors", ["replace", "ignore"])
def test_fake_byte_tokenizer_characters_come_out_whole(errors: str) -> None:
    detok = IncrementalDetokenizer(bytes_decode(BYTE_VOCAB, errors))
    dragon = list("🐉".encode())
    assert [detok.add([b]) for b in [*b"a", *dragon]] == ["a", "", "", "", "🐉"]
    # "b" comes out at once although its token also starts the next emoji.
    assert [detok.add([i]) for i in [256, 257]] == ["b", "🐉c"]


def test_text_before_an_incomplete_character_is_not_held_back() -> None:
    """Steps that keep ending inside a character still stream what precedes it."""
    decode = bytes_decode(BYTE_VOCAB, "replace")
    ids = list("你好世界".encode())  # 12 bytes: steps of 4 end inside 好, inside 世, cleanly
    detok = IncrementalDetokenizer(decode)
    assert [detok.add(step) for step in chunked(ids, "4")] == ["你", "好", "世界"]


@pytest.mark.parametrize(("errors", "tail"), [("replace", "\ufffd"), ("ignore", "")])
def test_finish_flushes_incomplete_bytes_like_a_full_decode(errors: str, tail: str) -> None:
    decode = bytes_decode(BYTE_VOCAB, errors)
    ids = [*b"ok", *"🐉".encode()[:2]]
    detok = IncrementalDetokenizer(decode)
    assert [detok.add([i]) for i in ids] == ["o", "k", "", ""]
    assert detok.finish() == tail
    assert detok.text == decode(ids) == "ok" + tail


def test_invalid_bytes_inside_the_text_are_not_held_forever() -> None:
    """A U+FFFD that is not at the end is a real decoding error, emitted like a full decode."""
    decode = bytes_decode(BYTE_VOCAB, "replace")
    ids = [*b"a", 0xFF, *b"bc"]
    detok = IncrementalDetokenizer(decode)
    assert "".join(run(detok, chunked(ids, "1"))) == decode(ids) == "a\ufffdbc"


def test_pending_window_is_forced_forward_when_nothing_decodes() -> None:
    """Garbage bytes that never complete a character do not make the window grow without end."""
    decode = bytes_decode(BYTE_VOCAB, "replace")
    sizes: list[int] = []

    def spy(window: Sequence[int]) -> str:
        sizes.append(len(window))
        return decode(window)

    detok = IncrementalDetokenizer(spy)
    ids = [*b"a", *[0xF0] * 100, *b"b"]
    deltas = run(detok, chunked(ids, "1"))
    assert max(sizes) <= 73  # 8 ids of context + up to 65 pending
    assert "".join(deltas) == decode(ids)


FUZZ_CHARS = "ab \n\té你好🐉😀👨\u200d👩🇫🇷őΩ"


def random_byte_tokens(rng: random.Random) -> tuple[str, list[bytes], list[int]]:
    """A random text cut into tokens at random byte offsets, with a few silent tokens mixed in."""
    text = "".join(rng.choices(FUZZ_CHARS, k=rng.randint(1, 40)))
    data = text.encode()
    cuts = sorted(rng.sample(range(1, len(data)), k=rng.randint(0, len(data) - 1)))
    vocab = [data[a:b] for a, b in zip([0, *cuts], [*cuts, len(data)], strict=True)]
    ids = list(range(len(vocab)))
    vocab.append(b"")  # decodes to nothing, like a special token with skip_special_tokens
    for _ in range(rng.randint(0, 3)):
        ids.insert(rng.randint(0, len(ids)), len(vocab) - 1)
    return text, vocab, ids


@pytest.mark.parametrize("errors", ["replace", "ignore"])
@pytest.mark.parametrize("seed", range(10))
def test_fuzz_fake_byte_tokenizer(errors: str, seed: int) -> None:
    rng = random.Random(seed)
    for _ in range(100):
        text, vocab, ids = random_byte_tokens(rng)
        detok = IncrementalDetokenizer(bytes_decode(vocab, errors))
        deltas = run(detok, chunked(ids, f"random{rng.random()}"))
        assert "".join(deltas) == text, (vocab, ids, deltas)
        assert not any("\ufffd" in d for d in deltas), (vocab, ids, deltas)


def test_fuzz_real_tokenizer(smollm2_tokenizer: Tokenizer) -> None:
    rng = random.Random(0)
    decode = real_decode(smollm2_tokenizer)
    eos = smollm2_tokenizer.get_eos_token_id()
    for _ in range(100):
        text = "".join(rng.choices(FUZZ_CHARS, k=rng.randint(1, 30)))
        ids = encode(smollm2_tokenizer, text)
        for _ in range(rng.randint(0, 2)):
            ids.insert(rng.randint(0, len(ids)), eos)
        detok = IncrementalDetokenizer(decode)
        deltas = run(detok, chunked(ids, f"random{rng.random()}"))
        assert "".join(deltas) == decode(ids) == text, (ids, deltas)
        assert not any("\ufffd" in d for d in deltas), (ids, deltas)


# -- stop strings (pure logic) ----------------------------------------------------------------


def test_stop_inside_one_token() -> None:
    decode, ids = tokenize_pieces(["The", " capital", " of", " France", " is"])
    detok = IncrementalDetokenizer(decode, ["of Fr"])
    deltas = run(detok, chunked(ids, "1"))
    assert "".join(deltas) == detok.text == "The capital "
    assert detok.stopped


def test_stop_spanning_steps_and_tokens() -> None:
    decode, ids = tokenize_pieces(["x", "He", "l", "lo W", "or", "ld", "!"])
    detok = IncrementalDetokenizer(decode, ["llo World"])
    assert [detok.add([i]) for i in ids[:6]] == ["x", "He", "", "", "", ""]
    assert detok.stopped
    assert detok.text == "xHe"


def test_stop_at_the_very_start() -> None:
    decode, ids = tokenize_pieces(["STOP", " more"])
    detok = IncrementalDetokenizer(decode, ["STOP"])
    assert detok.add(ids[:1]) == ""
    assert detok.stopped
    assert detok.add(ids[1:]) == ""
    assert detok.finish() == ""
    assert detok.text == ""


@pytest.mark.parametrize(("include", "expected"), [(False, "Hello "), (True, "Hello world")])
def test_include_stop_str_in_output(include: bool, expected: str) -> None:
    decode, ids = tokenize_pieces(["Hello", " wor", "ld", " and", " more"])
    detok = IncrementalDetokenizer(decode, ["world"], include_stop_str_in_output=include)
    deltas = run(detok, chunked(ids, "1"))
    assert "".join(deltas) == detok.text == expected
    assert detok.stopped


@pytest.mark.parametrize("include", [False, True])
def test_several_stop_strings_earliest_wins(include: bool) -> None:
    decode, ids = tokenize_pieces(["one", " two", " three", " four"])
    detok = IncrementalDetokenizer(decode, ["four", "two", "three"], include)
    assert "".join(run(detok, chunked(ids, "all"))) == ("one two" if include else "one ")


@pytest.mark.parametrize("chunking", ["1", "2", "all"])
def test_overlapping_stop_strings_first_completed_wins(chunking: str) -> None:
    """The stop "bc" is complete before "abcd" is, so it wins however the text arrives."""
    decode, ids = tokenize_pieces(["x", "a", "b", "c", "d", "e"])
    detok = IncrementalDetokenizer(decode, ["abcd", "bc"])
    assert "".join(run(detok, chunked(ids, chunking))) == "xa"


def test_stop_strings_ending_together_cut_at_the_longest() -> None:
    decode, ids = tokenize_pieces(["x", "abc", "d"])
    detok = IncrementalDetokenizer(decode, ["c", "abc", "bc"])
    assert "".join(run(detok, chunked(ids, "1"))) == "x"
    detok = IncrementalDetokenizer(decode, ["c", "abc", "bc"], include_stop_str_in_output=True)
    assert "".join(run(detok, chunked(ids, "1"))) == "xabc"


def test_nothing_is_emitted_after_a_stop() -> None:
    decode, ids = tokenize_pieces(["a", "b", "<END>", "c", "d"])
    detok = IncrementalDetokenizer(decode, ["<END>"], include_stop_str_in_output=True)
    assert detok.add(ids[:3]) == "ab<END>"
    assert detok.stopped
    assert detok.add(ids[3:4]) == ""
    assert detok.add(ids[4:]) == ""
    assert detok.finish() == ""
    assert detok.finish() == ""
    assert detok.text == "ab<END>"
    assert detok.token_count == 5


def test_text_that_may_begin_a_stop_string_is_held_back_until_finish() -> None:
    decode, ids = tokenize_pieces(["foo E", "N", "!", " bar E"])
    detok = IncrementalDetokenizer(decode, ["END"])
    assert detok.add(ids[:1]) == "foo "
    assert detok.add(ids[1:2]) == ""
    assert detok.add(ids[2:3]) == "EN!"  # "EN!" cannot become "END" any more
    assert detok.add(ids[3:]) == " bar "
    assert detok.text == "foo EN! bar "
    assert detok.finish() == "E"
    assert detok.text == "foo EN! bar E"
    assert not detok.stopped


def test_hold_back_is_at_most_the_longest_stop_minus_one() -> None:
    decode, ids = tokenize_pieces(["xabcabc"])
    detok = IncrementalDetokenizer(decode, ["abcabcd", "zz"])
    assert detok.add(ids) == "x"
    assert detok.finish() == "abcabc"
    decode, ids = tokenize_pieces(["xyz" * 5])
    detok = IncrementalDetokenizer(decode, ["yzyzy", "zxyzxyzq"])
    assert detok.add(ids) == "xyzxyzxy"
    assert detok.finish() == "zxyzxyz"  # the longest stop minus one: 7 characters


def test_text_that_cannot_begin_a_stop_string_is_not_held_back() -> None:
    decode, ids = tokenize_pieces(["abc", "def"])
    detok = IncrementalDetokenizer(decode, ["###", "\n\nUser:"])
    assert [detok.add([i]) for i in ids] == ["abc", "def"]


def test_stop_split_across_held_text_and_new_delta() -> None:
    decode, ids = tokenize_pieces(["xa", "b", "c"])
    detok = IncrementalDetokenizer(decode, ["ab"])
    assert detok.add(ids[:1]) == "x"
    assert detok.add(ids[1:2]) == ""
    assert detok.stopped
    assert detok.text == "x"


def test_stop_found_by_finish() -> None:
    """finish() applies the stop check to a flushed tail (here an incomplete character)."""
    decode = bytes_decode(BYTE_VOCAB, "replace")
    detok = IncrementalDetokenizer(decode, ["k\ufffd"])
    assert [detok.add([i]) for i in [*b"ok", *"🐉".encode()[:2]]] == ["o", "", "", ""]
    assert detok.finish() == ""
    assert detok.stopped
    assert detok.text == "o"


def test_without_stop_strings_nothing_is_held_back() -> None:
    decode, ids = tokenize_pieces(["a", "b"])
    detok = IncrementalDetokenizer(decode)
    assert [detok.add([i]) for i in ids] == ["a", "b"]
    assert detok.finish() == ""


def test_empty_stop_strings_are_ignored() -> None:
    decode, ids = tokenize_pieces(["a", "b"])
    detok = IncrementalDetokenizer(decode, ["", "zz"])
    assert "".join(run(detok, chunked(ids, "1"))) == "ab"
    assert not detok.stopped


def test_stop_must_not_be_a_bare_string() -> None:
    with pytest.raises(TypeError):
        IncrementalDetokenizer(pieces_decode([]), "stop")


def test_empty_add_decodes_nothing() -> None:
    calls: list[Sequence[int]] = []

    def decode(ids: Sequence[int]) -> str:
        calls.append(ids)
        return "x" * len(ids)

    detok = IncrementalDetokenizer(decode)
    assert detok.add([]) == ""
    assert calls == []
    assert detok.finish() == ""
    assert calls == []


def test_add_after_finish_is_an_error() -> None:
    decode, ids = tokenize_pieces(["a"])
    detok = IncrementalDetokenizer(decode)
    assert detok.add(ids) == "a"
    assert detok.finish() == ""
    with pytest.raises(RuntimeError):
        detok.add(ids)


def test_accepts_numpy_style_ids() -> None:
    import numpy as np

    decode, _ = tokenize_pieces(["a", "b"])
    detok = IncrementalDetokenizer(decode)
    assert detok.add(np.array([0, 1], dtype=np.int64)) == "ab"


def reference_cut(text: str, stop: Sequence[str], include: bool) -> tuple[str, bool]:
    """Expected output: the text up to the first stop string completed in it."""
    for end in range(1, len(text) + 1):
        hits = [s for s in stop if s and text.endswith(s, 0, end)]
        if hits:
            longest = max(hits, key=len)
            return text[: end if include else end - len(longest)], True
    return text, False


@pytest.mark.parametrize("seed", range(40))
def test_stop_strings_match_reference_for_any_chunking(seed: int) -> None:
    rng = random.Random(seed)
    alphabet = "ab c"
    pieces = ["".join(rng.choices(alphabet, k=rng.randint(0, 3))) for _ in range(30)]
    stop = ["".join(rng.choices(alphabet, k=rng.randint(1, 5))) for _ in range(rng.randint(1, 4))]
    decode, ids = tokenize_pieces(pieces)
    text = decode(ids)
    for include in (False, True):
        expected, stops = reference_cut(text, stop, include)
        for chunking in ("1", "3", f"random{seed}", "all"):
            detok = IncrementalDetokenizer(decode, stop, include)
            deltas = run(detok, chunked(ids, chunking))
            assert "".join(deltas) == detok.text == expected, (pieces, stop, chunking)
            assert detok.stopped == stops
            assert detok.token_count == len(ids)


# -- token texts: steps without the tokenizer -------------------------------------------------


@pytest.fixture(scope="module")
def smollm2_texts(smollm2_tokenizer: Tokenizer) -> TokenTexts:
    def decode_many(windows: list[list[int]], skip: bool) -> list[str]:
        texts: Any = smollm2_tokenizer.decode(windows, skip_special_tokens=skip)  # type: ignore[arg-type]
        return list(texts)

    texts = TokenTexts.build(decode_many, len(smollm2_tokenizer.get_vocab()))
    assert texts is not None  # byte-level BPE: the check passes
    return texts


def test_real_tokenizer_token_texts_match_the_decode_path(
    smollm2_tokenizer: Tokenizer, smollm2_texts: TokenTexts
) -> None:
    """Same deltas, step by step, with and without token texts; most steps skip the tokenizer."""
    rng = random.Random(1)
    decode = real_decode(smollm2_tokenizer)
    calls = 0

    def counted(ids: Sequence[int]) -> str:
        nonlocal calls
        calls += 1
        return decode(ids)

    eos = smollm2_tokenizer.get_eos_token_id()
    texts = [
        *ROUND_TRIP_TEXTS.values(),
        *("".join(rng.choices(FUZZ_CHARS, k=30)) for _ in range(60)),
    ]
    steps_total = 0
    for text in texts:
        ids = encode(smollm2_tokenizer, text)
        if rng.random() < 0.3:
            ids.insert(rng.randint(0, len(ids)), eos)  # a skipped special token
        for stop in ((), (" over", "🐉", "\n")):
            steps = list(chunked(ids, f"random{rng.random()}"))
            steps_total += len(steps)
            plain = run(IncrementalDetokenizer(decode, stop), iter(steps))
            fast = run(IncrementalDetokenizer(counted, stop, texts=smollm2_texts), iter(steps))
            assert fast == plain, (text, steps)
    ascii_ids = encode(smollm2_tokenizer, ROUND_TRIP_TEXTS["ascii"] * 4)
    calls = 0
    run(IncrementalDetokenizer(counted, texts=smollm2_texts), chunked(ascii_ids, "1"))
    assert calls == 0  # plain English: no tokenizer call at all


def test_token_texts_skip_special_tokens_and_leave_split_characters_to_the_tokenizer() -> None:
    vocab = [b"Hello", b" world", b" ", b"\xf0\x9f", b"\x90\x89", b"", b"!"]
    special = {5: "<|end|>"}

    def decode_many(windows: list[list[int]], skip: bool) -> list[str]:
        return [
            b"".join(
                special[i].encode() if i in special and not skip else vocab[i] for i in window
            ).decode("utf-8", "replace")
            for window in windows
        ]

    texts = TokenTexts.build(decode_many, len(vocab))
    assert texts is not None
    assert texts.join([0, 1, 6]) == "Hello world!"
    assert texts.join([0, 3]) is None  # the first half of 🐉
    assert texts.join([0, 5, 6]) == "Hello!"  # special tokens skipped (the table's only mode)
    assert texts.join([99]) is None  # not in the vocabulary


def test_token_texts_refuse_a_tokenizer_that_cleans_up_spaces() -> None:
    """HF's clean_up_tokenization_spaces turns " ." into ".": a "." token after a lone space
    must not be joined blindly. Streams decode as with the tokenizer alone either way, and a
    tokenizer that never concatenates gets no table at all."""
    vocab = ["Hello", " world", " ", ".", " .", "!", "a", "b"]

    def cleaned(ids: Sequence[int]) -> str:
        return "".join(vocab[i] for i in ids).replace(" .", ".")

    def decode_many(windows: list[list[int]], skip: bool) -> list[str]:
        return [cleaned(window) for window in windows]

    texts = TokenTexts.build(decode_many, len(vocab))
    assert texts is not None
    assert texts.join([3]) is None  # " " then "." is not " ."
    assert texts.join([0, 1, 5]) == "Hello world!"
    rng = random.Random(3)
    for _ in range(300):
        ids = [rng.randrange(len(vocab)) for _ in range(rng.randint(1, 12))]
        steps = list(chunked(ids, f"random{rng.random()}"))
        plain = run(IncrementalDetokenizer(cleaned), iter(steps))
        fast = run(IncrementalDetokenizer(cleaned, texts=texts), iter(steps))
        assert fast == plain, ids

    def sentencepiece_like(windows: list[list[int]], skip: bool) -> list[str]:
        # strips the leading space of the whole text: never concatenation
        return ["".join(vocab[i] for i in window).lstrip(" ") for window in windows]

    assert TokenTexts.build(sentencepiece_like, len(vocab)) is None
