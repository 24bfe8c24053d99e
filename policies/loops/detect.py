"""Pure loop detection over an agent's tool-call rounds (no I/O, no state).

A *round* is one assistant message of the current turn (everything after the last user
message): the set of tool calls it made, each keyed by tool name + normalized arguments, and
the results the tool messages gave back. Three kinds of loop are found at the end of the turn:

- ``repeat``: the same round `max_repeats` times in a row (period 1);
- ``cycle``: a sequence of 2..`max_period` rounds repeated `max_repeats` times (A→B→A→B→A→B);
- ``rounds``: more than `max_tool_rounds` tool-call rounds since the last user message — only
  when a user sets that limit; it is off by default (None), because a long run of distinct calls
  is an agent at work, not a loop.

A repetition only counts when it brought no new information: each repeated call's result is
the same as at its previous occurrence, or empty. So a retry after an error that then succeeds,
pagination (different arguments) and polling that makes progress are not loops.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from itertools import compress
from typing import Any, Sequence

from ..cache import cache_short, stable_hash
from ..messages import Message, content_text, is_role, last_user_index, message_values, remembered, role_of
from ..text.calls import call_parts

LABEL_MAX = 80  # characters of a call's label in messages and logs
HISTORY_MAX = 30  # rounds of transition history kept with a detected loop


@dataclass
class Round:
    """One assistant message of the turn: its calls (sorted by key) and where their results are."""

    keys: tuple[str, ...]  # "name(canonical args)" per call, sorted; a text-only round has one "text:<hash>"
    calls: tuple[tuple[str, str], ...]  # (name, raw arguments) per call, same order; ("", said) for text
    result_refs: tuple[Any, ...]  # raw tool-message content per call (None: no result), same order
    has_calls: bool

    @property
    def label(self) -> str:
        if not self.has_calls:
            text = self.calls[0][1]
            return f'said "{text[:40]}…"' if len(text) > 40 else f'said "{text}"'
        return " + ".join(call_label(name, args) for name, args in self.calls)

    def result(self, i: int) -> str:
        return _normalized_result(self.result_refs[i])


@dataclass
class Loop:
    kind: str  # "repeat" | "cycle" | "rounds"
    period: int  # rounds per repetition (0 for "rounds")
    repeats: int  # how many times the cycle ran back to back at the end of the turn
    cycle: list[str]  # labels of one repetition, in order
    cycle_keys: tuple[tuple[str, ...], ...]  # the rounds' keys of one repetition, canonically rotated
    tool_rounds: int  # tool-call rounds since the last user message
    history: list[str] = field(default_factory=list)  # the transition history that caused it (labels)

    @property
    def signature(self) -> str:
        """Identifies this loop across requests of a turn (stable while the loop keeps running)."""
        return stable_hash([self.kind, [list(k) for k in self.cycle_keys]])


# ----------------------------------------------------------------------------- normalization


def _collapse(text: str) -> str:
    return " ".join(text.split())


def _canonical(value: Any) -> Any:
    if isinstance(value, str):
        return _collapse(value)
    if isinstance(value, list):
        return [_canonical(v) for v in value]
    if isinstance(value, dict):
        return {str(k): _canonical(v) for k, v in value.items()}
    return value


@cache_short(maxsize=8192, max_chars=4096)  # at most 8,192 × ~8 KB (key and value): 64 MB
def call_key(name: str, arguments: str) -> str:
    """A call's identity: arguments parsed as JSON, keys sorted, whitespace in strings collapsed.

    Arguments that are not JSON are compared as text with whitespace collapsed. Long arguments
    (a file written whole) are read each time, not cached.
    """
    try:
        parsed = _canonical(json.loads(arguments)) if arguments.strip() else {}
        canon = json.dumps(parsed, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    except (ValueError, RecursionError):
        canon = _collapse(arguments)
    return f"{name}({canon})"


def call_label(name: str, arguments: str) -> str:
    """A short human-readable form of a call, e.g. search(q="paris", page=2); only built for reports."""
    try:
        parsed = _canonical(json.loads(arguments)) if arguments.strip() else {}
        if isinstance(parsed, dict):
            shown = ", ".join(f"{k}={json.dumps(v, ensure_ascii=False)}" for k, v in sorted(parsed.items()))
        else:
            shown = json.dumps(parsed, ensure_ascii=False)
    except (ValueError, RecursionError):
        shown = _collapse(arguments)
    label = f"{name}({shown})"
    return label if len(label) <= LABEL_MAX else label[: LABEL_MAX - 2] + "…)"


def _normalized_result(ref: Any) -> str:
    if ref is None:
        return ""
    text = ref if isinstance(ref, str) else content_text({"content": ref})
    return _collapse(text)


# ----------------------------------------------------------------------------- rounds


def turn_start(messages: Sequence[Message]) -> int:
    """Index of the first message of the current turn (after the last user message)."""
    return last_user_index(messages) + 1


def extract_rounds(messages: Sequence[Message], start: int | None = None) -> Rounds:
    """The assistant rounds of messages[start:] (default: the turn since the last user message)."""
    begin = turn_start(messages) if start is None else start
    roles = message_values("role", messages, role_of)
    return Rounds(messages, [i for i in range(begin, len(messages)) if roles[i] == "assistant"])


class Rounds(Sequence[Round]):
    """The rounds of the assistant messages at `said` (positions in `messages`, in order), each read
    when first asked for: find_cycle compares the last rounds' calls with those a period before first
    (`keys_of`: the assistant messages alone), so an agent at work (no repeats) has ~7 of its last 18
    rounds' calls read and no round read whole, however long its turn."""

    def __init__(self, messages: Sequence[Message], said: Sequence[int]) -> None:
        self.messages, self.said = messages, list(said)
        self._read: dict[int, Round] = {}

    def __len__(self) -> int:
        return len(self.said)

    def __getitem__(self, index):  # type: ignore[override]
        if isinstance(index, slice):
            return [self[i] for i in range(len(self.said))[index]]
        i = range(len(self.said))[index]  # negative indices, and IndexError past the end
        found = self._read.get(i)
        if found is None:
            end = self.said[i + 1] if i + 1 < len(self.said) else len(self.messages)
            found = self._read[i] = _round(self.messages, self.said[i], end)
        return found

    def keys_of(self, i: int) -> tuple[str, ...]:
        """Round i's keys alone, from its assistant message (no results matched): what find_cycle
        compares first, and most rounds of an agent at work are read no further."""
        return remembered("loops.keys", self.messages[self.said[i]], _keys_of)

    def has_calls_of(self, i: int) -> bool:
        return remembered("loops.said", self.messages[self.said[i]], _said)[0] != "text"


