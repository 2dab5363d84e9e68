"""The voice chat graph's own nodes without models: `ChatChunk.read` of an LLM node's answer, the
sentence splitter, and the audio reply that joins the answer's text and its speech into OpenAI's
audio chat answer (a stream's `delta.audio` chunks, a unary answer's `message.audio`).

The nodes run from their blocks in examples/voice_chat's graph.pbtxt under CalculatorRunner, with
LLM answers built the way HttpLLMCalculator builds them (ResponseBuilder bodies, `sse_frame`s,
`data: [DONE]` in the last packet) and SpokenBatches of known samples in place of the speech node.

CalculatorRunner queues every packet before the node runs, so the Immediate handler of the reply
node takes them in timestamp order: the tests say "SPEECH arrives after CHUNK 10" by stamping it
15. Where the order of arrival itself is the point (text held until the first speech, the LLM's
`[DONE]` before the last sentence is spoken), `Steps` feeds the same node one packet at a time and
waits for the graph to settle in between, with the speech at its chunk's timestamp as in the
graph.
"""

from __future__ import annotations

import asyncio
import base64
import io
import json
import time
import wave
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
from google.protobuf import text_format

import calculators.voice.audio_reply  # registers the calculators
import calculators.voice.sentence_splitter  # noqa: F401
from calculators.http.replies import HttpReply, JsonReply, Reply, SseEvents, encode
from calculators.llm.answer import ChatChunk
from calculators.voice.packets import SentenceAudio, SentenceBatch, SpokenBatch
from graphruntime import Graph, Packet
from graphruntime.config import parse_graph_config
from graphruntime.testing import CalculatorRunner
from servables.llm.choices import Usage
from servables.openai.audio_chat import EXPIRES_AFTER, AudioReply
from servables.openai.bodies import SSE_DONE, Choice, ResponseBuilder, dumps, error_body, sse_frame
from servables.text_to_speech.servable import VOICE_HEADER
from tests.unit.servables.test_image_gen_protocol import assert_schema_valid

GRAPH = Path(__file__).resolve().parents[3] / "examples/voice_chat/models/voice-chat/graph.pbtxt"
Samples = npt.NDArray[np.float32]

STREAM_WAV = AudioReply("alloy", "wav", True, "audio_stream0123456789abcdef")
STREAM_PCM = AudioReply("alloy", "pcm", True, "audio_pcm00123456789abcdef")
UNARY_WAV = AudioReply("alloy", "wav", False, "audio_unary0123456789abcdef")


def example_node(name: str) -> str:
    """The body of node `name` in the example graph, for CalculatorRunner."""
    config = parse_graph_config(GRAPH.read_text(encoding="utf-8"))
    [node] = [node for node in config.proto.node if node.name == name]
    text: str = text_format.MessageToString(node)
    return text


SPLITTER = example_node("Sentences")
REPLY = example_node("Reply")
SPLITTER_ALONE = """
calculator: "SentenceSplitterCalculator"
input_stream: "CHUNK:answer"
output_stream: "SENTENCES:sentences"
"""


# ------------------------------------------------------------------------------ LLM answers


class Answer:
    """An LLM node's answer as HttpLLMCalculator sends it: one packet per engine step."""

    def __init__(self, model: str = "voice-chat", include_usage: bool = False) -> None:
        self.builder = ResponseBuilder("chat", model, include_usage=include_usage)

    def stream(self, pieces: list[str], done_alone: bool = False) -> list[bytes]:
        """A stream whose steps generate `pieces`; the last step carries finish_reason (and
        the usage chunk when asked for) and [DONE] (in a packet of its own if `done_alone`)."""
        packets = []
        for step, piece in enumerate(pieces):
            frames = sse_frame(self.builder.role_chunk(0)) if step == 0 else b""
            last = step == len(pieces) - 1 and not done_alone
            frames += sse_frame(self.builder.delta_chunk(0, piece, None, "stop" if last else None))
            if last:
                frames += self.end()
            packets.append(frames)
        if done_alone:
            packets.append(sse_frame(self.builder.delta_chunk(0, "", None, "stop")) + self.end())
        return packets

    def end(self) -> bytes:
        usage = b""
        if self.builder.include_usage:
            usage = sse_frame(self.builder.usage_chunk(Usage(9, 4)))
        return usage + SSE_DONE

    def unary(self, content: str) -> bytes:
        body = self.builder.unary([Choice(0, content, "stop")], Usage(9, 4))
        return dumps(body).encode()


