"""The answer checker's gate over a typed-event stream (streaming/typed.py with each API's dialect),
driven by scripted upstream bytes: what goes out, in what order, and how a stream ends."""

from __future__ import annotations

import asyncio
import json

from ctxwarden.policies.base import Block, Exchange
from ctxwarden.proxy.streaming.gate import TextGate
from ctxwarden.proxy.streaming.typed import TypedRelay
from ctxwarden.proxy.wire.anthropic_gate import MessagesDialect
from ctxwarden.proxy.wire.responses_gate import ResponsesDialect


class Upstream:
    """What TypedRelay reads from an httpx response: bytes in chunks, then aclose()."""

    def __init__(self, chunks: list[bytes]) -> None:
        self.chunks = chunks
        self.closed = False

    async def aiter_bytes(self):
        for chunk in self.chunks:
            yield chunk

    async def aclose(self) -> None:
        self.closed = True


def responses_events(words: list[str], complete: bool = True) -> list[bytes]:
    where = {"item_id": "msg_1", "output_index": 0, "content_index": 0}
    events = [{"type": "response.created", "response": {"id": "resp_1", "model": "m", "status": "in_progress", "output": []}},
              {"type": "response.output_item.added", "output_index": 0, "item": {"id": "msg_1", "type": "message", "content": []}}]
    events += [{"type": "response.output_text.delta", **where, "delta": w} for w in words]
    if complete:
        events += [{"type": "response.output_text.done", **where, "text": "".join(words)},
                   {"type": "response.completed", "response": {"id": "resp_1", "model": "m", "status": "completed",
                                                               "usage": {"input_tokens": 3, "output_tokens": 7}}}]
    return [f"event: {e['type']}\ndata: {json.dumps({**e, 'sequence_number': n})}\n\n".encode() for n, e in enumerate(events)]


def run(chunks: list[bytes], dialect, validate, releasable=None) -> tuple[list[dict], TypedRelay, Upstream]:
    ex = Exchange("r1", "m", [], None, {})
    relay = TypedRelay(TextGate(ex, validate, releasable), dialect)
    upstream = Upstream(chunks)

    async def collect() -> bytes:
        return b"".join([out async for out in relay.relay(upstream)])

    body = asyncio.run(collect()).decode()
    datas = [json.loads(line[5:]) for line in body.splitlines() if line.startswith("data:")]
    return datas, relay, upstream


def judged(log: list[str], false_word: str | None = None):
    async def validate(ex, answer):
        log.append(answer.text)
        if false_word and false_word in answer.text:
            return Block(reason="test", notice="[ctxwarden] blocked.")
        return None
    return validate


def test_text_goes_out_sentence_by_sentence_and_a_false_one_never_does():
    log: list[str] = []
    words = ["One is fine.", " Two is", " false.", " Three", " never shows."]
    datas, relay, upstream = run(responses_events(words), ResponsesDialect(), judged(log, "false"))
    deltas = [d["delta"] for d in datas if d["type"] == "response.output_text.delta"]
    assert deltas == ["One is fine.", "\n\n[ctxwarden] blocked."]
    assert datas[-1]["type"] == "response.completed" and datas[-1]["response"]["output"][0]["content"][0]["text"] == \
        "One is fine.\n\n[ctxwarden] blocked."
    assert relay.outcome == "blocked" and upstream.closed
    assert all("Three" not in piece for piece in log)  # nothing after the block is even judged
    assert [d["sequence_number"] for d in datas] == sorted(d["sequence_number"] for d in datas)


def test_what_the_validators_clear_goes_out_before_its_sentence_ends():
    log: list[str] = []
    words = ["Hello", " there", " friend."]
    datas, _, _ = run(responses_events(words), ResponsesDialect(), judged(log), releasable=lambda ex, pending: len(pending))
    assert [d["delta"] for d in datas if d["type"] == "response.output_text.delta"] == words
    assert datas[-1]["type"] == "response.completed"


def test_a_stream_cut_before_its_end_gets_an_error_event_after_the_judged_text():
    datas, relay, _ = run(responses_events(["All good.", " And then"], complete=False), ResponsesDialect(), judged([]))
    assert [d.get("delta") for d in datas if d["type"] == "response.output_text.delta"] == ["All good.", " And then"]
    assert datas[-1]["type"] == "error" and datas[-1]["code"] == "upstream_stream_cut" and relay.outcome == "cut"


def test_events_split_across_chunks_and_keep_alives_pass_in_order():
    raw = b"".join(responses_events(["Fine.", " Done."]))
    chunks = [b": keep-alive\n\n"] + [raw[i:i + 7] for i in range(0, len(raw), 7)]
    datas, relay, _ = run(chunks, ResponsesDialect(), judged([]))
    assert relay.outcome == "ok" and datas[-1]["type"] == "response.completed"
    assert "".join(d["delta"] for d in datas if d["type"] == "response.output_text.delta") == "Fine. Done."
    assert relay.dialect.usage() == {"prompt_tokens": 3, "completion_tokens": 7}


