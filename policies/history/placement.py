"""Where a compaction's summaries go in the forwarded messages: always on the user's side.

Providers' chat templates accept a system message only first (vLLM and llama.cpp templates,
Anthropic and Gemini through litellm), and the strict ones (Mistral, Gemma, older Llama) also want
user and assistant turns to alternate, counting an assistant's tool calls with their results as
the assistant's side. A summary is context the proxy hands the model, so it travels as user text,
marked as the proxy's (blocks.py), and joins the user turn next to it:

- after a user message (what happened after the user spoke: the steps of an agent run), it is
  appended to that message, whose own words stay first and byte for byte;
- before a user message (what was said before it), it opens that message;
- between two assistant turns, or first, it is a user turn of its own.

So a summary never makes two user turns in a row, and never stands between an assistant's tool
call and its results (blocks and kept spans hold whole exchanges). Two user messages of the
client's that a summary sits between become one turn (their words in order, the summary between
them): nothing else can keep the alternation without writing words for the assistant.

A trimmed span (too old, `max_age_s`) leaves nothing behind, unless removing it would put two
assistant turns together or open the conversation with one: then a one-line note stands in for it.

The placement depends only on the items (content), so the same history forwards the same bytes
on every turn between events (providers' prompt caches), on any replica.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable, Sequence, Union

from ..messages import Message

JOIN = "\n\n"


@dataclass(frozen=True)
class Note:
    """Text from the proxy for the user's side (a summary)."""

    text: str


@dataclass(frozen=True)
class Gap:
    """A trimmed span: forwarded as `text` only where dropping it would break the alternation."""

    text: str


Item = Union[Message, Note, Gap]


def side(message: Message) -> str:
    """"user" or "assistant": tool results belong to the assistant's turn that called them."""
    return "user" if message.get("role") == "user" else "assistant"


def _side(item: Item) -> str | None:
    if isinstance(item, Note):
        return "user"
    if isinstance(item, Gap):
        return None
    return side(item)


def place(items: Sequence[Item]) -> list[Message]:
    """The forwarded body (after the system prompt) for `items`: messages, summaries and gaps in
    conversation order. Messages that no summary touches are the same objects."""
    # Past the last summary or gap and the message after it (a user message there takes the summary
    # in), nothing is merged or filled: the verbatim tail, which grows between events, is not walked.
    last = next((i for i in range(len(items) - 1, -1, -1) if isinstance(items[i], (Note, Gap))), -1)
    return [*_merge(_fill_gaps(items[:last + 2])), *items[last + 2:]]  # type: ignore[list-item]


def _fill_gaps(items: Sequence[Item]) -> list[Message | Note]:
    after: list[str | None] = [None] * (len(items) + 1)  # the side of the next item that is no gap
    for i in range(len(items) - 1, -1, -1):
        after[i] = _side(items[i]) or after[i + 1]
    out: list[Message | Note] = []
    for i, item in enumerate(items):
        if not isinstance(item, Gap):
            out.append(item)
        elif (_side(out[-1]) if out else None) != "user" and after[i + 1] == "assistant":
            out.append(Note(item.text))
    return out


def _merge(items: list[Message | Note]) -> list[Message]:
    out: list[Message] = []
    i, n = 0, len(items)
    while i < n:
        item = items[i]
        starts = isinstance(item, Note) or (side(item) == "user" and i + 1 < n and isinstance(items[i + 1], Note))
        if not starts:
            out.append(item)  # type: ignore[arg-type]
            i += 1
            continue
        group = [item]
        j = i + 1
        while j < n and (isinstance(items[j], Note) or (isinstance(group[-1], Note) and side(items[j]) == "user")):  # type: ignore[arg-type]
            group.append(items[j])
            j += 1
        out.append(_user_turn(group))
        i = j
    return out


def _user_turn(group: Sequence[Message | Note]) -> Message:
    """One user message from user messages and notes, in order. String contents stay a string
    (joined by a blank line, as a user would write them); list contents keep their parts, and
    each note is a text part of its own."""
    users = [g for g in group if not isinstance(g, Note)]
    base: Message = dict(users[0]) if users else {"role": "user"}
    pieces = [g.text if isinstance(g, Note) else g.get("content") for g in group]
    if all(p is None or isinstance(p, str) for p in pieces):
        base["content"] = JOIN.join(p for p in pieces if p)
    else:
        base["content"] = list(_parts(pieces))
    return base


def _parts(pieces: Iterable[object]) -> Iterable[dict]:
    for piece in pieces:
        if isinstance(piece, list):
            yield from piece
        elif isinstance(piece, str) and piece:
            yield {"type": "text", "text": piece}


def turns(messages: Sequence[Message]) -> list[str]:
    """The conversation's turns after the system prompt, for alternation checks: "system" for a
    system/developer message, "user", or "assistant" (an assistant message, the tool results that
    answer it, and an assistant message that follows tool results are one assistant turn)."""
    out: list[str] = []
    previous_role = None
    for message in messages:
        role = message.get("role")
        if role in ("system", "developer"):
            out.append("system")
        elif role == "user":
            out.append("user")
        elif role in ("tool", "function") or (role == "assistant" and previous_role in ("tool", "function")):
            if not out or out[-1] != "assistant":
                out.append("assistant")
        else:
            out.append("assistant")
        previous_role = role
    return out