def events(reply: Reply) -> list[Any]:
    """The SSE frames of an output packet: parsed JSON, or the string "[DONE]"."""
    payload = encode(reply)
    assert payload.endswith(b"\n\n"), payload
    found: list[Any] = []
    for frame in payload[:-2].split(b"\n\n"):
        assert frame.startswith(b"data: "), frame
        data = frame[len(b"data: ") :]
        found.append("[DONE]" if data == b"[DONE]" else json.loads(data))
    return found


def tone(seed: int, length: int) -> Samples:
    samples: Samples = np.random.default_rng(seed).uniform(-0.8, 0.8, length).astype(np.float32)
    return samples


def spoken(text: str, seed: int, length: int = 800, rate: int = 16_000) -> SentenceAudio:
    return SentenceAudio(text, tone(seed, length), rate)


def wav_samples(data: bytes) -> tuple[Samples, int]:
    """A 16-bit PCM WAV (OpenAI's `wav`, which Python's `wave` module reads): samples, rate."""
    with wave.open(io.BytesIO(data)) as reader:
        assert (reader.getsampwidth(), reader.getnchannels()) == (2, 1)
        pcm = np.frombuffer(reader.readframes(reader.getnframes()), "<i2")
        return (pcm / 32768).astype(np.float32), reader.getframerate()


def assert_pcm16_of(samples: Samples, expected: Samples) -> None:
    assert samples.shape == expected.shape
    assert np.max(np.abs(samples - expected)) <= 1 / 32767


def is_audio(event: Any) -> bool:
    choices = event.get("choices") or [] if isinstance(event, dict) else []
    return bool(choices) and "audio" in choices[0]["delta"]


def audio_of(event: dict[str, Any]) -> dict[str, Any]:
    audio: dict[str, Any] = event["choices"][0]["delta"]["audio"]
    return audio


# ---------------------------------------------------------------------------- ChatChunk.read


def test_read_sse_frames_takes_the_first_choices_text() -> None:
    answer = Answer()
    b = answer.builder
    two_choices = b.delta_chunk(0, "")
    two_choices["choices"] = [
        b.delta_chunk(1, "[one]")["choices"][0],
        b.delta_chunk(0, " world")["choices"][0],
    ]
    payload = (
        sse_frame(b.role_chunk(0))
        + sse_frame(b.delta_chunk(0, "Hello"))
        + sse_frame(b.delta_chunk(1, "[other choice]"))
        + sse_frame(two_choices)
        + sse_frame(b.delta_chunk(0, "!", None, "stop"))
        + SSE_DONE
    )
    chunk = ChatChunk.read(payload)
    assert chunk.done
    assert not chunk.failed
    assert chunk.body is None
    assert len(chunk.events) == 5
    assert chunk.events[1] == b.delta_chunk(0, "Hello")
    assert chunk.text() == "Hello world!"


def test_read_sse_frames_without_done() -> None:
    payload = Answer().stream(["Hi", " there"])[0]
    chunk = ChatChunk.read(payload)
    assert (chunk.done, chunk.failed, chunk.text()) == (False, False, "Hi")
    assert len(chunk.events) == 2  # the role chunk and the delta


def test_read_a_done_packet_alone() -> None:
    chunk = ChatChunk.read(SSE_DONE)
    assert (chunk.done, chunk.events, chunk.text()) == (True, [], "")


def test_read_an_error_frame() -> None:
    b = Answer().builder
    payload = sse_frame(b.delta_chunk(0, "Half a sen")) + sse_frame(error_body("boom")) + SSE_DONE
    chunk = ChatChunk.read(payload)
    assert chunk.failed
    assert chunk.done
    assert chunk.text() == "Half a sen"
    assert not ChatChunk.read(sse_frame(error_body("boom"))).done
    assert ChatChunk.read(sse_frame(error_body("boom"))).failed


