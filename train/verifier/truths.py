"""True claims in the passage's own words, negations both ways, and values taken from the passage
itself (iteration 3 of the verifier's data; data.py calls these).

Iteration 1's probes showed two shortcuts the data taught:
- a claim that repeats the passage word for word was read as contradicted (0.73): verbatim true
  claims were rare after balancing, because a bin of claims whose words are all in the premise held
  few contradicted ones (only role swaps) to balance them with. `sub_claims` gives verbatim
  sentences, their clauses and the sentence without a leading phrase (supported);
  `value_from_passage` gives contradicted claims with no new word either: a year, date or number
  replaced by another of the same kind that the same passage states elsewhere (the mix-up a
  retrieval-fed answer makes);
- "not" + a date read as supported, because the negated falsehoods ("X was not born in 1975" when
  he was born in 1971: supported) came without their mirror. `negation_pairs` gives both with the
  same words: the false value negated (supported) and the true value negated (contradicted), one
  of each per change, so every kind has them in equal numbers.
"""

from __future__ import annotations

import random
import re

import quantities as qty
import textops as tx

_CLAUSE_SPLIT = re.compile(r"(?:;\s+|,\s+(?:and|but|while|whereas)\s+)")
_CLAUSE_START = re.compile(r"^(?:he|she|it|they|his|her|its|their|this|these|the|[A-Z][\w'-]*)\b")
_LEAD = re.compile(r"^(?:In|On|By|During|Since|After|Before|From|Until|At|As of)\s+[^,]{2,40},\s+(?=[A-Z])")
NEGATABLE = ("date", "number", "converted_number", "unit_confusion", "roles")


def _sentence(text: str) -> str:
    text = text.strip().rstrip(",;:")
    text = text[:1].upper() + text[1:]
    return text if text.endswith((".", "!", "?")) else text + "."


def sub_claims(sentence: str) -> list[tuple[str, str]]:
    """True claims in the sentence's words: the sentence itself, each clause that stands alone
    ("A was born in 1950; he moved to Paris in 1970" -> both halves), the sentence without a
    leading "In 1990, " phrase. (claim, kind)."""
    out = [(sentence, "verbatim")]
    parts = _CLAUSE_SPLIT.split(sentence)
    if len(parts) > 1:
        for n, part in enumerate(parts):
            if len(tx.words(part)) < 5 or (n and not _CLAUSE_START.match(part)):
                continue
            out.append((_sentence(part), "clause"))
    m = _LEAD.match(sentence)
    if m and len(tx.words(sentence[m.end():])) >= 5:
        out.append((_sentence(sentence[m.end():]), "lead_dropped"))
    seen: set[str] = set()
    return [(c, k) for c, k in out if not (c in seen or seen.add(c))]


def value_from_passage(sentence: str, passage: str, rng: random.Random) -> tuple[str, str] | None:
    """One year, date or number of the sentence replaced by another of the same kind that the
    passage states elsewhere: contradicted, with every word of the claim in the premise."""
    slots = [s for s in qty.find_slots(sentence) if s.kind in ("year", "date", "count", "quantity")]
    rng.shuffle(slots)
    others = qty.find_slots(passage)
    for slot in slots:
        cands = []
        for o in others:
            if o.kind != slot.kind or o.text == slot.text:
                continue
            if slot.kind == "year" and o.year == slot.year:
                continue
            if slot.kind == "date" and (o.day, o.month, o.year) == (slot.day, slot.month, slot.year):
                continue
            if slot.kind in ("count", "quantity") and (o.value == slot.value or o.unit != slot.unit):
                continue
            cands.append(o)
        if cands:
            o = cands[rng.randrange(len(cands))]
            out = qty.apply(sentence, slot, o.text)
            if out != sentence:
                return out, f"{slot.kind}_from_passage"
    return None


def negation_pairs(sentence: str, false: tuple[str, str] | None, vocab: tx.Vocabulary) -> list[tuple[str, str, str]]:
    """For a negated falsehood (data.negated_falsehood: "X was not born in 1975" when he was born
    in 1971, supported), its mirror: the true value negated, the same words otherwise ("X was not
    born in 1971": contradicted). Both or neither: (claim, label, how)."""
    if not false or false[1] not in NEGATABLE:
        return []
    true = tx.negate(sentence, vocab)
    if not true or true[1] != "negation_inserted" or true[0] == false[0]:
        return []
    return [(false[0], "supported", false[1]), (true[0], "contradicted", false[1])]
