"""Subject–relation–value facts read from a sentence with a small lexicon of relation words.

"The Eiffel Tower is located in Paris" → (Eiffel Tower, located_in, Paris);
"Mark Twain wrote Heart of Darkness" and "Heart of Darkness is written by Mark Twain" both →
(Heart of Darkness, written_by, Mark Twain): creative works are always the subject, because a
work has one author but an author many works — so "Joseph Conrad also wrote Lord Jim" does not
contradict "Heart of Darkness is written by Joseph Conrad", while "Mark Twain wrote Heart of
Darkness" does. Each relation has a weight: how sure a different value makes a contradiction
(a book has one author: 0.9; a film has many actors and the KB may list only some: 0.6).
The knowledge-graph form "X : `Relation`: Y" (and "~Relation" for the inverse) is read too.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from .claims import Mention, refers_back


@dataclass(frozen=True)
class Relation:
    name: str
    weight: float  # confidence that a different value is a contradiction
    creative: bool  # True: agent → work relation, stored with the work as subject
    words: frozenset[str]  # verbs and participles that express it
    nouns: frozenset[str] = frozenset()  # "director of", "author of"
    kind: str = "wrong_entity"  # the poisoning type reported in metrics


def _r(name: str, weight: float, creative: bool, words: str, nouns: str = "", kind: str = "wrong_entity") -> Relation:
    return Relation(name, weight, creative, frozenset(words.split()), frozenset(nouns.split()), kind)


RELATIONS: tuple[Relation, ...] = (
    _r("written_by", 0.9, True, "wrote write writes written penned authored", "writer author authors novelist screenwriter", "false_attribution"),
    _r("directed_by", 0.9, True, "directed directs direct", "director directors", "false_attribution"),
    _r("produced_by", 0.7, True, "produced produces produce", "producer producers", "false_attribution"),
    _r("composed_by", 0.8, True, "composed composes", "composer", "false_attribution"),
    _r("founded_by", 0.85, True, "founded", "founder founders", "false_attribution"),
    _r("invented_by", 0.85, True, "invented", "inventor", "false_attribution"),
    _r("painted_by", 0.85, True, "painted", "painter", "false_attribution"),
    _r("created_by", 0.75, True, "created creates", "creator", "false_attribution"),
    _r("starring", 0.6, True, "starred stars starring star featured features appeared acted", "cast", "false_attribution"),
    _r("located_in", 0.95, False, "located situated headquartered based lies", "", "wrong_location"),
    _r("born_in", 0.9, False, "born", "birthplace", "wrong_location"),
    _r("capital", 0.95, False, "", "capital", "wrong_location"),
    _r("released", 0.9, False, "released premiered published", "release", "invented_date"),
    _r("genre", 0.6, False, "", "genre genres", "wrong_attribute"),
    _r("sport", 0.85, False, "", "sport", "wrong_attribute"),
    _r("nationality", 0.85, False, "", "nationality country", "wrong_location"),
    _r("spouse", 0.8, False, "married", "spouse wife husband", "wrong_entity"),
    _r("population", 0.9, False, "", "population inhabitants", "wrong_number"),
    _r("died", 0.9, False, "died", "", "invented_date"),
)

# Relations whose subjects are the same kind of thing: a film "written by" A, claimed "directed by" B
# is suspicious (B may be made up) but not a contradiction.
CREATOR_FAMILY = frozenset({"written_by", "directed_by", "produced_by", "created_by", "composed_by"})

_BY_WORD: dict[str, Relation] = {}
for _rel in RELATIONS:
    for _w in _rel.words | _rel.nouns:
        _BY_WORD.setdefault(_w, _rel)

RELATION_BY_NAME = {r.name: r for r in RELATIONS}
_LOCATED = RELATION_BY_NAME["located_in"]

_WORD = re.compile(r"[\w'’\-]+")
_BE = frozenset("is was were are be been being 's".split())
_TRIPLE = re.compile(r"^(?P<left>.*?)\s*:\s*`(?P<inverse>~?)(?P<rel>[^`]+)`\s*:\s*(?P<right>.+)$")
_PERSON_PRONOUNS = frozenset("he she they him her them".split())


@dataclass(frozen=True)
class Fact:
    subject: Mention
    relation: Relation
    value: Mention


def extract_facts(text: str, mentions: list[Mention], context_subject: Mention | None = None) -> list[Fact]:
    """Facts stated by `text` (one clause or one KB sentence)."""
    triple = _TRIPLE.match(text)
    if triple:
        return _triple_facts(triple, mentions)
    words = [(m.group().lower(), m.start(), m.end()) for m in _WORD.finditer(text)]
    facts: list[Fact] = []
    inside = [(m.start, m.end) for m in mentions if m.kind == "name"]  # "The Paris Wife" is no spouse
    triggers = [(i, _BY_WORD[w]) for i, (w, a, b) in enumerate(words)
                if w in _BY_WORD and not any(s <= a and b <= e for s, e in inside)]
    if not triggers:  # "X is in Y": a location, when nothing more specific is said
        triggers = [(i, _LOCATED) for i, (w, _, _) in enumerate(words) if w == "in" and i and words[i - 1][0] in _BE][:1]
    for n, (i, rel) in enumerate(triggers):
        lo = words[triggers[n - 1][0]][2] if n else 0
        hi = words[triggers[n + 1][0]][1] if n + 1 < len(triggers) else len(text)
        pos = words[i][1]
        left = [m for m in mentions if lo <= m.start and m.end <= pos]
        right = [m for m in mentions if m.start >= words[i][2] and m.end <= hi]
        facts += _facts_at(text, words, i, rel, left, right, context_subject)
    return facts


def relations_in(text: str) -> set[str]:
    """The names of the relations the text's words express ("directed" → directed_by)."""
    return {_BY_WORD[w].name for w in (w.lower() for w in _WORD.findall(text)) if w in _BY_WORD}


