"""Assess one text against the knowledge base: claims → evidence → verdicts.

Each sentence of the text is a claim, read as an answer to the user's question. Its evidence is
retrieved with the question plus the claim (evidence.py); the configured checker (checkers/)
gives one verdict per claim. Retrieval is synchronous (embedding, disk): `retrieve` runs in a
worker thread; the checker is awaited (a model-backed one makes its call there).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Sequence

from ..text.sentences import bounded_sentences, last_sentence_end
from ..text.slots import FUNCTION_WORDS, fold, words
from .checkers.base import CONTRADICTED, CheckContext, Checker, ClaimToCheck, ClaimVerdict
from .kb import KnowledgeBase

# A claim longer than this (a log line, a JSON tool result with no sentence end) is judged in
# pieces: natural sentences are far shorter, and long ones cost every check in proportion to their square.
MAX_CLAIM_CHARS = 500
FENCE = "```"  # opens and closes a block of code in Markdown
_LIST_START = re.compile(r"\s*1[.)]\s")


@dataclass
class Assessment:
    claims: list[ClaimToCheck] = field(default_factory=list)
    verdicts: list[ClaimVerdict] = field(default_factory=list)
    fresh_share: float = 1.0  # share of retrieved passages that are not stale (always 1: stale ones are skipped)
    events: list[dict] = field(default_factory=list)  # what the checker reported (e.g. a judge fallback)

    @property
    def worst(self) -> ClaimVerdict | None:
        """The contradicted claim the checker is surest of."""
        bad = [v for v in self.verdicts if v.label == CONTRADICTED]
        return max(bad, key=lambda v: v.confidence) if bad else None


def retrieve(text: str, kb: KnowledgeBase, question: str = "", context: str = "", top_k: int = 4,
             claims: list[str] | None = None) -> list[ClaimToCheck]:
    """The claims of `text` (or the `claims` given) with their evidence (none when the KB is empty)."""
    if not len(kb.index):  # nothing to judge by: not even the split (a 16 MB text was ~1 s of it)
        return []
    claims = bounded_sentences(text, MAX_CLAIM_CHARS) if claims is None else list(claims)
    if not claims:
        return []
    unfinished = context[last_sentence_end(context):].strip()
    if unfinished:  # a streamed sentence released in part: judge it whole
        claims[0] = f"{unfinished} {claims[0]}"
    # an answer's opening number answers the question ("2015. It was …"), unless it opens a numbered list
    first = 0 if context.strip() or opens_list(text) else 1
    claims = claims[:first] + [c for c in claims[first:] if says_something(c)]
    if not claims:
        return []
    queries = [f"{question} {c}".strip() for c in claims]
    found = kb.search(queries, k=top_k)
    out: list[ClaimToCheck] = []
    before = context
    for claim, evidence in zip(claims, found):
        out.append(ClaimToCheck(claim, question, tuple(evidence), before[-500:]))
        before = f"{before[-500:]} {claim}".strip()  # only its end is read: the whole, rebuilt per claim, was quadratic
    return out


@dataclass
class InputClaims:
    """What of an incoming message is worth judging against the KB."""

    claims: list[str]
    unrelated: int = 0  # pieces sharing no word with the KB: nothing there for it to contradict
    over_cap: int = 0  # related pieces past the per-message cap, least related first


def opens_list(text: str) -> bool:
    """The text starts with a list's first marker: "1." or "1)" and a space. Not "2015. It was …", nor
    "1." alone at the end (the answer "1"). A stream's first piece is that marker alone ("1. "): the
    "2." that would show a list has not arrived yet, so the marker is enough (waiting for it blocked
    every streamed answer opening with a numbered list whose KB held a number)."""
    return _LIST_START.match(text) is not None


def _content_terms(text: str) -> set[str]:
    """The words of a text that can carry a fact (folded, not stemmed: as the KB's vocabulary is kept):
    not function words, not bare numbers."""
    return {w for w in words(fold(text)) if w not in FUNCTION_WORDS and not w.isdigit()}


def says_something(claim: str) -> bool:
    """A claim has a content word: past an answer's first sentence, a list's marker ("2."), a bracket
    or a number alone states nothing the KB could contradict (such a "claim" was read against any
    number of its evidence); as its first, a number answers the question ("1,600", "2015. It was …")."""
    return bool(_content_terms(claim))


def _shared_words(piece: str, vocabulary: frozenset[str] | set[str]) -> int:
    return len(_content_terms(piece) & vocabulary)


def input_claims(text: str, kb: KnowledgeBase, cap: int) -> InputClaims:
    """The pieces of a tool result (or an earlier answer) that the KB can speak to: those sharing a
    content word with it, most shared first, at most `cap`. A 4k-token log or JSON result is
    hundreds of pieces, and judging each costs a retrieval and a verdict; the KB has nothing to say
    about pieces that share no word with it (every checker needs evidence, and evidence is found by
    the words it shares or by meaning, which a piece of records and ids rarely has in common)."""
    vocabulary = kb.index.vocabulary
    if not vocabulary:  # an empty KB speaks to nothing: no need to split (~2 ms for an agent's 8 KB tool result)
        return InputClaims([])
    pieces = bounded_sentences(text, MAX_CLAIM_CHARS)
    related = []  # (words shared with the KB, position, piece)
    for n, piece in enumerate(pieces):
        shared = _shared_words(piece, vocabulary)
        if shared:
            related.append((shared, n, piece))
    kept = sorted(sorted(related, key=lambda r: -r[0])[:cap], key=lambda r: r[1])  # the most related, in text order
    return InputClaims([piece for _, _, piece in kept], len(pieces) - len(related), len(related) - len(kept))


def answer_claims(text: str, kb: KnowledgeBase, cap: int) -> InputClaims:
    """Every claim of an answer, unless there are more than `cap`: then the `cap` that share the most
    words with the KB (in text order), the rest left unjudged and counted in `over_cap`. Each claim
    costs ~5 ms of retrieval and checking on one core, so a 1 MB answer (~5,000 claims) was held 24 s;
    a long answer of 16k tokens is ~400 sentences."""
    if not len(kb.index):
        return InputClaims([])
    pieces = bounded_sentences(text, MAX_CLAIM_CHARS)
    if len(pieces) <= cap:
        return InputClaims(pieces)
    vocabulary = kb.index.vocabulary
    ranked = sorted(range(len(pieces)), key=lambda n: -_shared_words(pieces[n], vocabulary))[:cap]
    return InputClaims([pieces[n] for n in sorted(ranked)], over_cap=len(pieces) - cap)


def input_evidence(text: str, kb: KnowledgeBase, cap: int, top_k: int) -> tuple[InputClaims, list[ClaimToCheck]]:
    """The pieces of an incoming message worth judging, with their evidence: one call, off the loop."""
    pieces = input_claims(text, kb, cap)
    return pieces, retrieve(text, kb, top_k=top_k, claims=pieces.claims)


def outside_code(text: str, in_code: bool = False) -> str:
    """The text without its fenced code blocks (```…```, `in_code`: the text starts inside one). A line
    of code is no statement the KB speaks to, yet read as a claim its numbers and names met the KB's
    ("int opt = 1;" against "a TCP server in C"): code was all that still blocked answers quoting
    the KB (bench/poisoning.py --quoting)."""
    if FENCE not in text:
        return "" if in_code else text
    return "\n".join(part for n, part in enumerate(text.split(FENCE)) if (n % 2 == 0) != in_code)


def answer_evidence(text: str, kb: KnowledgeBase, question: str, context: str, top_k: int,
                    cap: int, prior: str = "") -> tuple[InputClaims, list[ClaimToCheck]]:
    """An answer's claims worth judging (answer_claims: its prose, not its code; `prior`, a stream's
    text before this piece, says whether it starts inside a code block), with their evidence: one
    call, off the loop (reading all of `prior` costs ~0.7 ms a megabyte: not with an empty KB)."""
    if not len(kb.index):
        return InputClaims([]), []
    text = outside_code(text, prior.count(FENCE) % 2 == 1)
    picked = answer_claims(text, kb, cap)
    if not picked.claims:
        return picked, []
    return picked, retrieve(text, kb, question, context, top_k, claims=picked.claims)


async def assess(claims: Sequence[ClaimToCheck], checker: Checker, exchange: object = None) -> Assessment:
    if not claims:
        return Assessment()
    ctx = CheckContext(exchange=exchange)
    verdicts = await checker.check(list(claims), ctx)
    return Assessment(list(claims), verdicts, 1.0, ctx.events)