def test_read_a_unary_body() -> None:
    payload = Answer().unary("Hello there. Bye.")
    chunk = ChatChunk.read(payload)
    assert chunk.done
    assert chunk.events == []
    assert chunk.body == json.loads(encode(payload))
    assert chunk.text() == "Hello there. Bye."
    assert not chunk.failed


def test_read_a_unary_body_without_content() -> None:
    body = json.loads(Answer().unary(""))
    body["choices"][0]["message"]["content"] = None
    assert ChatChunk.read(dumps(body).encode()).text() == ""


def test_read_an_http_reply() -> None:
    unary = Answer().unary("Spoken.")
    chunk = ChatChunk.read(HttpReply(unary, "application/json"))
    assert (chunk.done, chunk.body, chunk.text()) == (True, json.loads(unary), "Spoken.")
    frames = Answer().stream(["A", "B."])
    streamed = ChatChunk.read(HttpReply(frames[1], "text/event-stream"))
    assert (streamed.done, streamed.text()) == (True, "B.")


# ------------------------------------------------------------------------ the sentence splitter


def split(
    packets: list[bytes], reply: AudioReply | str | None = "absent"
) -> list[tuple[SentenceBatch, int]]:
    """The splitter's batches; `reply` "absent": the node has no AUDIO_REPLY input."""
    runner = CalculatorRunner(SPLITTER if reply != "absent" else SPLITTER_ALONE)
    if reply != "absent":
        runner.add("AUDIO_REPLY", Packet(reply, 0))
    for timestamp, packet in enumerate(packets):
        runner.add("CHUNK", Packet(packet, timestamp))
    runner.run()
    return [(p.payload, int(p.timestamp)) for p in runner.outputs("SENTENCES")]


def test_splitter_batches_each_chunk_at_its_timestamp() -> None:
    packets = Answer().stream(["Hello", " there. How", " are you? I am", " fine"])
    batches = split(packets, STREAM_WAV)
    assert [(b.sentences, b.final, t) for b, t in batches] == [
        ([], False, 0),
        (["Hello there."], False, 1),
        (["How are you?"], False, 2),
        (["I am fine"], True, 3),
    ]
    assert all(batch.reply is STREAM_WAV for batch, _ in batches)


def test_splitter_completes_a_sentence_only_once_what_follows_its_end_arrived() -> None:
    packets = Answer().stream(["It costs 3.", "5 euros.", " Pay now!", "\nOk"], done_alone=True)
    batches = split(packets, STREAM_WAV)
    assert [(b.sentences, b.final, t) for b, t in batches] == [
        ([], False, 0),  # "3." may go on: "3.5"
        ([], False, 1),  # "euros." with nothing after it yet
        (["It costs 3.5 euros."], False, 2),
        (["Pay now!"], False, 3),
        (["Ok"], True, 4),  # the [DONE] packet flushes the rest
    ]


def test_splitter_final_batch_may_be_empty() -> None:
    packets = Answer().stream(["One. Two.\n"], done_alone=True)
    batches = split(packets, STREAM_WAV)
    assert [(b.sentences, b.final, t) for b, t in batches] == [
        (["One.", "Two."], False, 0),
        ([], True, 1),
    ]


def test_splitter_a_unary_answer_is_one_final_batch() -> None:
    batches = split([Answer().unary("First one. Second one? Third")], UNARY_WAV)
    assert [(b.sentences, b.final, t) for b, t in batches] == [
        (["First one.", "Second one?", "Third"], True, 0)
    ]
    assert batches[0][0].reply is UNARY_WAV


def test_splitter_an_error_frame_ends_the_answer() -> None:
    b = Answer().builder
    packets = [
        sse_frame(b.role_chunk(0)) + sse_frame(b.delta_chunk(0, "Done. Half a")),
        sse_frame(error_body("engine failed")),
    ]
    batches = split(packets, STREAM_WAV)
    assert [(b.sentences, b.final, t) for b, t in batches] == [
        (["Done."], False, 0),
        ([], True, 1),  # what the answer left half said is not spoken
    ]


