"""The NLI checker: a cross-encoder trained on natural language inference reads each (evidence,
claim) pair and says whether the evidence entails the claim, contradicts it, or neither.

The model comes from a local directory, never from the network: `model.onnx` (run on onnxruntime,
CPU) with the Hugging Face `tokenizer.json` beside it — the layout `optimum-cli export onnx` writes
for a cross-encoder such as cross-encoder/nli-deberta-v3-xsmall. Without model.onnx, a directory
sentence-transformers can load works too when that package is installed. The output order of the
labels comes from the directory's config.json (`id2label`), else from `nli.labels`.

A claim is read as an answer to its question. A fragment without a verb ("Delhi" answering "...head
office in what city?") states nothing an NLI model can judge on its own, so its hypothesis is the
question followed by the claim ("...head office in what city? Delhi"); a full sentence is judged
as it stands (the question would only dilute it).

All pairs of one answer (every claim x each of its evidence windows) go through the model in one
batch. For each claim, the evidence the model is surest about (highest of p(contradiction),
p(entailment)) decides: contradicted when contradiction wins with p >= 0.5, supported when
entailment is the most likely label, unverifiable otherwise.
"""

from __future__ import annotations

import asyncio
import json
import logging
import re
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from ...errors import CtxwardenError
from ...text.sentences import split_sentences
from ...text.word_cache import without_word_cache
from .base import CONTRADICTED, SUPPORTED, UNVERIFIABLE, CheckContext, ClaimToCheck, ClaimVerdict, unverifiable

log = logging.getLogger("ctxwarden.poisoning")

CONTRADICTION, ENTAILMENT, NEUTRAL = "contradiction", "entailment", "neutral"
CONTRADICTION_FLOOR = 0.5  # a contradiction less likely than this is not called one

# Words that make a clause a sentence: auxiliaries and modals (the finite verb of most factual
# statements: "is", "was founded", "has won"), subject pronouns, and the commonest irregular past
# forms. Lowercase words ending in -ed count too. A miss only adds the question to the hypothesis.
_VERB_WORDS = frozenset("""
is are was were be been being am has have had do does did will would shall should can could may
might must isn't aren't wasn't weren't hasn't haven't hadn't don't doesn't didn't won't can't
cannot couldn't shouldn't wouldn't it's he's she's that's there's they're we're i'm i he she we
they became began built bought brought came chose drew drove fell felt found gave got grew held
kept knew led left lost made meant met paid ran said sang sat saw sent shot sold spoke spent stood
struck swam took taught thought threw told won wore wrote lies lives holds
""".split())
_NOT_VERBS_ED = frozenset({"hundred", "indeed"})
_TOKEN = re.compile(r"[A-Za-zÀ-ÖØ-öø-ÿ][\w'’\-]*")


class NLIModelError(CtxwardenError, ValueError):
    """The NLI model directory is missing, incomplete or unusable (a configuration error)."""


class NLIChecker:
    name = "nli"

    def __init__(self, config: Any) -> None:
        if not config.model_path:
            raise NLIModelError("poisoning.nli.model_path is required with checker: nli (a local model directory)")
        directory = Path(config.model_path).expanduser()
        if not directory.is_dir():
            raise NLIModelError(f"poisoning.nli.model_path {directory} is not a directory")
        self.labels = model_labels(directory, config.labels)
        self.model = load_model(directory, max_length_for(directory, config.max_length), len(self.labels))
        self._column = {label: n for n, label in enumerate(self.labels)}

    async def check(self, claims: Sequence[ClaimToCheck], ctx: CheckContext) -> list[ClaimVerdict]:
        out = [unverifiable(c, self.name) for c in claims]
        todo = [n for n, c in enumerate(claims) if c.evidence]  # nothing to read against: no model call
        if not todo:
            return out
        hypotheses = {n: hypothesis(claims[n]) for n in todo}
        pairs = [(ev.window or ev.sentence, hypotheses[n]) for n in todo for ev in claims[n].evidence]
        started = time.perf_counter()
        try:
            probs = await asyncio.to_thread(self.model.probabilities, pairs)
            if probs.shape != (len(pairs), len(self.labels)):
                raise NLIModelError(f"the model gave scores of shape {probs.shape} for {len(pairs)} pairs and "
                                    f"{len(self.labels)} labels")
        except Exception as exc:  # the policy must keep answering: unverifiable, and say why
            log.warning("the NLI model failed: %s", exc)
            ctx.events.append({"event": "nli_error", "reason": f"{type(exc).__name__}: {exc}"})
            for n in todo:
                out[n].note = f"nli failed: {type(exc).__name__}"
            return out
        per_pair_ms = (time.perf_counter() - started) * 1000 / len(pairs)
        row = 0
        for n in todo:
            claim = claims[n]
            out[n] = self.verdict(claim, probs[row : row + len(claim.evidence)])
            out[n].latency_ms = per_pair_ms * len(claim.evidence)
            row += len(claim.evidence)
        return out

    def surest(self, probs: np.ndarray) -> tuple[int, float, float]:
        """Of one claim's evidence passages (rows of `probs`), the one the model is surest about
        (highest of P(contradiction), P(entailment)): its row, P(contradiction), P(entailment)."""
        p_con = probs[:, self._column[CONTRADICTION]]
        p_ent = probs[:, self._column[ENTAILMENT]]
        best = int(np.argmax(np.maximum(p_con, p_ent)))
        return best, float(p_con[best]), float(p_ent[best])

    def verdict(self, claim: ClaimToCheck, probs: np.ndarray) -> ClaimVerdict:
        """The verdict from the probabilities of each of the claim's evidence passages."""
        best, con, ent = self.surest(probs)
        ev, row = claim.evidence[best], probs[best]
        if con >= ent and con >= CONTRADICTION_FLOOR:
            return ClaimVerdict(claim.text, CONTRADICTED, con, ev.sentence, ev.id, kind="contradicted", checker=self.name)
        if ent > con and ent >= float(row.max()):
            return ClaimVerdict(claim.text, SUPPORTED, ent, ev.sentence, ev.id, checker=self.name)
        neutral = float(row[self._column[NEUTRAL]]) if NEUTRAL in self._column else 1.0 - con - ent
        return ClaimVerdict(claim.text, UNVERIFIABLE, max(0.0, neutral), ev.sentence, ev.id, checker=self.name)


