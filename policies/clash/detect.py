"""Clash detection: which statements in a conversation contradict each other.

The local detector compares statements slot by slot (text/statements extracts them):
two statements clash when they give one slot incompatible values; they are duplicates when they
give it the same value in different messages. It is offline, deterministic and takes well under
a millisecond once statements are extracted. The LLM judge (judge.py) produces
the same `Clash` records, so resolution does not care which detector found a clash.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Iterable, Sequence

from ..cache import stable_hash
from ..deadline import NO_DEADLINE, Deadline
from ..messages import Message, content_text
from ..text.calls import call_parts
from ..text.statements.compare import compatible, conflicts, duplicates, family, takes_bare_numbers, value_type
from ..text.statements.match import Matcher
from ..text.statements.model import Statement
from .frames import frame_pairs
from .relate import diet_excludes, polarity_flip, replaced

CONTRADICTORY_PREFERENCES = "CONTRADICTORY_PREFERENCES"
CONFLICTING_FACTS = "CONFLICTING_FACTS"
OUTDATED_INFORMATION = "OUTDATED_INFORMATION"
DUPLICATE_FACTS = "DUPLICATE_FACTS"
CLASH_TYPES = (CONTRADICTORY_PREFERENCES, CONFLICTING_FACTS, OUTDATED_INFORMATION, DUPLICATE_FACTS)


def text_keys(texts: dict[tuple[int, int], str]) -> dict[tuple[int, int], str]:
    """A key per user text: its hash, and which occurrence of that exact text it is. Stable as the
    conversation grows, and distinct when the user repeats a message word for word."""
    seen: dict[str, int] = {}
    keys: dict[tuple[int, int], str] = {}
    for where, text in sorted(texts.items()):
        h = stable_hash(text)
        keys[where] = f"{h}#{seen.get(h, 0)}"
        seen[h] = seen.get(h, 0) + 1
    return keys


@dataclass(frozen=True)
class Located:
    """A statement and where it is: message index, text part (-1: string content), text key."""

    message: int
    part: int
    text_hash: str
    st: Statement

    @property
    def key(self) -> str:
        """Stable across turns and re-sends: built from the text, not from the message's index."""
        return stable_hash([self.text_hash, self.st.start, self.st.vstart, self.st.value, self.st.negated])

    @property
    def order(self) -> tuple[int, int, int, int]:
        return (self.message, self.part, self.st.start, self.st.vstart)


@dataclass(frozen=True)
class Clash:
    type: str
    older: Located
    newer: Located  # in a later message than `older`: values within one message never clash
    detector: str = "local"

    @property
    def key(self) -> str:
        return stable_hash([self.older.key, self.newer.key])

    @property
    def slot(self) -> str:
        return self.newer.st.slot

    @property
    def label(self) -> str:
        return self.newer.st.label

    @property
    def correction(self) -> bool:
        return getattr(self.newer.st, "correction", False)

    @property
    def duplicate(self) -> bool:
        return self.type == DUPLICATE_FACTS


def clash_type(newer: Statement) -> str:
    if newer.kind == "preference":
        return CONTRADICTORY_PREFERENCES
    if newer.kind == "fact":
        return CONFLICTING_FACTS
    return OUTDATED_INFORMATION


# ----------------------------------------------------------------------------- the local detector


def inherit_qualifiers(found: list[Located]) -> list[Located]:
    """Complete statements that lean on the conversation (`found` is in conversation order):

    - a price level with no domain ("we want to go luxury") takes the domain of the nearest
      price statement that has one (earlier first), else "general";
    - a changed date or time with no event ("make it 7:30pm instead") takes the event of the
      latest earlier date or time, and is dropped when there is none;
    - a count with no qualifier ("make it 3 nights") takes the qualifier of the latest earlier
      count of the same thing ("2 nights in Rome").
    """
    out: list[Located] = []
    for i, loc in enumerate(found):
        slot = loc.st.slot
        if slot.startswith("tier.") and _domain_of(slot) == "":
            loc = _with_domain(loc, found, i)
        elif slot in ("date.?", "time.?"):
            family = slot[:5]
            earlier = [l for l in reversed(out) if l.st.slot.startswith(family) and l.st.slot != slot]
            if not earlier:
                continue
            loc = replace(loc, st=replace(loc.st, slot=earlier[0].st.slot, label=earlier[0].st.label))
        elif slot.startswith("count.") and ">" not in slot:
            earlier = [l for l in reversed(out) if l.st.slot.split(">", 1)[0] == slot and ">" in l.st.slot]
            if earlier:
                loc = replace(loc, st=replace(loc.st, slot=earlier[0].st.slot))
        out.append(loc)
    return out


