"""What a compaction event writes: summary blocks whose size is known before they are made.

A block covers a run of whole units (tool calls stay with their answers). Its message is a header
with the archived transcript's ref, an extractive (or LLM) summary of what the user and the
assistant said, and one line per tool result: the call and a digest of the result by content type
(digest.py: JSON keeps its structure and the items later messages name, logs collapse repeats and
keep errors, code keeps signatures), with the ref of the whole result. Every tool result and the
span's transcript are archived, so the recall tool can bring back anything a digest elided.

Budgets depend only on token counts (`Sizing`), so the planner (events.py) can size a block
without making it, and an event's position never depends on a summary's wording.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Callable, Sequence

from ..messages import Message, content_text, message_values, role_of
from ..text.calls import call_parts
from .digest import digest
from .layout import Body
from .scratchpad import archive_ref

HEADER_TOKENS = 40  # the block's header line: message framing, counts, the transcript's ref
LINE_TOKENS = 45  # per tool result line: the call (name and clipped arguments) and the result's ref
ARGS_CHARS = 80


@dataclass(frozen=True)
class Sizing:
    summary_ratio: float
    summary_max_tokens: int
    digest_ratio: float
    digest_max_tokens: int
    roll_up_max_tokens: int

    def text_budget(self, tokens: int) -> int:
        if tokens <= 0:
            return 0
        return min(tokens, max(40, min(self.summary_max_tokens, int(tokens * self.summary_ratio))))

    def digest_budget(self, tokens: int) -> int:
        return min(tokens, max(60, min(self.digest_max_tokens, int(tokens * self.digest_ratio))))

    def roll_up(self, sizes: Sequence[int]) -> int:
        return min(sum(sizes), self.roll_up_max_tokens)


@dataclass(frozen=True)
class UnitCosts:
    """Per unit: tokens of what people said (and the calls), and of each tool result."""

    said: list[int]
    results: list[list[int]]

    @classmethod
    def of(cls, body: Body) -> "UnitCosts":
        if body.columns is not None:  # made with the units, carried for those the last request sent
            return cls(body.columns.said, body.columns.results)  # type: ignore[arg-type]
        tokens = body.tokens
        tool = [role == "tool" for role in message_values("role", body.messages, role_of)]  # the request's own: a slice
        said, results = [], []
        for unit in body.units:
            said.append(sum([tokens[i] for i in unit if not tool[i]]))
            results.append([tokens[i] for i in unit if tool[i]])
        return cls(said, results)

    def estimate(self, sizing: Sizing, a: int, b: int) -> int:
        said = sum(self.said[a:b])
        results = [t for u in range(a, b) for t in self.results[u]]
        return HEADER_TOKENS + sizing.text_budget(said) + sum(LINE_TOKENS + sizing.digest_budget(t) for t in results)


@dataclass(frozen=True)
class ArchivedResult:
    ref: str
    text: str
    call: str  # name(arguments), clipped
    tool_call_id: str


def split_span(messages: Sequence[Message]) -> tuple[list[Message], list[ArchivedResult]]:
    """(what people said and the calls, the tool results with their refs), in order."""
    calls: dict[str, str] = {}
    said: list[Message] = []
    results: list[ArchivedResult] = []
    for msg in messages:
        if msg.get("role") == "tool":
            call_id = str(msg.get("tool_call_id") or "")
            text = content_text(msg)
            results.append(ArchivedResult(archive_ref(text, call_id), text, calls.get(call_id, msg.get("name") or "tool"), call_id))
            continue
        for call in msg.get("tool_calls") or []:
            name, args = call_parts(call)
            args = " ".join(str(args or "").split())
            args = args if len(args) <= ARGS_CHARS else args[:ARGS_CHARS] + "…"
            calls[str(call.get("id") or "")] = f"{'?' if name is None else name}({args})"
        said.append(msg)
    return said, results


def result_lines(results: Sequence[ArchivedResult], sizing: Sizing, mentions: str, count: Callable[[str], int],
                 archived: bool) -> str:
    """One line per tool result: the call, the ref of the whole result (when archived), and the
    result itself when it fits its budget, else its digest."""
    lines = []
    for r in results:
        tokens = count(r.text)
        budget = sizing.digest_budget(tokens)
        hint = f"ref={r.ref}" if archived else ""  # the line names the ref; the digest need not repeat it
        body = " ".join(r.text.split()) if tokens <= budget else digest(r.text, budget, mentions=mentions, count=count)
        lines.append(f"- {r.call} → {hint + ': ' if hint else ''}{body}")
    return "\n".join(lines)


def mentions_after(messages: Sequence[Message]) -> str:
    """What later messages say (up to the event): the ids and names a digest must keep."""
    parts = []
    for msg in messages:
        parts.append(content_text(msg))
        for call in msg.get("tool_calls") or []:
            parts.append(json.dumps(call.get("function") or call.get("custom") or {}, ensure_ascii=False))
    return "\n".join(parts)