# ----------------------------------------------------------------------------- hypotheses


def hypothesis(claim: ClaimToCheck) -> str:
    """What the model checks against the evidence: the claim, or for a verbless fragment the
    question it answers followed by the claim."""
    text = claim.text.strip()
    question = _question(claim.question)
    if not question or has_verb(text):
        return text
    return f"{question} {text}"


def has_verb(text: str) -> bool:
    for token in _TOKEN.findall(text):
        word = token.lower().replace("’", "'")
        if word in _VERB_WORDS:
            return True
        if token.islower() and word.endswith("ed") and len(word) >= 5 and not word.endswith("eed") and word not in _NOT_VERBS_ED:
            return True
    return False


def _question(text: str) -> str:
    """The sentence that asks (the last one ending in '?'), else the last sentence of the message."""
    sentences = split_sentences(text.strip())
    if not sentences:
        return ""
    asked = [s for s in sentences if s.rstrip().endswith("?")]
    return (asked or sentences)[-1].strip()


# ----------------------------------------------------------------------------- the model directory


def model_labels(directory: Path, configured: Sequence[str]) -> list[str]:
    """The output order: config.json's id2label when it names the NLI labels, else `configured`."""
    config = _read_config(directory)
    id2label = config.get("id2label")
    if isinstance(id2label, dict) and id2label:
        try:
            labels = [_canonical(id2label[k]) for k in sorted(id2label, key=int)]
        except (TypeError, ValueError):
            labels = []
        if CONTRADICTION in labels and ENTAILMENT in labels:
            return labels
        log.info("%s: id2label %s does not name the NLI labels; using nli.labels", directory, id2label)
    labels = [_canonical(label) for label in configured]
    if CONTRADICTION not in labels or ENTAILMENT not in labels:
        raise NLIModelError(f"poisoning.nli.labels {list(configured)} must include 'contradiction' and 'entailment' "
                            f"(and {directory / 'config.json'} has no id2label naming them)")
    return labels


def max_length_for(directory: Path, configured: int) -> int:
    """`configured`, capped by the model's position embeddings (RoBERTa-style models reserve two)."""
    limit = _read_config(directory).get("max_position_embeddings")
    if isinstance(limit, int) and limit > 16 and configured > limit - 2:
        log.info("%s: nli.max_length %d capped at %d (the model's positions)", directory, configured, limit - 2)
        return limit - 2
    return configured


def _read_config(directory: Path) -> dict[str, Any]:
    path = directory / "config.json"
    if not path.is_file():
        return {}
    try:
        config = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise NLIModelError(f"{path} is not readable JSON: {exc}") from exc
    return config if isinstance(config, dict) else {}


def _canonical(label: Any) -> str:
    word = str(label).strip().lower()
    for name in (CONTRADICTION, ENTAILMENT, NEUTRAL):
        if word[:6] == name[:6]:  # "CONTRADICTION", "contradict", "entails", "Neutral"
            return name
    return word


def load_model(directory: Path, max_length: int, n_labels: int) -> Any:
    """An object with probabilities(pairs) -> array[len(pairs), n_labels]."""
    if (directory / "model.onnx").is_file():
        return OnnxCrossEncoder(directory, max_length, n_labels)
    try:
        import sentence_transformers  # optional: loads PyTorch weights
    except ImportError:
        sentence_transformers = None
    if sentence_transformers is not None and (directory / "config.json").is_file():
        return TorchCrossEncoder(directory, max_length)
    raise NLIModelError(f"poisoning.nli.model_path {directory} has no model.onnx (export one with: "
                        f"optimum-cli export onnx --model <cross-encoder> {directory})")


