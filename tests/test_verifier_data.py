"""The verifier's training data (train/verifier/data.py, issue 44): deterministic, built from the
training half of HaluEval only, balanced, and with no shortcut: neither the claim's length, nor its
word overlap with the premise, nor the presence of a question predicts the label.

Built from HaluEval QA rows 500-999 as bench/data holds them (no download), in a few seconds.
"""

from __future__ import annotations

import json
import random
import re
import sys
from collections import Counter
from pathlib import Path

import pytest

VERIFIER = Path(__file__).resolve().parents[1] / "train" / "verifier"
sys.path.insert(0, str(VERIFIER))

import data  # noqa: E402
import halueval  # noqa: E402
import quantities as qty  # noqa: E402


def _auc(neg: list[float], pos: list[float]) -> float:
    """ROC AUC, folded: a classifier may read a feature either way round."""
    ranked = sorted([(x, 0) for x in neg] + [(x, 1) for x in pos])
    rank_sum, i = 0.0, 0
    while i < len(ranked):  # average ranks over ties
        j = i
        while j < len(ranked) and ranked[j][0] == ranked[i][0]:
            j += 1
        rank_sum += sum(1 for k in range(i, j) if ranked[k][1]) * (i + j + 1) / 2
        i = j
    a = (rank_sum - len(pos) * (len(pos) + 1) / 2) / (len(pos) * len(neg))
    return max(a, 1 - a)


@pytest.fixture(scope="module")
def built(tmp_path_factory) -> tuple[Path, list[dict]]:
    out = tmp_path_factory.mktemp("verifier")
    data.main(["--repo-rows", "--out", str(out), "--quiet"])
    rows = [json.loads(line) for name in ("train.jsonl", "dev.jsonl") for line in (out / name).open(encoding="utf-8")]
    return out, rows


def test_build_is_deterministic(built, tmp_path):
    out, _ = built
    data.main(["--repo-rows", "--out", str(tmp_path), "--quiet"])
    for name in ("train.jsonl", "dev.jsonl"):
        assert (tmp_path / name).read_bytes() == (out / name).read_bytes()


def test_schema_and_sources(built):
    _, rows = built
    assert len(rows) > 2500
    for r in rows:
        assert set(r) == {"premise", "claim", "label", "source", "kind"}
        assert r["label"] in data.LABELS and r["premise"] and r["claim"]
    sources = Counter(r["source"].split(":")[0] for r in rows)
    assert set(sources) == {"halueval_qa", "halueval_passage", "halueval_statement", "clash_pairs", "clash_natural"}
    for r in rows:
        if r["source"].startswith("clash_"):
            assert r["source"].split(":")[1] == "dev"  # only the dev split of the clash sets


def test_no_test_half_row_is_used(built):
    _, rows = built
    numbers = [int(r["source"].split(":")[1]) for r in rows if r["source"].startswith("halueval_")]
    assert numbers and max(numbers) < halueval.TRAIN_END and min(numbers) >= 500
    with pytest.raises(ValueError):
        halueval.training_rows(range(4990, 5001))
    with pytest.raises(ValueError):
        data.Builder([(5000, {"knowledge": "x", "question": "q", "right_answer": "a", "hallucinated_answer": "b"})])


def test_natural_pairs_are_never_trained_on(built):
    _, rows = built
    pairs = [json.loads(line) for line in (VERIFIER / "natural_pairs.jsonl").open(encoding="utf-8")]
    assert len(pairs) == 20 and Counter(p["label"] for p in pairs) == {"right": 10, "wrong": 10}
    claims = {r["claim"] for r in rows} | {r["premise"] for r in rows}
    assert not any(p["claim"] in claims or p["evidence"] in claims for p in pairs)


def test_label_balance(built):
    _, rows = built
    synthetic = [r for r in rows if r["source"].startswith("halueval_")]
    shares = Counter(r["label"] for r in synthetic)
    for label, want in data.SHARES.items():
        assert abs(shares[label] / len(synthetic) - want) < 0.03, (label, shares)
    for source in ("halueval_qa", "halueval_passage", "halueval_statement"):
        labels = Counter(r["label"] for r in synthetic if r["source"].startswith(source + ":"))
        assert all(labels[lab] >= 50 for lab in data.LABELS), (source, labels)