def has_relation_word(text: str) -> bool:
    """Does the text use a relation the lexicon knows ("wrote", "located", "genre")?"""
    return any(w.lower() in _BY_WORD for w in _WORD.findall(text))


def _facts_at(text: str, words: list[tuple[str, int, int]], i: int, rel: Relation, left: list[Mention],
              right: list[Mention], context_subject: Mention | None) -> list[Fact]:
    """The facts around one relation word. Subjects are names (a lower-case term such as "horror"
    is a value, never a subject); "it"/"that one" stand for the previous claim's subject."""
    word = words[i][0]
    after = [w for w, _, _ in words[i + 1 : i + 3]]
    before = words[i - 1][0] if i else ""
    left_names, right_names = _names(left), _names(right)
    pronoun_subject = [context_subject] if context_subject and (refers_back(text[: words[i][1]]) or not left_names) else []
    if word in rel.nouns and "of" in after[:1]:
        # "A was the director of W" / "the director of W is A" / "the capital of France is Paris";
        # "Paris has a population of 2.1 million": no name after "of", the subject is on the left
        of_end = words[i + 1][2]
        objects = [m for m in right if m.start >= of_end]
        if not rel.creative and left_names and not _names(objects):
            return [Fact(left_names[-1], rel, v) for v in objects[:1]]
        subjects = _names(objects)[:1]
        values = left[-1:] or [m for m in objects if m not in subjects][:1]
        return [Fact(s, rel, v) for s in subjects for v in values if v.key != s.key]
    if rel.creative:
        if before in _BE and "by" in after:  # "W is written by A"
            works = left_names[-1:] or pronoun_subject
            return [Fact(w, rel, a) for w in works for a in right_names]
        into = "in" in after[:1] or word in ("appeared", "acted")
        if rel.name == "starring" and not into:  # "W stars A", "W is starring A", "It starred A"
            works = left_names[-1:] or pronoun_subject
            return [Fact(w, rel, a) for w in works for a in right_names]
        # active: "A wrote W", "A starred in W"; "He also wrote W": the person named just before
        if _pronoun_right_before(words, i):  # "Jane and her sister wrote W": no single agent
            agent = context_subject if context_subject is not None and _looks_like_person(context_subject) else None
            if agent is None or left_names:
                return []
            return [Fact(w, rel, agent) for w in right_names if w.key != agent.key]
        if not left_names:
            return []
        agent = left_names[-1]
        works = right_names or ([context_subject] if context_subject and refers_back(text[words[i][2]:]) else [])
        return [Fact(w, rel, agent) for w in works]
    # attributes: "X is located in Y", "X was released in 2014", "X has genre Y", "X release date: March 2024"
    subjects = left_names[-1:] or pronoun_subject
    values = right[:3] if rel.name in ("genre", "nationality") or rel.kind == "wrong_location" else right[:1]
    return [Fact(s, rel, v) for s in subjects for v in values if v.key != s.key]


def _looks_like_person(m: Mention) -> bool:
    """"Steven Spielberg", "J.K. Rowling": two or three capitalised words, no article, connector or
    digit (a work's title is rarely shaped like that: "The Terminator", "Titanic", "Heart of Darkness")."""
    words = m.text.split()
    return (m.kind == "name" and 2 <= len(words) <= 3 and all(w[:1].isupper() for w in words)
            and words[0].lower() not in ("the", "a", "an") and not any(ch.isdigit() for ch in m.text))


def _names(mentions: list[Mention]) -> list[Mention]:
    return [m for m in mentions if m.kind == "name"]


def _pronoun_right_before(words: list[tuple[str, int, int]], i: int) -> bool:
    """"He also wrote W": the agent is a pronoun, not the name mentioned earlier in the clause."""
    for w, _, _ in reversed(words[max(0, i - 3) : i]):
        if w in _PERSON_PRONOUNS:
            return True
    return False


def _triple_facts(match: re.Match, mentions: list[Mention]) -> list[Fact]:
    rel_words = [w.lower() for w in _WORD.findall(match.group("rel"))]
    rel = next((_BY_WORD[w] for w in rel_words if w in _BY_WORD), None)
    if rel is None:
        rel = Relation("kg:" + " ".join(rel_words), 0.5, False, frozenset())
    split = match.start("rel")
    left = [m for m in mentions if m.end <= split]
    right = [m for m in mentions if m.start >= match.start("right")]
    if not left or not right:
        return []
    inverse = bool(match.group("inverse"))
    a, b = left[-1], right[0]
    # "A : `Film Produced`: W" (A produced W) and "W : `~Film Produced`: A" both → (W, produced_by, A)
    if rel.creative:
        subject, value = (a, b) if inverse else (b, a)
    else:
        subject, value = (b, a) if inverse else (a, b)
    return [Fact(subject, rel, value)]