def _with_domain(loc: Located, found: list[Located], i: int) -> Located:
    tiers = [l for l in found if l.st.slot.startswith("tier.") and _domain_of(l.st.slot)]
    earlier = [l for l in tiers if l.order < loc.order]
    later = [l for l in tiers if l.order > loc.order]
    ref = earlier[-1] if earlier else later[0] if later else None
    domain = _domain_of(ref.st.slot) if ref else "general"
    label = f"{domain} preference" if domain != "general" else "price level"
    return replace(loc, st=replace(loc.st, slot=loc.st.slot.replace("tier.", f"tier.{domain}", 1), label=label))


def _domain_of(slot: str) -> str:
    return slot.split(".", 1)[1].split("@", 1)[0].split(">", 1)[0]


class AgentTurns:
    """What the agent said and did between two user messages (assistant text, tool calls, tool
    results), read lazily: most conversations have no conflict to check against it."""

    def __init__(self, messages: Sequence[Message] = ()) -> None:
        self.messages = messages
        self._text: dict[int, str] = {}

    def text(self, i: int) -> str:
        """Message `i`'s text and, for an assistant, its calls (names and arguments), lower-cased;
        "" for a user or system message."""
        if i not in self._text:
            m = self.messages[i]
            said: list[str] = []
            if m.get("role") in ("assistant", "tool", "function"):
                said.append(content_text(m))
                for call in m.get("tool_calls") or []:
                    name, args = call_parts(call)
                    said.append(f"{name or ''} {'' if args is None else args}")
            self._text[i] = "\n".join(said).lower()
        return self._text[i]

    def acted_on(self, older: Located, newer: Located) -> bool:
        """Whether the agent used the older value before the newer one was said: then the newer is
        the next run of a step ("Search flights on Friday" … "Nothing on Friday" … "How about
        Saturday?"), not a contradiction. Only a request the agent runs has runs; a stated preference
        ("I'm looking for budget hotels") holds until changed, and a correction is a correction."""
        literal = older.st.display.lower().strip()
        if not older.st.request or newer.st.correction or len(literal) < 2:
            return False
        return any(literal in self.text(i) for i in range(older.message + 1, min(newer.message, len(self.messages))))


def local_clashes(found: Iterable[Located], matcher: Matcher | None = None, agent: AgentTurns | None = None,
                  deadline: Deadline = NO_DEADLINE) -> list[Clash]:
    """Every contradicting pair (older, newer) per slot, and the nearest duplicate of each statement.
    Only pairs from two messages: values within one message are never a clash (a request that names
    two values of one kind is a range, a comparison, a conversion or a plan). `deadline.check()` runs
    once per statement compared, so a budget or a client's leaving stops the work (OverBudget)."""
    matcher = matcher or Matcher()
    agent = agent or AgentTurns()
    matcher.prepare(loc.st for loc in found)
    ordered = inherit_qualifiers(sorted(found, key=lambda l: l.order))
    frames = [loc for loc in ordered if loc.st.slot.startswith("frame.")]
    ordered = [loc for loc in ordered if not loc.st.slot.startswith("frame.")]
    by_slot: dict[str, list[Located]] = {}
    for loc in ordered:
        by_slot.setdefault(value_type(loc.st.slot), []).append(loc)
    clashes: list[Clash] = []
    for items in by_slot.values():
        clashes += slot_clashes(items, matcher, agent, deadline=deadline)
    bare = [loc for loc in ordered if loc.st.slot == "v.num"]  # "… should be 650" (an amount), "zip is 94117" (a reference)
    for key in [k for k in by_slot if takes_bare_numbers(k)]:
        clashes += slot_clashes(sorted(by_slot[key] + bare, key=lambda l: l.order), matcher, agent, across=True,
                                deadline=deadline)
    clashes += related_clashes(ordered, matcher, {(id(c.older), id(c.newer)) for c in clashes}, agent, deadline)
    deadline.check()
    if frames:
        said = {((c.older.message, c.older.st.start), (c.newer.message, c.newer.st.start)) for c in clashes}
        clashes += [make_clash(older, newer) for older, newer in frame_pairs(frames, matcher, lambda o, n: (
            ((o.message, o.st.start), (n.message, n.st.start)) in said or agent.acted_on(o, n)))]
    return sorted(clashes, key=lambda c: (c.newer.order, c.older.order))


