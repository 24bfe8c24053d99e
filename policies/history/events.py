"""Compaction events, derived from the conversation itself.

Providers' prompt caches pay off only while request N+1 starts with the bytes of request N, so
history is rewritten only at *compaction events*, and each event buys many steps of headroom.
Which events happened is not remembered: it is replayed from the content. The plan walks the
conversation's unit boundaries (every point where a request could have ended: after a user
message or a tool result) as if each were a request, and at each one asks whether an event
would fire there:

- `budget`: the history would pass the budget's `compress` mark → compact down to its `target`
  (hysteresis: compaction goes at least to the start of the verbatim tail, and further if needed);
- `distraction`: the history is over the distraction limits and the part an event could compact
  (everything before the verbatim tail but the current user message) is worth an event
  (`event_min_exchanges` or `event_min_tokens`);
- `age`: a unit that could be compacted is older than `max_age_s` (clients that send timestamps).

An event compacts [frontier, new frontier) into segments that are frozen from then on: later
events only append after them (a roll-up merges old blocks only when there are more than
`max_summaries`). Sizes come from estimates that depend only on token counts, never on summary
text, so an LLM summarizer's wording cannot move an event. The same conversation therefore gives
the same plan on any replica, after a restart, or on a replay.

Pure functions over counts; no I/O.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from itertools import accumulate
from typing import Callable, Literal, Sequence

SegmentKind = Literal["keep", "block", "trim"]
MIN_BLOCK_MESSAGES = 3
ROLL_UP_FLOOR = 64  # tokens a roll-up keeps, however tight the budget  # a run this short stays verbatim unless its summary is smaller in tokens


@dataclass(frozen=True)
class Units:
    """What the plan needs to know about each unit (a message, or a tool call with its answers)."""

    starts: Sequence[int]  # index of each unit's first message
    messages: Sequence[int]  # messages per unit
    tokens: Sequence[int]  # tokens per unit
    is_user: Sequence[bool]  # the unit is a user message
    ends_request: Sequence[bool]  # a request may end after this unit (user message or tool results)
    times: Sequence[float | None]  # latest timestamp in the unit, when the client sends them


@dataclass(frozen=True)
class Marks:
    max_messages: int  # distraction limits (RF-006)
    max_tokens: int
    keep_recent: int  # messages at the end that stay verbatim
    event_min_exchanges: int  # a distraction event compacts at least this many units ...
    event_min_tokens: int  # ... or this many tokens
    max_summaries: int
    budget_high: int | None = None  # history tokens that trigger a budget event (None: no budget)
    budget_low: int | None = None  # history tokens a budget event brings the history to
    max_age_s: float | None = None
    budget_tail: int | None = None  # tokens of verbatim tail a budget event keeps (the newest unit always)
    budget_blocks: int | None = None  # tokens of summary blocks a budget event leaves (more: they are rolled up to it)


@dataclass
class PlannedSegment:
    kind: SegmentKind
    start: int  # unit index
    end: int  # unit index, exclusive
    at: int  # the unit boundary of the event that made it (what its digests may look ahead to)
    tokens: int  # estimated forwarded tokens
    messages: int  # forwarded messages
    children: tuple["PlannedSegment", ...] = ()  # a roll-up: the blocks it merged


@dataclass(frozen=True)
class Event:
    at: int  # unit boundary: the request that fired it ended after unit at-1
    start: int  # frontier before
    end: int  # frontier after
    reason: str  # budget | distraction | age
    merged: bool = False


@dataclass
class Plan:
    frontier: int = 0  # units before it are compacted (frozen segments), units from it are verbatim
    segments: list[PlannedSegment] = field(default_factory=list)
    events: list[Event] = field(default_factory=list)

    def size(self) -> tuple[int, int]:
        return sum(s.messages for s in self.segments), sum(s.tokens for s in self.segments)


Estimate = Callable[[int, int], int]  # estimated tokens of one summary block over units [a, b)
Merge = Callable[[Sequence[int]], int]  # estimated tokens of a roll-up of blocks of these sizes


@dataclass(frozen=True)
class Replay:
    """Where a replay stood after boundary `k` (one a longer conversation replays the same way: not
    its last unit), with what it read of units [0, k) (`read`), to resume from on the next request."""

    k: int
    read: tuple
    frontier: int
    segments: tuple[PlannedSegment, ...]
    events: tuple[Event, ...]
    last_user: int

    def bytes(self) -> int:
        """About what it holds: `read` is 8 columns of k values (~230 bytes a unit, measured; counted
        at 60 before, the policy's replays held ~6x their bound under bench/fuzz.py), and its segments
        and events (~200 bytes each)."""
        return 600 + 250 * self.k + 200 * (len(self.segments) + len(self.events))


def plan(units: Units, marks: Marks, estimate: Estimate, merge: Merge) -> Plan:
    """Replay the conversation's boundaries and return the events and the frozen layout."""
    return resumed_plan(units, marks, estimate, merge)[0]


def resumed_plan(units: Units, marks: Marks, estimate: Estimate, merge: Merge, resume: Replay | None = None,
                 read: Callable[[int], tuple] | None = None) -> tuple[Plan, Replay | None]:
    """`plan`, and where the replay stood before the last unit. `read(k)`: all the replay reads of units [0, k) (counts,
    costs, marks); when it is `resume.read`, the replay goes on from there: an agent's request
    repeats the last one's units and adds one, and replaying them all was most of the planner's work."""
    result = Plan()
    prefix_tokens = _prefix(units.tokens)
    prefix_messages = _prefix(units.messages)
    last_user = -1
    n = len(units.starts)
    first = 1
    if resume is not None and read is not None and resume.k < n and read(resume.k) == resume.read:
        result = Plan(resume.frontier, list(resume.segments), list(resume.events))
        last_user, first = resume.last_user, resume.k + 1
    replay = None
    for k in range(first, n + 1):
        if k == n and read is not None and n > 1:  # before the last unit: where a longer conversation goes on
            replay = Replay(n - 1, read(n - 1), result.frontier, tuple(result.segments), tuple(result.events), last_user)
        if units.is_user[k - 1]:
            last_user = k - 1
        if not units.ends_request[k - 1] and k < n:
            continue
        frozen_m, frozen_t = result.size()
        raw_t = prefix_tokens[k] - prefix_tokens[result.frontier]
        raw_m = prefix_messages[k] - prefix_messages[result.frontier]
        protect = protected_from(units, k, marks.keep_recent)
        reason = _trigger(units, marks, result.frontier, protect, last_user, k,
                          frozen_m + raw_m, frozen_t + raw_t, prefix_tokens)
        if reason:
            _fire(result, units, marks, estimate, merge, k, protect, last_user, reason, prefix_tokens)
    return result, replay


def _prefix(values: Sequence[int]) -> list[int]:
    return [0, *accumulate(values)]  # C speed: a request's replay reads every unit's sums


def protected_from(units: Units, k: int, keep_recent: int) -> int:
    """The first unit of the verbatim tail of a request ending after unit k-1: whole units holding
    the last `keep_recent` messages."""
    end = units.starts[k - 1] + units.messages[k - 1]
    first = end - keep_recent
    for u in range(k - 1, -1, -1):
        if units.starts[u] < first:
            return u + 1 if units.starts[u] + units.messages[u] <= first else u
    return 0


def _trigger(units: Units, marks: Marks, frontier: int, protect: int, pinned: int, k: int,
             messages: int, tokens: int, prefix_tokens: list[int]) -> str | None:
    if marks.budget_high is not None and tokens > marks.budget_high and frontier < k - 1:
        return "budget"
    if protect <= frontier:
        return None
    if marks.max_age_s is not None and _any_stale(units, frontier, protect, pinned, k, marks.max_age_s):
        return "age"
    if messages <= marks.max_messages and tokens <= marks.max_tokens:
        return None
    compactable = protect - frontier - (1 if frontier <= pinned < protect else 0)
    compactable_tokens = prefix_tokens[protect] - prefix_tokens[frontier]
    if compactable >= marks.event_min_exchanges or compactable_tokens >= marks.event_min_tokens:
        return "distraction"
    return None


def _moment(units: Units, k: int) -> float | None:
    known = [t for t in units.times[:k] if t is not None]
    return max(known) if known else None


def _stale(units: Units, u: int, now: float | None, max_age_s: float) -> bool:
    t = units.times[u]
    return now is not None and t is not None and t < now - max_age_s


def _any_stale(units: Units, frontier: int, protect: int, pinned: int, k: int, max_age_s: float) -> bool:
    now = _moment(units, k)
    return any(_stale(units, u, now, max_age_s) for u in range(frontier, protect) if u != pinned)


def _fire(result: Plan, units: Units, marks: Marks, estimate: Estimate, merge: Merge, k: int, protect: int,
          pinned: int, reason: str, prefix_tokens: list[int]) -> None:
    start = result.frontier
    end = max(start, protect)
    new = _compact(units, marks, estimate, start, end, pinned, k)
    if reason == "budget":
        # Hysteresis: go on into the verbatim tail (never the newest unit) until under the low mark,
        # and until the tail holds at most `budget_tail` tokens: the steps until the next event are
        # (compress mark - what this one leaves) / (what a step adds), and in a tight window a
        # verbatim tail of a few big tool results is most of what it leaves.
        def over(end: int, new: list[PlannedSegment]) -> bool:
            tail = prefix_tokens[k] - prefix_tokens[end]
            return (_tokens_after(result, new, prefix_tokens, end, k) > (marks.budget_low or 0)
                    or (marks.budget_tail is not None and tail > marks.budget_tail))

        while end < k - 1 and over(end, new):
            end += 1
            new = _compact(units, marks, estimate, start, end, pinned, k)
    if not new and reason != "budget":
        return
    result.segments.extend(new)
    merged = False
    after = _tokens_after(result, [], prefix_tokens, end, k)
    over_low = reason == "budget" and after > (marks.budget_low or 0)
    # Every budget event adds a block, and in a long agent loop the blocks would grow until they are most
    # of what an event leaves, so events come ever closer (the steps until the next one are the compress
    # mark less what an event leaves, over what a step adds). An event already rewrites the forwarded
    # history from the first block on, so rolling the blocks up to a fixed size then costs the cache nothing.
    blocks = [s for s in result.segments if s.kind == "block"]
    over_blocks = reason == "budget" and marks.budget_blocks is not None and sum(s.tokens for s in blocks) > marks.budget_blocks
    if len(blocks) > marks.max_summaries or over_low or over_blocks:
        def cap(rolled: int) -> int | None:
            # Under the budget, the roll-up gets what is left of the low mark once the rest is counted.
            caps = [(marks.budget_low or 0) - (after - rolled)] if over_low else []
            if over_blocks:
                caps.append(marks.budget_blocks or 0)
            return min(caps) if caps else None
        merged = _roll_up(result, merge, k, pinned, cap)
    if end == start and not merged:
        return  # nothing left to compact: not an event (the budget's final check has the last word)
    result.frontier = end
    result.events.append(Event(k, start, end, reason, merged))


def _tokens_after(result: Plan, new: list[PlannedSegment], prefix_tokens: list[int], end: int, k: int) -> int:
    return result.size()[1] + sum(s.tokens for s in new) + prefix_tokens[k] - prefix_tokens[end]


def _compact(units: Units, marks: Marks, estimate: Estimate, start: int, end: int, pinned: int, k: int) -> list[PlannedSegment]:
    """Segments for units [start, end): the pinned user message stays, stale units go, every other
    run becomes one summary block (or stays verbatim when its summary would not be smaller)."""
    now = _moment(units, k) if marks.max_age_s is not None else None
    out: list[PlannedSegment] = []
    run_start: int | None = None

    def close(at: int) -> None:
        nonlocal run_start
        if run_start is not None:
            out.append(_run(units, estimate, run_start, at, k))
            run_start = None

    for u in range(start, end):
        if u == pinned:
            close(u)
            out.append(PlannedSegment("keep", u, u + 1, k, units.tokens[u], units.messages[u]))
        elif marks.max_age_s is not None and _stale(units, u, now, marks.max_age_s):
            close(u)
            out.append(PlannedSegment("trim", u, u + 1, k, 0, 0))
        elif run_start is None:
            run_start = u
    close(end)
    return out


def _run(units: Units, estimate: Estimate, a: int, b: int, k: int) -> PlannedSegment:
    raw_tokens = sum(units.tokens[a:b])
    raw_messages = sum(units.messages[a:b])
    summary = estimate(a, b)
    if summary >= raw_tokens and raw_messages <= MIN_BLOCK_MESSAGES:
        return PlannedSegment("keep", a, b, k, raw_tokens, raw_messages)  # a summary would cost more than it saves
    return PlannedSegment("block", a, b, k, summary, 1)


def _roll_up(result: Plan, merge: Merge, k: int, pinned: int, cap: Callable[[int], int | None]) -> bool:
    """Merge a run of the frozen layout (blocks, kept units, trimmed units) into one block: the bound on
    blocks, and the budget's last resort. The current user message stays verbatim and in place, so the
    run is the layout before it or, when that has nothing to merge (an agent loop: one task message,
    then only calls and results), the layout after it. Rare by design: it rewrites the cached prefix,
    which only an event may do. `cap(tokens of the run)` bounds the merged block."""
    segs = result.segments
    at = next((i for i, s in enumerate(segs) if s.start == pinned and s.kind == "keep"), len(segs))
    for first, end in ((0, at), (at + 1, len(segs))):
        children = tuple(s for s in segs[first:end] if s.kind != "trim")
        if len(children) < 2 or not any(c.kind == "block" for c in children):
            continue
        tokens = merge([c.tokens for c in children])
        limit = cap(sum(c.tokens for c in children))
        if limit is not None:
            tokens = max(ROLL_UP_FLOOR, min(tokens, limit))
        segs[first:end] = [PlannedSegment("block", segs[first].start, segs[end - 1].end, k, tokens, 1, children)]
        return True
    return False
