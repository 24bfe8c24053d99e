"""The NLI checker on a tiny cross-encoder built here: a WordLevel tokenizer.json and an ONNX graph.

The graph is a real (if crude) NLI model over the pair [CLS] premise [SEP] hypothesis [SEP]: it
counts which content words of the hypothesis the premise has (coverage) and whether exactly one
side says "not". Covered + same polarity → entailment; covered + opposite polarity →
contradiction; not covered (or a lone word, which states nothing) → neutral. It reads segments from
token_type_ids (or, in the variant without that input, from the first [SEP]) and ignores padding
through attention_mask, so feeding the wrong inputs changes the verdicts.
"""

from __future__ import annotations

import json
import sys
import types
from pathlib import Path

import numpy as np
import pytest

from ctxwarden.policies.poisoning.checkers import build_checker
from ctxwarden.policies.poisoning.checkers.base import CheckContext, ClaimToCheck, Evidence
from ctxwarden.policies.poisoning.checkers.nli import NLIChecker, NLIModelError, has_verb, hypothesis
from ctxwarden.policies.poisoning.config import NLIConfig, PoisoningConfig

onnx = pytest.importorskip("onnx")  # test extra: builds the tiny model
TensorProto, helper, numpy_helper = onnx.TensorProto, onnx.helper, onnx.numpy_helper

SPECIAL = ["[PAD]", "[UNK]", "[CLS]", "[SEP]"]
FUNCTION = "the is of in what where was a has its on".split()
CONTENT = "paris capital france acme head office mumbai delhi city moon made cheese tower completed 1889".split()
VOCAB = {w: n for n, w in enumerate(SPECIAL + FUNCTION + ["not"] + CONTENT)}
CANONICAL = ("contradiction", "entailment", "neutral")
# logits = [coverage, coverage * polarity_mismatch] @ W + b, columns in CANONICAL order
W = np.array([[0.0, 9.0, 0.0], [14.0, -12.0, 0.0]], dtype=np.float32)
B = np.array([-10.0, -7.0, 0.0], dtype=np.float32)

PARIS = "Paris is the capital of France."
ACME = "Acme has its head office in Mumbai."
TOWER = "The tower was completed in 1889."


def write_tokenizer(directory: Path) -> None:
    from tokenizers import Tokenizer, models, normalizers, pre_tokenizers, processors

    tok = Tokenizer(models.WordLevel(VOCAB, unk_token="[UNK]"))
    tok.normalizer = normalizers.Lowercase()
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    tok.post_processor = processors.TemplateProcessing(
        single="[CLS] $A [SEP]", pair="[CLS] $A [SEP] $B:1 [SEP]:1",
        special_tokens=[("[CLS]", VOCAB["[CLS]"]), ("[SEP]", VOCAB["[SEP]"])])
    tok.save(str(directory / "tokenizer.json"))


def _const(name: str, value, dtype=np.float32):
    return numpy_helper.from_array(np.asarray(value, dtype=dtype), name)


def _segment_nodes(segment_input: bool) -> list:
    """seg [B,S,1]: 1.0 on hypothesis tokens, from token_type_ids or from the first [SEP]."""
    if segment_input:
        return [helper.make_node("Cast", ["token_type_ids"], ["seg2"], to=TensorProto.FLOAT)]
    return [helper.make_node("Equal", ["input_ids", "sep_id"], ["is_sep_b"]),
            helper.make_node("Cast", ["is_sep_b"], ["is_sep"], to=TensorProto.FLOAT),
            helper.make_node("CumSum", ["is_sep", "axis1"], ["seps"]),
            helper.make_node("Sub", ["seps", "is_sep"], ["after"]),
            helper.make_node("Min", ["after", "one"], ["seg2"])]


