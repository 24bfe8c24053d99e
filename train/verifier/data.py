"""Build the verifier's training pairs: premise, claim, label (supported | contradicted | not_covered).

    python train/verifier/data.py                 # all training rows -> train/verifier/build/{train,dev}.jsonl
    python train/verifier/data.py --rows 1000     # the first 1,000 rows only (a quick look)
    python train/verifier/data.py --repo-rows     # HaluEval rows 500-999 from bench/data, no download
    python train/verifier/data.py --no-clash-dev  # without the hand-written clash dev pairs

Labels are NLI-style: `supported` = the premise entails the claim, `contradicted` = they cannot both
be true, `not_covered` = compatible but not entailed (another subject, an added detail, a value
inside a stated range, a next step). The clash/memory judge reads `contradicted` as a clash.

Sources (licences in SOURCES.md): HaluEval QA rows 0-4,999 only (halueval.training_rows refuses
any other), bench/data/clash_pairs.jsonl and clash_natural.jsonl, split `dev` only (the project's
own, Apache-2.0). Every pair records its source and row ("halueval_qa:123").

Per HaluEval row, four tasks:
- qa: the question with the right answer (supported), another answer of the same kind or a changed
  date/number/yes-no (contradicted), HaluEval's hallucinated answer (contradicted), each as a short
  answer after the question, as a full sentence built from the question's words, and both; the
  right answer against the passage with its answer sentences replaced by another row's sentences
  (not_covered);
- passage: a sentence of the passage rewritten: its number in another unit or rounded, its date in
  another format (supported), a detail dropped (supported); the sentence itself, its clauses, the
  sentence without a leading phrase (supported, truths.sub_claims); one fact changed: a number (also
  with units), a date, an entity of the same kind from the data, a negation inserted or removed, the
  roles swapped, a value the same passage states elsewhere (contradicted); negations in pairs with
  the same words: the false value negated (supported), the true one (contradicted); the sentence
  against the passage without it (not_covered);
- statement: earlier / later statement pairs built from the same sentences (premise = the earlier):
  same slot of the same subject changed (contradicted), restated in other words (supported), detail
  added (not_covered) or dropped (supported), another subject (not_covered), a range and a value
  inside it (not_covered one way, supported the other) or outside it (contradicted), a clause of it
  (supported), negations in pairs as in passage; some turned
  into the first person ("I was born in ..."), markers ("Actually, ", "Update: ") on every label alike;
- clash: the dev pairs of the clash sets (first and last user turn), as they are.

No shortcuts: within each (task, question present, claim length, share of claim words absent from
the premise) bin, pairs are sampled to the same label shares (40 % supported, 40 % contradicted,
20 % not covered), so neither the length nor the word overlap nor the presence of a question says
anything about the label (checked by tests/test_verifier_data.py). The clash pairs and the negation
pairs are kept whole. Where a claim has no new word (a verbatim sentence), not_covered is scarce:
the passage task's bins keep supported and contradicted up to 3x what not_covered alone allows.
Rows whose number ends in 9 go to dev.jsonl (checkpoint selection), the rest to train.jsonl.
"""

from __future__ import annotations

import argparse
import json
import random
import re
import sys
from collections import Counter, defaultdict
from collections.abc import Iterable
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import halueval  # noqa: E402
import quantities as qty  # noqa: E402
import textops as tx  # noqa: E402
import truths  # noqa: E402

SEED = 20240544
BUILD = HERE / "build"
LABELS = ("supported", "contradicted", "not_covered")
SHARES = {"supported": 0.4, "contradicted": 0.4, "not_covered": 0.2}
# windows are what the policy reads, four per claim: most say nothing about the claim, and a model
# that calls one of those a contradiction blocks a right answer
TASK_SHARES = {"window": {"supported": 0.3, "contradicted": 0.3, "not_covered": 0.4}}
# a claim in the passage's own words (verbatim, a clause) has few not_covered peers in its bin (a
# claim with no new word is rarely neither entailed nor contradicted): there, supported and
# contradicted are kept up to this many times what not_covered alone would allow
SCARCE_NOT_COVERED = {"passage": 3.0}
# against its own window a claim with no new word (a verbatim sentence, a value the window states
# elsewhere) is all but never not_covered (3 of ~3,300 such pairs from 500 rows): in that bin
# supported and contradicted are balanced between themselves alone (iteration 3 kept 2 verbatim),
# NO_NEW_WORD_KEEP of the scarcer of the two, each with (half the time) its own not_covered partner
# (the same claim against a window away from it or of another row), so not_covered keeps its share
NO_NEW_WORD_BIN, NO_NEW_WORD_KEEP = ("window", 0), 0.4
NEGATION_DROP = 0.5  # the share of inserted negations (contradicted) dropped where no negation pair stands in
CLASH_FILES = ("clash_pairs.jsonl", "clash_natural.jsonl")
CLASH_SPLIT = "dev"  # the only clash split that may be trained on
MARKERS = ["", "", "", "Actually, ", "Update: ", "Also, ", "Just so you know, ", "To be clear, ", "Correction: ",
           "Note: ", "One more thing: ", "For the record, "]
RELATIVES = ["My sister", "My brother", "My manager", "My wife", "My husband", "My friend", "My colleague",
             "My son", "My daughter", "My neighbour", "My father", "My mother"]
PERSON_NOUNS = {"actor", "actress", "director", "singer", "musician", "writer", "author", "player", "president",
                "politician", "composer", "producer", "artist", "rapper", "poet", "novelist", "footballer",
                "coach", "member", "founder", "man", "woman", "person", "comedian", "journalist", "guitarist", "drummer", "vocalist", "scientist", "king", "queen", "painter", "architect",
                "screenwriter", "cricketer", "boxer", "wrestler", "driver", "pitcher", "quarterback", "host",
                "businessman", "engineer", "philosopher", "physicist", "chemist", "mathematician", "leader"}
