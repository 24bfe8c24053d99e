"""Shared by the poisoning tests: the local checker over real retrieval (BM25 + wordllama vectors)."""

from __future__ import annotations

from typing import Callable

import numpy as np

from ctxwarden.policies.poisoning.checkers.base import ClaimToCheck, ClaimVerdict
from ctxwarden.policies.poisoning.checkers.local import LocalChecker
from ctxwarden.policies.poisoning.evidence import EvidenceIndex, IndexedSentence
from ctxwarden.policies.text.sentences import split_sentences
from ctxwarden.proxy.embeddings import WordLlamaEmbedder


def local_judge(docs: dict[str, str]) -> Callable[..., ClaimVerdict]:
    """verdict(claim, question="") → the local checker's verdict on evidence retrieved from `docs`."""
    embedder = WordLlamaEmbedder()
    sentences = [IndexedSentence(f"{d}#{n}", d, n, s) for d, text in docs.items() for n, s in enumerate(split_sentences(text))]
    index = EvidenceIndex(sentences, np.asarray(embedder.embed([s.text for s in sentences])))
    checker = LocalChecker()

    def claim_of(claim: str, question: str = "") -> ClaimToCheck:
        query = f"{question} {claim}".strip()
        return ClaimToCheck(claim, question, tuple(index.search([query], embedder.embed([query]), 4)[0]))

    def verdict(claim: str, question: str = "") -> ClaimVerdict:
        return checker.verdict(claim_of(claim, question))

    verdict.claim = claim_of  # the claim with its evidence, for tests that read the features
    return verdict


def tool_turn(question: str, tool: str, result: str) -> list[dict]:
    """A user question, the assistant's call to `tool`, and the tool's result (call id call_1)."""
    return [
        {"role": "user", "content": question},
        {"role": "assistant", "content": None,
         "tool_calls": [{"id": "call_1", "type": "function", "function": {"name": tool, "arguments": "{}"}}]},
        {"role": "tool", "tool_call_id": "call_1", "content": result},
    ]
