"""Split text into claims and find what each claim is about (its mentions).

A claim is a sentence or an independent clause. What makes it checkable is a mention: a name
(a capitalised span such as "Eiffel Tower" or "Hobo with a Shotgun", or a term the knowledge base
knows, found case-insensitively), a number or a date. Greetings, questions and opinions without
mentions are not checkable and always pass (an answer with no verifiable claim scores accuracy 1.0).

Everything here is pure string work (no model): a 200-word answer takes well under a millisecond.
"""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Iterable, Mapping

from .sentences import split_sentences

# Words that are capitalised only because they start a sentence (or are pronouns and fillers).
STOP = frozenset("""
a about above actually after again against ah all also although always am an and another any anyway are
aren't around as at aw be because been before being below best better between both but by can cannot
certainly could definitely did do does doing done down during each either else enjoy even ever every
exactly few for from further glad good great had has have having he hello her here hers herself hey hi
him himself his hmm how however i if in indeed into is it it's its itself just let like likely maybe me
might mine more most much must my myself nice no nope nor not nothing now of off oh ok okay on once one
only or other our ours ourselves out over own perhaps please pretty probably quite rather really right
same see she should since so some something sorry still such sure than thank thanks that that's the
their theirs them themselves then there these they this those though through thus to too totally true
under unfortunately until up us very was we well were what when where whether which while who whom
whose why will with would wow yeah yes yet you your yours yourself yourselves great awesome absolutely
cool fun interesting wonderful amazing honestly personally speaking have has had do does did i'm i've
you're you've he's she's we're they're don't doesn't didn't isn't wasn't can't won't
""".split())

# Connectors allowed inside a name ("Hobo with a Shotgun", "Heart of Darkness", "Leonardo da Vinci").
CONNECTORS = frozenset("of the a an with for in on to at de da del della di du la le von van der den y & 's".split())
MONTHS = ("january february march april may june july august september october november december").split()
NEGATIONS = frozenset("not n't never no neither nor nobody nothing didn't doesn't don't isn't wasn't weren't aren't hasn't haven't hadn't won't can't cannot".split())
PRONOUN_SUBJECTS = ("it", "this", "that", "that one", "this one", "the movie", "the film", "the book",
                    "the novel", "the show", "the series", "the song", "the album", "the game")

_TOKEN = re.compile(r"\w+(?:['’\-.&]\w+)*|\d+(?:[.,]\d+)*")
_NUMBER = re.compile(r"(?<![\w.])(\d{1,3}(?:,\d{3})+|\d+(?:\.\d+)?)(?:\s*(million|billion|thousand|trillion|%|percent))?(?![\w])")
_CLAUSE_BREAK = re.compile(r";\s+|,\s+(?:but|whereas|while|although)\s+|\s+but\s+|,\s+and\s+(?=(?:he|she|it|they|this|that|[A-Z]))")
_RELATIVE = re.compile(r",\s+(?:which|who)\s+")
_TITLES = frozenset("Mr Mrs Ms Dr St Sr Jr Prof Mt Sir Gen Col Capt Lt Rev".split())
_QUALIFIER = re.compile(r"\s*\([^()]{1,60}\)")
_QUOTED = re.compile(r"[\"“]([^\"”]{2,80})[\"”]")


@lru_cache(maxsize=100_000)
def normalize(text: str) -> str:
    """The matching key of a mention: lower case, no accents, no leading article, no possessive."""
    text = re.sub(r"\([^)]*\)", " ", text)  # "Youth in Revolt (Romantic comedy Film)" → "youth in revolt"
    text = unicodedata.normalize("NFKD", text)
    text = "".join(ch for ch in text if not unicodedata.combining(ch)).lower()
    text = re.sub(r"['’]s\b", "", text)
    text = re.sub(r"[^\w\s]", " ", text)
    words = text.split()
    while words and words[0] in ("the", "a", "an"):
        words = words[1:]
    return " ".join(words)


@dataclass(frozen=True)
class Mention:
    text: str  # as written
    key: str  # normalize(text), or the number/date value for numbers and dates
    kind: str  # "name" (capitalised or quoted) | "term" (a KB name written in lower case) | "number" | "date"
    start: int
    end: int


@dataclass
class Claim:
    text: str
    mentions: list[Mention] = field(default_factory=list)
    context_subject: Mention | None = None  # what "it"/"that one" refers to (the previous claim's subject)
    index: int = 0

    @property
    def checkable(self) -> bool:
        return bool(self.mentions) and not self.text.rstrip().endswith("?")

    @property
    def names(self) -> list[Mention]:
        return [m for m in self.mentions if m.kind == "name"]


