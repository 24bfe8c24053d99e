"""The compacted front of a session's forwarded history, made once an event and reused until the next.

Between two events an agent's requests differ only by what they append: the planner keeps the same
segments, each block's key is the same, and placement gives the same messages. Materializing the
segments again (a block key is a hash over its span's message keys), merging the notes into their
user turns and counting the result's tokens cost ~0.15 ms a request once a history is compacted,
most of what a late step of a 60-step loop cost more than an early one.

So the session keeps what it forwarded in front of the verbatim tail (`Front`), with what it
depends on: the planner's segments, the keys of every message the blocks read (up to the furthest
event boundary a digest looks ahead to, and the tail's first message, which placement may merge a
note into), the owner the blocks archive for and the model. A request that matches all of them takes the front
as it is, rebuilt over its own message objects (policies downstream know a message by identity).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Iterator, Sequence

from ..messages import Message, held_bytes, message_values
from .events import PlannedSegment
from .layout import Body
from .placement import Item, Note, place
from .scratchpad import REF_RE

Template = list  # of int (an index into the body: that message as it came) or Message (made by placement)


@dataclass(frozen=True)
class Front:
    segments: tuple[PlannedSegment, ...]
    scope: tuple
    hashes: tuple[str, ...]  # body.hashes[:covered]: what the blocks and the placement read
    template: Template  # the placed front: body indices and the messages placement made
    tail_from: int  # the first body message after the front (the tail less the message placement read)
    tokens: int  # the placed front's tokens
    noted: bool  # a summary names an archived ref
    non_text: int  # images, audio and files inside the summarized spans
    size: int

    def matches(self, segments: Sequence[PlannedSegment], scope: tuple, hashes: Sequence[str]) -> bool:
        covered = len(self.hashes)
        return (len(hashes) >= covered and tuple(segments) == self.segments and scope == self.scope
                and tuple(hashes[:covered]) == self.hashes)

    def messages(self, body: Sequence[Message]) -> list[Message]:
        """The front over this request's messages; what placement made is copied (a policy after this
        one may edit a message it is handed: the next request must find the front as it was)."""
        return [body[x] if type(x) is int else _copy(x) for x in self.template]


def front_of(segments: Sequence[PlannedSegment], scope: tuple, body: Body, frozen: list[Item], frontier: int,
             count: Callable[[list[Message]], int]) -> Front:
    """The front of a request whose segments were materialized into `frozen` (notes, gaps and kept
    messages), up to the planner's `frontier` unit; `count` gives the tokens of placed messages."""
    first = body.span(frontier, frontier)[0]  # the verbatim tail's first message
    head = body.messages[first:first + 1]  # placement merges a note into the message after it, at most:
    tail_from = first + len(head)  # the rest of the tail is never read
    placed = place([*frozen, *head])
    every = list(_all_segments(segments))
    covered = min(len(body.messages), max([tail_from, *(body.span(s.at, s.at)[0] for s in every)]))
    tokens = count(placed)  # first: counting gives a non-ASCII text its UTF-8 copy, which the size must see
    template, size = template_of(placed, body.messages, covered)
    blocks = [s for s in segments if s.kind == "block"]
    # ~80 bytes a message key (its string and its place in the tuple), ~600 a planned segment
    size += 90 * covered + 600 * len(every)
    return Front(tuple(segments), scope, tuple(body.hashes[:covered]), template, tail_from, tokens,
                 # A summary naming an archived ref (its header names the span's) needs no scan of the whole request
                 any(REF_RE.search(i.text) for i in frozen if isinstance(i, Note)),
                 _non_text_parts(body, blocks), size)


def template_of(placed: Sequence[Message], body: Sequence[Message], covered: int) -> tuple[Template, int]:
    """The placed front as a template, and its size in bytes (what placement made is held here)."""
    index = {id(m): i for i, m in enumerate(body[:covered])}
    template: Template = []
    size = 1_000 + 8 * len(placed)  # the front itself and its scope
    for m in placed:
        i = index.get(id(m))
        if i is not None and body[i] is m:
            template.append(i)
        else:
            template.append(m)
            size += held_bytes(m)
    return template, size


def _copy(message: Message) -> Message:
    content = message.get("content")
    return {**message, "content": list(content)} if isinstance(content, list) else dict(message)


def _all_segments(segments: Sequence[PlannedSegment]) -> Iterator[PlannedSegment]:
    """The segments and, inside roll-ups, the blocks they merged (each read its span up to its `at`)."""
    for seg in segments:
        yield seg
        yield from _all_segments(seg.children)


def _non_text_parts(body: Body, segments: list[PlannedSegment]) -> int:
    """Images, audio and files inside summarized messages (the summary marks each one)."""
    counts = message_values("history.non_text", body.messages, _non_text)  # the request's own: a slice
    return sum(sum(counts[start:end]) for start, end in (body.span(s.start, s.end) for s in segments))


def _non_text(msg: Message) -> int:
    content = msg.get("content")
    return sum(1 for p in content if isinstance(p, dict) and p.get("type") not in ("text", "refusal")) if isinstance(
        content, list) else 0