def test_splitter_a_text_answer_gets_no_batches() -> None:
    assert split(Answer().stream(["Hello there. ", "Bye."]), None) == []
    assert split([Answer().unary("Hello there. Bye.")], None) == []


def test_splitter_without_audio_reply_splits_every_answer() -> None:
    batches = split(Answer().stream(["Hello there. ", "Bye."]))
    assert [(b.sentences, b.final, b.reply, t) for b, t in batches] == [
        (["Hello there."], False, None, 0),
        (["Bye."], True, None, 1),
    ]


# ----------------------------------------------------------------------- the audio reply node


def reply_run(
    reply: AudioReply | None,
    chunks: list[tuple[int, Any]],
    speech: Sequence[tuple[int, SpokenBatch]] = (),
    reply_at: int = 0,
) -> list[tuple[Any, int]]:
    runner = CalculatorRunner(REPLY)
    runner.add("AUDIO_REPLY", Packet(reply, reply_at))
    for timestamp, payload in chunks:
        runner.add("CHUNK", Packet(payload, timestamp))
    for timestamp, batch in speech:
        runner.add("SPEECH", Packet(batch, timestamp))
    runner.run()
    return [(body(p.payload), int(p.timestamp)) for p in runner.outputs("HTTP_RESPONSE_PAYLOAD")]


def body(payload: Any) -> Any:
    """A packet of the reply node without the X-Voice header its first spoken packet has."""
    if isinstance(payload, JsonReply | SseEvents) and payload.headers:
        return replace(payload, headers={})
    return payload


def assert_increasing(outputs: list[tuple[Any, int]]) -> None:
    stamps = [timestamp for _, timestamp in outputs]
    assert stamps == sorted(set(stamps)), stamps


# (a) a text answer


def test_reply_a_text_answer_passes_through_byte_for_byte() -> None:
    packets = Answer().stream(["Hello there. ", "How are you?"])
    out = reply_run(None, list(enumerate(packets)))
    assert [payload for payload, _ in out] == packets
    assert all(out_payload is packet for (out_payload, _), packet in zip(out, packets, strict=True))
    assert_increasing(out)


def test_reply_a_text_answer_passes_through_when_the_reply_comes_late() -> None:
    packets = Answer().stream(["Hello there. ", "How", " are you?"])
    out = reply_run(None, list(enumerate(packets)), reply_at=5)
    assert [payload for payload, _ in out] == packets
    assert_increasing(out)


def test_reply_a_unary_text_answer_and_an_http_reply_pass_through() -> None:
    unary = Answer().unary("Hello.")
    assert [p for p, _ in reply_run(None, [(0, unary)])] == [unary]
    other = HttpReply(b"RIFF audio", "audio/wav")
    [(payload, _)] = reply_run(None, [(0, other)])
    assert payload is other


# (b) a streamed spoken answer


def split_ending(frames: list[Any]) -> tuple[list[Any], list[Any]]:
    """An LLM stream's events as a spoken reply sends them: the text at once (finish_reason
    cleared), and what ends the stream (an empty delta with the finish_reason, the usage
    chunk) kept for the end, before [DONE]."""
    now: list[Any] = []
    end: list[Any] = []
    for event in frames:
        if event == "[DONE]":
            continue
        choices = event.get("choices") or []
        if not choices and event.get("usage") is not None:
            end.append(event)
        elif any(c.get("finish_reason") for c in choices):
            if any(c.get("delta") for c in choices):
                now.append({**event, "choices": [{**c, "finish_reason": None} for c in choices]})
            end.append({**event, "choices": [{**c, "delta": {}} for c in choices]})
        else:
            now.append(event)
    return now, end


def frames_of(out: list[tuple[Any, int]]) -> list[Any]:
    return [event for payload, _ in out for event in events(payload)]