def test_length_overlap_and_question_do_not_predict_the_label(built):
    _, rows = built
    features = {
        "length": lambda r: len(data.tx.words(r["claim"])),
        "word overlap": lambda r: data.absent_share(r["premise"], r["claim"]),
        "question": lambda r: float("?" in r["claim"]),
        "premise length": lambda r: len(data.tx.words(r["premise"])),
    }
    for name, f in features.items():
        for label in data.LABELS:  # each label against the rest
            pos = [f(r) for r in rows if r["label"] == label]
            neg = [f(r) for r in rows if r["label"] != label]
            a = _auc(neg, pos)
            limit = 0.65 if name != "premise length" else 0.70
            assert a <= limit, f"{name} predicts {label}: AUC {a:.3f}"
        pos = [f(r) for r in rows if r["label"] == "contradicted"]
        neg = [f(r) for r in rows if r["label"] == "supported"]
        assert _auc(neg, pos) <= 0.65, f"{name} tells contradicted from supported"


def test_every_transformation_is_present(built):
    _, rows = built
    kinds = {r["kind"] for r in rows}
    for want in ("qa_right_sentence", "qa_halu_sentence", "qa_swap_sentence_entity", "qa_uncovered_short",
                 "sent_paraphrase_quantity", "sent_paraphrase_date", "sent_number", "sent_date", "sent_entity",
                 "sent_negation_inserted", "sent_roles", "stmt_changed_date", "stmt_other_subject",
                 "stmt_detail_added", "stmt_value_in_range", "stmt_range_excludes_value", "clash_parameter_step",
                 "sent_verbatim", "sent_clause", "stmt_clause", "sent_negated_true_date", "sent_negated_false_date"):
        assert any(k.startswith(want) for k in kinds), want


def test_negations_come_in_pairs_with_the_same_words(built):
    """Iteration 1 learned "not + a date" = supported from negated falsehoods alone: each kind of
    negated claim now has as many true values negated (contradicted) as false ones (supported)."""
    _, rows = built
    kinds = Counter(r["kind"] for r in rows if "_negated_" in r["kind"])
    assert kinds
    for kind, n in kinds.items():
        mirror = kind.replace("_negated_false_", "_negated_true_") if "_false_" in kind else kind.replace("_negated_true_", "_negated_false_")
        assert abs(n - kinds[mirror]) <= max(2, 0.05 * n), (kind, n, kinds[mirror])
    for r in rows:
        if "_negated_" in r["kind"]:
            assert r["label"] == ("supported" if "_negated_false_" in r["kind"] else "contradicted")


def test_verbatim_claims_are_supported_and_passage_values_swapped_are_not(built):
    _, rows = built
    verbatim = [r for r in rows if r["kind"] == "sent_verbatim"]
    assert len(verbatim) > 100 and all(r["label"] == "supported" and data.contains_words(r["premise"], r["claim"]) for r in verbatim)
    mixed = [r for r in rows if r["kind"].endswith("_from_passage") and r["kind"].startswith("sent_")]
    assert mixed and all(r["label"] == "contradicted" and data.absent_share(r["premise"], r["claim"]) == 0 for r in mixed)


def test_truths():
    import truths

    s = "Smith was born in 1950 in Leeds; he moved to Paris in 1970."
    assert truths.sub_claims(s) == [(s, "verbatim"), ("Smith was born in 1950 in Leeds.", "clause"),
                                    ("He moved to Paris in 1970.", "clause")]
    assert truths.sub_claims("In 1990, Smith released his first album in Leeds.")[-1] == \
        ("Smith released his first album in Leeds.", "lead_dropped")
    out = truths.value_from_passage("The tower was completed on 31 March 1889.",
                                    "Work began on 28 January 1887. The tower was completed on 31 March 1889.", random.Random(0))
    assert out == ("The tower was completed on 28 January 1887.", "date_from_passage")
    vocab = data.tx.Vocabulary(["The tower was completed in 1889."])
    pair = truths.negation_pairs("The tower was completed in 1889.", ("The tower was not completed in 1925.", "date"), vocab)
    assert pair == [("The tower was not completed in 1925.", "supported", "date"),
                    ("The tower was not completed in 1889.", "contradicted", "date")]


# ---- the mechanical conversions ----------------------------------------------------------------

_READ = re.compile(r"(-?[\d,]+(?:\.\d+)?)\s*(thousand|million|billion)?\s*(°C|°F|[a-zA-Z²/ ]+)?")


def _value(text: str) -> tuple[float, str]:
    m = _READ.search(text)
    assert m, text
    v = float(m.group(1).replace(",", "")) * {"thousand": 1e3, "million": 1e6, "billion": 1e9}.get(m.group(2) or "", 1)
    return v, (m.group(3) or "").strip()


def _in_base(value: float, unit: str) -> float | None:
    unit = unit.lower().replace("us ", "")
    for name in sorted(qty.UNIT_NAMES, key=len, reverse=True):
        if unit == name or unit.startswith(name + " ") or unit == name.rstrip("s"):
            dim, factor, _ = qty.UNIT_NAMES[name]
            return value * factor if dim not in ("celsius", "fahrenheit") else None
    return None


