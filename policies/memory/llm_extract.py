"""WRITE with `extract: llm`: the judge model reads the user's text and answers strict JSON.

One call per new user message, through Services.complete (the proxy's upstream), with
response_format json_object; the answer must be {"memories": [{"text", "kind"}]} with kinds from
config.KINDS, else LLMExtractError and the local extractor's result stands (memory.extract_fallback).
Each memory the model names is read by the statement reader too, so supersede compares it the same way.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

from ..base import Exchange, Services
from ..errors import CtxwardenError
from ..text.statements.extract import extract
from .config import KINDS
from .extract import Candidate

PROMPT = (
    "Extract durable memories from the user's message: preferences, facts about the user, standing "
    "instructions for the assistant, and constraints, that would still hold in a new conversation next "
    "week. Ignore one-off requests, questions, plans and past events. Answer only JSON: "
    '{"memories": [{"text": "<the user\'s own sentence or a short paraphrase>", "kind": '
    '"preference|fact|instruction|constraint"}]}; {"memories": []} when there is none.'
)
MAX_MEMORIES = 10


class LLMExtractError(CtxwardenError):
    """The judge model failed or answered something other than the JSON asked for."""


class LLMExtractor:
    def __init__(self, services: Services, model: str | None, timeout_s: float) -> None:
        self.services = services
        self.model = model
        self.timeout_s = timeout_s

    async def candidates(self, ex: Exchange, text: str) -> list[Candidate]:
        if self.services.complete is None or not self.model:
            raise LLMExtractError("extract: llm has no model to call")
        messages = [{"role": "system", "content": PROMPT}, {"role": "user", "content": text}]
        try:
            answer = await asyncio.wait_for(
                self.services.complete(self.model, messages, exchange=ex, temperature=0,
                                       response_format={"type": "json_object"}), self.timeout_s)
        except Exception as exc:
            raise LLMExtractError(f"{type(exc).__name__}: {exc}") from exc
        return parse(answer)


def parse(answer: str) -> list[Candidate]:
    try:
        data: Any = json.loads(answer)
    except ValueError as exc:
        raise LLMExtractError(f"not JSON: {answer[:80]!r}") from exc
    items = data.get("memories") if isinstance(data, dict) else None
    if not isinstance(items, list):
        raise LLMExtractError('expected {"memories": [...]}')
    out: list[Candidate] = []
    for item in items[:MAX_MEMORIES]:
        if not isinstance(item, dict) or not isinstance(item.get("text"), str) or item.get("kind") not in KINDS:
            raise LLMExtractError(f"a memory must be {{text, kind}} with kind in {', '.join(KINDS)}: {str(item)[:80]}")
        text = " ".join(item["text"].split())
        if text:
            out.append(Candidate(text, item["kind"], 1.0, extract(text)))
    return out