DEMONYMS = set("""American British English French German Italian Spanish Canadian Australian Irish Scottish Welsh
Japanese Chinese Indian Russian Mexican Brazilian Dutch Swedish Norwegian Danish Finnish Polish Greek Turkish Korean
Israeli Egyptian Nigerian Argentine Argentinian Chilean Colombian Cuban Austrian Swiss Belgian Portuguese Hungarian
Czech Ukrainian Filipino Pakistani Iranian Thai Vietnamese Indonesian Malaysian Peruvian Venezuelan Jamaican Kenyan
Ghanaian Icelandic Croatian Serbian Romanian Bulgarian Slovak Slovenian Estonian Latvian Lithuanian Georgian
Armenian Lebanese Syrian Iraqi Saudi Moroccan Algerian Tunisian Ethiopian Scandinavian Taiwanese Singaporean""".split())
PLACE_NOUNS = {"city": "place", "town": "place", "village": "place", "country": "country", "nation": "country",
               "state": "region", "county": "region", "province": "region", "region": "region", "island": "place",
               "river": "river", "continent": "country", "borough": "place", "suburb": "place", "district": "region"}


# ---- small helpers -----------------------------------------------------------------------------


def norm(text: str) -> str:
    return " ".join(tx.words(text))


def absent_share(premise: str, claim: str) -> float:
    """The share of the claim's words that the premise does not contain (the word-overlap baseline)."""
    cw = tx.words(claim)
    if not cw:
        return 0.0
    pw = set(tx.words(premise))
    return sum(w not in pw for w in cw) / len(cw)


def has_question(claim: str) -> bool:
    return "?" in claim


def length_bin(n: int) -> int:
    if n <= 12:
        return (n + 1) // 2
    for i, hi in enumerate((15, 18, 22, 27, 33, 40, 50)):
        if n <= hi:
            return 7 + i
    return 20


def overlap_bin(share: float) -> int:
    return 0 if share < 0.05 else 1 if share < 0.1 else 1 + min(9, int(share * 10))


def contains_words(text: str, part: str) -> bool:
    p = norm(part)
    return bool(p) and f" {p} " in f" {norm(text)} "


NEGATION = re.compile(r"\b(?:not|no|never|n't|neither|nor|isn't|wasn't|aren't|weren't|didn't|doesn't)\b", re.I)


# ---- answer kinds and pools --------------------------------------------------------------------


def answer_kind(question: str, answer: str) -> str:
    a, q = answer.strip().rstrip("."), question.lower()
    if a.lower() in ("yes", "no"):
        return "yesno"
    slots = qty.find_slots(a)
    if slots and slots[0].start == 0 and slots[0].end >= len(a) - 1:
        return {"year": "year", "date": "date", "month": "date"}.get(slots[0].kind, "number")
    if re.fullmatch(r"[\d.,]+", a):
        return "number"
    m = re.search(r"\b(?:what|which)\s+(?:[a-z-]+\s+){0,2}?([a-z]+)\b", q)
    head = m.group(1) if m else ""
    if (head in PERSON_NOUNS or re.search(r"\bwho(?:m|se)?\b", q)) and shape(a)[0] in (2, 3, 4) and "," not in a:
        return "person"
    if head in PLACE_NOUNS:
        return PLACE_NOUNS[head]
    if re.match(r"(?:in\s+)?where\b", q):
        return "place"
    if a in DEMONYMS or a.replace("-", " ").split()[-1] in DEMONYMS and len(a.split()) <= 2:
        return "nationality"
    if head and head not in ("is", "was", "are", "were", "did", "does", "do", "year", "type", "kind", "name", "the"):
        return f"thing:{head}"
    return "other"


def shape(name: str) -> tuple:
    """What two names of one kind share to be swapped: word count, a comma, capitals, digits."""
    toks = name.split()
    return (len(toks), "," in name, all(t[:1].isupper() for t in toks if t.lower() not in ("of", "the", "and", "de")),
            any(c.isdigit() for c in name))


class Pools:
    """Answers of the training rows grouped by kind: what a same-kind swap draws from."""

    def __init__(self, rows: Iterable[tuple[int, dict]]) -> None:
        by_kind: dict[str, set[str]] = defaultdict(set)
        for _, row in rows:
            kind = answer_kind(row["question"], row["right_answer"])
            a = row["right_answer"].strip().rstrip(".")
            if kind in ("yesno", "year", "date", "number") or not (1 <= len(a.split()) <= 6):
                continue
            by_kind[kind].add(a)
        self.by_kind = {k: sorted(v) for k, v in by_kind.items() if len(v) >= 3}
        # capitalised names only: what a passage sentence may have one of swapped
        self.names: dict[str, str] = {}
        for kind, names in self.by_kind.items():
            for name in names:
                if name[:1].isupper() and len(name) >= 4 and name not in self.names:
                    self.names[name] = kind
        self._name_re = re.compile(r"\b(" + "|".join(re.escape(n) for n in sorted(self.names, key=len, reverse=True)) + r")\b") \
            if self.names else None

    def other(self, kind: str, answer: str, rng: random.Random) -> str | None:
        pool = self.by_kind.get(kind)
        if not pool:
            return None
        want = shape(answer)
        for _ in range(16):
            cand = pool[rng.randrange(len(pool))]
            if shape(cand) == want and not contains_words(cand, answer) and not contains_words(answer, cand):
                return cand
        return None

    def names_in(self, text: str) -> list[re.Match]:
        return list(self._name_re.finditer(text)) if self._name_re else []


# ---- the answer made wrong ---------------------------------------------------------------------