@pytest.mark.parametrize("sentence", [
    "Mount Everest rises to 8,849 m above sea level.", "The lake is 1,642 metres deep.",
    "The circuit is 6.213 km long.", "The town covers 52.3 sq mi of land.", "The parcel weighs 2.6 kg.",
    "The trail is 3,000 miles long.", "The car reached 120 km/h.", "The reservoir holds 4,500 litres.",
])
def test_unit_paraphrases_are_true_and_falsifications_are_not(sentence):
    slot = [s for s in qty.find_slots(sentence) if s.kind == "quantity"][0]
    truth = _in_base(slot.value, slot.text.split(maxsplit=1)[1] if " " in slot.text else "")
    assert truth
    for seed in range(30):
        rng = random.Random(seed)
        para = qty.paraphrase(slot, rng)
        v, unit = _value(para)
        got = _in_base(v, unit)
        assert got is not None and abs(got - truth) / truth <= 0.06, (para, truth)
        wrong, how = qty.falsify(slot, random.Random(seed))
        v, unit = _value(wrong)
        got = _in_base(v, unit)
        assert got is not None and abs(got - truth) / truth >= 0.25, (wrong, how, truth)


def test_dates_and_counts():
    rng = random.Random(3)
    s = "She was born on March 2, 1991 and the town had 4,529 residents."
    date = [x for x in qty.find_slots(s) if x.kind == "date"][0]
    assert (date.day, date.month, date.year) == (2, 3, 1991)
    seen = {qty.paraphrase(date, random.Random(n)) for n in range(40)}
    assert {"2 March 1991", "1991-03-02"} <= seen and all("1991" in x for x in seen)
    assert all(not re.search(r"\b(?:April|February)\b", x) for x in seen)
    for n in range(20):
        wrong = qty.falsify(date, random.Random(n))[0]
        assert wrong not in seen and wrong != "March 2, 1991"
    count = [x for x in qty.find_slots(s) if x.kind == "count"][0]
    assert count.value == 4529
    para = qty.paraphrase(count, rng)
    assert abs(_value(para)[0] - 4529) / 4529 < 0.06
    year = qty.Slot(0, 4, "year", "1991", year=1991)
    assert qty.paraphrase(year, random.Random(0)) in ("the early 1990s", "the 20th century")


def test_an_export_folder_names_its_outputs_as_checker_nli_reads_them(tmp_path):
    """export.py's folder is what `checker: nli` loads: the trained order (supported,
    contradicted, not_covered) must reach the checker as entailment, contradiction, neutral."""
    import export

    from ctxwarden.policies.poisoning.checkers.nli import model_labels

    for trained in (["supported", "contradicted", "not_covered"], ["contradicted", "not_covered", "supported"]):
        (tmp_path / "labels.json").write_text(json.dumps(trained))
        export.nli_config(tmp_path)
        got = model_labels(tmp_path, ["not", "these"])
        assert got == [export.NLI_NAMES[label] for label in trained]


def test_a_year_before_a_full_stop_or_comma_is_a_slot():
    """Iteration 3's probe "not completed in 1889." scored supported 0.63: a year before "." or ","
    was never a slot, so such sentences got no year swap and no negation pair."""
    for s in ("It was completed in 1889.", "Completed in 1889, it was the tallest tower.", "He died in 1975; she in 1980."):
        years = [x.year for x in qty.find_slots(s) if x.kind == "year"]
        assert years and years[0] in (1889, 1975), s
    for s in ("a budget of 1,889 dollars", "the value 1889.5 was read", "1889-1890 season", "1889km away"):
        assert not [x for x in qty.find_slots(s) if x.kind == "year"], s
    s = "The Eiffel Tower was completed in 1889."
    wrong = data.negated_falsehood(s, [(qty.apply(s, qty.find_slots(s)[0], "1925"), "date")], data.tx.Vocabulary([s]))
    pair = data.truths.negation_pairs(s, wrong, data.tx.Vocabulary([s]))
    assert [lab for _, lab, _ in pair] == ["supported", "contradicted"] and "not" in pair[1][0] and "1889" in pair[1][0]


def test_verbatim_claims_are_kept_against_their_window(built):
    """The window task's balancing kept 2 verbatim claims in 45,075 pairs (iteration 3): a claim in
    its window's own words has few not_covered peers in its bin, as in the passage task."""
    _, rows = built
    passage = sum(r["kind"] == "sent_verbatim" for r in rows)
    window = [r for r in rows if r["kind"] == "win_sent_verbatim"]
    assert len(window) >= 0.15 * passage, (len(window), passage)  # was 4 of 236 (rows 500-999)
    assert all(r["label"] == "supported" and data.contains_words(r["premise"], r["claim"]) for r in window)
