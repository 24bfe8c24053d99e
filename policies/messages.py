"""Reading chat messages: their text, tool-call pairing, and where the system prompt ends."""

from __future__ import annotations

import contextlib
import functools
import operator
import sys
from contextvars import ContextVar
from typing import Any, Callable, Iterator, Sequence

Message = dict[str, Any]
Tool = dict[str, Any]
WHOLE_TOOL_LIST = 16  # tool definitions from which a list is counted whole (text/tokens.py: count_tools)


def content_text(message: Message) -> str:
    """The text of a message: string content, or the text parts of list-form content. Non-text parts
    (images, audio, files) are represented by a short marker: nothing is silently lost from summaries and checks."""
    content = message.get("content")
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    parts: list[str] = []
    for part in content:
        if not isinstance(part, dict):
            continue
        kind = part.get("type")
        if kind in ("text", "refusal"):
            parts.append(str(part.get(kind, "")))
        else:
            parts.append((_MARKERS.get(kind) if isinstance(kind, str) else None) or f"[{kind}]")
    return "\n".join(parts)


_MARKERS = {"image_url": "[image]", "input_image": "[image]", "input_audio": "[audio]", "audio": "[audio]", "file": "[file]"}


def tool_call_ids(message: Message) -> list[str]:
    return [c.get("id", "") for c in message.get("tool_calls") or []]


def group_exchanges(messages: Sequence[Message], start: int = 0) -> list[list[int]]:
    """Split message indices into units that must be kept or dropped whole.

    An assistant message with tool_calls and the tool messages answering it form one unit (so do
    a legacy `function_call` and the `function` message after it); every other message is a unit
    of its own. Trimming and summarizing by units keeps every tool-call pair intact
    (docs/ARCHITECTURE.md, invariant 1). From `start` (where a unit starts): the units from there."""
    roles = carried_values("role", messages, role_of) or [m.get("role") for m in messages]
    units: list[list[int]] = []
    n = len(messages)
    i = start
    while i < n:
        if roles[i] != "assistant":
            units.append([i])
            i += 1
            continue
        msg = messages[i]
        if msg.get("tool_calls"):
            ids = set(tool_call_ids(msg))
            j = i + 1
            while j < n and roles[j] == "tool" and messages[j].get("tool_call_id") in ids:
                j += 1
            units.append(list(range(i, j)))
            i = j
        elif msg.get("function_call") and i + 1 < n and roles[i + 1] == "function":
            units.append([i, i + 1])
            i += 2
        else:
            units.append([i])
            i += 1
    return units


def system_prefix_length(messages: Sequence[Message]) -> int:
    """How many leading messages are the system prompt (system/developer) — never summarized."""
    n = 0
    while n < len(messages) and messages[n].get("role") in ("system", "developer"):
        n += 1
    return n


def last_user_index(messages: Sequence[Message]) -> int:
    roles = carried_values("role", messages, role_of)  # the request's own list: its roles, one list a request
    if roles is not None:
        return len(roles) - 1 - roles[::-1].index("user") if "user" in roles else -1
    for i in range(len(messages) - 1, -1, -1):
        if messages[i].get("role") == "user":
            return i
    return -1


def role_of(message: Message) -> Any:
    return message.get("role")


def is_role(role: str) -> Callable[[Any], bool]:  # for `map` at C speed ("user".__eq__(None) is NotImplemented: true)
    return functools.partial(operator.eq, role)


def with_note(message: Message, note: str) -> Message:
    """A copy of a user message with `note` after its own words, which stay byte for byte: string
    content gains "\\n\\n" + note, list content a text part. Every provider's template accepts it
    (a late system message is rejected by many, and a second user message in a row breaks the
    alternation some require)."""
    content = message.get("content")
    if isinstance(content, list):
        return {**message, "content": [*content, {"type": "text", "text": note}]}
    text = content if isinstance(content, str) else ""  # (none: the note alone)
    return {**message, "content": f"{text}\n\n{note}" if text else note}


def append_note(messages: list[Message], note: str) -> list[Message]:
    """`messages` with a note from the proxy to the model at the very end, where the provider's
    cached prefix is untouched: inside the last message when it is the user's, else as a user
    message of its own after the last tool results (OpenAI, Anthropic and Gemini all accept a user
    turn there)."""
    if messages and messages[-1].get("role") == "user":
        return [*messages[:-1], with_note(messages[-1], note)]
    return [*messages, {"role": "user", "content": note}]