def wrong_answer(question: str, answer: str, kind: str, pools: Pools, rng: random.Random) -> tuple[str, str] | None:
    """Another answer of the same kind, and how it was made."""
    a = answer.strip().rstrip(".")
    if kind == "yesno":
        return ("no" if a.lower() == "yes" else "yes"), "yesno"
    m = re.search(r",?\s+([^,]+?)\s+or\s+([^,?]+?)\??$", question.strip())
    if m:  # "Which ..., A or B?": the other option, from the question itself
        x, y = m.group(1).strip(), m.group(2).strip()
        x = re.sub(r"^(?:.*\b(?:first|more|older|younger|earlier|later|larger|taller|longer)\b,?\s+)", "", x)
        for opt, other in ((x, y), (y, x)):
            if contains_words(a, opt) or contains_words(opt, a):
                if other and not contains_words(other, a):
                    return other, "entity_option"
    slots = qty.find_slots(a)
    if slots:
        made = qty.falsify(slots[0], rng)
        if made:
            return qty.apply(a, slots[0], made[0]), made[1]
    other = pools.other(kind, a, rng)
    if other:
        return other, "entity"
    return None


def short_span(hallucinated: str, question: str, answer: str) -> str | None:
    """The new words of a hallucinated answer: what it says instead of the right answer."""
    qwords = set(tx.words(question)) | tx.STOP
    tokens = hallucinated.strip().rstrip(".").split()
    runs: list[list[str]] = []
    run: list[str] = []
    for tok in tokens:
        w = tx.words(tok)
        new = bool(w) and any(x not in qwords for x in w)
        glue = tok.lower() in ("of", "the", "and", "de", "&", "von", "van")
        if new or (glue and run):
            run.append(tok)
        else:
            if run:
                runs.append(run)
            run = []
    if run:
        runs.append(run)
    best = None
    for r in runs:
        while r and r[-1].lower() in ("of", "the", "and", "de", "&", "von", "van"):
            r = r[:-1]
        if not r or len(r) > 6:
            continue
        score = (sum(t[:1].isupper() or t[:1].isdigit() for t in r), len(r))
        if best is None or score > best[0]:
            best = (score, r)
    if best is None:
        return None
    span = " ".join(best[1]).strip(",;:()\"'“”")
    if not span or contains_words(answer, span) or contains_words(span, answer):
        return None
    return span


def halu_is_noisy(hallucinated: str, answer: str) -> bool:
    """A "hallucinated" answer that states the right answer without negating it (HaluEval has some)."""
    return contains_words(hallucinated, answer) and not NEGATION.search(hallucinated)


def negated_falsehood(sentence: str, changes: list[tuple[str, str]], vocab: tx.Vocabulary) -> tuple[str, str] | None:
    """A one-fact change of a single-valued slot (a date, a number, the roles) with a negation
    inserted: true again ("X was not born in 1975" when he was born in 1971), so that "not" alone
    says nothing. Only where the negation plainly governs the change: one short clause, the change
    after the negation with no comma or parenthesis between them."""
    for text, how in changes:
        if how not in ("date", "number", "converted_number", "unit_confusion", "roles"):
            continue
        neg = tx.negate(text, vocab)
        if not neg or neg[1] != "negation_inserted" or len(tx.words(text)) > 18:
            continue
        at = next((i for i, (a, b) in enumerate(zip(neg[0], text)) if a != b), len(text))  # where "not" went in
        if how == "roles":
            if re.search(r"[,;()]", text):
                continue
            return neg[0], how
        start = next((i for i, (a, b) in enumerate(zip(text, sentence)) if a != b), len(text))  # the change
        if start <= at or re.search(r"[,;()]", text[at:start]) or text.count("(", 0, start) > text.count(")", 0, start):
            continue
        return neg[0], how
    return None


# ---- premises without the fact -----------------------------------------------------------------


def without(passage_sents: list[str], drop: list[int], fillers: list[str], rng: random.Random) -> str | None:
    """The passage with the sentences `drop` replaced by sentences of other rows (same length, about)."""
    keep = [s for i, s in enumerate(passage_sents) if i not in drop]
    if not keep or not fillers:
        return None
    out = list(passage_sents)
    for i in drop:
        out[i] = fillers[rng.randrange(len(fillers))]
    return " ".join(out)


def drop_slot(sentence: str, rng: random.Random) -> str | None:
    """The sentence without one of its dates or numbers, where that leaves it grammatical: a
    parenthesis holding it ("(born 2 March 1991)"), or a phrase "in 1991" / "on 2 March 1991"."""
    slots = [s for s in qty.find_slots(sentence) if s.kind != "small"]
    if not slots:
        return None
    slot = slots[rng.randrange(len(slots))]
    open_, close = sentence.rfind("(", 0, slot.start), sentence.find(")", slot.end)
    if open_ != -1 and close != -1 and ")" not in sentence[open_:slot.start]:
        out = sentence[:open_].rstrip() + sentence[close + 1:]
    else:
        m = re.search(r"(?:,\s*|\s+)(?:in|on|since|from|by|at|during)\s+(?:the\s+)?$", sentence[:slot.start])
        if not m or re.match(r"\s*[A-Za-z]*\d", sentence[slot.end:]):
            return None
        out = sentence[:m.start()] + sentence[slot.end:]
    out = re.sub(r"\s+([,.;])", r"\1", re.sub(r"\s{2,}", " ", out)).strip()
    return out if len(tx.words(out)) >= 4 and out != sentence else None


# ---- first person ------------------------------------------------------------------------------

_PERSON_START = re.compile(rf"^(?P<name>{tx.NAME})(?:\s*\((?P<paren>[^)]*)\))?,?\s+(?P<verb>is|was|has|had|lives|lived|works|worked|played|plays|moved|studied|grew)\b")
_FIRST = {"is": "am", "was": "was", "has": "have", "had": "had", "lives": "live", "lived": "lived", "works": "work",
          "worked": "worked", "played": "played", "plays": "play", "moved": "moved", "studied": "studied", "grew": "grew"}


_PERSON_NOUN = re.compile(r"^\s*(?:not\s+)?(?:an?|the)\s+(?:(?!(?:by|of|in|for|from|with|on|at)\b)[\w'-]+,?\s+){0,5}?(?:" + "|".join(sorted(PERSON_NOUNS)) + r")s?\b")


