"""WRITE, local: which sentences of a user turn are durable memories, and of which kind.

A sentence becomes a memory when the statement reader (text/statements) finds the user stating
something about themselves or about how they want to be served, and the sentence's own features
say it is meant to last: not a question, not a hypothetical, not the past, not a plan, not a
request for something now. Each test is a feature the statement reader already computes; there
are no word lists here. The kind follows from the statement:

    fact         a fact about the user ("I live in Berlin", "my name is ...", a count they have)
    constraint   a limit or a refusal ("never ...", "I can't eat ...", a maximum amount)
    instruction  how to answer, said as an imperative ("Always answer in French")
    preference   what they like or choose ("I prefer quality hotels")

A request for something now is an imperative whose statements name the specifics of that request
(a place, a date, a name: `v.*`, `date.*`, `time.*` values): "book me a flight to London on March
3" is a request, "always answer in French" is an instruction. So is a need put as a question: a
sentence that asks anywhere (or is followed by a question of its own, "Any ideas?") and whose
values name specifics, how many included (`count.*`): "I need a room for two nights in Copenhagen,
any ideas?" is a request; "I'm vegetarian, can you suggest a restaurant?" still states a preference.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from ..text.statements.extract import extract
from ..text.statements.model import Sentence, Statement, split_sentences
from ..text.words import content_words

# The write gate (RF-005) is not a score threshold. Relevance is the tests of _judge: a sentence
# that is dated, a need for now, a request with its own specifics, or holds nothing lasting is no
# memory. Consistency is checked later: with the knowledge base (the poisoning policy's check:
# memory.rejected) and with earlier memories (writer.py: duplicates merge, contradictions follow the
# strategy). `quality` (0.5-1) only records how plainly the sentence states it, in the memory's
# provenance: on bench/memories.py every candidate scores 0.8 or more and the few wrong ones score
# 0.8 and 1.0 like the right ones, so a threshold on it would only cut recall.
_ONE_OFF_FAMILIES = ("v.", "date.", "time.")  # values that name the specifics of one request
_REQUEST_VALUES = (*_ONE_OFF_FAMILIES, "count.")  # ... and how many: "two nights", "a table for four"
# The user as the grammatical subject (a closed class of pronouns): statements read by the generic
# readers (`v.*`: any typed value, any clause) are the user's only when the user is their subject.
_SPEAKER_SUBJECT = re.compile(r"^\W*(?:i|i'm|im|i'd|i've|i'll|we|we're|we'd|we've|my|our)\b")
# A sentence read only by the generic action reader (`v.act`) must name something besides its verb
# to stand on its own later: "I noticed that.", "I accepted.", "I know." hold nothing a later request
# could use (their "that" is in the turns around them). On CRI's long conversation (bench/memory_outside.py)
# they were 155 of 1,077 memories; on bench/memories.py's labelled turns no memory is lost.
_MIN_CONTENT_WORDS = 2


@dataclass(frozen=True)
class Candidate:
    """A memory the extractor proposes: its text, kind, how plainly it is stated (recorded, not a gate)
    and the statements behind it."""

    text: str
    kind: str
    quality: float
    statements: tuple[Statement, ...]

    @property
    def slots(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys(st.slot for st in self.statements))


def candidates(text: str) -> list[Candidate]:
    """The durable memories in one user text, in order; cached through the statement reader."""
    statements = extract(text)
    if not statements:
        return []
    sentences = split_sentences(text)
    by_sentence: dict[int, list[Statement]] = {}
    for st in statements:
        # what a question takes as given ("the warfarin I take") is for the clash detector: the
        # question is no memory, and it still asks after the sentence before it
        if not st.given:
            by_sentence.setdefault(st.sentence, []).append(st)
    out: list[Candidate] = []
    for n, sentence in enumerate(sentences):
        found = by_sentence.get(sentence.index)
        if not found:
            continue
        after = sentences[n + 1] if n + 1 < len(sentences) else None
        asks = sentence.question or (after is not None and after.question and after.index not in by_sentence)
        candidate = _judge(sentence, found, asks)
        if candidate is not None:
            out.append(candidate)
    return out


def _judge(s: Sentence, found: list[Statement], asks: bool = False) -> Candidate | None:
    if any(_dated(st) for st in found):
        return None  # tied to one occasion ("I flew to Madrid on Tuesday", "the meeting is at 3pm today")
    if asks and any(_specific(st) for st in found):
        return None  # a need for now, put as a question: "I need a room for two nights in Copenhagen, any ideas?"
    lasting = [st for st in found if _lasting(s, st)]
    if not lasting or _fragment(s, lasting):
        return None
    refusal = all(st.negated for st in lasting)
    if s.imperative and not refusal and any(st.slot.startswith(_ONE_OFF_FAMILIES) for st in found):
        return None  # a request for something now, with its own specifics
    return Candidate(s.text.strip(), _kind(s, lasting), _quality(s, lasting), tuple(lasting))


def _fragment(s: Sentence, lasting: list[Statement]) -> bool:
    """Only the generic action reader found it and the sentence names one thing at most (the
    content words of the closed-class table in text/words.py): its meaning is in other turns."""
    return all(st.slot == "v.act" for st in lasting) and len(content_words(s.text)) < _MIN_CONTENT_WORDS


def _specific(st: Statement) -> bool:
    """A value that names the specifics of one request (a place, a name, a time, how many), not a
    stated preference or fact about the user."""
    return st.kind == "value" and st.slot.startswith(_REQUEST_VALUES)


def _dated(st: Statement) -> bool:
    return st.slot.startswith(("date.", "v.date"))


def _lasting(s: Sentence, st: Statement) -> bool:
    """The statement holds beyond this turn: stated, now, by the user, for themselves."""
    pos = st.vstart - s.start
    if st.step or s.question_at(pos) or s.hypothetical(pos) or s.past(pos) or s.future(pos):
        return False
    if st.slot.startswith("v."):
        if st.negated and (s.imperative or (not s.first_person and _opens_with_negation(s))):
            return True  # a refusal addressed to the agent: "do not use emojis", "avoid long layovers"
        return bool(_SPEAKER_SUBJECT.match(s.lower))  # "I'm allergic to peanuts"; not "tell me a joke"
    return s.first_person or s.imperative or st.kind == "preference"


def _opens_with_negation(s: Sentence) -> bool:
    """A refusal the reader does not see as an imperative opens with its negation: "Do not use
    emojis", "Don't recommend chain restaurants", "No meat, no dairy". Prose that only holds a
    negation names something first: "He immobilizes his body to avoid ...", "Third, the variables
    used as axes don't have to be ...", a code line ("with torch.no_grad():"). On the first messages
    of 300 ShareGPT conversations, 104 of 354 memories came from such prose (bench/memories.py
    --ordinary), and none of the labelled turns is one."""
    at = s.first_negation()
    return at is not None and not content_words(s.lower[:at])


def _kind(s: Sentence, lasting: list[Statement]) -> str:
    """fact, instruction, constraint or preference (module docstring)."""
    if any(st.kind == "fact" for st in lasting) and not s.imperative:
        return "fact"
    if any(st.slot.startswith("answer.") for st in lasting) or (s.imperative and not any(st.negated for st in lasting)):
        return "instruction"
    if any((st.negated and not st.slot.startswith("like.")) or ".max" in st.slot for st in lasting):
        return "constraint"
    if all(st.kind == "value" for st in lasting) or any(st.kind == "fact" for st in lasting):
        return "fact"
    return "preference"


def _quality(s: Sentence, lasting: list[Statement]) -> float:
    """How plainly the sentence states something lasting (0.5-1): provenance, not a gate (above)."""
    score = 0.6
    if s.first_person or s.imperative:
        score += 0.2
    if any(st.kind != "value" for st in lasting):
        score += 0.2
    if s.changes:
        score -= 0.1  # a change of mind: still a memory, it supersedes the earlier one
    return max(0.0, min(1.0, score))
