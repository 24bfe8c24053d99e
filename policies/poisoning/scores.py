"""Validation scores for an answer: relevance, accuracy, freshness, completeness → quality.

- relevance: cosine similarity of the answer and the user's last message (embeddings);
- accuracy: 1.0 with no verifiable claim; else the share of decided claims the KB supports
  (a contradicted claim counts 1 - its confidence);
- freshness: the share of KB passages used as evidence that are not past their `valid_until`
  (stale passages are never used to judge, so this is 1.0 unless evidence went stale);
- completeness: with `response_format` json_schema, the share of required fields the JSON answer
  has; an answer cut by the token limit (finish_reason "length") gets 0.5; else 1.0;
- quality: their weighted mean (weights below).
They are reported (header `x-ctxwarden-validation`, metrics), not enforced.
"""

from __future__ import annotations

import json
import operator
from dataclasses import dataclass
from typing import Any, Sequence

from ..text.window import analysis_windows
from .checkers.base import CONTRADICTED, SUPPORTED, ClaimVerdict

RELEVANCE_CHARS = 8000  # of a longer answer or question, the head and tail are embedded for the relevance score

WEIGHTS = {"relevance": 0.3, "accuracy": 0.4, "freshness": 0.1, "completeness": 0.2}


@dataclass
class Scores:
    relevance: float
    accuracy: float
    freshness: float
    completeness: float

    @property
    def quality(self) -> float:
        return sum(getattr(self, k) * w for k, w in WEIGHTS.items())

    def header(self) -> str:
        return "; ".join(f"{k}={v:.2f}" for k, v in (("quality", self.quality), *((k, getattr(self, k)) for k in WEIGHTS)))


def accuracy(verdicts: Sequence[ClaimVerdict]) -> float:
    decided = [v for v in verdicts if v.label in (SUPPORTED, CONTRADICTED)]
    if not decided:
        return 1.0  # no verifiable claim: nothing is wrong
    return sum(1.0 if v.label == SUPPORTED else 1.0 - v.confidence for v in decided) / len(decided)


def completeness(answer_text: str, body: dict[str, Any], finish_reason: str | None) -> float:
    if finish_reason == "length":
        return 0.5
    required = required_fields(body.get("response_format"))
    if not required:
        return 1.0
    try:
        data = json.loads(answer_text)
    except ValueError:
        return 0.0
    if not isinstance(data, dict):
        return 0.0
    return sum(1 for key in required if data.get(key) not in (None, "")) / len(required)


def required_fields(fmt: Any) -> list[str]:
    """The `required` keys of a json_schema response_format; [] for any other (or odd) shape."""
    spec = fmt.get("json_schema") if isinstance(fmt, dict) and fmt.get("type") == "json_schema" else None
    schema = spec.get("schema") if isinstance(spec, dict) else None
    required = schema.get("required") if isinstance(schema, dict) else None
    return [key for key in required if isinstance(key, str)] if isinstance(required, list) else []


def about(text: str) -> str:
    """What a text is about, for the relevance embedding: all of it, or the head and tail of a long one
    (a pasted megabyte would cost a second of embedding and say no more)."""
    return "\n".join(piece for _, piece in analysis_windows(text, RELEVANCE_CHARS))


def relevance(answer_vector: Sequence[float] | None, query_vector: Sequence[float] | None) -> float:
    if answer_vector is None or query_vector is None or not len(answer_vector) or not len(query_vector):
        return 1.0  # nothing to compare with (no user message): not a relevance problem
    # unit vectors: the dot product is the cosine (embedders hand out lists: summed in Python, which
    # beats converting 2 × 256 floats to arrays for one product)
    return max(0.0, min(1.0, sum(map(operator.mul, answer_vector, query_vector))))