_PLAIN_FIELDS = frozenset({"role", "content", "name", "tool_call_id", "tool_calls", "refusal"})
_CALL_FIELDS = frozenset({"id", "type", "function"})

# What is known of each message object of the request being handled (`request_memo`): its
# fingerprint and the analyses made of it (`remembered`), by id. Every policy reads the whole history
# on every request (the budget, the planner, the archive, refs), and even a cache lookup per message
# and analysis (~2 µs, and ~3 µs for the fingerprint) added up to milliseconds at 120 messages.
# Holding the message keeps its id from being reused while the entry lives. Worker threads started by
# asyncio.to_thread see the same dict (they run in a copy of the request's context).
Facts = dict[Any, Any]


class Memo(dict):
    """`request_memo`'s table (id → (message, facts)), with what it knows of the request as a whole:
    its incoming messages (`incoming`, a copy of the list), how many of them lead the session's last
    request unchanged (`carried`), that request (`previous`), and the per-message value lists made
    of the incoming messages (`values`, by kind: `message_values`)."""

    __slots__ = ("incoming", "carried", "previous", "values")

    def __init__(self, incoming: Sequence[Message], carried: int, previous: "Carried | None") -> None:
        super().__init__()
        self.incoming = list(incoming)
        self.carried = carried
        self.previous = previous
        self.values: dict[Any, list] = {}


_MEMO: ContextVar[Memo | None] = ContextVar("ctxwarden_message_facts", default=None)


@contextlib.contextmanager
def request_memo(messages: Sequence[Message] = (), previous: "Carried | None" = None) -> Iterator[Memo]:
    """Analyses are remembered per message object until the block ends (one request's policies).
    `previous` (what `Carried` kept of the session's last request): each of `messages` equal to the
    message at its place there starts with that message's facts, so an agent's history, sent again
    whole at every step, is compared (memcmp speed) instead of analysed again. The leading run of
    equal messages is found by one list comparison (C speed: no Python work per message)."""
    carried = 0
    if previous is not None:
        old = previous.messages
        n = min(len(messages), len(old))
        carried = n if list(messages[:n]) == old[:n] else next(i for i in range(n) if messages[i] != old[i])
    memo = Memo(messages, carried, previous)
    if previous is not None:
        head = memo.incoming[:carried]
        memo.update(zip(map(id, head), zip(head, previous.facts)))  # no Python work per message
        rest = slice(carried + 1, n)
        memo.update((id(m), (m, facts))  # and each equal message after the first that differs
                    for m, o, facts in zip(messages[rest], old[rest], previous.facts[rest]) if m == o)
    fresh = sum(_chars(m) for m in messages[carried:] if id(m) not in memo)
    token, counted = _MEMO.set(memo), _FRESH.set((fresh, len(messages)))
    try:
        yield memo
    finally:
        _MEMO.reset(token)
        _FRESH.reset(counted)


def message_values(kind: Any, messages: Sequence[Message], compute: Callable[[Message], Any]) -> list:
    """[compute(m) for m in messages], which the caller must not change: `carried_values` for the
    request's incoming messages, else per message through `remembered`."""
    known = carried_values(kind, messages, compute)
    return known if known is not None else [remembered(kind, m, compute) for m in messages]


def carried_values(kind: Any, messages: Sequence[Message], compute: Callable[[Message], Any]) -> list | None:
    """Within `request_memo`, for a list that ends with the request's own incoming messages (the same
    objects in the same order: the whole request, or its tail after the summaries a policy put in
    front): [compute(m) for m in messages], which the caller must not change. The incoming messages'
    values are made once per request and kind, and those of the messages carried from the session's
    last request come from its list as one slice, so the cost is what is new in the request, not a
    lookup per message. None for any other list, or outside a request. `compute` must read nothing
    but the message (and what `kind` names)."""
    memo = _MEMO.get()
    if memo is None:
        return None
    incoming = memo.incoming
    whole = len(messages) == len(incoming) and list(messages) == incoming  # the same objects: a pointer each
    tail = len(incoming) if whole else _common_tail(messages, incoming)
    if not tail:
        return None
    known = memo.values.get(kind)
    if known is None:
        previous = memo.previous
        base = previous.values.get(kind, [])[:memo.carried] if previous is not None else []
        known = memo.values[kind] = [*base, *(remembered(kind, m, compute) for m in incoming[len(base):])]
    if whole:
        return known
    return [*(remembered(kind, m, compute) for m in messages[:len(messages) - tail]), *known[len(known) - tail:]]