# ----------------------------------------------------------------------------- splitting


def split_clauses(sentence: str) -> list[str]:
    """Independent clauses; a relative clause ("X, which starred Y") becomes "X starred Y"."""
    out: list[str] = []
    for part in _CLAUSE_BREAK.split(sentence):
        part = part.strip(" ,")
        if not part:
            continue
        pieces = _RELATIVE.split(part)
        out.append(pieces[0])
        for prev, rel in zip(pieces, pieces[1:]):
            antecedent = _last_capitalised_span(prev)
            out.append(f"{antecedent} {rel}" if antecedent else rel)
    return out


def _last_capitalised_span(text: str) -> str:
    spans = [m for m in find_mentions(text) if m.kind == "name"]
    return spans[-1].text if spans else ""


# ----------------------------------------------------------------------------- mentions


def find_mentions(text: str, lexicon: Mapping[str, str] | None = None, max_ngram: int = 4) -> list[Mention]:
    """Names, numbers and dates in `text`; with a lexicon, known lower-case terms too ("mystery")."""
    mentions = _dates(text)
    taken = [(m.start, m.end) for m in mentions]
    for m in _quoted(text) + _capitalised(text) + _numbers(text):  # "Claude 3" is a name, not a number
        if not _overlaps(m.start, m.end, taken):
            mentions.append(m)
            taken.append((m.start, m.end))
    if lexicon:
        for m in _lexicon_hits(text, lexicon, max_ngram):
            if not _overlaps(m.start, m.end, taken):
                mentions.append(m)
                taken.append((m.start, m.end))
    mentions.sort(key=lambda m: m.start)
    return mentions


def _overlaps(start: int, end: int, taken: Iterable[tuple[int, int]]) -> bool:
    return any(start < e and s < end for s, e in taken)


def _dates(text: str) -> list[Mention]:
    out = []
    pattern = r"\b(" + "|".join(MONTHS) + r")\s+(?:(\d{1,2}),?\s+)?(\d{4})\b"
    for m in re.finditer(pattern, text, re.IGNORECASE):
        key = f"{m.group(3)}-{MONTHS.index(m.group(1).lower()) + 1:02d}"
        out.append(Mention(m.group(0), key, "date", m.start(), m.end()))
    return out


def _numbers(text: str) -> list[Mention]:
    out = []
    for m in _NUMBER.finditer(text):
        value = float(m.group(1).replace(",", ""))
        scale = {"thousand": 1e3, "million": 1e6, "billion": 1e9, "trillion": 1e12}.get((m.group(2) or "").lower(), 1)
        kind = "date" if scale == 1 and 1000 <= value <= 2100 and "." not in m.group(1) and "," not in m.group(1) else "number"
        key = str(int(value)) if kind == "date" else f"{value * scale:g}{'%' if (m.group(2) or '') in ('%', 'percent') else ''}"
        out.append(Mention(m.group(0), key, kind, m.start(), m.end()))
    return out


def _quoted(text: str) -> list[Mention]:
    return [Mention(m.group(1), normalize(m.group(1)), "name", m.start(1), m.end(1))
            for m in _QUOTED.finditer(text) if normalize(m.group(1))]


def _capitalised(text: str) -> list[Mention]:
    """Runs of capitalised words, with connectors inside ("Lord of the Rings"), no sentence fillers."""
    tokens = list(_TOKEN.finditer(text))
    out: list[Mention] = []
    i = 0
    while i < len(tokens):
        if not _is_capital(tokens[i].group()):
            i += 1
            continue
        j = i
        while j + 1 < len(tokens) and _same_span(text, tokens[j], tokens[j + 1]):
            nxt = tokens[j + 1].group()
            if _is_capital(nxt) or nxt[0].isdigit():
                j += 1
                continue
            # a connector belongs to the name only when a capitalised word follows it
            k = j + 1
            while k < len(tokens) and tokens[k].group().lower() in CONNECTORS and _same_span(text, tokens[k - 1], tokens[k]):
                k += 1
            if k > j + 1 and k < len(tokens) and _is_capital(tokens[k].group()) and _same_span(text, tokens[k - 1], tokens[k]):
                j = k
                continue
            break
        span = tokens[i : j + 1]
        while span and (span[0].group().lower() in STOP and span[0].group().lower() not in ("the",)):
            span = span[1:]
        while span and span[-1].group().lower() in (STOP | CONNECTORS):
            span = span[:-1]
        if span and not span[0].group()[0].isdigit() and not (len(span) == 1 and span[0].group().lower() in ("the", "i")):
            start, end = span[0].start(), span[-1].end()
            qualifier = _QUALIFIER.match(text, end)
            if qualifier:  # "The Good Doctor (Thriller Film)": the qualifier belongs to the name
                end = qualifier.end()
                while j + 1 < len(tokens) and tokens[j + 1].start() < end:
                    j += 1
            key = normalize(text[start:end])
            if key and key not in STOP:
                out.append(Mention(text[start:end], key, "name", start, end))
        i = j + 1
    return out