def first_person(sentence: str, subject: str = "I") -> str | None:
    """"Kevin Goldthwaite (born ...) is a former soccer player" -> "I am a former soccer player"."""
    m = _PERSON_START.match(sentence)
    if not m or not _PERSON_NOUN.match(sentence[m.end():]):
        return None
    verb = m.group("verb")
    if subject == "I":
        verb = _FIRST[verb]
    rest = sentence[m.end():]
    rest = re.sub(r"\b(his|her)\b", "my" if subject == "I" else r"\1", rest)
    out = f"{subject} {verb}{rest}"
    born = re.match(r"\s*(?:[^;]*;\s*)?(born\s+.+)$", m.group("paren") or "")
    if born:  # "(born 9 December 1982 in Sacramento)" -> "...; I was born 9 December 1982 in Sacramento."
        again = subject if subject == "I" else subject[0].lower() + subject[1:]
        out = f"{out.rstrip().rstrip('.')}; {again} was {born.group(1).strip()}."
    return out


# ---- builders ----------------------------------------------------------------------------------


class Builder:
    def __init__(self, rows: list[tuple[int, dict]], seed: int = SEED, evaluation: bool = False) -> None:
        """`evaluation`: the generators run on test rows to make evaluation pairs (baselines.py);
        such pairs are never written where train.py reads."""
        if not evaluation and any(i >= halueval.TRAIN_END for i, _ in rows):
            raise ValueError("HaluEval QA rows >= 5,000 are the test half: never trained on")
        self.rows = rows
        self.seed = seed
        self.vocab = tx.Vocabulary([r["knowledge"] for _, r in rows] + [r["question"] for _, r in rows])
        self.pools = Pools(rows)
        self.sents = {i: tx.sentences(tx.clean(r["knowledge"])) for i, r in rows}
        # subjects of sentences, by the word after them: what "another subject" draws from
        self.subjects: dict[str, list[str]] = defaultdict(list)
        for i, _ in rows:
            for s in self.sents[i]:
                m = re.match(rf"^({tx.NAME})\s+(is|was|has|had|are|were)\b", s)
                if m and m.group(1).split()[0].lower() not in tx.NOT_SUBJECTS:
                    self.subjects[m.group(2)].append(m.group(1))
        for k in self.subjects:
            self.subjects[k] = sorted(set(self.subjects[k]))
        self.by_split: dict[str, list[int]] = defaultdict(list)
        for i, _ in rows:
            self.by_split[self.split_of(i)].append(i)
        self.pairs: list[dict] = []

    def rng(self, *key: object) -> random.Random:
        return random.Random(":".join(str(k) for k in (self.seed, *key)))

    def split_of(self, idx: int) -> str:
        return "dev" if idx % 10 == 9 else "train"

    def add(self, premise: str, claim: str, label: str, source: str, kind: str, task: str, split: str) -> None:
        premise, claim = premise.strip(), re.sub(r"\s+", " ", claim).strip()
        if not premise or not claim or premise == claim and label != "supported":
            return
        self.pairs.append({"premise": premise, "claim": claim, "label": label, "source": source, "kind": kind,
                           "_task": task, "_split": split})

    def fillers(self, idx: int, rng: random.Random, n: int = 6) -> list[str]:
        """Sentences of other rows of the same split: what replaces a removed sentence."""
        pool = self.by_split[self.split_of(idx)]
        out: list[str] = []
        for _ in range(n):
            other = pool[rng.randrange(len(pool))] if len(pool) > 1 else idx
            if other != idx and self.sents[other]:
                out.append(self.sents[other][rng.randrange(len(self.sents[other]))])
        return out

    # -- qa ------------------------------------------------------------------------------------

    def qa(self, idx: int, row: dict) -> None:
        rng = self.rng("qa", idx)
        src, split = f"halueval_qa:{idx}", self.split_of(idx)
        passage = tx.clean(row["knowledge"])
        q = re.sub(r"\s+", " ", row["question"].strip())
        if not q.endswith("?"):
            q = q.rstrip(".") + "?"
        a = row["right_answer"].strip().rstrip(".")
        h = row["hallucinated_answer"].strip()
        if not a or not h:
            return
        kind = answer_kind(q, a)
        add = lambda p, c, lab, k: self.add(p, c, lab, src, k, "qa", split)  # noqa: E731
        right_sentence, _ = tx.statement(q, a, self.vocab)
        add(passage, f"{q} {a}", "supported", "qa_right_short")
        add(passage, right_sentence, "supported", "qa_right_sentence")
        add(passage, f"{q} {right_sentence}", "supported", "qa_right_long")
        wrong = wrong_answer(q, a, kind, self.pools, rng)
        if wrong:
            text, how = wrong
            add(passage, f"{q} {text}", "contradicted", f"qa_swap_short_{how}")
            add(passage, tx.statement(q, text, self.vocab)[0], "contradicted", f"qa_swap_sentence_{how}")
        if not halu_is_noisy(h, a):
            add(passage, h, "contradicted", "qa_halu_sentence")
            add(passage, f"{q} {h}", "contradicted", "qa_halu_long")
            span = short_span(h, q, a)
            if span:
                add(passage, f"{q} {span}", "contradicted", "qa_halu_short")
        slots = qty.find_slots(a)  # a date or quantity answer: said in other words, or wrongly so
        if slots:
            para = qty.paraphrase(slots[0], rng, a[:slots[0].start])
            if para:
                add(passage, tx.statement(q, qty.apply(a, slots[0], para), self.vocab)[0], "supported", "qa_right_paraphrase")
            made = qty.falsify(slots[0], rng, reworded=True, before=a[:slots[0].start])
            if made:
                add(passage, tx.statement(q, qty.apply(a, slots[0], made[0]), self.vocab)[0], "contradicted",
                    f"qa_wrong_paraphrase_{made[1]}")
        sents = self.sents[idx]
        drop = [i for i, s in enumerate(sents) if contains_words(s, a)]
        if drop and kind != "yesno":
            judged = [(f"{q} {a}", "supported", "qa_right_short"), (right_sentence, "supported", "qa_right_sentence")]
            if wrong:
                judged.append((f"{q} {wrong[0]}", "contradicted", f"qa_swap_short_{wrong[1]}"))
            if not halu_is_noisy(h, a):
                judged.append((h, "contradicted", "qa_halu_sentence"))
            self.windowed(idx, drop, judged, rng, src, split)
            uncovered = without(sents, drop, self.fillers(idx, rng), rng)
            if uncovered and not contains_words(uncovered, a):
                add(uncovered, f"{q} {a}", "not_covered", "qa_uncovered_short")
                add(uncovered, right_sentence, "not_covered", "qa_uncovered_sentence")

    # -- sentence edits ------------------------------------------------------------------------

    def entity_swap(self, sentence: str, rng: random.Random) -> str | None:
        found = [m for m in self.pools.names_in(sentence)
                 if self.pools.names[m.group(1)] in ("person", "nationality", "country", "place", "region", "river")]
        if not found:
            return None
        m = found[rng.randrange(len(found))]
        other = self.pools.other(self.pools.names[m.group(1)], m.group(1), rng)
        if not other or contains_words(sentence, other):
            return None
        before = sentence[:m.start()]
        art = re.search(r"\b(an?)\s+$", before)
        if art:  # "an American" -> "a British"
            before = before[:art.start(1)] + ("an" if other[:1].lower() in "aeiou" else "a") + before[art.end(1):]
        return before + other + sentence[m.end():]

    def falsified(self, sentence: str, rng: random.Random) -> list[tuple[str, str]]:
        """One-fact changes of a sentence, each with what changed."""
        out: list[tuple[str, str]] = []
        slots = qty.find_slots(sentence)
        if slots:
            slot = slots[rng.randrange(len(slots))]
            made = qty.falsify(slot, rng, before=sentence[:slot.start])
            if made:
                out.append((qty.apply(sentence, slot, made[0]), made[1]))
        swapped = self.entity_swap(sentence, rng)
        if swapped:
            out.append((swapped, "entity"))
        neg = tx.negate(sentence, self.vocab)
        if neg:
            out.append(neg)
        roles = tx.swap_roles(sentence, self.vocab)
        if roles:
            out.append((roles, "roles"))
        return out

    def paraphrased(self, sentence: str, rng: random.Random) -> tuple[str, str, qty.Slot] | None:
        """The sentence with one number or date said otherwise (another unit, rounded, reformatted)."""
        slots = [s for s in qty.find_slots(sentence) if s.kind != "small" or rng.random() < 0.3]
        rng.shuffle(slots)
        for slot in slots:
            para = qty.paraphrase(slot, rng, sentence[:slot.start])
            if para:
                return qty.apply(sentence, slot, para), f"{slot.kind}", slot
        return None

    @staticmethod
    def reduced(sentence: str) -> str | None:
        """The sentence with a detail dropped: a parenthesis, an appositive, a trailing clause."""
        out = re.sub(r"\s*\([^)]*\)", "", sentence)
        if out != sentence and len(tx.words(out)) >= 4:
            return out
        m = re.match(r"^(.{25,}?),\s+(?:which|who|where|and|making|with|while|including|located|based)\b.*?([.!?]?)$", sentence)
        if m:
            return m.group(1) + (m.group(2) or ".")
        return None

    def chosen_sentences(self, idx: int, rng: random.Random, k: int) -> list[int]:
        sents = self.sents[idx]
        order = list(range(len(sents)))
        rng.shuffle(order)
        return order[:k]

    def windowed(self, idx: int, at: list[int], judged: list[tuple[str, str, str]], rng: random.Random,
                 src: str, split: str) -> None:
        """The same claims against what the policy reads: a retrieved window (the sentence that
        decides with its neighbours) keeps the label; a window of the same passage away from every
        sentence in `at` (same subject, other facts) or of another row covers nothing: not_covered.
        Without these, one window misread out of the four retrieved per claim decides the verdict."""
        sents = self.sents[idx]
        i = at[0]
        window = " ".join(sents[max(0, i - 1):i + 2])
        away = [j for j in range(len(sents)) if all(abs(j - k) >= 2 for k in at)]
        for claim, label, kind in judged:
            self.add(window, claim, label, src, f"win_{kind}", "window", split)
            if away and rng.random() < 0.7:  # j is 2+ sentences from each of `at`: its window holds none of them
                j = away[rng.randrange(len(away))]
                premise = " ".join(sents[max(0, j - 1):j + 2])
                self.add(premise, claim, "not_covered", src, "win_away_same_passage", "window", split)
            else:
                filler = " ".join(self.fillers(idx, rng, 3))
                if filler:
                    self.add(filler, claim, "not_covered", src, "win_other_row", "window", split)

    def passage(self, idx: int, row: dict) -> None:
        rng = self.rng("passage", idx)
        src, split = f"halueval_passage:{idx}", self.split_of(idx)
        sents = self.sents[idx]
        if len(sents) < 2:
            return
        passage = " ".join(sents)
        judged: list[tuple[str, str, str]] = []  # (claim, label, kind) against the whole passage, for windows

        def add(p: str, c: str, lab: str, k: str) -> None:
            self.add(p, c, lab, src, k, "passage", split)
            if p == passage and lab != "not_covered":
                judged.append((c, lab, k))

        for i in self.chosen_sentences(idx, rng, 3):
            judged.clear()
            s = sents[i]
            para = self.paraphrased(s, rng)
            if para:
                add(passage, para[0], "supported", f"sent_paraphrase_{para[1]}")
                made = qty.falsify(para[2], rng, reworded=True, before=s[:para[2].start])  # the same slot made wrong, written like the paraphrase
                if made:
                    add(passage, qty.apply(s, para[2], made[0]), "contradicted", f"sent_{made[1]}")
            red = self.reduced(s)
            if red:
                add(passage, red, "supported", "sent_detail_dropped")
            for text, how in truths.sub_claims(s):  # the passage's own words: the sentence, its clauses
                add(passage, text, "supported", f"sent_{how}")
            changes = self.falsified(s, rng)
            rng.shuffle(changes)
            # "X was not born in 1975" (he was born in 1971): true, with a "not"; "X was not born in 1971": false
            negations = truths.negation_pairs(s, negated_falsehood(s, changes, self.vocab), self.vocab)
            for text, lab, how in negations:
                self.add(passage, text, lab, src, f"sent_negated_{'false' if lab == 'supported' else 'true'}_{how}",
                         "negation", split)
            if negations or rng.random() < NEGATION_DROP:  # the pair's true side is the inserted negation;
                changes = [c for c in changes if c[1] != "negation_inserted"]  # else half of them: "not" alone is a cue
            for text, how in changes[:2]:
                add(passage, text, "contradicted", f"sent_{how}")
            mixed = truths.value_from_passage(s, passage, rng)  # another value the passage states: no new word
            if mixed:
                add(passage, mixed[0], "contradicted", f"sent_{mixed[1]}")
            claim = para[0] if para and rng.random() < 0.5 else s
            choice = rng.random()
            dropped = drop_slot(s, rng)
            if dropped and choice < 0.35:  # the passage without the claim's date or number
                add(" ".join(sents[:i] + [dropped] + sents[i + 1:]), claim, "not_covered", "sent_value_missing")
            elif red and choice < 0.55:  # the passage says less than the claim: its detail is not covered
                add(" ".join(sents[:i] + [red] + sents[i + 1:]), claim, "not_covered", "sent_detail_missing")
            elif choice < 0.85:
                other = self.other_subject(claim, rng)
                if other:
                    add(passage, other, "not_covered", "sent_other_subject")
            else:
                uncovered = without(sents, [i], self.fillers(idx, rng), rng)
                if uncovered:
                    add(uncovered, claim, "not_covered", "sent_uncovered")
            self.windowed(idx, [i], judged, rng, src, split)

    # -- statements ----------------------------------------------------------------------------

    def other_subject(self, sentence: str, rng: random.Random) -> str | None:
        m = re.match(rf"^({tx.NAME})\s+(is|was|has|had|are|were)\b", sentence)
        if not m or m.group(1).split()[0].lower() in tx.NOT_SUBJECTS:
            return None
        pool = self.subjects.get(m.group(2), [])
        for _ in range(8):
            other = pool[rng.randrange(len(pool))] if pool else None
            if other and not contains_words(other, m.group(1)) and not contains_words(m.group(1), other):
                return other + sentence[m.end(1):]
        return None

    @staticmethod
    def ranged(sentence: str, slot: qty.Slot, rng: random.Random, inside: bool) -> str | None:
        """The slot's value replaced by a range (or limit) that holds it, or one that does not."""
        if re.search(r"\b(?:than|about|over|nearly|around|approximately|roughly|almost|up to|at least|some|under|of)\s+$", sentence[:slot.start]):
            return None  # "more than 150 works" is a limit already
        if slot.kind == "year":
            if re.search(r"(?:\bthe|'s)\s+$", sentence[:slot.start]) or re.match(r"\s+[a-z]", sentence[slot.end:]):
                return None  # "the 2004 winter": a year as a modifier
            v = slot.year
            lo, hi = (v - rng.randint(1, 4), v + rng.randint(1, 4)) if inside else \
                ((v + rng.randint(2, 6), v + rng.randint(8, 14)) if rng.random() < 0.5 else (v - rng.randint(8, 14), v - rng.randint(2, 6)))
            text = rng.choice([f"between {lo} and {hi}", f"sometime from {lo} to {hi}", f"in the years {lo}-{hi}"])
            return qty.apply(sentence, slot, text)
        if slot.kind not in ("quantity", "count") or slot.value < 5:
            return None
        v = slot.value
        unit = ""
        if slot.kind == "quantity":
            m = re.match(rf"({qty.NUMBER})\s*-?\s*(.*)$", slot.text)
            unit = m.group(2).split("(")[0].strip() if m else ""
            if not unit:
                return None
        decimals = 0 if v >= 10 else 1
        if inside:
            lo, hi = v * rng.uniform(0.6, 0.9), v * rng.uniform(1.1, 1.5)
        elif rng.random() < 0.5:
            lo, hi = v * rng.uniform(1.3, 1.6), v * rng.uniform(1.8, 2.5)
        else:
            lo, hi = v * rng.uniform(0.3, 0.45), v * rng.uniform(0.55, 0.75)
        lo_t, hi_t = qty.rounded(lo)[1] if lo >= 100 else qty.fmt(lo, decimals), qty.rounded(hi)[1] if hi >= 100 else qty.fmt(hi, decimals)
        u = f" {unit}" if unit else ""
        form = rng.random()
        if form < 0.6:
            text = f"between {lo_t} and {hi_t}{u}"
        elif form < 0.8:
            text = f"more than {lo_t}{u}" if inside or lo > v else f"more than {lo_t}{u}"
        else:
            text = f"less than {hi_t}{u}" if inside or hi < v else f"less than {hi_t}{u}"
        if (form >= 0.6 and form < 0.8 and not inside and lo < v) or (form >= 0.8 and not inside and hi > v):
            return None  # the one-sided limit would still hold the value
        return qty.apply(sentence, slot, text)

    def statement(self, idx: int, row: dict) -> None:
        rng = self.rng("statement", idx)
        src, split = f"halueval_statement:{idx}", self.split_of(idx)
        def add(p: str, c: str, lab: str, k: str) -> None:
            if norm(re.sub(r"^[A-Z][\w ]*?[:,] ", "", c)) != norm(p):  # a restatement must restate something
                self.add(p, c, lab, src, k, "statement", split)

        for i in self.chosen_sentences(idx, rng, 2):
            s = self.sents[idx][i]
            person = first_person(s) is not None and rng.random() < 0.4
            speaker = "I" if rng.random() < 0.5 else RELATIVES[rng.randrange(len(RELATIVES))]

            def voice(text: str, subject: str = speaker) -> str | None:
                return first_person(text, subject) if person else text

            def later(text: str, marker: str | None = None) -> str:
                marker = rng.choice(MARKERS) if marker is None else marker
                if marker.endswith(", ") and re.match(r"(?:The|A|An|It|He|She|They|This|These|In|On|At|His|Her|Its|Their|My)\b", text):
                    text = text[:1].lower() + text[1:]
                return marker + text

            earlier = voice(s)
            if not earlier:
                continue
            tag = "stmt_me" if person else "stmt"
            changes = self.falsified(s, rng)
            rng.shuffle(changes)
            pair = [(voice(text), lab, how) for text, lab, how in
                    truths.negation_pairs(s, negated_falsehood(s, changes, self.vocab), self.vocab)]
            if pair and all(t for t, _, _ in pair):  # both or neither: "not" says nothing alone
                marker = rng.choice(MARKERS)  # one marker for both: the same words but the value
                for t, lab, how in pair:
                    self.add(earlier, later(t, marker), lab, src,
                             f"{tag}_negated_{'false' if lab == 'supported' else 'true'}_{how}", "negation", split)
            if pair and all(t for t, _, _ in pair) or rng.random() < NEGATION_DROP:  # as in passage()
                changes = [c for c in changes if c[1] != "negation_inserted"]
            for text, how in changes[:2]:
                t = voice(text)
                if t and t != earlier:
                    add(earlier, later(t), "contradicted", f"{tag}_changed_{how}")
            clauses = [c for c in truths.sub_claims(s) if c[1] != "verbatim"]
            if clauses:
                text, how = clauses[rng.randrange(len(clauses))]
                if voice(text):
                    add(earlier, later(voice(text)), "supported", f"{tag}_{how}")
            para = self.paraphrased(s, rng)
            if para and voice(para[0]):
                add(earlier, later(voice(para[0])), "supported", f"{tag}_restated_{para[1]}")
            red = self.reduced(s)
            if red and voice(red):
                if rng.random() < 0.5:
                    add(earlier, later(voice(red)), "supported", f"{tag}_detail_dropped")
                else:
                    add(voice(red), later(earlier), "not_covered", f"{tag}_detail_added")
            if person:
                rel = "I" if speaker != "I" and rng.random() < 0.7 else rng.choice([r for r in RELATIVES if r != speaker])
                o = first_person(s, rel)
                if o:
                    if changes and rng.random() < 0.6:
                        o = first_person(changes[0][0], rel) or o
                    add(earlier, later(o), "not_covered", f"{tag}_other_subject")
            else:
                o = self.other_subject(s, rng)
                if o:
                    if changes and rng.random() < 0.6:
                        o2 = self.other_subject(changes[0][0], rng)
                        o = o2 or o
                    add(earlier, later(o), "not_covered", f"{tag}_other_subject")
            slots = [x for x in qty.find_slots(s) if x.kind in ("quantity", "count", "year")]
            if slots:
                slot = slots[rng.randrange(len(slots))]
                inside = self.ranged(s, slot, rng, inside=True)
                if inside and voice(inside):
                    if rng.random() < 0.5:
                        add(voice(inside), later(earlier), "not_covered", f"{tag}_value_in_range")
                    else:
                        add(earlier, later(voice(inside)), "supported", f"{tag}_range_of_value")
                outside = self.ranged(s, slot, rng, inside=False)
                if outside and voice(outside):
                    if rng.random() < 0.5:
                        add(voice(outside), later(earlier), "contradicted", f"{tag}_value_outside_range")
                    else:
                        add(earlier, later(voice(outside)), "contradicted", f"{tag}_range_excludes_value")

    # -- clash dev pairs -----------------------------------------------------------------------

    def clash_dev(self) -> None:
        data = halueval.ROOT / "bench" / "data"
        for name in CLASH_FILES:
            for line in (data / name).open(encoding="utf-8"):
                if not line.strip():
                    continue
                r = json.loads(line)
                if r.get("split") != CLASH_SPLIT:
                    continue
                turns = [t for t in r["turns"] if isinstance(t, str)]
                if len(turns) < 2:
                    continue
                lab = r["label"]
                if lab in ("contradiction", "clash"):
                    label = "contradicted"
                elif lab == "duplicate" or r.get("kind") == "restatement":
                    label = "supported"
                else:
                    label = "not_covered"
                kind = (r.get("kind") or r.get("type") or lab).lower()
                split = "dev" if sum(map(ord, r["id"])) % 10 == 9 else "train"
                self.add(turns[0], turns[-1], label, f"{name.split('.')[0]}:{CLASH_SPLIT}:{r['id']}",
                         f"clash_{kind}", "clash", split)

    # -- all -----------------------------------------------------------------------------------

    def build(self, clash_dev: bool = True) -> list[dict]:
        for idx, row in self.rows:
            self.qa(idx, row)
            self.passage(idx, row)
            self.statement(idx, row)
        if clash_dev:
            self.clash_dev()
        seen: set[tuple[str, str]] = set()
        unique = []
        for p in self.pairs:
            key = (p["premise"], p["claim"])
            if key not in seen:
                seen.add(key)
                unique.append(p)
        return balance(unique, self.seed)