def test_reply_stream_text_and_audio_chunks_in_order() -> None:
    answer = Answer()
    packets = answer.stream(["Hello", " there. How are", " you? I'm", " fine."])
    s1, s2, s3 = spoken("Hello there.", 1), spoken("How are you?", 2), spoken("I'm fine.", 3)
    out = reply_run(
        STREAM_WAV,
        [(0, packets[0]), (10, packets[1]), (20, packets[2]), (30, packets[3])],
        [
            (5, SpokenBatch([], False)),  # chunk 0 completed no sentence
            (15, SpokenBatch([s1], False)),
            (25, SpokenBatch([s2], False)),
            (45, SpokenBatch([s3], True)),  # spoken after the LLM's [DONE] (at 30)
        ],
    )
    assert_increasing(out)
    sequence = frames_of(out)
    text_in, ending = split_ending([e for packet in packets for e in events(packet)])

    # The text frames go out as the LLM sent them, the audio between them as it is spoken;
    # the finish_reason and [DONE] last, once, after the final batch.
    assert [e for e in sequence if not is_audio(e) and e != "[DONE]"] == text_in + ending
    shape = ["audio" if is_audio(e) else "done" if e == "[DONE]" else "text" for e in sequence]
    assert shape == [
        "text",
        "text",
        "text",
        "audio",
        "text",
        "audio",
        "text",
        "audio",
        "text",
        "done",
    ]
    assert sequence[-2]["choices"][0]["finish_reason"] == "stop"
    assert sequence.count("[DONE]") == 1

    audio_events = [e for e in sequence if is_audio(e)]
    for event, sentence in zip(audio_events, [s1, s2, s3], strict=True):
        assert_schema_valid("CreateChatCompletionStreamResponse", event)
        assert {k: event[k] for k in ("id", "created", "model")} == {
            k: text_in[0][k] for k in ("id", "created", "model")
        }
        audio = audio_of(event)
        assert audio["id"] == STREAM_WAV.id
        assert audio["transcript"].strip() == sentence.text
        samples, rate = wav_samples(base64.b64decode(audio["data"]))
        assert rate == sentence.rate
        assert_pcm16_of(samples, sentence.samples)
    assert [("expires_at" in audio_of(e)) for e in audio_events] == [False, False, True]
    expires = audio_of(audio_events[-1])["expires_at"]
    assert abs(expires - (int(time.time()) + EXPIRES_AFTER)) <= 5


def test_reply_stream_done_waits_for_the_final_speech() -> None:
    packets = Answer().stream(["All done."])  # one packet: text and [DONE]
    out = reply_run(STREAM_WAV, [(0, packets[0])], [(5, SpokenBatch([], False))])
    sequence = frames_of(out)
    assert "[DONE]" not in sequence  # the final batch never came
    text_in, ending = split_ending(events(packets[0]))
    assert ending and sequence == text_in  # the finish_reason waits with [DONE]


def test_reply_stream_text_waits_for_the_first_speech() -> None:
    packets = Answer().stream(["Hello", " there.", " Bye."])
    assert reply_run(STREAM_WAV, list(enumerate(packets))) == []  # no speech: nothing out
    out = reply_run(STREAM_WAV, list(enumerate(packets)), [(7, SpokenBatch([], False))])
    text_in, _ = split_ending([e for p in packets for e in events(p)])
    assert frames_of(out) == text_in  # once the speech node has taken a batch: all of it


def test_reply_stream_several_sentences_in_the_final_batch() -> None:
    packets = Answer().stream(["One. Two. Three"])
    batch = SpokenBatch([spoken("One.", 1), spoken("Two.", 2), spoken("Three", 3)], True)
    out = reply_run(STREAM_WAV, [(0, packets[0])], [(1, batch)])
    sequence = frames_of(out)
    audio = [audio_of(e) for e in sequence if is_audio(e)]
    # The transcripts add up to the text: sentences after the first get their space back.
    assert [a["transcript"] for a in audio] == ["One.", " Two.", " Three"]
    assert ["expires_at" in a for a in audio] == [False, False, True]
    assert sequence[-1] == "[DONE]"
    assert_increasing(out)