def slot_clashes(items: list[Located], matcher: Matcher, agent: AgentTurns, across: bool = False,
                 deadline: Deadline = NO_DEADLINE) -> list[Clash]:
    """Every contradicting pair among `items` (in order) from two messages, and the nearest
    duplicate of each. With `across`, only pairs of two value types: an amount and a bare number
    ("under $80 in a size 10" are two values), the pairs of one type being compared in their own slot."""
    out: list[Clash] = []
    first = 0  # where newer's message starts in `items`: only what comes before is compared (linear in one message)
    for j, newer in enumerate(items):
        deadline.check()
        if j and items[j - 1].message != newer.message:
            first = j
        duplicate_seen = False
        for older in reversed(items[:first]):
            if across and value_type(older.st.slot) == value_type(newer.st.slot):
                continue
            if conflicts(older.st, newer.st, matcher):
                if not agent.acted_on(older, newer):
                    out.append(make_clash(older, newer))
            elif not duplicate_seen and older.message != newer.message and duplicates(older.st, newer.st, matcher):
                out.append(Clash(DUPLICATE_FACTS, older, newer))
                duplicate_seen = True
    return out


def related_clashes(ordered: list[Located], matcher: Matcher, taken: set[tuple[int, int]], agent: AgentTurns,
                    deadline: Deadline = NO_DEADLINE) -> list[Clash]:
    """Clashes across slots (relate.py): polarity flips on one object, values said to replace an
    earlier one, meal choices a diet excludes; only between messages. A pair is looked at only
    when one of the relations can hold (refusals and replacements are few), so the cost stays
    near linear in the number of statements."""
    out: list[Clash] = []
    refusals: list[int] = []
    diets: list[int] = []
    for j, newer in enumerate(ordered):
        deadline.check()
        b = newer.st
        target = replaced(b, [loc.st for loc in ordered[:j] if loc.message != newer.message], matcher) \
            if b.replaces or b.correction else None
        pool = set(range(j)) if b.negated else set(refusals)
        pool |= set(diets) if b.slot.startswith(("diet", "meal")) else set()
        for i in sorted(pool):
            older = ordered[i]
            a = older.st
            if older.message == newer.message or (id(older), id(newer)) in taken:
                continue
            if polarity_flip(a, b, matcher) or diet_excludes(a, b):
                out.append(make_clash(older, newer))
                taken.add((id(older), id(newer)))
        if target is not None:
            older = next(loc for loc in ordered[:j] if loc.st is target)
            if (id(older), id(newer)) not in taken and not agent.acted_on(older, newer) \
                    and (target.slot == "v.act" or not compatible(family(b.slot), target.value, b.value)):
                out.append(make_clash(older, newer))
                taken.add((id(older), id(newer)))
        if b.negated:
            refusals.append(j)
        if b.slot.startswith(("diet", "meal")):
            diets.append(j)
    return out


def make_clash(older: Located, newer: Located, detector: str = "local", type_: str | None = None) -> Clash:
    return Clash(type_ or clash_type(newer.st), older, newer, detector)