def write_model(directory: Path, order=CANONICAL, segment_input: bool = True) -> None:
    columns = [CANONICAL.index(label) for label in order]
    content = np.zeros(len(VOCAB), np.float32)
    content[[VOCAB[w] for w in CONTENT]] = 1
    negator = np.zeros(len(VOCAB), np.float32)
    negator[VOCAB["not"]] = 1
    inits = [_const("eye", np.eye(len(VOCAB))), _const("content", content), _const("negator", negator),
             _const("W", W[:, columns]), _const("b", B[columns]), _const("one", 1.0), _const("zero", 0.0),
             _const("axis1", [1], np.int64), _const("axis2", [2], np.int64), _const("sep_id", VOCAB["[SEP]"], np.int64)]
    n = helper.make_node
    nodes = [n("Gather", ["eye", "input_ids"], ["onehot"]),  # [B,S,V]
             n("Cast", ["attention_mask"], ["mask2"], to=TensorProto.FLOAT),
             n("Unsqueeze", ["mask2", "axis2"], ["mask"]),
             *_segment_nodes(segment_input),
             n("Unsqueeze", ["seg2", "axis2"], ["seg"]),
             n("Mul", ["onehot", "mask"], ["real"]),
             n("Mul", ["real", "seg"], ["in_b"]), n("Sub", ["real", "in_b"], ["in_a"]),
             n("ReduceSum", ["in_a", "axis1"], ["count_a"], keepdims=0),
             n("ReduceSum", ["in_b", "axis1"], ["count_b"], keepdims=0),
             n("Min", ["count_a", "one"], ["has_a"]), n("Min", ["count_b", "one"], ["has_b"]),
             n("Mul", ["has_b", "content"], ["words_b"]), n("Mul", ["words_b", "has_a"], ["shared"]),
             n("ReduceSum", ["shared", "axis1"], ["matched"], keepdims=1),
             n("ReduceSum", ["words_b", "axis1"], ["total"], keepdims=1),
             n("Max", ["total", "one"], ["total1"]), n("Div", ["matched", "total1"], ["coverage0"]),
             n("Sub", ["total", "one"], ["more"]), n("Clip", ["more", "zero", "one"], ["gate"]),  # one word: neutral
             n("Mul", ["coverage0", "gate"], ["coverage"]),
             n("Mul", ["has_a", "negator"], ["neg_a0"]), n("ReduceSum", ["neg_a0", "axis1"], ["neg_a"], keepdims=1),
             n("Mul", ["has_b", "negator"], ["neg_b0"]), n("ReduceSum", ["neg_b0", "axis1"], ["neg_b"], keepdims=1),
             n("Sub", ["neg_a", "neg_b"], ["neg_diff"]), n("Abs", ["neg_diff"], ["mismatch"]),
             n("Mul", ["coverage", "mismatch"], ["conflict"]),
             n("Concat", ["coverage", "conflict"], ["features"], axis=1),
             n("MatMul", ["features", "W"], ["raw"]), n("Add", ["raw", "b"], ["logits"])]
    ids = ["input_ids", "attention_mask"] + (["token_type_ids"] if segment_input else [])
    inputs = [helper.make_tensor_value_info(name, TensorProto.INT64, ["batch", "sequence"]) for name in ids]
    output = helper.make_tensor_value_info("logits", TensorProto.FLOAT, ["batch", 3])
    graph = helper.make_graph(nodes, "tiny-nli", inputs, [output], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)
    onnx.checker.check_model(model)
    onnx.save(model, str(directory / "model.onnx"))


@pytest.fixture
def model_dir(tmp_path: Path) -> Path:
    write_tokenizer(tmp_path)
    write_model(tmp_path)
    return tmp_path


def ev(n: int, sentence: str, window: str = "") -> Evidence:
    return Evidence(f"doc{n}#0", f"doc{n}", sentence, window or sentence, score=1.0 / (n + 1))


def claim(text: str, *evidence: Evidence, question: str = "") -> ClaimToCheck:
    return ClaimToCheck(text, question, tuple(evidence))


async def judge(checker: NLIChecker, *claims: ClaimToCheck) -> list:
    return await checker.check(claims, CheckContext())