def test_reply_stream_pcm_chunks_are_raw_int16() -> None:
    packets = Answer().stream(["Hi there. Bye."])
    s1 = spoken("Hi there.", 1, length=2400, rate=24_000)
    s2 = spoken("Bye.", 2, length=1200, rate=24_000)
    out = reply_run(STREAM_PCM, [(0, packets[0])], [(1, SpokenBatch([s1, s2], True))])
    audio = [audio_of(e) for e in frames_of(out) if is_audio(e)]
    assert [a["id"] for a in audio] == [STREAM_PCM.id] * 2
    for entry, sentence in zip(audio, [s1, s2], strict=True):
        pcm = np.frombuffer(base64.b64decode(entry["data"]), dtype="<i2")
        assert len(pcm) == len(sentence.samples)
        np.testing.assert_allclose(pcm / 32768.0, sentence.samples, atol=1 / 16384)


def test_reply_stream_pcm_is_24khz() -> None:
    packets = Answer().stream(["Hi."])
    sentence = spoken("Hi.", 1, length=1600, rate=16_000)
    out = reply_run(STREAM_PCM, [(0, packets[0])], [(1, SpokenBatch([sentence], True))])
    [entry] = [audio_of(e) for e in frames_of(out) if is_audio(e)]
    assert len(base64.b64decode(entry["data"])) == 2 * 2400  # 0.1 s at 24 kHz, 2 bytes each


def test_reply_stream_last_audio_chunk_has_expires_at_when_the_final_batch_is_empty() -> None:
    """The answer ends with a line break: its last sentence is complete before [DONE], so the
    splitter's final batch is empty (test_splitter_final_batch_may_be_empty) and the speech
    node's final SpokenBatch holds no sentence. The last audio chunk sent must still carry
    `expires_at`; today no audio chunk of the stream does."""
    packets = Answer().stream(["Hello there.\n"], done_alone=True)
    out = reply_run(
        STREAM_WAV,
        [(0, packets[0]), (10, packets[1])],
        [(5, SpokenBatch([spoken("Hello there.", 1)], False)), (15, SpokenBatch([], True))],
    )
    sequence = frames_of(out)
    assert sequence[-1] == "[DONE]"
    audio = [audio_of(e) for e in sequence if is_audio(e)]
    assert [a["transcript"] for a in audio if a["transcript"]] == ["Hello there."]
    assert "expires_at" in audio[-1], audio[-1].keys()


def test_reply_stream_usage_chunk_stays_the_last_chunk() -> None:
    """stream_options.include_usage: OpenAI sends the usage chunk (choices []) as the last
    chunk before [DONE]. The audio of the final sentences must come before it, not after."""
    answer = Answer(include_usage=True)
    packets = answer.stream(["Hello there. ", "Bye."])
    out = reply_run(
        STREAM_WAV,
        [(0, packets[0]), (10, packets[1])],
        [
            (5, SpokenBatch([spoken("Hello there.", 1)], False)),
            (15, SpokenBatch([spoken("Bye.", 2)], True)),
        ],
    )
    sequence = frames_of(out)
    assert sequence[-1] == "[DONE]"
    usage = [i for i, e in enumerate(sequence) if e != "[DONE]" and e.get("usage")]
    assert usage == [len(sequence) - 2], [
        "audio" if is_audio(e) else "usage" if e != "[DONE]" and e.get("usage") else "text/done"
        for e in sequence
    ]


def test_reply_stream_audio_chunks_carry_null_usage_when_usage_is_asked_for() -> None:
    """OpenAI: with include_usage, every chunk but the last has `usage: null` (the LLM node's
    text chunks do)."""
    packets = Answer(include_usage=True).stream(["Hi."])
    out = reply_run(STREAM_WAV, [(0, packets[0])], [(5, SpokenBatch([spoken("Hi.", 1)], True))])
    sequence = frames_of(out)
    assert all("usage" in e for e in sequence if e != "[DONE]" and not is_audio(e))
    for event in (e for e in sequence if is_audio(e)):
        assert "usage" in event and event["usage"] is None