def _common_tail(messages: Sequence[Message], incoming: list[Message]) -> int:
    """How many of the last messages of both lists are equal (compared from the end as whole slices,
    at C speed: one binary search, the shared messages being the same objects)."""
    low, high = 0, min(len(messages), len(incoming))
    if list(messages[len(messages) - high:]) == incoming[len(incoming) - high:]:  # a slice of them (the body
        return high  # after the system prompt, read by the planner and the archive): one comparison
    while low < high:  # equal tails of t messages imply equal tails of fewer
        t = (low + high + 1) // 2
        if list(messages[len(messages) - t:]) == incoming[len(incoming) - t:]:
            low = t
        else:
            high = t - 1
    return low


# (characters of the messages not carried from the session's last request, messages): see light_work
_FRESH: ContextVar[tuple[int, int] | None] = ContextVar("ctxwarden_fresh_chars", default=None)
LIGHT_CHARS = 32_000  # as base.HEAVY_BODY_BYTES: past it, counting what is new is work for a worker thread
LIGHT_MESSAGES = 2_000  # past it, even a lookup a message adds up to milliseconds


def light_work() -> bool:
    """Within `request_memo`: whole-request work (counting, keying, planning) costs what is new in the
    request, as its analyses of the rest are carried, so it stays on the event loop however big the
    body: a thread hop costs more than that work (~0.1 ms, and milliseconds on a busy host)."""
    fresh = _FRESH.get()
    return fresh is not None and fresh[0] <= LIGHT_CHARS and fresh[1] <= LIGHT_MESSAGES


def heavy(ex: Any) -> bool:
    """`run_cpu`'s judgement for work on the whole history of the exchange `ex`: a big body whose new
    part is big too (or whose history is not carried)."""
    return ex.heavy and not light_work()


def _chars(message: Message) -> int:
    content = message.get("content")
    text = len(content) if isinstance(content, str) else LIGHT_CHARS + 1 if content else 0  # parts: not guessed
    return text + sum(len(str((c.get("function") or {}).get("arguments") or "")) if isinstance(c, dict) else 0
                      for c in message.get("tool_calls") or [])


def held_bytes(value: Any) -> int:
    """Bytes of every string a message (or its facts) holds, as CPython stores it (a text with one
    character outside the BMP takes 4 bytes a character), keys too: what keeping it alive holds. Counted in characters,
    carried messages weighed ~2x their estimate (fuzzed non-ASCII text, the facts' text copies)."""
    total, stack = 0, [value]
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            total += sys.getsizeof(item)
        elif isinstance(item, dict):
            total += 50 * len(item)
            for key, inner in item.items():
                stack.extend((key, inner))
        elif isinstance(item, (list, tuple, frozenset)):
            total += 8 * len(item)
            stack.extend(item)
        else:
            total += 24
    return total


class Carried:
    """A request's messages with their facts and value lists, for the session's next request
    (`request_memo`). The messages the request carried from the one before are taken from it as
    they were (a slice: equal messages, the same facts), so making this costs what is new."""

    __slots__ = ("messages", "facts", "values", "bytes", "_sizes")

    def __init__(self, messages: Sequence[Message], memo: dict[int, tuple[Message, Facts]]) -> None:
        kept: list[Message] = []
        facts: list[Facts] = []
        sizes: list[int] = []
        whole = isinstance(memo, Memo) and len(messages) == len(memo.incoming) and list(messages) == memo.incoming
        start = memo.carried if whole and memo.previous is not None else 0  # type: ignore[union-attr]
        if start:
            previous = memo.previous  # type: ignore[union-attr]
            kept, facts, sizes = previous.messages[:start], previous.facts[:start], previous._sizes[:start]
        # Only messages with a fingerprint: `==` tells 1 from True no better than a hash does.
        for message in messages[start:]:
            hit = memo.get(id(message))
            if hit is None or hit[0] is not message:
                hit = (message, {})
            if _FINGERPRINT not in hit[1]:  # no policy asked for it (the system prompt, a message only counted)
                hit[1][_FINGERPRINT] = _fingerprint(message)
            if hit[1][_FINGERPRINT] is None:
                break
            kept.append(message)
            facts.append(hit[1])
            # About: the texts (held alive by this) and what its facts hold (a copy of its text), ~600 bytes
            sizes.append(600 + held_bytes(message) + held_bytes(hit[1]))
        self.messages: list[Message] = kept
        self.facts: list[Facts] = facts
        self._sizes = sizes
        self.values: dict[Any, list] = dict(memo.values) if whole else {}  # type: ignore[union-attr]
        self.bytes = sum(sizes) + 16 * len(messages) * len(self.values)


