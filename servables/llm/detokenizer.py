"""Incremental detokenization for streaming: token ids in, safe text deltas out.

Two problems make `decode(new_ids)` per engine step wrong:

* **Split UTF-8.** Byte-level BPE vocabularies spread one emoji or CJK character over 2-4 tokens.
  openvino-genai's detokenizer silently drops incomplete bytes (it returns '' for them), other
  tokenizers return U+FFFD; either way per-token decoding loses or corrupts the character. We use
  the sliding window of vLLM / HF `DecodeStream`: of the ids kept, `ids[:read_offset]` is left
  context whose text was already emitted and `ids[read_offset:]` is pending; `decode(context)` and
  `decode(context + pending)` share their start, so their difference is the pending text even for
  tokenizers that strip the first token's leading space (SentencePiece) or drop orphan
  continuation bytes at the start. The window slides (pending becomes context) only at a clean
  point: the text grew and does not end with U+FFFD. If it ends with U+FFFD, the text before that
  is emitted and the pending ids wait for the bytes that complete the character; if it did not
  grow (bytes dropped silently, or skipped special tokens), they just wait. Each `add` costs at
  most two decode calls on a window of a few tokens, however long the output.

* **Stop strings.** Matching is on text, so a stop string can lie inside one token (" France"
  holds "of Fr" when preceded by " of") or span several tokens and steps. Undelivered text whose
  end could still be the start of a stop string is held back: the longest suffix that is a prefix
  of some stop string, at most `max(len(s)) - 1` characters, and nothing at all when the tail
  cannot begin a stop string. The first stop string to be completed wins (the earliest end; on a
  tie, the longest, i.e. the earliest start), which is also what any other split of the same text
  into steps would give, so results do not depend on how the engine batches tokens. Only the
  held-back tail plus the new delta is searched, since an earlier match would already have fired.

A tokenizer call costs ~0.15-0.5 ms of CPU on these machines whatever its size, once per engine
step: the frontend's largest cost per token under load (py-spy, concurrency 8: a third of its
time). Most steps need no call at all. For byte-level BPE vocabularies (GPT-2, Llama 3, Qwen,
SmolLM2) decoding is concatenation: decode(a + b) == decode(a) + decode(b) whenever every token
is a whole character run. `TokenTexts` holds each such token's text, found and checked once at
load (every token next to two anchor tokens, on both sides, plus random runs, in two batched
calls); a step whose tokens all have a text, arriving when nothing is pending, is turned into
text by joining them (a skipped special token's text is ""). Everything else (the bytes of a
split character, requests that keep special tokens, any tokenizer that failed the check, e.g.
one that cleans up spaces) takes the decode path above.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence

__all__ = ["IncrementalDetokenizer", "TokenTexts"]

_REPLACEMENT_CHAR = "\ufffd"

# Left context kept when the window slides: the ids just before the pending ones. One token is
# enough for SentencePiece's leading space; the bytes of an incomplete character that the
# tokenizer dropped silently lie in the last 3 tokens, or a few more if skipped special tokens
# came between them, and must stay inside the window until the character is complete.
_CONTEXT_TOKENS = 8

# The window slides only at a clean point. These bound how long it waits, so that the cost of
# `add` stays bounded on pathological output:
# - ids that add no text and leave no trailing U+FFFD (skipped special tokens) are folded into
#   the context once more than this many are pending; an incomplete UTF-8 character (at most 4
#   bytes, so at most 4 tokens) never needs that many unless special tokens interrupt it;
_MAX_SILENT_PENDING = 8
# - text that keeps ending with U+FFFD (steps that keep ending inside a character, or bytes that
#   never form one) is flushed as decoded, U+FFFD included, once this many ids are pending.
_MAX_PENDING = 64


DecodeMany = Callable[[list[list[int]], bool], list[str]]

# Random runs of plain tokens checked at load, and their longest length.
_CHECK_RUNS = 2000
_CHECK_RUN_LENGTH = 8


class TokenTexts:
    """The text of every token whose decoding is plain concatenation (module docstring)."""

    __slots__ = ("texts",)

    def __init__(self, texts: Sequence[str | None]) -> None:
        self.texts = list(texts)  # None: decode such a token with the tokenizer

    def join(self, token_ids: Sequence[int]) -> str | None:
        """The text of these tokens, or None if one of them needs the tokenizer."""
        texts = self.texts
        count = len(texts)
        parts = []
        for token in token_ids:
            token = int(token)
            text = texts[token] if 0 <= token < count else None
            if text is None:
                return None
            parts.append(text)
        return "".join(parts)

    @classmethod
    def build(cls, decode_many: DecodeMany, vocab_size: int) -> TokenTexts | None:
        """Decode every token alone, keep those that concatenate; None if the check fails.

        The texts are those of decoding with special tokens skipped (the default; requests
        that keep special tokens do not use the table). A token is kept when its text has no
        U+FFFD (so it is not part of a split character) and is either the same non-empty text
        as without skipping, or empty while the unskipped text is not (a special token), and
        when next to each anchor (a word, a word after a space, a lone space) on either side it
        decodes as the two texts joined. Then random runs of kept tokens must decode as their
        texts joined, or the tokenizer is not concatenative and None is returned.
        """
        ids = [[token] for token in range(vocab_size)]
        skipped = decode_many(ids, True)
        kept = decode_many(ids, False)
        texts: list[str | None] = [
            a if (a == b or not a) and b and "\ufffd" not in a else None
            for a, b in zip(skipped, kept, strict=True)
        ]
        plain = [token for token, text in enumerate(texts) if text is not None]
        if not any(texts[token] for token in plain):
            return None
        word = next((t for t in plain if (texts[t] or "").isalpha()), None)
        spaced = next(
            (t for t in plain if (text := texts[t] or "")[:1] == " " and text[1:].isalpha()),
            None,
        )
        if word is None or spaced is None:
            return None
        # A lone space, if the vocabulary has one, catches clean-ups such as " ." -> ".".
        space = next((t for t in plain if texts[t] == " "), None)
        anchors = [anchor for anchor in (word, spaced, space) if anchor is not None]
        windows = [pair for anchor in anchors for t in plain for pair in ([anchor, t], [t, anchor])]
        for window, text in zip(windows, decode_many(windows, True), strict=True):
            first, second = window
            if text != (texts[first] or "") + (texts[second] or ""):
                texts[second if first in anchors else first] = None
        plain = [token for token, text in enumerate(texts) if text is not None]
        if len(plain) < 2:
            return None
        rng = random.Random(0)
        runs = [
            [rng.choice(plain) for _ in range(rng.randint(2, _CHECK_RUN_LENGTH))]
            for _ in range(_CHECK_RUNS)
        ]
        table = cls(texts)
        for run, text in zip(runs, decode_many(runs, True), strict=True):
            if text != table.join(run):
                return None
        return table


class IncrementalDetokenizer:
    """Turns a growing list of generated token ids into text deltas for streaming.

    `decode` maps ids to text, e.g.
    `lambda ids: tokenizer.decode(list(ids), skip_special_tokens=True)`; it is only ever called
    on a short window of the ids, at most twice per `add`. Only generated ids go in, never the
    prompt. Not thread-safe: use one instance per generated sequence.
    """

    __slots__ = (
        "_decode",
        "_finished",
        "_held",
        "_ids",
        "_include_stop",
        "_parts",
        "_prefix_text",
        "_read_offset",
        "_sent",
        "_stop",
        "_stopped",
        "_text",
        "_texts",
        "_token_count",
    )

    def __init__(
        self,
        decode: Callable[[Sequence[int]], str],
        stop: Sequence[str] = (),
        include_stop_str_in_output: bool = False,
        texts: TokenTexts | None = None,
    ) -> None:
        if isinstance(stop, str):
            raise TypeError("stop must be a sequence of strings, not a string")
        self._decode = decode
        # Empty stop strings would match everywhere; the engine accepts and ignores them too.
        self._stop: tuple[str, ...] = tuple(dict.fromkeys(s for s in stop if s))
        self._include_stop = include_stop_str_in_output
        # The decode window (vLLM's prefix_offset is always 0: older ids are dropped).
        # ids[:read_offset] is left context whose text was emitted; ids[read_offset:] is pending.
        self._ids: list[int] = []
        self._read_offset = 0
        self._prefix_text: str | None = ""  # decode(ids[:read_offset]), None when not known
        self._sent = 0  # chars of decode(ids) past decode(ids[:read_offset]) already emitted
        self._held = ""  # decoded text not yet emitted: the tail that may begin a stop string
        self._parts: list[str] = []
        self._text: str | None = ""
        self._stopped = False
        self._finished = False
        self._token_count = 0
        self._texts = texts  # token texts that skip the tokenizer (module docstring)

    @property
    def stopped(self) -> bool:
        """A stop string was found; the text was cut there and nothing more will be emitted.

        The caller should abort generation and report finish_reason "stop".
        """
        return self._stopped

    @property
    def text(self) -> str:
        """All text emitted so far: the concatenation of every delta returned."""
        if self._text is None:
            self._text = "".join(self._parts)
            self._parts = [self._text]
        return self._text

    @property
    def token_count(self) -> int:
        """Number of token ids passed to `add` so far, including any after a stop string."""
        return self._token_count

    def add(self, token_ids: Sequence[int]) -> str:
        """Take the new ids of one engine step; return the text safe to send now ("" if none)."""
        fast = self.add_plain(token_ids)
        if fast is not None:
            return fast
        windows = self.windows(token_ids)
        return self.deliver([self._decode(window) for window in windows])

    def add_plain(self, token_ids: Sequence[int]) -> str | None:
        """`add` without the tokenizer, when `TokenTexts` knows every token and nothing is
        pending; None otherwise (then use `windows` and `deliver`, or `add`)."""
        texts = self._texts
        if (
            texts is None
            or self._finished
            or self._stopped
            or self._read_offset != len(self._ids)
            or self._sent
            or len(token_ids) == 0
        ):
            return None
        delta = texts.join(token_ids)
        if delta is None:
            return None
        # What `windows` + `deliver` do at a clean point, with decode(ids) known to be
        # decode(context) + delta.
        self._token_count += len(token_ids)
        ids = self._ids
        ids.extend(map(int, token_ids))
        if len(ids) > 2 * _CONTEXT_TOKENS:
            del ids[: len(ids) - _CONTEXT_TOKENS]
            self._prefix_text = None
        elif self._prefix_text is not None:
            self._prefix_text += delta
        self._read_offset = len(ids)
        return self._release(delta, final=False)

    def windows(self, token_ids: Sequence[int]) -> list[list[int]]:
        """First half of `add`: take the ids, return the id windows that need decoding.

        Lets a caller decode the windows of many sequences in one tokenizer call (see
        `TokenizerBatcher`) and pass the texts, in order, to `deliver`.
        """
        if self._finished:
            raise RuntimeError("IncrementalDetokenizer.add() called after finish()")
        self._token_count += len(token_ids)
        if self._stopped or len(token_ids) == 0:
            return []
        self._ids.extend(map(int, token_ids))
        return self._windows()

    def deliver(self, texts: Sequence[str]) -> str:
        """Second half of `add`: the decoded windows in; the text safe to send now out."""
        if not texts:
            return ""
        return self._release(self._decode_new(texts, final=False), final=False)

    def finish(self) -> str:
        """Generation ended: return everything still held back, cut at a stop string if any.

        Incomplete trailing bytes are flushed the way the tokenizer decodes them (dropped, or as
        U+FFFD), so that the emitted text equals a decode of all ids. Later calls return "".
        """
        if self._finished:
            return ""
        self._finished = True
        if self._stopped:
            return ""
        texts = [self._decode(window) for window in self._windows()]
        out = self._release(self._decode_new(texts, final=True) if texts else "", final=True)
        self._ids.clear()
        self._read_offset = self._sent = 0
        self._prefix_text = ""
        return out

    def _windows(self) -> list[list[int]]:
        """The context (when its text is not cached) and the whole window, or nothing."""
        ids = self._ids
        if self._read_offset == len(ids):
            return []
        if self._prefix_text is None:
            return [ids[: self._read_offset], list(ids)]
        return [list(ids)]

    def _decode_new(self, texts: Sequence[str], final: bool) -> str:
        """Given the decoded windows, the new text that is safe to emit ("" to keep waiting)."""
        ids = self._ids
        read_offset = self._read_offset
        if self._prefix_text is None:
            self._prefix_text = texts[0] if read_offset else ""
        prefix_text = self._prefix_text
        new_text = texts[-1]
        pending = len(ids) - read_offset
        start = len(prefix_text) + self._sent
        if not final:
            if new_text.endswith(_REPLACEMENT_CHAR) and pending <= _MAX_PENDING:
                # An incomplete character: what precedes it is final and can go out now.
                delta = new_text.rstrip(_REPLACEMENT_CHAR)[start:]
                self._sent += len(delta)
                return delta
            if len(new_text) <= len(prefix_text) and pending <= _MAX_SILENT_PENDING:
                # Nothing new: skipped special tokens, or bytes of a character dropped silently.
                return ""
        # A clean point (or a forced one): slide the window, the pending ids become context.
        # The window is trimmed only when it grew past twice the context; until then the new
        # context's text is the text just decoded, so the next call needs one decode, not two.
        if len(ids) > 2 * _CONTEXT_TOKENS:
            del ids[: len(ids) - _CONTEXT_TOKENS]
            self._prefix_text = None
        else:
            self._prefix_text = new_text
        self._read_offset = len(ids)
        self._sent = 0
        return new_text[start:]

    def _release(self, delta: str, final: bool) -> str:
        """Apply the stop strings to the held-back text plus `delta`; emit what is safe."""
        text = self._held + delta
        if not text:
            return ""
        if self._stop:
            cut = self._find_stop(text)
            if cut is not None:
                self._stopped = True
                self._held = ""
                self._ids.clear()
                self._read_offset = self._sent = 0
                self._prefix_text = ""
                return self._emit(text[:cut])
            keep = 0 if final else self._partial_stop_len(text)
        else:
            keep = 0
        self._held = text[len(text) - keep :] if keep else ""
        return self._emit(text[: len(text) - keep])

    def _find_stop(self, text: str) -> int | None:
        """Index to cut `text` at for the first stop string completed in it, if any."""
        best_start = best_end = -1
        for s in self._stop:
            start = text.find(s)
            if start < 0:
                continue
            end = start + len(s)
            if best_end < 0 or end < best_end or (end == best_end and start < best_start):
                best_start, best_end = start, end
        if best_end < 0:
            return None
        return best_end if self._include_stop else best_start

    def _partial_stop_len(self, text: str) -> int:
        """Length of the longest suffix of `text` that is a proper prefix of a stop string."""
        longest = 0
        for s in self._stop:
            for k in range(min(len(s) - 1, len(text)), longest, -1):
                if text.endswith(s[:k]):
                    longest = k
                    break
        return longest

    def _emit(self, out: str) -> str:
        if out:
            self._parts.append(out)
            self._text = None
        return out