# (c) a unary spoken answer


def test_reply_unary_answer_carries_message_audio() -> None:
    unary = Answer().unary("Hello there. How are you? Fine.")
    s1, s2, s3 = spoken("Hello there.", 1), spoken("How are you?", 2, 1200), spoken("Fine.", 3)
    out = reply_run(
        UNARY_WAV,
        [(0, unary)],
        [
            (1, SpokenBatch([s1, s2], False)),
            (2, SpokenBatch([], False)),
            (3, SpokenBatch([s3], True)),
        ],
    )
    [(payload, _)] = out
    body = json.loads(encode(payload))
    expected = json.loads(unary)
    audio = body["choices"][0]["message"].pop("audio")
    assert body == expected  # the rest of the LLM's answer unchanged, content included
    assert set(audio) == {"id", "data", "transcript", "expires_at"}
    assert audio["id"] == UNARY_WAV.id
    assert audio["transcript"] == expected["choices"][0]["message"]["content"]
    samples, rate = wav_samples(base64.b64decode(audio["data"]))
    assert rate == 16_000
    assert_pcm16_of(samples, np.concatenate([s1.samples, s2.samples, s3.samples]))
    assert abs(audio["expires_at"] - (int(time.time()) + EXPIRES_AFTER)) <= 5
    body["choices"][0]["message"]["audio"] = audio
    assert_schema_valid("CreateChatCompletionResponse", body)


def test_reply_unary_answer_waits_for_the_final_batch() -> None:
    unary = Answer().unary("Hello there. Bye.")
    batches = [(1, SpokenBatch([spoken("Hello there.", 1)], False))]
    assert reply_run(UNARY_WAV, [(0, unary)], batches) == []


def test_reply_unary_answer_and_its_speech_in_one_call() -> None:
    """The body and the final batch at the same timestamp reach one process() call."""
    unary = Answer().unary("Hi.")
    sentence = spoken("Hi.", 4)
    [(payload, timestamp)] = reply_run(
        UNARY_WAV, [(0, unary)], [(0, SpokenBatch([sentence], True))]
    )
    assert timestamp == 0
    audio = json.loads(encode(payload))["choices"][0]["message"]["audio"]
    samples, _ = wav_samples(base64.b64decode(audio["data"]))
    assert_pcm16_of(samples, sentence.samples)


# ------------------------------------------------------ arrival order, one packet at a time


class Steps:
    """The reply node of the example graph fed one packet at a time, settling in between."""

    def __init__(self) -> None:
        self.runner = CalculatorRunner(REPLY)
        self.graph = Graph(self.runner.graph)
        self.out: list[tuple[Any, int]] = []
        self.packets: list[Any] = []  # as they went out, headers included
        self.graph.observe_output_stream("output", lambda _, p: self._out(p))

    def _out(self, packet: Packet) -> None:
        self.packets.append(packet.payload)
        self.out.append((body(packet.payload), int(packet.timestamp)))

    async def start(self) -> None:
        await self.graph.start_run({})

    async def send(self, stream: str, payload: Any, timestamp: int) -> list[Any]:
        """Feed one packet; the SSE frames that went out because of it."""
        return frames_of(await self.send_raw(stream, payload, timestamp))

    async def send_raw(self, stream: str, payload: Any, timestamp: int) -> list[tuple[Any, int]]:
        """Feed one packet; the packets that went out because of it."""
        before = len(self.out)
        await self.graph.add_packet(stream, Packet(payload, timestamp))
        await asyncio.wait_for(self.graph.wait_until_idle(), 10)
        return self.out[before:]

    async def finish(self) -> None:
        self.graph.close_all_packet_sources()
        await asyncio.wait_for(self.graph.wait_until_done(), 10)


