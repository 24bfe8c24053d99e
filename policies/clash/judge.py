"""The LLM judge: an optional detector that asks a model (clash.judge_model) for contradictions.

The user's sentences are numbered and sent in one call; the judge answers with pairs of
sentence ids. Only sentences from user messages it has not seen in this session are marked
[new], so each turn costs one short call about the latest message, and earlier findings are
remembered (SessionState.judge_findings) and located again by text hash on later turns.
Findings become the same `Clash` records as the local detector's.
"""

from __future__ import annotations

import asyncio
import json
import re
from dataclasses import dataclass
from typing import Any

from ..base import Exchange, Services
from ..cache import LRU, approx_size, stable_hash
from ..errors import CtxwardenError
from ..text.statements.model import Sentence, Statement, split_sentences
from .detect import CLASH_TYPES, DUPLICATE_FACTS, Clash, Located, make_clash, text_keys
from .question import Texts
from .state import SessionState

SYSTEM_PROMPT = """You find contradictions between statements a USER made in a conversation with an assistant.
You get the user's sentences, numbered S1, S2, ... in the order they were said; sentences marked [new] were just added.
Report a pair when both cannot hold for the user at once:
- CONTRADICTORY_PREFERENCES: a changed preference ("budget hotels under $50" then "a luxury 5-star hotel");
- CONFLICTING_FACTS: facts about the user that exclude each other ("I'm in New York" then "I'm in London");
- OUTDATED_INFORMATION: a value that was changed (a date, amount, count, name, seat or meal choice).
You may also report DUPLICATE_FACTS: the same fact or preference stated twice.
Do NOT report: additions ("I also like parks"); different scopes ("$200 per night" and "$1,400 for the week");
plans next to the present ("I'm in New York" and "I fly to London next week"); statements about other people;
questions; hypotheticals; things said about the past.
Only report pairs that involve at least one [new] sentence. "older" is the sentence said first.
Answer with JSON only: {"clashes": [{"older": "S1", "newer": "S4", "type": "CONTRADICTORY_PREFERENCES",
"topic": "hotel preference", "older_value": "budget", "newer_value": "luxury"}]}. No clashes: {"clashes": []}."""

_KINDS = {"CONTRADICTORY_PREFERENCES": "preference", "CONFLICTING_FACTS": "fact"}


class JudgeError(CtxwardenError, RuntimeError):
    """The judge could not be asked or its answer could not be read."""


@dataclass(frozen=True)
class _Numbered:
    message: int
    part: int
    text_hash: str
    sentence: Sentence


def numbered_sentences(texts: Texts) -> list[_Numbered]:
    keys = text_keys(texts)
    out = []
    for (message, part), text in sorted(texts.items()):
        out += [_Numbered(message, part, keys[(message, part)], s) for s in split_sentences(text)]
    return out