def bin_of(pair: dict) -> tuple:
    n = len(tx.words(pair["claim"]))
    return (pair["_task"], has_question(pair["claim"]), length_bin(n), overlap_bin(absent_share(pair["premise"], pair["claim"])))


def balance(pairs: list[dict], seed: int, shares: dict[str, float] | None = None, key=None) -> list[dict]:
    """Within each bin (`key`, by default `bin_of`), the same label shares (SHARES): the largest
    sample that has them."""
    shares = shares or SHARES
    key = key or bin_of
    rng = random.Random(f"{seed}:balance")
    bins: dict[tuple, dict[str, list[dict]]] = defaultdict(lambda: defaultdict(list))
    kept: list[dict] = []
    no_new_word: set[str] = set()
    for p in pairs:
        if p["_task"] in ("clash", "negation"):  # kept whole: negations come in (true, false) pairs
            kept.append(p)
            continue
        bins[key(p)][p["label"]].append(p)
    for key in sorted(bins, key=repr):
        by_label = bins[key]
        share = TASK_SHARES.get(key[0], shares) if isinstance(key, tuple) and key else shares
        k = min(len(by_label[lab]) / share[lab] for lab in share)
        if isinstance(key, tuple) and len(key) == 4 and (key[0], key[3]) == NO_NEW_WORD_BIN:
            k = NO_NEW_WORD_KEEP * min(len(by_label[lab]) / share[lab] for lab in share if lab != "not_covered")
        elif isinstance(key, tuple) and key and key[0] in SCARCE_NOT_COVERED:  # not_covered may fall short here
            k = min(min(len(by_label[lab]) / share[lab] for lab in share if lab != "not_covered"),
                    SCARCE_NOT_COVERED[key[0]] * len(by_label["not_covered"]) / share["not_covered"])
        for lab in share:
            members = by_label[lab]
            rng.shuffle(members)
            kept += members[:int(k * share[lab] + 1e-9)]
            if isinstance(key, tuple) and len(key) == 4 and (key[0], key[3]) == NO_NEW_WORD_BIN:
                no_new_word.update(p["claim"] for p in members[:int(k * share[lab] + 1e-9)])
    chosen = {id(p) for p in kept}
    for p in pairs:  # the kept no-new-word window claims' own not_covered partners
        if (p["_task"], p["label"]) == ("window", "not_covered") and p["claim"] in no_new_word \
                and id(p) not in chosen and rng.random() < 0.5:
            kept.append(p)
    return kept