async def test_steps_text_is_held_until_the_first_speech_then_flows() -> None:
    packets = Answer().stream(["Hello", " there.", " Bye."])
    text = [split_ending(events(p))[0] for p in packets]
    closing = split_ending(events(packets[-1]))[1]
    hello = spoken("Hello there.", 1)
    steps = Steps()
    await steps.start()
    assert await steps.send("audio_reply", STREAM_WAV, 0) == []
    assert await steps.send("answer", packets[0], 0) == []  # held: the voice is not checked
    assert await steps.send("answer", packets[1], 1) == []
    # The speech node took chunk 0's batch (no sentence yet): the held text goes out.
    assert await steps.send("speech", SpokenBatch([], False), 0) == text[0] + text[1]
    # From now on, text as it comes; [DONE] held back.
    assert await steps.send("answer", packets[2], 2) == text[2]
    sent = await steps.send("speech", SpokenBatch([hello], False), 1)
    assert [audio_of(e)["transcript"] for e in sent] == ["Hello there."]
    sent = await steps.send("speech", SpokenBatch([spoken("Bye.", 2)], True), 2)
    assert [audio_of(e)["transcript"] for e in sent if is_audio(e)] == [" Bye."]
    assert sent[-1 - len(closing) : -1] == closing and sent[-1] == "[DONE]"
    await steps.finish()
    assert_increasing(steps.out)
    # The first packet out names who spoke (a response header); the others are plain frames.
    first, *rest = steps.packets
    assert isinstance(first, SseEvents) and first.headers == {VOICE_HEADER: "default"}
    assert all(not packet.headers for packet in rest)


async def test_steps_a_text_answer_is_not_held() -> None:
    packets = Answer().stream(["Hello", " there."])
    steps = Steps()
    await steps.start()
    await steps.send("audio_reply", None, 0)
    assert await steps.send("answer", packets[0], 0) == events(packets[0])
    assert await steps.send("answer", packets[1], 1) == events(packets[1])
    await steps.finish()


async def test_steps_unary_answer_goes_out_with_the_final_batch() -> None:
    unary = Answer().unary("Hi. Bye.")
    steps = Steps()
    await steps.start()
    assert await steps.send_raw("audio_reply", UNARY_WAV, 0) == []
    assert await steps.send_raw("answer", unary, 0) == []
    first = SpokenBatch([spoken("Hi.", 1)], False, "alloy")  # the voice is known from the first
    assert await steps.send_raw("speech", first, 0) == []
    sent = await steps.send_raw("speech", SpokenBatch([spoken("Bye.", 2)], True, "alloy"), 1)
    [(payload, _)] = sent
    assert json.loads(encode(payload))["choices"][0]["message"]["audio"]["transcript"] == "Hi. Bye."
    await steps.finish()
    assert len(steps.out) == 1
    [reply] = steps.packets
    assert isinstance(reply, JsonReply) and reply.headers == {VOICE_HEADER: "alloy"}


def test_reply_an_error_mid_stream_ends_it_as_chat_streams_end() -> None:
    """An LLM that fails after its first words: one error frame, then [DONE], after whatever
    was spoken; no audio chunk after the error."""
    b = Answer().builder
    first = sse_frame(b.role_chunk(0)) + sse_frame(b.delta_chunk(0, "Hello there. Half"))
    broken = sse_frame(error_body("engine failed")) + SSE_DONE
    out = reply_run(
        STREAM_WAV,
        [(0, first), (1, broken)],
        [(2, SpokenBatch([spoken("Hello there.", 1)], False)), (3, SpokenBatch([], True))],
    )
    sequence = frames_of(out)
    assert sequence[-1] == "[DONE]" and "error" in sequence[-2]
    assert [e for e in sequence if isinstance(e, dict) and "error" in e] == [sequence[-2]]
    assert [audio_of(e)["transcript"] for e in sequence if is_audio(e)] == ["Hello there."]


def test_reply_a_unary_answer_with_nothing_spoken_has_no_audio() -> None:
    """A tool call or an empty answer: `message.audio` is null, not an empty file."""
    body = Answer().unary("")
    [(payload, _)] = reply_run(UNARY_WAV, [(0, body)], [(1, SpokenBatch([], True))])
    assert json.loads(encode(payload))["choices"][0]["message"]["audio"] is None