def _is_capital(token: str) -> bool:
    return token[:1].isupper()


def _same_span(text: str, left: re.Match, right: re.Match) -> bool:
    """Two tokens belong to one name only when nothing but spaces separates them, or the dot
    of an abbreviation or initial ("Dr. Seuss", "J.K. Rowling", "Robert Downey Jr.")."""
    gap = text[left.end():right.start()]
    if "\n" in gap:
        return False
    if gap.strip() == "":
        return True
    return gap.rstrip() == "." and (len(left.group()) <= 2 or "." in left.group() or left.group() in _TITLES)


def _lexicon_hits(text: str, lexicon: Mapping[str, str], max_ngram: int) -> list[Mention]:
    tokens = list(_TOKEN.finditer(text))
    keys = [normalize(t.group()) for t in tokens]
    out: list[Mention] = []
    i = 0
    while i < len(tokens):
        hit = None
        for n in range(min(max_ngram, len(tokens) - i), 0, -1):
            key = " ".join(k for k in keys[i : i + n] if k)
            if key in lexicon and (n > 1 or (key not in STOP and len(key) >= 4)):
                hit = n
                break
        if hit:
            start, end = tokens[i].start(), tokens[i + hit - 1].end()
            out.append(Mention(text[start:end], lexicon[" ".join(k for k in keys[i : i + hit] if k)], "term", start, end))
            i += hit
        else:
            i += 1
    return out


# ----------------------------------------------------------------------------- claims


def split_claims(text: str, lexicon: Mapping[str, str] | None = None, context: str = "",
                 conversation: str = "") -> list[Claim]:
    """The claims of `text`. `context` (text before it, e.g. the part of a stream already released)
    gives "it" and "that one" in the first claim something to refer to. `conversation` (the last
    message before the answer) does so too, but only for claims that plainly refer back ("She also
    wrote X" after "Has Kirsten Smith written others?"): a new topic must not inherit its subject."""
    claims: list[Claim] = []
    previous_subject = last_subject(context, lexicon)
    earlier = last_subject(conversation, lexicon) if previous_subject is None else None
    for sentence in split_sentences(text):
        for clause in split_clauses(sentence):
            mentions = find_mentions(clause, lexicon)
            subject = previous_subject or (earlier if refers_back(clause) or refers_to_someone(clause) else None)
            claims.append(Claim(clause, mentions, context_subject=subject, index=len(claims)))
            previous_subject = _subject_of(mentions) or previous_subject
    return claims


def last_subject(text: str, lexicon: Mapping[str, str] | None = None) -> Mention | None:
    """What the last sentence of `text` is about, for "it" and "she" after it: its first name the
    KB knows, else its first name ("Tell me about the Acme X200" is about the Acme X200)."""
    sentences = split_sentences(text) if text.strip() else []
    if not sentences:
        return None
    mentions = find_mentions(sentences[-1], lexicon)
    known = [m for m in mentions if m.kind == "name" and lexicon and m.key in lexicon]
    return known[0] if known else _subject_of(mentions)


def _subject_of(mentions: list[Mention]) -> Mention | None:
    names = [m for m in mentions if m.kind == "name"]
    return names[0] if names else None


def negated(text: str) -> bool:
    """True when the clause denies something ("did not direct", "never won")."""
    words = re.findall(r"[\w'’]+", text.lower().replace("’", "'"))
    return any(w in NEGATIONS or w.endswith("n't") for w in words)


_PERSONAL = re.compile(r"\b(?:he|she|they|him|her|them|his|their)\b", re.IGNORECASE)


def refers_to_someone(text: str) -> bool:
    """True when the clause names someone by a pronoun ("She also wrote X", "plays for them")."""
    return bool(_PERSONAL.search(text))


def refers_back(text: str) -> bool:
    """True when the clause talks about something named earlier ("it", "that one", "the movie")."""
    low = f" {text.lower()} "
    return any(f" {p} " in low or f" {p}." in low or f" {p}!" in low or f" {p}," in low for p in PRONOUN_SUBJECTS)