def remembered(kind: Any, message: Message, compute: Callable[[Message], Any]) -> Any:
    """`compute(message)`, made once per message object (and carried to the session's next request
    for an equal message) within `request_memo`; `kind` names the analysis. `compute` must read
    nothing but the message (and what `kind` names)."""
    memo = _MEMO.get()
    if memo is None:
        return compute(message)
    hit = memo.get(id(message))
    if hit is None or hit[0] is not message:
        hit = memo[id(message)] = (message, {})
    facts = hit[1]
    if kind in facts:
        return facts[kind]
    value = facts[kind] = compute(message)
    return value


def message_tokens(counter: Any, message: Message, model: str) -> int:
    """`counter.count_message(message, model)`, once per message object and carried to the session's
    next request (`remembered`): the counter's own cache costs a key and a locked lookup per message."""
    return remembered(("tokens", id(counter), model), message, lambda m: counter.count_message(m, model))


def message_token_list(counter: Any, messages: Sequence[Message], model: str) -> list[int]:
    """`message_tokens` of each of `messages` (`message_values`: a slice of the session's last
    request's list for the messages it carried)."""
    return message_values(("tokens", id(counter), model), messages, lambda m: counter.count_message(m, model))


def tools_tokens(counter: Any, tools: Sequence[Any] | None, model: str, *more: Sequence[Any]) -> int:
    """`counter.count_tools` of `tools` and of each list of `more` (the proxy's own tools; counts add up,
    and the request's own list alone is keyed once: text.tokens.tool_list_key): a long list whole (kept
    across requests), a short one per tool, once per request (`remembered`: budget, planner, archive)."""
    one = ("tool_tokens", id(counter), model)
    return sum(int(counter.count_tools(part, model)) if len(part or ()) >= WHOLE_TOOL_LIST
               else sum(remembered(one, t, lambda t: counter.count_tools([t], model)) for t in part or ())
               for part in (tools, *more))


_FINGERPRINT = "fingerprint"


def fingerprint(message: Message) -> tuple[int, int] | None:
    """`_fingerprint`, remembered per message object within `request_memo`."""
    return remembered(_FINGERPRINT, message, _fingerprint)


def _fingerprint(message: Message) -> tuple[int, int] | None:
    """An in-process identity of a whole message (every field), for caches of what is derived from
    it, without hashing its JSON or its bytes: Python's own 64-bit hash of its fields, and its
    text's length. A str caches its hash, so the analyses of one request that fingerprint the same
    message pay for hashing its text once. Never stable across processes: only for in-memory keys.
    None for shapes it does not cover (list content, other fields, non-str values): hash those in full."""
    content = message.get("content")
    if not (content is None or isinstance(content, str)) or not message.keys() <= _PLAIN_FIELDS:
        return None
    fields = (message.get("role"), message.get("name"), message.get("tool_call_id"), message.get("refusal"))
    if not all(f is None or type(f) is str for f in fields):  # 1 and True hash alike yet read differently
        return None
    calls = message.get("tool_calls")
    key: tuple = (tuple(message.keys()), content, *fields)
    if calls is not None:
        shape = _calls_shape(calls)
        if shape is None:
            return None
        key += shape
    return hash(key), len(content or "")


def _calls_shape(calls: Any) -> tuple | None:
    """Every field of the documented tool-call shape, as str values; None for any other shape."""
    if not isinstance(calls, list):
        return None
    out: list = []
    for call in calls:
        if not isinstance(call, dict) or not call.keys() <= _CALL_FIELDS:
            return None
        fn = call.get("function")
        if not (isinstance(fn, dict) and fn.keys() <= {"name", "arguments"}):
            return None
        values = (call.get("id"), call.get("type"), fn.get("name"), fn.get("arguments"))
        if not all(v is None or type(v) is str for v in values):
            return None
        out.append((tuple(call.keys()), tuple(fn.keys()), *values))
    return (len(out), *out)