def checker_for(directory: Path, **settings) -> NLIChecker:
    return NLIChecker(NLIConfig(model_path=str(directory), **settings))


# ----------------------------------------------------------------------------- verdicts


async def test_a_negated_fact_is_contradicted_with_the_evidence_that_decided(model_dir):
    checker = checker_for(model_dir)
    (v,) = await judge(checker, claim("Paris is not the capital of France.", ev(0, ACME), ev(1, PARIS)))
    assert (v.label, v.kind, v.checker) == ("contradicted", "contradicted", "nli")
    assert v.confidence > 0.95
    assert (v.evidence, v.evidence_id) == (PARIS, "doc1#0")
    assert v.latency_ms > 0


async def test_an_entailed_claim_is_supported_reading_the_window(model_dir):
    window = f"{ACME} {PARIS}"  # the sentence itself is about Acme; its window states the fact
    (v,) = await judge(checker_for(model_dir), claim("Paris is the capital of France", ev(0, ACME, window)))
    assert v.label == "supported" and v.confidence > 0.8
    assert v.evidence == ACME  # the central sentence is reported, the window was read


async def test_an_unrelated_claim_is_unverifiable(model_dir):
    (v,) = await judge(checker_for(model_dir), claim("The moon is made of cheese.", ev(0, PARIS), ev(1, ACME)))
    assert v.label == "unverifiable" and v.checker == "nli"
    assert v.confidence > 0.5  # how likely "neither" is


async def test_supporting_evidence_beats_a_weaker_contradiction(model_dir):
    # the contradiction here is partial (the premise shares 2 of 3 content words); the entailment is full
    partial = "Paris is not the capital."
    (v,) = await judge(checker_for(model_dir), claim("Paris is the capital of France", ev(0, partial), ev(1, PARIS)))
    assert (v.label, v.evidence_id) == ("supported", "doc1#0")


async def test_a_fragment_is_read_as_the_answer_to_its_question(model_dir):
    checker = checker_for(model_dir)
    asked = claim("Mumbai", ev(0, ACME), question="Hello. Where is the head office of Acme?")
    alone = claim("Mumbai", ev(0, ACME))
    with_q, without_q = await judge(checker, asked, alone)
    assert with_q.label == "supported"
    assert without_q.label == "unverifiable"  # a lone word states nothing the model can judge


def test_hypotheses_add_the_question_only_to_verbless_fragments():
    q = "Thanks! In what city is the head office? Please answer briefly."
    assert hypothesis(ClaimToCheck("Delhi", q, ())) == "In what city is the head office? Delhi"
    assert hypothesis(ClaimToCheck("The head office is in Delhi.", q, ())) == "The head office is in Delhi."
    assert hypothesis(ClaimToCheck("Delhi", "", ())) == "Delhi"
    for fragment in ("Delhi", "in 1889", "about two hundred metres", "Richard Nixon", "the Eiffel Tower"):
        assert not has_verb(fragment), fragment
    for sentence in ("It was completed in 1889", "Joseph Conrad wrote it", "Acme founded it in 1990",
                     "She's the CEO", "They can't vote"):
        assert has_verb(sentence), sentence


async def test_one_batch_gives_what_one_pair_at_a_time_gives(model_dir):
    checker = checker_for(model_dir)
    long_window = f"{ACME} {PARIS} {TOWER}"  # pads the short pairs in the batch
    claims = [claim("Paris is not the capital of France.", ev(0, ACME), ev(1, PARIS, long_window)),
              claim("Mumbai", ev(2, ACME), question="Where is the head office of Acme?"),
              claim("The moon is made of cheese.", ev(3, TOWER)),
              claim("The tower was completed in 1889.", ev(4, TOWER), ev(5, PARIS))]
    calls: list[int] = []
    run = checker.model.probabilities
    checker.model.probabilities = lambda pairs: calls.append(len(pairs)) or run(pairs)
    together = await judge(checker, *claims)
    assert calls == [6]  # every (claim, evidence) pair of the answer in one run
    apart = [(await judge(checker, c))[0] for c in claims]
    assert [v.label for v in together] == ["contradicted", "supported", "unverifiable", "supported"]
    assert [v.label for v in apart] == [v.label for v in together]
    assert [v.evidence_id for v in apart] == [v.evidence_id for v in together]
    np.testing.assert_allclose([v.confidence for v in apart], [v.confidence for v in together], rtol=1e-5)


