"""Typed statements extracted from what the user wrote: the raw material of clash detection.

A `Statement` says that, in one sentence, the user gave a value to a slot: a preference
("tier.hotel" = "budget"), a fact ("location.current" = "new york") or a value ("seat" =
"aisle", "date.departure" = "m3d5", "count.people" = "4"). Two statements on the same slot
with incompatible values are a clash; different slots never clash, which is how additions
("I also like parks"), scopes ("$200 per night" vs "$1,400 for the week") and plans ("I fly
to London next week") stay compatible.

Extraction is rule based (rules.py, person.py, values.py), a few hundred microseconds per message,
and cached per message text, so a conversation that grows by one turn costs one extraction.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal

from ..sentences import sentence_spans
from ..words import FUNCTION_WORDS
from .lexicon import RELATION

Kind = Literal["preference", "fact", "value"]


@dataclass(frozen=True)
class Statement:
    slot: str  # what the statement is about: "tier.hotel", "location.current", "count.people"
    kind: Kind
    value: str  # canonical and comparable: "budget", "new york", "4", "m3d5"
    label: str  # for people: "hotel preference", "current location"
    display: str  # what the user wrote for the value: "budget hotels", "New York"
    negated: bool  # "I don't want a luxury hotel"
    sentence: int  # index of the sentence in the text
    start: int  # the sentence's span in the text
    end: int
    vstart: int  # the literal value's span in the text
    vend: int
    changes: bool  # the sentence announces a change ("actually", "instead", "now")
    substitutable: bool = True  # the literal can be swapped for a newer value (merge); not "budget hotels"
    subject: tuple[str, ...] = ()  # what the value is about, in order (subject.py): ("^q3", "infrastructure", "budget")
    correction: bool = False  # the sentence corrects something said before ("sorry, I meant ...")
    step: bool = False  # the value is the argument of a new run of a step ("retry with 150 euros")
    request: bool = False  # the sentence asks the agent to do something now ("show me page 2")
    replaces: bool = False  # the sentence puts its value in place of an earlier one ("... instead", "rather than ...")
    adds: bool = False  # the sentence adds to what was said ("also", "too", "as well")
    refused: tuple[str, ...] = ()  # the noun phrase refused ("no smart locks", "not requiring a degree"): one object
    refused_for: tuple[str, ...] = ()  # what the refused thing is for, said after it ("no tip for the taxi"): which one
    context: frozenset[str] = frozenset()  # the sentence's topic words (subject.topic_words): what else it is about
    given: bool = False  # read from what a question takes as given ("the warfarin I take"), not said outright
    window: bool = False  # the value is how many of a listing to take ("the last 100 lines", "the top 5")
    series: frozenset[str] = frozenset()  # which ones of a series the sentence names ("the second half"): subject.series_of


# ----------------------------------------------------------------------------- sentences

_DASHES = ("—", "–", " - ")


def _without_asides(spans: list[tuple[int, int]], lower: str) -> tuple[tuple[int, int], ...]:
    """Clause boundaries, less a pair of dashes around a short aside ("Phase 2 — the member portal —
    is due July 15"): what comes after the aside continues the clause before it."""
    out: list[tuple[int, int]] = []
    i = 0
    while i < len(spans):
        a = spans[i]
        b = spans[i + 1] if i + 1 < len(spans) else None
        if b and lower[a[0]:a[1]] in _DASHES and lower[b[0]:b[1]] in _DASHES and len(lower[a[1]:b[0]].split()) <= 5:
            i += 2
            continue
        out.append(a)
        i += 1
    return tuple(out)


_CLAUSE = re.compile(
    r"(?<!\d),|,(?!\d)|;|:(?!\d\d)|—|–|\s-\s|\((?!\d)|\)|\b(?:but|and|although|though|whereas|while|so|because|since|yet|however|plus)\b", re.I
)
_FIRST_PERSON = re.compile(r"\b(?:i|i'm|im|i'd|i'll|i've|me|my|mine|myself|we|we're|we'd|we'll|we've|us|our|ours|let's)\b")
_LEADING = (
    r"(?:actually|also|ok|okay|so|and|but|oh|well|please|hi|hey|hello|now|then|no|sorry|hmm|btw|instead|"
    r"correction|update|wait|fine|great|good|right|yes|yeah|alright|cool|again|plus|oops|just|remember|"
    r"on second thought|in that case|one more thing|by the way|hmm+|then)"
)
_STRIP_LEADING = re.compile(rf"^(?:\W*{_LEADING}\b[\s,!:.-]*)+")
_IMPERATIVE = re.compile(
    r"^(?:book|find|get|reserve|make|switch|change|put|give|search|look|show|pick|move|use|keep|be|answer|"
    r"reply|respond|write|talk|speak|send|set|add|update|let's|lets|let us|go|choose|select|stick|plan|"
    r"arrange|schedule|order|include|avoid|skip|forget|remember|note|assume|call|email|text|rebook|upgrade|"
    r"downgrade|seat|sit|stay|fly|take|travel|check|leave|return|depart)\b"
    # any other verb that opens a sentence with its object pronoun: "ship it", "drive me", "mail them"
    r"|^(?!(?:is|was|are|were|do|does|did|can|could|would|will|should|shall|may|might|must|has|have|had|"
    r"how|what|why|when|where|who|which|that|so|and|but|or|then|thank|thanks|love|hate|miss)\b)[a-z]+\s+(?:it|them|me|us|him)\b"
)
_REQUEST_QUESTION = re.compile(
    r"^(?:can|could|would|will)\s+(?:you|u)\s+(?:please\s+)?(?:book|find|get|reserve|switch|change|make|put|give|"
    r"move|update|set|search|look|answer|reply|respond|write|speak|talk|use|keep|send|show|translate)\b|^(?:can|could|may)\s+(?:i|we)\s+(?:please\s+)?(?:get|have|book|switch|change)\b"
    r"|^(?:how|what)\s+about\b.*\binstead\b|^(?:can|could)\b.*\binstead\b"
)
_CHANGE = re.compile(
    r"\b(?:actually|instead|changed? (?:my|our) minds?|on second thought|scratch that|correction|i meant|i mean|"
    r"make (?:it|that)|switch(?:ed)?|change[ds]?|no longer|anymore|any more|rather|update[ds]?|now|no wait|"
    r"wait|sorry|oops|let'?s go with|new plan|forget|cancel(?:led)?|moved|just to clarify|to clarify|back to|"
    r"change (?:of|in) plans?|plans? (?:have |has )?changed|scratch (?:that|the|this|those))\b"
)
_CORRECTION = re.compile(
    r"\b(?:correction|to correct|correct(?:ing)? (?:that|myself|this)|i meant|i mean|sorry|oops|typo|my (?:mistake|bad)|"
    r"mis(?:read|typed|spoke|remembered)|(?:got|had) it wrong|let me (?:fix|correct|rephrase)|scratch that|no wait|"
    r"wait,|actually,? make (?:it|that)|(?:should|would) have said|i said \S+ but|"
    r"(?:scratch|forget|ignore|disregard) what i (?:said|wrote|told you|mentioned))\b"
)
_REPLACE = re.compile(
    r"\b(?:instead|rather than|in place of|(?:switch|change|move)(?:e?[ds])?\s+(?:\w+\s+){0,2}?to|make (?:it|that|them)|"
    r"scratch (?:that|the|this|those)|change (?:of|in) plans?|plans? (?:have |has )?changed|on (?:second thought|reflection)|thinking about it|changed? (?:my|our) minds?|forget (?:the|about|it)|"
    r"after all|no longer|any ?more)\b"
)
# "too" adds at the end of its clause ("a gym would be nice too"); before a word it intensifies ("too pricey")
_TOO = r"too\b(?=\s*(?:$|[,.;:!?)]|please\b|as well\b|and\b|but\b|so\b|though\b|if\b|then\b))"
_ADDITIVE = re.compile(rf"\b(?:{_TOO}|also|as well|in addition|additionally|another|extra)\b")
_NEW_STEP = re.compile(
    rf"\b(?:re-?(?:try|run|do|query|search|scrape|send|check)\w*|this time|next(?!\s+to\b)|another|try|widen|narrow|broaden|the same(?:\s+\w+){{0,2}}\s+(?:for|with|on)|{_TOO}|"
    r"as well)\b|\b(?:it|them|that|this|with)\b.*\b(?:again|once more|one more time)\b"
)
_THEN_AT_END = re.compile(r"\bthen\W*$")  # "check May 4 then": a run; "departure on October 2 then": a decision
# a value turned up or down from the one in effect ("bump it to 21", "drop concurrency to 2", "take
# it up to 8", "cut the batch size by half"): the old value held until now, it was no mistake
_ADJUST = re.compile(
    r"\b(?:(?:bump|drop|raise|lower|increase|decrease|reduce|cut|ramp|crank|dial|scale|double|halve|extend|"
    r"shorten|lengthen|tighten|loosen|boost)\b(?:\s+(?!to\b|by\b)[\w'-]+){0,3}?(?:\s+(?:up|down|back))?"
    r"|(?:take|bring|turn|push|knock|put)(?:\s+(?!to\b|by\b)[\w'-]+){0,2}?\s+(?:up|down|back))"
    r"\s+(?:to|by)\s+(?:about\s+|around\s+|half\b|[$€£]?\d[\d,.]*(?![\d,.:]|\s*[ap]\.?m\b))"
)
_SPEAKER_FIRST = re.compile(r"(?:i|we|my|our)\b")  # "I want a budget hotel again" states, it runs nothing
_NEGATOR = re.compile(
    r"\b(?:not|no|never|nor|without|instead of|rather than|no longer|forget|avoid|skip|hate|dislike|scratch|"
    r"nothing|none|disable|(?:stop|quit|cease)\s+\w+ing)\b|n't\b|\bdont\b|\bcant\b"
)
_NOT_A_NEGATION = re.compile(r"\bno\b(?=[\s,!.-]*(?:i|i'm|im|we|we're|it|it's|that|actually|wait|sorry|thanks|thank|make|let's)\b)|\bno (?:more|less|later|earlier|fewer|longer|shorter|bigger|larger|smaller|higher|lower|greater) than\b|\bnot (?:more|less|later|earlier|over|above|exceed\w*)\b|\b(?:not|n't)\s+(?:sure|certain|only|just|too|very|much|bad|a problem|an issue|mind)\b|\bno\s+(?:problem|worries)\b|\bnot\s+\w+\s+but\b|(?:\bnot|n't)\s+(?:[a-z]+\s+){0,2}?(?:until|till)\b")  # "isn't until June": June, later than thought
_POST_NEGATION = re.compile(
    r"^[^,;]{0,30}?\b(?:(?:is|are)\s+)?(?:not|n't|no longer)\s+(?:\w+\s+)?(?:needed|necessary|an option|options|required|"
    r"ok|okay|fine|wanted|important|possible|a priority|what i want|for me)\b|^[^,;]{0,30}?\b(?:anymore|any more|is out|are out)\b"
)
_HYPOTHETICAL = re.compile(
    r"\b(?:if|unless|whether|in case|suppose|supposing|imagine|what if|hypothetically|maybe|perhaps|might|"
    r"may be|possibly|wish|would be nice|dream)\b"
)
_PAST = re.compile(
    r"\b(?:was|were|used to|had|did|happened|took place|(?<!the )(?:last|previous|past) (?:year|month|week|time|summer|winter|"
    r"spring|fall|autumn|night|monday|tuesday|wednesday|thursday|friday|saturday|sunday)|"
    r"previously|formerly|back then|years ago|in the past|once|ago)\b"
)
_NOT_PAST = re.compile(r"\b(?:was|were) (?:thinking|hoping|wondering|planning|going)\b|\bhad better\b")
_FUTURE = re.compile(
    r"\b(?:next|tomorrow|tonight|soon|later|will|'ll|going to|gonna|planning|plan to|plan on|intend|upcoming|"
    r"from the \d+|from (?:monday|tuesday|wednesday|thursday|friday|saturday|sunday)|"
    r"in (?:january|february|march|april|may|june|july|august|september|october|november|december)|"
    r"this (?:weekend|summer|winter|spring|fall|autumn)|in (?:a|an|\d+|two|three|few) (?:days?|weeks?|months?|hours?)|"
    r"after|then|heading|moving|fly(?:ing)? to|travell?ing to|going to|visit(?:ing)?|on (?:my|our|the) way)\b"
)
_INTERROGATIVE = re.compile(
    r"(?:is|are|am|do|does|did|can|could|would|will|should|shall|what|which|where|when|how|who|why|have|has|any)\b"
)
_WORD = re.compile(r"[\w'$€£%-]+")
ELLIPTICAL_WORDS = 8  # "On the return flight, an aisle seat." states a choice without a subject


_SUBJECT_PRONOUN = re.compile(r"(?:he|she|they)\b")
# "my parents live ...": a plural relation's verb has no -s
_PLURAL_VERB = r"(?<=s)\s+(?:live|work|want|prefer|like|love|need|eat|hate|say|think|use|stay|own|don't)\b"
_RELATION_SUBJECT = re.compile(  # the person is the subject ("my wife prefers ..."), not a modifier ("our client repo")
    rf"(?:my|our|his|her|their)\s+(?:\w+\s+)?{RELATION}\b(?!\s+and\s+(?:i|me)\b)"
    rf"(?=\s*(?:$|[,.;:!?'’]|(?:and|who|is|was|are|were|has|had|have|does|doesn't|did|didn't|will|would|can|can't|should|must|"
    rf"might|isn't|wants|prefers|likes|loves|needs|eats|hates|lives|works|says|said|thinks|gets|takes|uses|only|also|just|"
    rf"never|always|really|too|can't|won't|doesn't)\b|[a-z]+[^s's]s\b(?!')|{_PLURAL_VERB}))")  # "my wife drinks": a verb of hers
_RELATION_BENEFICIARY = re.compile(rf"\bfor\s+(?:my|our|his|her|their)\s+(?:\w+\s+)?{RELATION}\b|\b(?:my|our)\s+{RELATION}(?:'s\b|'(?!\w))")
_RELATION_VERB = re.compile(
    rf"\b(?:my|our)\s+{RELATION}(?:(?:'s)?\s+(?:is|wants|prefers|likes|loves|needs|lives|works|eats|hates|would|'d)\b|{_PLURAL_VERB})"
)


# "her 10mg amlodipine", "their 3 kids": a value in a noun phrase someone else owns is theirs
_POSSESSED = re.compile(r"\b(?:his|her|their)\s+(?:[\w-]+\s+)?$")


def _third_party(lower: str) -> int | None:
    """Where `lower` (a sentence or a clause) starts speaking of someone other than the user; None
    when it does not."""
    stripped = _STRIP_LEADING.sub("", lower)
    if _SUBJECT_PRONOUN.match(stripped) or _RELATION_SUBJECT.match(stripped):
        return 0
    found = [m.start() for m in (_RELATION_BENEFICIARY.search(lower), _RELATION_VERB.search(lower)) if m]
    return min(found) if found else None


@dataclass(frozen=True)
class Sentence:
    """One sentence of a message, with the features the rules ask about."""

    text: str
    lower: str
    start: int  # offset of the sentence in the message text
    index: int
    question: bool
    first_person: bool
    imperative: bool
    elliptical: bool
    third_party_from: int | None  # where the sentence starts speaking of someone else
    changes: bool
    correction: bool  # an explicit correction of something said before
    new_step: bool  # a request to run a step again or the next one, with other arguments
    replaces: bool  # the sentence puts a value in place of an earlier one ("deliver it to Tacoma instead")
    adds: bool  # the sentence adds to what was said ("I also want to visit Florence")
    boundaries: tuple[tuple[int, int], ...]  # clause separators (",", "but", ";", ...) as spans

    @property
    def end(self) -> int:
        return self.start + len(self.text)

    @property
    def addressed(self) -> bool:
        """The user speaks of themselves, asks for something, or answers in a few words."""
        return self.first_person or self.imperative or self.elliptical

    def third_party_at(self, pos: int) -> bool:
        """About someone else: the clause says so, or the sentence does and the clause has no "I"."""
        c0, c1 = self.clause(pos)
        clause = self.lower[c0:c1]
        if _third_party(clause) is not None or _POSSESSED.search(self.lower, c0, pos):
            return True
        if _IMPERATIVE.match(_STRIP_LEADING.sub("", clause.strip())):
            return False  # "she loves spicy food, so make the curry hot": the request is the user's
        # "My sister is vegan, no meat at all" speaks of her throughout; in "It'll be 3 adults, my
        # brother is joining" the clause before the mention is still the user's
        return self.third_party_from is not None and self.third_party_from < c1 and not _FIRST_PERSON.search(clause)

    def question_at(self, pos: int) -> bool:
        """Whether the clause at `pos` asks rather than states ("..., what should I see?" asks only at the end)."""
        if not self.question:
            return False
        c0, c1 = self.clause(pos)
        if not self.lower[c1:].strip(" ?!.\"'"):
            return True
        return bool(_INTERROGATIVE.match(self.lower[c0:c1].strip()))

    def clause(self, pos: int) -> tuple[int, int]:
        """The clause around sentence-relative position `pos`."""
        start, end = 0, len(self.lower)
        for b0, b1 in self.boundaries:
            if b1 <= pos:
                start = b1
            elif b0 >= pos:
                end = b0
                break
        return start, end

    def negated(self, vstart: int, vend: int) -> bool:
        c0, c1 = self.clause(vstart)
        before = self.lower[c0:vstart]
        before = _NOT_A_NEGATION.sub(" ", before)
        return bool(_NEGATOR.search(before) or _POST_NEGATION.search(self.lower[vend:c1]))

    def first_negation(self) -> int | None:
        """Where the word of the sentence's first negation starts (as `negated` reads one; "can't" at
        its "can"), or None."""
        m = _NEGATOR.search(_NOT_A_NEGATION.sub(lambda hit: " " * len(hit.group()), self.lower))
        if m is None:
            return None
        return len(self.lower[:m.start()].rstrip("abcdefghijklmnopqrstuvwxyz'"))

    def hypothetical(self, vstart: int) -> bool:
        c0, _ = self.clause(vstart)
        return bool(_HYPOTHETICAL.search(self.lower[c0:vstart]) or re.match(r"\W*(?:if|unless|suppose|imagine)\b", self.lower))

    def past(self, vstart: int) -> bool:
        c0, c1 = self.clause(vstart)
        clause = _NOT_PAST.sub(" ", self.lower[c0:c1])
        return bool(_PAST.search(clause))

    def future(self, vstart: int) -> bool:
        c0, c1 = self.clause(vstart)
        return bool(_FUTURE.search(self.lower[c0:c1]))


# "the warfarin I take every evening", "the laptop we use": a relative clause inside a question takes
# its fact as given. Modals and wanting leave it open ("the dress I should wear" is still asked).
_PRESUPPOSED = re.compile(
    r"\b(?:the|my|our)\s+(?P<np>[a-z][\w'-]*(?:\s+[a-z][\w'-]*){0,2}?)\s+(?:that\s+|which\s+)?"
    r"(?:i|we)\s+(?:already\s+|currently\s+|usually\s+|still\s+)?(?P<verb>[a-z]+)\b[^,;?]*"
)
_OPEN_VERBS = {"should", "could", "would", "can", "might", "must", "may", "will", "need", "needs", "want", "wanted",
               "ought", "shall", "wish", "hope", "plan", "do", "did", "mean", "meant", "think", "asked", "saw"}


def presupposed(s: Sentence) -> list[Sentence]:
    """The parts of a question it takes as given, each read as its own sentence at its place in
    the message text."""
    if not s.question:
        return []
    out = []
    for m in _PRESUPPOSED.finditer(s.lower):
        if m.group("verb") in _OPEN_VERBS or m.group("np").split()[-1] in FUNCTION_WORDS:
            continue
        a, b = m.start("np"), m.end()
        out.append(_sentence(s.text[a:b].rstrip(" ?!."), s.start + a, s.index))
    return out


def split_sentences(text: str) -> list[Sentence]:
    """The sentences of `text`, read; a ';' ends a statement too."""
    return [_sentence(text[a:b], a, i) for i, (a, b) in enumerate(sentence_spans(text, semicolons=True))]


def _sentence(body: str, start: int, index: int) -> Sentence:
    lower = body.lower().replace("’", "'")
    stripped = _STRIP_LEADING.sub("", lower)
    question = lower.rstrip().endswith("?") and not _REQUEST_QUESTION.match(stripped)
    imperative = bool(_IMPERATIVE.match(stripped))
    return Sentence(
        text=body,
        lower=lower,
        start=start,
        index=index,
        question=question,
        first_person=bool(_FIRST_PERSON.search(lower)),
        imperative=imperative,
        elliptical=len(_WORD.findall(lower)) <= ELLIPTICAL_WORDS,
        third_party_from=_third_party(lower),
        changes=bool(_CHANGE.search(lower)),
        correction=bool(_CORRECTION.search(lower)),
        new_step=bool(_NEW_STEP.search(lower) or _ADJUST.search(lower) or (_THEN_AT_END.search(lower) and imperative))
        and not question and not _SPEAKER_FIRST.match(stripped),
        replaces=bool(_REPLACE.search(lower)) and not _ADDITIVE.search(lower),
        adds=bool(_ADDITIVE.search(lower)),
        boundaries=_without_asides(sorted([m.span() for m in _CLAUSE.finditer(lower)] + _preposed(lower, question)), lower),
    )


# "with only 2,000 rows in my dataset is a split worth it?": a question opened by a phrase it takes
# as given asks from its auxiliary or question word on; the phrase before is a clause of its own
_PREPOSED = re.compile(
    r"\W*(?:(?:so|and|ok|okay|well|but)\W+)?(?:with|since|given|as|because|considering)\b[^,;:?]*?"
    r"(?P<gap>\s)(?=(?:is|are|was|were|do|does|did|should|shall|can|could|would|will|how|what|when|where|which|who|why)\b)"
)


def _preposed(lower: str, question: bool) -> list[tuple[int, int]]:
    m = _PREPOSED.match(lower) if question and not re.search(r"[,;:—–]", lower) else None  # else a comma ends the phrase
    return [m.span("gap")] if m else []