def write(pairs: list[dict], out: Path, seed: int) -> dict[str, int]:
    out.mkdir(parents=True, exist_ok=True)
    counts = {}
    for split in ("train", "dev"):
        rows = sorted((p for p in pairs if p["_split"] == split), key=lambda p: (p["source"], p["kind"], p["claim"]))
        random.Random(f"{seed}:{split}").shuffle(rows)
        with (out / f"{split}.jsonl").open("w", encoding="utf-8") as f:
            for p in rows:
                f.write(json.dumps({k: p[k] for k in ("premise", "claim", "label", "source", "kind")}, ensure_ascii=False) + "\n")
        counts[split] = len(rows)
    return counts


def summary(pairs: list[dict]) -> str:
    lines = []
    by_source = Counter((p["source"].split(":")[0], p["label"]) for p in pairs)
    sources = sorted({s for s, _ in by_source})
    lines.append(f"{'source':22} " + " ".join(f"{lab:>13}" for lab in LABELS) + f" {'total':>8}")
    for s in sources:
        row = [by_source[(s, lab)] for lab in LABELS]
        lines.append(f"{s:22} " + " ".join(f"{n:13d}" for n in row) + f" {sum(row):8d}")
    totals = Counter(p["label"] for p in pairs)
    lines.append(f"{'all':22} " + " ".join(f"{totals[lab]:13d}" for lab in LABELS) + f" {len(pairs):8d}")
    lines.append("")
    lines.append(f"{'kind':44} {'label':13} {'n':>6}")
    for (kind, lab), n in sorted(Counter((p["kind"], p["label"]) for p in pairs).items()):
        lines.append(f"{kind:44} {lab:13} {n:6d}")
    return "\n".join(lines)