async def test_claims_without_evidence_never_reach_the_model(model_dir):
    checker = checker_for(model_dir)
    checker.model.probabilities = lambda pairs: pytest.fail("the model ran")
    (v,) = await judge(checker, claim("Paris is the capital of France."))
    assert (v.label, v.checker, v.confidence) == ("unverifiable", "nli", 0.0)


async def test_a_failing_model_gives_unverifiable_and_an_event(model_dir):
    checker = checker_for(model_dir)

    def broken(pairs):
        raise RuntimeError("onnxruntime exploded")

    checker.model.probabilities = broken
    ctx = CheckContext()
    verdicts = await checker.check([claim(PARIS, ev(0, PARIS)), claim("Hi")], ctx)
    assert [v.label for v in verdicts] == ["unverifiable", "unverifiable"]
    assert verdicts[0].note == "nli failed: RuntimeError" and verdicts[1].note == ""
    assert ctx.events == [{"event": "nli_error", "reason": "RuntimeError: onnxruntime exploded"}]


# ----------------------------------------------------------------------------- the model directory


ORDER = ("entailment", "neutral", "contradiction")  # not the default order


async def test_label_order_comes_from_config_json(tmp_path):
    write_tokenizer(tmp_path)
    write_model(tmp_path, order=ORDER)
    (tmp_path / "config.json").write_text(json.dumps({"id2label": {"0": "ENTAILMENT", "1": "NEUTRAL", "2": "CONTRADICTION"}}))
    checker = checker_for(tmp_path)  # nli.labels left at the default order: config.json wins
    assert checker.labels == list(ORDER)
    v1, v2 = await judge(checker, claim("Paris is not the capital of France.", ev(0, PARIS)), claim(PARIS, ev(0, PARIS)))
    assert (v1.label, v2.label) == ("contradicted", "supported")


async def test_without_config_json_the_configured_labels_apply(tmp_path):
    write_tokenizer(tmp_path)
    write_model(tmp_path, order=ORDER)
    claims = (claim("Paris is not the capital of France.", ev(0, PARIS)), claim(PARIS, ev(0, PARIS)))
    right = await judge(checker_for(tmp_path, labels=list(ORDER)), *claims)
    assert [v.label for v in right] == ["contradicted", "supported"]
    wrong = await judge(checker_for(tmp_path), *claims)  # the default order misreads this model
    assert [v.label for v in wrong] != ["contradicted", "supported"]


def test_generic_id2label_falls_back_to_the_configured_labels(model_dir):
    (model_dir / "config.json").write_text(json.dumps({"id2label": {"0": "LABEL_0", "1": "LABEL_1", "2": "LABEL_2"}}))
    assert checker_for(model_dir).labels == list(CANONICAL)
    with pytest.raises(NLIModelError, match="must include 'contradiction' and 'entailment'"):
        checker_for(model_dir, labels=["yes", "no", "maybe"])


def test_a_label_count_unlike_the_models_outputs_is_refused(model_dir):
    with pytest.raises(NLIModelError, match="3 scores per pair but 2 labels"):
        checker_for(model_dir, labels=["contradiction", "entailment"])