def _softmax(logits: np.ndarray) -> np.ndarray:
    shifted = np.exp(logits - logits.max(axis=1, keepdims=True))
    return shifted / shifted.sum(axis=1, keepdims=True)


class OnnxCrossEncoder:
    """model.onnx + tokenizer.json: pairs tokenized as the model was trained ([CLS] premise [SEP]
    hypothesis [SEP], with segment ids), padded to the longest pair, truncated longest-first."""

    def __init__(self, directory: Path, max_length: int, n_labels: int) -> None:
        import onnxruntime as ort
        from tokenizers import Tokenizer

        tokenizer_file = directory / "tokenizer.json"
        if not tokenizer_file.is_file():
            raise NLIModelError(f"poisoning.nli.model_path {directory} has no tokenizer.json (it sits beside model.onnx "
                                f"in an optimum export)")
        try:
            self._tokenizer = without_word_cache(Tokenizer.from_file(str(tokenizer_file)))  # see word_cache.py
            options = ort.SessionOptions()
            options.log_severity_level = 3
            # Pairs come in every length: an arena would keep the largest buffers ever needed.
            options.enable_cpu_mem_arena = False
            options.enable_mem_pattern = False
            self._session = ort.InferenceSession(str(directory / "model.onnx"), sess_options=options,
                                                 providers=["CPUExecutionProvider"])
        except Exception as exc:
            raise NLIModelError(f"poisoning.nli.model_path {directory}: cannot load the model: {exc}") from exc
        self._tokenizer.enable_truncation(max_length=max_length, strategy="longest_first")
        self._tokenizer.enable_padding(pad_id=_pad_id(self._tokenizer), pad_token=_pad_token(self._tokenizer))
        self._inputs = {i.name: (np.int32 if "int32" in i.type else np.int64) for i in self._session.get_inputs()}
        if "input_ids" not in self._inputs:
            raise NLIModelError(f"{directory / 'model.onnx'} has no input_ids input (inputs: {sorted(self._inputs)})")
        outputs = [o for o in self._session.get_outputs()]
        self._output = next((o.name for o in outputs if o.name == "logits"), outputs[0].name)
        width = next(o.shape for o in outputs if o.name == self._output)[-1]
        if isinstance(width, int) and width != n_labels:
            raise NLIModelError(f"{directory / 'model.onnx'} gives {width} scores per pair but {n_labels} labels are configured")

    def feeds(self, pairs: Sequence[tuple[str, str]]) -> dict[str, np.ndarray]:
        encodings = self._tokenizer.encode_batch(list(pairs))
        columns = {"input_ids": [e.ids for e in encodings], "attention_mask": [e.attention_mask for e in encodings],
                   "token_type_ids": [e.type_ids for e in encodings]}
        # feed only what the graph takes: DeBERTa-v3 and RoBERTa exports have no token_type_ids
        return {name: np.array(columns[name], dtype=dtype) for name, dtype in self._inputs.items() if name in columns}

    def probabilities(self, pairs: Sequence[tuple[str, str]]) -> np.ndarray:
        logits = self._session.run([self._output], self.feeds(pairs))[0]
        return _softmax(np.asarray(logits, dtype=np.float64).reshape(len(pairs), -1))


def _pad_token(tokenizer: Any) -> str:
    padding = tokenizer.padding or {}
    if padding.get("pad_token"):
        return padding["pad_token"]
    return next((t for t in ("[PAD]", "<pad>", "<PAD>") if tokenizer.token_to_id(t) is not None), "[PAD]")


def _pad_id(tokenizer: Any) -> int:
    padding = tokenizer.padding or {}
    if padding.get("pad_id") is not None and padding.get("pad_token"):
        return int(padding["pad_id"])
    found = tokenizer.token_to_id(_pad_token(tokenizer))
    return int(found) if found is not None else 0  # masked out anyway


class TorchCrossEncoder:
    """A directory sentence-transformers' CrossEncoder loads (PyTorch weights); optional."""

    def __init__(self, directory: Path, max_length: int) -> None:
        from sentence_transformers import CrossEncoder

        try:
            try:
                self._model = CrossEncoder(str(directory), max_length=max_length, device="cpu", local_files_only=True)
            except TypeError:  # older sentence-transformers lack the flag; a local path is not fetched anyway
                self._model = CrossEncoder(str(directory), max_length=max_length, device="cpu")
        except Exception as exc:
            raise NLIModelError(f"poisoning.nli.model_path {directory}: sentence-transformers cannot load it: {exc}") from exc

    def probabilities(self, pairs: Sequence[tuple[str, str]]) -> np.ndarray:
        probs = self._model.predict(list(pairs), batch_size=max(1, len(pairs)), apply_softmax=True,
                                    show_progress_bar=False, convert_to_numpy=True)
        return np.asarray(probs, dtype=np.float64).reshape(len(pairs), -1)