def cues(pairs: list[dict], top: int = 12, min_count: int = 300) -> str:
    """The claim words whose presence shifts the label most (a claim-only shortcut to watch): word,
    label, share of that label among claims with the word, its share overall, claims with the word."""
    import math

    base = Counter(p["label"] for p in pairs)
    by_word: dict[str, Counter] = defaultdict(Counter)
    for p in pairs:
        for w in set(tx.words(p["claim"])):
            by_word[w][p["label"]] += 1
    rows = []
    for w, c in by_word.items():
        n = sum(c.values())
        if n >= min_count:
            for lab in LABELS:
                share, overall = c[lab] / n, base[lab] / len(pairs)
                rows.append((abs(share - overall) * math.sqrt(n), w, lab, share, overall, n))
    lines = [f"{'word':14} {'label':13} {'share':>6} {'overall':>8} {'claims':>7}"]
    for _, w, lab, share, overall, n in sorted(rows, reverse=True)[:top]:
        lines.append(f"{w:14} {lab:13} {share:6.2f} {overall:8.2f} {n:7d}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rows", type=int, default=halueval.TRAIN_END, help="HaluEval rows 0..N-1 (at most 5,000)")
    parser.add_argument("--repo-rows", action="store_true", help="rows 500-999 from bench/data (no download)")
    parser.add_argument("--no-clash-dev", action="store_true", help="leave out the clash sets' dev pairs")
    parser.add_argument("--seed", type=int, default=SEED)
    parser.add_argument("--out", type=Path, default=BUILD)
    parser.add_argument("--quiet", action="store_true")
    args = parser.parse_args(argv)
    rows = halueval.repo_rows() if args.repo_rows else halueval.training_rows(range(0, args.rows))
    pairs = Builder(rows, args.seed).build(clash_dev=not args.no_clash_dev)
    counts = write(pairs, args.out, args.seed)
    report = f"{summary(pairs)}\n\nclaim-only word cues (the strongest; shares of the label with / without the word):\n{cues(pairs)}"
    (args.out / "counts.txt").write_text(report + "\n", encoding="utf-8")
    if not args.quiet:
        print(report)
        print(f"\nwrote {counts['train']} train and {counts['dev']} dev pairs to {args.out} "
              f"(HaluEval rows {rows[0][0]}-{rows[-1][0]}, seed {args.seed})")


if __name__ == "__main__":
    main()