class Judge:
    def __init__(self, model: str, services: Services, timeout_s: float, cache_size: int = 1024) -> None:
        self.model = model
        self.services = services
        self.timeout_s = timeout_s
        # Per prompt: a replayed turn costs no call. By bytes too: a finding quotes the user's sentences
        self._cache: LRU[str, list[dict[str, Any]]] = LRU(cache_size, max_bytes=4 * 2**20,
                                                          sizeof=lambda key, found: 100 + len(key) + approx_size(found, 3))

    async def clashes(self, ex: Exchange, texts: Texts, state: SessionState) -> list[Clash]:
        sentences = numbered_sentences(texts)
        new_hashes = {n.text_hash for n in sentences} - state.judged
        if new_hashes:
            findings = await self._ask(ex, sentences, new_hashes)
            state.judge_findings.extend(f for f in findings if f not in state.judge_findings)
            state.judged |= new_hashes
        return self._locate(state.judge_findings, sentences, texts)

    async def _ask(self, ex: Exchange, sentences: list[_Numbered], new_hashes: set[str]) -> list[dict[str, Any]]:
        lines = [f"S{i + 1}{' [new]' if n.text_hash in new_hashes else ''}: {' '.join(n.sentence.text.split())}"
                 for i, n in enumerate(sentences)]
        messages = [{"role": "system", "content": SYSTEM_PROMPT}, {"role": "user", "content": "\n".join(lines)}]
        key = stable_hash([self.model, messages])
        cached = self._cache.get(key)
        if cached is not None:
            return cached
        if self.services.complete is None:
            raise JudgeError("no completion service to reach the judge model")
        try:
            raw = await asyncio.wait_for(self.services.complete(self.model, messages, exchange=ex, temperature=0), self.timeout_s)
        except Exception as exc:  # timeouts, upstream errors: the caller falls back to the local detector
            raise JudgeError(f"judge call failed: {type(exc).__name__}: {exc}") from exc
        findings = [self._finding(item, sentences) for item in _parse(raw)]
        findings = [f for f in findings if f]
        self._cache.put(key, findings)
        return findings

    @staticmethod
    def _finding(item: dict[str, Any], sentences: list[_Numbered]) -> dict[str, Any] | None:
        ids = [_index(item.get("older")), _index(item.get("newer"))]
        if None in ids or ids[0] == ids[1] or max(ids) >= len(sentences):  # type: ignore[type-var]
            return None
        older, newer = sorted(ids)  # type: ignore[type-var]
        kind = str(item.get("type", "")).upper()
        swap = ids[0] > ids[1]
        values = [str(item.get("older_value", "")), str(item.get("newer_value", ""))]
        return {
            "older": [sentences[older].text_hash, sentences[older].sentence.start],
            "newer": [sentences[newer].text_hash, sentences[newer].sentence.start],
            "type": kind if kind in CLASH_TYPES else "CONFLICTING_FACTS",
            "topic": " ".join(str(item.get("topic") or "statement").split())[:60],
            "older_value": values[1] if swap else values[0],
            "newer_value": values[0] if swap else values[1],
        }

    @staticmethod
    def _locate(findings: list[dict[str, Any]], sentences: list[_Numbered], texts: Texts) -> list[Clash]:
        where = {(n.text_hash, n.sentence.start): n for n in sentences}
        clashes: list[Clash] = []
        for f in findings:
            older, newer = where.get(tuple(f["older"])), where.get(tuple(f["newer"]))  # type: ignore[arg-type]
            if older is None or newer is None:
                continue  # that message is no longer in the conversation
            if older.message == newer.message:
                continue  # values within one message are never a clash (a range, a comparison, a plan)
            a = _located(older, f, f["older_value"], texts)
            b = _located(newer, f, f["newer_value"], texts)
            clashes.append(make_clash(a, b, detector="judge", type_=f["type"]) if f["type"] != DUPLICATE_FACTS
                           else Clash(DUPLICATE_FACTS, a, b, detector="judge"))
        return sorted(clashes, key=lambda c: (c.newer.order, c.older.order))


def _index(raw: Any) -> int | None:
    m = re.fullmatch(r"\s*S?(\d+)\s*", str(raw or ""), re.I)
    return int(m.group(1)) - 1 if m else None


def _parse(raw: str) -> list[dict[str, Any]]:
    text = re.sub(r"^\s*```(?:json)?|```\s*$", "", raw.strip())
    try:
        data = json.loads(text)
    except ValueError as exc:
        raise JudgeError(f"the judge did not answer with JSON: {raw[:120]!r}") from exc
    items = data.get("clashes") if isinstance(data, dict) else data
    if not isinstance(items, list):
        raise JudgeError("the judge's JSON has no 'clashes' list")
    return [i for i in items if isinstance(i, dict)]


def _located(n: _Numbered, finding: dict[str, Any], value: str, texts: Texts) -> Located:
    s = n.sentence
    text = texts[(n.message, n.part)]
    at = text.lower().find(value.lower(), s.start, s.end) if value else -1
    slot = "judge." + re.sub(r"[^a-z0-9]+", "-", finding["topic"].lower()).strip("-")
    st = Statement(
        slot=slot,
        kind=_KINDS.get(finding["type"], "value"),  # type: ignore[arg-type]
        value=value.lower().strip() or s.text.lower(),
        label=finding["topic"],
        display=value or s.text,
        negated=False,
        sentence=s.index,
        start=s.start,
        end=s.end,
        vstart=at if at >= 0 else s.start,
        vend=at + len(value) if at >= 0 else s.end,
        changes=s.changes,
        substitutable=at >= 0,
    )
    return Located(n.message, n.part, n.text_hash, st)