def messages_events(words: list[str]) -> list[bytes]:
    events = [("message_start", {"type": "message_start", "message": {"id": "m1", "model": "claude", "content": [],
                                                                      "usage": {"input_tokens": 5, "output_tokens": 0}}}),
              ("content_block_start", {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}})]
    events += [("content_block_delta", {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": w}})
               for w in words]
    events += [("content_block_stop", {"type": "content_block_stop", "index": 0}),
               ("message_delta", {"type": "message_delta", "delta": {"stop_reason": "end_turn"}, "usage": {"output_tokens": 9}}),
               ("message_stop", {"type": "message_stop"})]
    return [f"event: {name}\ndata: {json.dumps(data)}\n\n".encode() for name, data in events]


def test_a_messages_stream_blocked_ends_as_a_refusal():
    datas, _, _ = run(messages_events(["Fine here.", " But false", " now.", " Later."]), MessagesDialect(), judged([], "false"))
    texts = [d["delta"]["text"] for d in datas if d["type"] == "content_block_delta"]
    assert texts == ["Fine here.", "\n\n[ctxwarden] blocked."]
    kinds = [d["type"] for d in datas]
    assert kinds[-3:] == ["content_block_stop", "message_delta", "message_stop"]
    assert datas[-2]["delta"]["stop_reason"] == "refusal" and datas[-2]["ctxwarden"]["author"] == "proxy"


def test_a_messages_stream_that_passes_is_relayed_whole_with_its_usage():
    datas, relay, _ = run(messages_events(["All", " true."]), MessagesDialect(), judged([]))
    assert relay.outcome == "ok" and [d["type"] for d in datas][-1] == "message_stop"
    assert relay.dialect.usage() == {"completion_tokens": 9, "prompt_tokens": 5}


def test_a_blocked_responses_stream_keeps_what_went_out_numbered_and_reports_usage():
    """The completed response holds the items the client saw before the message (a reasoning item),
    the closing events continue the numbers of the events that went out (held ones were dropped), and
    the usage the upstream had not reported yet is the proxy's estimate, marked as such."""
    reasoning = {"id": "rs_1", "type": "reasoning", "summary": [{"type": "summary_text", "text": "Think."}]}
    where = {"item_id": "msg_1", "output_index": 1, "content_index": 0}
    events = [{"type": "response.created", "response": {"id": "resp_1", "model": "m", "status": "in_progress", "output": []}},
              {"type": "response.output_item.added", "output_index": 0, "item": {**reasoning, "summary": []}},
              {"type": "response.output_item.done", "output_index": 0, "item": reasoning},
              {"type": "response.output_item.added", "output_index": 1, "item": {"id": "msg_1", "type": "message", "content": []}}]
    events += [{"type": "response.output_text.delta", **where, "delta": w}
               for w in ["One is fine.", " Two is", " false.", " Three", " never shows."]]
    chunks = [f"event: {e['type']}\ndata: {json.dumps({**e, 'sequence_number': n})}\n\n".encode() for n, e in enumerate(events)]
    datas, relay, _ = run(chunks, ResponsesDialect(), judged([], "false"))
    numbers = [d["sequence_number"] for d in datas]
    assert numbers == list(range(numbers[0], numbers[0] + len(numbers)))  # no gap where held events were dropped
    completed = datas[-1]["response"]
    assert [item["type"] for item in completed["output"]] == ["reasoning", "message"]
    assert completed["usage"]["ctxwarden"] == "estimated" and completed["usage"]["output_tokens"] > 0
    assert relay.dialect.usage()["completion_tokens"] == completed["usage"]["output_tokens"]


def test_a_blocked_messages_stream_reports_its_output_tokens():
    def event(kind: str, data: dict) -> bytes:
        return f"event: {kind}\ndata: {json.dumps({'type': kind, **data})}\n\n".encode()
    chunks = [event("message_start", {"message": {"id": "msg_1", "model": "m", "usage": {"input_tokens": 12, "output_tokens": 1}}}),
              event("content_block_start", {"index": 0, "content_block": {"type": "text", "text": ""}})]
    chunks += [event("content_block_delta", {"index": 0, "delta": {"type": "text_delta", "text": w}})
               for w in ["One is fine.", " Two is", " false.", " Three", " never."]]
    datas, relay, _ = run(chunks, MessagesDialect(), judged([], "false"))
    delta = next(d for d in datas if d["type"] == "message_delta")
    assert delta["delta"]["stop_reason"] == "refusal" and delta["usage"]["output_tokens"] > 0
    assert delta["ctxwarden"]["usage"] == "estimated"
    assert relay.dialect.usage() == {"prompt_tokens": 12, "completion_tokens": delta["usage"]["output_tokens"]}


def test_an_answer_that_never_ends_a_sentence_is_judged_in_bounded_pieces():
    """A one-line answer (JSON, code) has no sentence end: its text was held and scanned whole again
    at every event (quadratic, on the event loop). Pieces now end at a break within a claim's bound,
    so each check and each scan reads at most that much, and the text goes out as it is judged."""
    from ctxwarden.policies.poisoning.assess import MAX_CLAIM_CHARS

    words = [f" item{n}: {n * 7}" for n in range(2000)]  # ~24 KB, no sentence end
    log: list[str] = []
    scanned: list[int] = []

    def releasable(ex, pending):
        scanned.append(len(pending))
        return 0
    datas, relay, _ = run(responses_events(words), ResponsesDialect(), judged(log), releasable)
    assert relay.outcome == "ok" and len(log) > 40
    assert max(len(piece) for piece in log[:-1]) <= MAX_CLAIM_CHARS
    assert max(scanned) <= MAX_CLAIM_CHARS + max(len(w) for w in words)
    deltas = [n for n, d in enumerate(datas) if d["type"] == "response.output_text.delta"]
    assert deltas[len(deltas) // 2] < len(datas) - 10  # released along the way, not all at the end