def _round(messages: Sequence[Message], at: int, end: int) -> Round:
    """The round of the assistant message messages[at], answered by the messages up to `end` (the
    next assistant message). What the message did is read once per message (`remembered`: carried
    from the session's last request)."""
    kind, entries = remembered("loops.said", messages[at], _said)
    if kind == "calls":
        results = _results_of([e[2] for e in entries], messages[at + 1:end])
        ordered = sorted(zip(entries, results), key=lambda e: e[0][0])
        return Round(tuple(e[0] for e, _ in ordered), tuple(e[1] for e, _ in ordered), tuple(r for _, r in ordered), True)
    if kind == "legacy":
        nxt = messages[at + 1] if at + 1 < len(messages) else {}
        result = nxt.get("content") if nxt.get("role") == "function" else None
        return Round((entries[0][0],), (entries[0][1],), (result,), True)
    key, text = entries
    return Round((key,), (("", text),), (None,), False)


def _keys_of(m: Message) -> tuple[str, ...]:
    """An assistant message's round keys, sorted as `_round` sorts its calls (`remembered`)."""
    kind, entries = remembered("loops.said", m, _said)
    if kind == "calls":
        return tuple(sorted(e[0] for e in entries))
    return (entries[0][0],) if kind == "legacy" else (entries[0],)


def _said(m: Message) -> tuple:
    """An assistant message's calls as rounds read them ("calls": (key, (name, raw arguments), id)
    each; "legacy": the single function_call), or its text ("text": key and text). Reads nothing
    but the message (`remembered`)."""
    calls = m.get("tool_calls") or []
    if calls:
        entries = []
        for c in calls:
            name, args = call_parts(c)
            raw = args if isinstance(args, str) else ("" if args is None else json.dumps(args))
            name = "?" if name is None else str(name)
            entries.append((call_key(name, raw), (name, raw), c.get("id")))
        return ("calls", tuple(entries))
    if isinstance(m.get("function_call"), dict):  # the legacy single-call format
        fn = m["function_call"]
        name, raw = str(fn.get("name", "?")), str(fn.get("arguments") or "")
        return ("legacy", ((call_key(name, raw), (name, raw)),))
    text = _collapse(content_text(m))
    return ("text", (f"text:{stable_hash(text)}", text[:LABEL_MAX]))  # the label shows 40 characters


def _results_of(ids: Sequence[Any], between: Sequence[Message]) -> list[Any]:
    """The content answering each call (by its id) of an assistant message, from the messages
    `between` it and the next assistant message (None: none yet).

    Only those answer it, so an id that a client reuses every round ("call_0", or "") never lends
    one round's result to another: such a round would look unchanged while the tool is making
    progress. Within the round a result is matched by id; where the ids do not tell the calls
    apart, by position.
    """
    answers = [m for m in between if m.get("role") == "tool"]
    if len(set(ids)) == len(ids):
        by_id = {}
        for a in answers:
            by_id.setdefault(a.get("tool_call_id"), a.get("content"))
        if any(i in by_id for i in ids):
            return [by_id.get(i) for i in ids]
    return [answers[i].get("content") if i < len(answers) else None for i in range(len(ids))]