async def test_a_graph_without_token_type_ids_works(tmp_path):
    write_tokenizer(tmp_path)
    write_model(tmp_path, segment_input=False)
    checker = checker_for(tmp_path)
    assert "token_type_ids" not in checker.model.feeds([("a", "b")])  # onnxruntime rejects unknown inputs
    verdicts = await judge(checker, claim("Paris is not the capital of France.", ev(0, PARIS)),
                           claim(PARIS, ev(0, PARIS)), claim("The moon is made of cheese.", ev(0, PARIS)))
    assert [v.label for v in verdicts] == ["contradicted", "supported", "unverifiable"]


def test_pairs_are_padded_to_the_longest_and_truncated_to_max_length(model_dir):
    (model_dir / "config.json").write_text(json.dumps({"max_position_embeddings": 40}))
    checker = checker_for(model_dir, max_length=100)  # capped by the model's positions (40 - 2)
    feeds = checker.model.feeds([(PARIS * 20, "Paris is the capital"), (PARIS, "Paris")])
    assert feeds["input_ids"].shape == (2, 38)
    assert feeds["attention_mask"][1].sum() < 38 and feeds["input_ids"][1, -1] == VOCAB["[PAD]"]
    assert feeds["token_type_ids"][0].tolist().count(1) == 5  # the hypothesis kept whole: "paris is the capital [SEP]"


def test_missing_or_incomplete_directories_are_clear_errors(tmp_path):
    with pytest.raises(NLIModelError, match="model_path is required"):
        NLIChecker(NLIConfig())
    with pytest.raises(NLIModelError, match="is not a directory"):
        checker_for(tmp_path / "nowhere")
    write_tokenizer(tmp_path)
    with pytest.raises(NLIModelError, match=f"{tmp_path}.*has no model.onnx"):
        checker_for(tmp_path)
    write_model(tmp_path)
    (tmp_path / "tokenizer.json").unlink()
    with pytest.raises(NLIModelError, match=f"{tmp_path}.*has no tokenizer.json"):
        checker_for(tmp_path)
    (tmp_path / "model.onnx").write_bytes(b"not a model")
    write_tokenizer(tmp_path)
    with pytest.raises(NLIModelError, match="cannot load the model"):
        checker_for(tmp_path)


async def test_build_checker_makes_the_nli_checker(model_dir):
    config = PoisoningConfig(checker="nli", nli={"model_path": str(model_dir)})
    checker = build_checker(config, services=None, local=None)
    assert isinstance(checker, NLIChecker) and checker.name == "nli"
    (v,) = await judge(checker, claim(PARIS, ev(0, PARIS)))
    assert v.label == "supported"


async def test_a_pytorch_directory_loads_through_sentence_transformers(tmp_path, monkeypatch):
    seen = {}

    class CrossEncoder:  # stands in for sentence_transformers.CrossEncoder
        def __init__(self, path, **kwargs):
            seen.update(path=path, **kwargs)

        def predict(self, pairs, **kwargs):
            return np.array([[0.1, 0.8, 0.1] for _ in pairs])

    monkeypatch.setitem(sys.modules, "sentence_transformers", types.SimpleNamespace(CrossEncoder=CrossEncoder))
    (tmp_path / "config.json").write_text(json.dumps({"id2label": {"0": "contradiction", "1": "entailment", "2": "neutral"}}))
    checker = checker_for(tmp_path, max_length=128)
    assert seen == {"path": str(tmp_path), "max_length": 128, "device": "cpu", "local_files_only": True}
    (v,) = await judge(checker, claim(PARIS, ev(0, PARIS)))
    assert (v.label, round(v.confidence, 3)) == ("supported", 0.8)


async def test_scores_of_the_wrong_shape_are_a_failure_not_a_misreading(model_dir):
    checker = checker_for(model_dir)
    checker.model.probabilities = lambda pairs: np.full((len(pairs), 2), 0.5)
    ctx = CheckContext()
    (v,) = await checker.check([claim(PARIS, ev(0, PARIS))], ctx)
    assert v.label == "unverifiable" and v.note == "nli failed: NLIModelError"
    assert "shape (1, 2)" in ctx.events[0]["reason"]
