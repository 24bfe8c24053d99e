"""Questions that name their own candidate answers, decided by the evidence about each candidate.

- A choice ("Which is older, A or B?", "Who played bass, A or B?"): the question names two
  options joined by "or"; the answer picks one. The evidence picks the option whose profile
  holds the question's own words (its predicate: "located in Chestnut Hill", "inducted into the
  Hall of Fame") clearly better than the other's; a question that orders its options in time
  ("born first", "younger", "released earlier") is decided by the dates the profiles give.
- A yes/no question about two or more named things ("Are A and B both ...?"): the evidence says
  yes when every profile holds the question's predicate; an answer opening with "no" leans
  against it.

A name's profile is what the evidence says about it: the sentences that name it and those that
follow in the same document until another candidate is named ("X (born 1963) is a singer. She
...").  Nothing here is a template: the only words listed are English's closed classes of
temporal order and of yes/no particles.
"""

from __future__ import annotations

import re
from typing import Sequence

from ...cache import cache_short
from ...text.slots import Slot, agree, content_words, fold, name_key
from .base import Evidence
from .readings import sentences_of
from .readings import slots_of as slots
from .roles import role

EARLIER = frozenset("first earlier earliest older oldest before sooner prior".split())
LATER = frozenset("later latest last younger youngest newer newest recent after".split())
AUXILIARIES = frozenset("is are was were do does did has have had can could will would".split())
YES, NO = frozenset({"yes", "yeah", "yep"}), frozenset({"no", "nope"})

CLEAR_MARGIN = 0.25  # one profile must hold this much more of the predicate than the other
HELD = 0.75  # a profile holding this share of the predicate states it
STATED = 0.5  # the picked profile must state at least this share of the predicate
MAX_OPTION_WORDS = 6
BY_DATES, BY_WORDS = "dates", "words"
# the closed class of quantity comparison: "more members", "the largest mall" compare a measure both have
MEASURE = frozenset("more most less least fewer fewest".split())


@cache_short(maxsize=4096, max_chars=2000)  # a long question is read each time, not kept
def options(question: str, joiner: str = "or") -> tuple[Slot, ...]:
    """The names the question joins with `joiner` ("A or B", "A, B, or C"). The last option of
    a choice runs to the question's end ("... or First for Women?": a title with small words)."""
    names = [s for s in slots(question) if s.kind == "name"]
    joined: list[Slot] = []
    for a, b in zip(names, names[1:]):
        between = question[a.end:b.start].strip().lower()
        if re.fullmatch(rf",?\s*(?:{joiner})(?:\s+the)?|,", between):
            joined += [s for s in (a, b) if s not in joined]
        elif len(joined) >= 2:
            break
        else:
            joined = []
    if len(joined) > 2 and _in_predicate(question, joined[0]):  # "Which director is American, A or B?"
        joined = joined[1:]
    if len(joined) < 2 or not re.search(rf"\b{joiner}\b", question, re.I):
        return ()
    last = joined[-1]
    tail = re.match(r"[^?,;:.!]*", question[last.start:]).group(0).rstrip()
    if joiner == "or" and len(tail.split()) <= MAX_OPTION_WORDS:
        joined[-1] = Slot("name", tail, last.start, last.start + len(tail), name_key(tail))
    return tuple(joined)


def _in_predicate(question: str, name: Slot) -> bool:
    """The name completes the question's predicate ("is American, A or B", "located in Chestnut
    Hill, A or B"): a preposition or copula links it to a content word before it. (A question
    that opens with its verb, "Is A, B or C ...?", has no such word: A is an option.)"""
    linked = role(question, name)
    return linked is not None and bool(linked.link) and bool(content_words(question[:name.start]))


def doc_sentences(evidence: Sequence[Evidence]) -> list[list[str]]:
    """Each evidence document's sentences in order, rebuilt from the retrieved windows."""
    docs: dict[str, dict[int, str]] = {}
    for e in evidence:
        part = _part(e.id)
        pieces = sentences_of(e.window)
        at = next((i for i, p in enumerate(pieces) if p == e.sentence), None)
        if part is None or at is None:
            docs.setdefault(e.doc_id, {}).setdefault(len(docs.get(e.doc_id, {})) + 10_000, e.sentence)
            continue
        for j, piece in enumerate(pieces):
            docs.setdefault(e.doc_id, {}).setdefault(part - at + j, piece)
    return [[parts[n] for n in sorted(parts)] for parts in docs.values()]


def _part(evidence_id: str) -> int | None:
    m = re.search(r"#(\d+)", evidence_id)
    return int(m.group(1)) if m else None


def profiles(evidence: Sequence[Evidence], names: Sequence[Slot]) -> list[list[str]]:
    """For each name, the evidence sentences about it (see the module docstring)."""
    out: list[list[str]] = [[] for _ in names]
    for sentences in doc_sentences(evidence):
        current: list[int] = []
        for sentence in sentences:
            found = [s for s in slots(sentence) if s.kind == "name"]
            named = [i for i, n in enumerate(names) if any(agree(n, s) for s in found)]
            if named or (found and _opens(sentence, found[0])):  # a sentence about another subject
                current = named
            for i in current:
                out[i].append(sentence)
    return out


def _opens(sentence: str, name: Slot) -> bool:
    """The name is the sentence's subject: only function words come before it."""
    return not content_words(sentence[:name.start])


def predicate(question: str, names: Sequence[Slot]) -> set[str]:
    """The question's own words, less the candidates' names and the words of order and measure."""
    return content_words(question) - {w for n in names for w in content_words(n.text)} - EARLIER - LATER - MEASURE