# ----------------------------------------------------------------------------- detection


def _no_new_information(cur: Round, prev: Round) -> bool:
    """True when every call of `cur` returned what it returned at `prev`, or nothing."""
    for i in range(len(cur.keys)):
        now = cur.result(i)
        if now and now != prev.result(i):
            return False
    return True


def _repeats_back(rounds: Sequence[Round], period: int) -> int:
    """How many whole repetitions of the last `period` rounds run back to back at the end."""
    n = len(rounds)
    i = n - period - 1
    while i >= 0 and rounds[i].keys == rounds[i + period].keys:
        i -= 1
    return (n - (i + 1)) // period


def _canonical_rotation(keys: list[tuple[str, ...]]) -> tuple[tuple[str, ...], ...]:
    """The smallest rotation, so A→B and B→A (the same cycle seen one round later) match."""
    return min(tuple(keys[i:] + keys[:i]) for i in range(len(keys)))


def find_cycle(rounds: Rounds, max_repeats: int, max_period: int) -> Loop | None:
    """A cycle of period 1..max_period repeated max_repeats times at the end, without new information."""
    n = len(rounds)
    for period in range(1, max_period + 1):
        window = period * max_repeats
        if window > n:
            break
        start = n - window
        if not any(rounds.has_calls_of(i) for i in range(n - period, n)):
            continue  # repeated chatter without calls is not an agent loop
        # From the newest back: an agent at work differs from its rounds a period ago at once, which
        # their keys tell (Rounds: the assistant messages alone, their results not matched)
        if any(rounds.keys_of(i) != rounds.keys_of(i - period) for i in range(n - 1, start + period - 1, -1)):
            continue
        if not all(_no_new_information(rounds[i], rounds[i - period]) for i in range(n - 1, start + period - 1, -1)):
            continue
        one = list(rounds[n - period:])
        repeats = _repeats_back(rounds, period)
        history_from = max(0, n - min(max(window, repeats * period) + 2, HISTORY_MAX))
        return Loop(
            kind="repeat" if period == 1 else "cycle",
            period=period,
            repeats=repeats,
            cycle=[r.label for r in one],
            cycle_keys=_canonical_rotation([r.keys for r in one]),
            tool_rounds=sum(r.has_calls for r in rounds),
            history=[r.label for r in rounds[history_from:]],
        )
    return None


def _calls(message: Message) -> bool:
    """A round of tool calls (or the legacy single call), when the message is the model's."""
    return bool(message.get("tool_calls") or isinstance(message.get("function_call"), dict))


def arguments_chars(messages: Sequence[Message], rounds: int) -> int:
    """Characters of the tool-call arguments in the turn's last `rounds` assistant messages: what
    find_loop parses again when they are too long for call_key's memo."""
    total = 0
    for m in reversed(messages[turn_start(messages):]):
        if m.get("role") != "assistant":
            continue
        rounds -= 1
        for call in m.get("tool_calls") or []:
            args = call_parts(call)[1]
            total += len(args) if isinstance(args, str) else 0
        if rounds <= 0:
            break
    return total


def find_loop(
    messages: Sequence[Message],
    *,
    max_repeats: int = 3,
    max_period: int = 6,
    max_tool_rounds: int | None = None,
) -> Loop | None:
    """The loop the current turn ends in, if any: a repeat or cycle without new information, then
    (only when `max_tool_rounds` is set) a turn longer than that many tool-call rounds.

    Only the last max_period × max_repeats rounds are read (where a cycle is looked for): an
    agent's turn gains a round per request, and reading all of them made every request cost in
    proportion to the turn. Once a loop is found, the whole turn is read for its report (how many
    repeats, the history, the tool rounds)."""
    begin = turn_start(messages)
    # Which messages are the model's, and which of those call tools: one list each a request, carried
    # for the messages the session's last request sent (messages.message_values), read at C speed.
    said_flags = list(map(is_role("assistant"), message_values("role", messages, role_of)[begin:]))
    said = list(compress(range(begin, len(messages)), said_flags))
    if not said:
        return None
    keep = max(max_period * max_repeats, 10)  # what find_cycle reads; a "rounds" report shows 10
    rounds = Rounds(messages, said[-keep:])
    found = find_cycle(rounds, max_repeats, max_period)
    if found and len(said) > keep:
        found = find_cycle(extract_rounds(messages, begin), max_repeats, max_period)
    if found:
        return found
    tool_rounds = sum(compress(message_values("loops.calls", messages, _calls)[begin:], said_flags))
    if max_tool_rounds is not None and tool_rounds > max_tool_rounds:
        return Loop(
            kind="rounds",
            period=0,
            repeats=0,
            cycle=[],
            cycle_keys=(),
            tool_rounds=tool_rounds,
            history=[r.label for r in rounds[-10:]],
        )
    return None