def resolve(names: Sequence[Slot], evidence: Sequence[Evidence]) -> list[Slot]:
    """Each candidate as the evidence writes it: a name run in the question may take in a word
    of the predicate ("Kings of Leon American rock bands"), one in the evidence may stop at a
    small word ("First for Women"). The evidence's name sharing most words with the candidate,
    unless the candidate is written whole in the evidence."""
    text = " ".join(e.window for e in evidence)
    folded = fold(text)
    found = [s for s in slots(text) if s.kind == "name"]
    out = []
    for n in names:
        best = max(found, key=lambda s: (len(set(s.value) & set(n.value)), -len(s.value)), default=None)
        if fold(n.text) in folded or best is None or not set(best.value) & set(n.value):
            out.append(n)
        else:
            out.append(best)
    return out


def held(words: set[str], profile: Sequence[str]) -> float:
    if not words:
        return 0.0
    return len(words & content_words(" ".join(profile))) / len(words)


def picked(claim: str, names: Sequence[Slot]) -> int | None:
    """The option the answer picks: the one it names first."""
    found = [s for s in slots(claim) if s.kind == "name"]
    for s in found:
        hits = [i for i, n in enumerate(names) if agree(n, s)]
        if len(hits) == 1:
            return hits[0]
    return None


def _names_all(claim: str, names: Sequence[Slot]) -> bool:
    found = [s for s in slots(claim) if s.kind == "name"]
    return all(any(agree(n, s) for s in found) for n in names)


def evidence_pick(question: str, asked: Sequence[Slot], names: Sequence[Slot],
                  evidence: Sequence[Evidence]) -> tuple[int, str] | None:
    """The option the evidence supports, when it clearly supports one, and how it decided:
    BY_DATES (the dates the profiles give, ordered as the question asks) or BY_WORDS (the one
    profile that states most of the predicate). `asked`: the options as the question writes
    them, `names`: as the evidence does."""
    about = profiles(evidence, names)
    rest = _without(question, asked)
    order = _order(rest)
    if order:
        dates = [_first_date(p) for p in about]
        if all(d is not None for d in dates) and len(set(dates)) == len(dates):
            best = (min if order < 0 else max)(dates)
            return dates.index(best), BY_DATES
    if _measures(rest):
        return None
    words = predicate(question, names)
    scores = [held(words, p) for p in about]
    ranked = sorted(range(len(scores)), key=lambda i: -scores[i])
    top, second = scores[ranked[0]], scores[ranked[1]]
    if top >= STATED and top - second >= CLEAR_MARGIN and all(about):
        return ranked[0], BY_WORDS
    return None


def _without(question: str, names: Sequence[Slot]) -> str:
    for n in sorted(names, key=lambda n: -n.start):
        question = question[:n.start] + " " + question[n.end:]
    return question


def _measures(question: str) -> bool:
    """The question compares a quantity ("more members", "the largest"): who has more of it is
    not read from which profile mentions it."""
    folded = re.findall(r"[a-z]+", fold(question))
    return any(w in MEASURE or len(w) >= 6 and w.endswith("est") for w in folded)


def _order(question: str) -> int:
    """-1 when the question asks for the earliest, +1 for the latest, 0 when it orders nothing."""
    folded = set(re.findall(r"[a-z]+", fold(question)))
    return -1 if folded & EARLIER else 1 if folded & LATER else 0


def _first_date(profile: Sequence[str]) -> tuple | None:
    """The earliest date of the first sentence about the name that gives one (a life, a run:
    "(1844–1846)", "born 1963")."""
    for sentence in profile:
        found = [s.value for s in slots(sentence) if s.kind == "date" and s.value[1] >= 0]
        found += [(int(s.value[0]), 0, 0) for s in slots(sentence) if s.kind == "number" and s.value[1] == "count"
                  and 1000 <= s.value[0] <= 2100 and float(s.value[0]).is_integer()]
        if found:
            return min(found)
    return None


def choice_conflict(claim: str, question: str, evidence: Sequence[Evidence]) -> str:
    """How the evidence decides against the option the answer picks (BY_DATES, BY_WORDS), or ""
    when it does not. The options are joined by "or", or by "and" in a question that is not a
    yes/no one ("Between A and B, who is older?")."""
    asked, joined = options(question), "or"
    if not asked and not _polar(question):
        asked, joined = options(question, "and"), "and"
    if not asked:
        return ""
    names = resolve(asked, evidence)
    mine = picked(claim, names)
    if mine is None or joined == "and" and _names_all(claim, names):  # "A and B both ...": no pick
        return ""
    theirs = evidence_pick(question, asked, names, evidence)
    return theirs[1] if theirs is not None and theirs[0] != mine else ""


def _polar(question: str) -> bool:
    """A yes/no question: it opens with an auxiliary verb ("Are ...", "Did ...")."""
    first = re.findall(r"[a-z]+", fold(question))[:1]
    return bool(first) and first[0] in AUXILIARIES


def asks_for_value(question: str) -> bool:
    """The question asks for a value of its own (a name, a date, a number, a description), not
    yes/no and not a pick among the names it gives."""
    return bool(question.strip()) and not _polar(question) and not options(question) and not options(question, "and")


def polar_conflict(claim: str, question: str, evidence: Sequence[Evidence]) -> bool:
    """A yes/no question about named things answered "no" where every profile states the
    predicate. (One profile lacking a word is no "no": the KB rarely says all.)"""
    answer = re.findall(r"[a-z]+", fold(claim))[:1]
    if not _polar(question) or not answer or answer[0] not in YES | NO:
        return False
    names = resolve(options(question, "and") or options(question, "or"), evidence)
    if not names:
        return False
    about = profiles(evidence, names)
    if not all(about):
        return False
    words = predicate(question, names)
    scores = [held(words, p) for p in about]
    return min(scores) >= HELD and answer[0] in NO
