"""The `poisoning` policy: keep hallucinations and planted instructions out of the context.

- Answers (on_response, also sentence by sentence while streaming): each claim, read as an answer to the user's
  question, is checked against the evidence retrieved for it (assess.py) by the configured checker (`checker:
  local | nli | llm | hybrid`, checkers/); a contradiction the checker is sure of (≥ confidence_threshold) is
  blocked, turned into a 422, or annotated (`action`); one inside `quarantine_band` is held for a human.
- Inputs (on_request, `check_inputs`): assistant and tool messages of the incoming context are
  checked the same way, and against the flag rules (prompt injection in tool results); a bad one
  is replaced by a short note (`input_action: drop`) or the request is refused (`reject`).
  Verdicts are cached per message hash, so a growing conversation costs one check per new message.
- Every verdict says which checker decided, in how long and (model checkers) for how many tokens: metrics
  ctxwarden.poisoning.verdicts / checker_ms / judge_tokens, the validation note, and the quarantine record.
- Metrics: checked items, blocked and quarantined by type, the poisoning rate over `alert_window` seconds (a log
  alert above `alert_rate`), the quarantine size. Admin API: admin.py. Other policies' KB check: kb_gate.py.
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from typing import Any

from ..base import Answer, BasePolicy, Block, Exchange, Reject, Services, Verdict, run_cpu
from ..cache import LRU
from ..messages import Message, content_text, remembered
from .admin import Route, routes
from .assess import Assessment, answer_evidence, assess, input_evidence
from .checkers import build_checker
from .checkers.local import LocalChecker
from .config import PoisoningConfig
from .findings import MARK, OUR_NOTES, VERDICT_BYTES, Finding, header_safe, question_of, short, verdict_size
from .flags import FlagRules
from .gate import releasable
from .inputs import UNSEEN, input_texts, known_verdicts, remember, to_check, verdict_keys, verdict_of
from .kb import KnowledgeBase, readiness
from .kb_gate import share
from .quarantine import APPROVED, REJECTED, QuarantineStore
from .scores import Scores, about, accuracy, completeness, relevance
from .stats import PoisoningStats

log = logging.getLogger("ctxwarden.poisoning")

_without_notes = lambda m: OUR_NOTES.sub("", content_text(m))  # noqa: E731  a message as the input checks read it
_read = lambda m: remembered("poisoning.text", m, _without_notes)  # noqa: E731  once a message
CHECKED_ROLES = ("assistant", "tool")
MAX_TENANT_KBS = 256  # tenants whose knowledge base (and its in-memory index) is kept loaded
SHORT_EMBED_CHARS = 4000  # answer + question under this are embedded on the event loop (≲ 0.3 ms)
PRIOR_CHARS = 2000  # of a stream's text already judged, what a new piece's check reads as its context


class PoisoningPolicy(BasePolicy):
    name = "poisoning"
    Config = PoisoningConfig
    validates_stream = True

    def __init__(self, config: PoisoningConfig, services: Services) -> None:
        super().__init__(config, services)
        self.local = LocalChecker()
        self.checker = build_checker(config, services, self.local)
        self.flags = FlagRules(config.flag_rules)
        self._roles = frozenset(CHECKED_ROLES) | self.flags.roles  # what the input checks read
        self.stats = PoisoningStats(config.alert_window, config.alert_rate, config.alert_min_samples)
        self._kbs: LRU[str | None, KnowledgeBase] = LRU(MAX_TENANT_KBS)  # each holds its evidence index
        self._quarantine: QuarantineStore | None = None
        self._verdicts: LRU[str, Finding | None] = LRU(max(1, config.cache_size), max_bytes=VERDICT_BYTES, sizeof=verdict_size)
        self._forgotten = 0  # forget_verdicts calls: in the scope of the verdict lists carried between requests
        self._lock = threading.Lock()
        share(self)  # Services.shared["kb_contradiction"]: the memory policy's write gate asks it

    # ------------------------------------------------------------------ stores

    def kb(self, tenant: str | None = None) -> KnowledgeBase:
        if self.services.store is None or self.services.embedder is None:
            raise RuntimeError("the poisoning policy needs services.store and services.embedder")
        with self._lock:
            return self._kbs.get_or_create(tenant, lambda: KnowledgeBase(
                self.services.store, self.services.embedder, tenant, self.config.kb_refresh_s, self.services.versions))

    @property
    def quarantine(self) -> QuarantineStore:
        if self.services.store is None or self.services.embedder is None:
            raise RuntimeError("the poisoning policy needs services.store and services.embedder")
        if self._quarantine is None:
            self._quarantine = QuarantineStore(self.services.store, self.services.embedder)
        return self._quarantine

    async def aclose(self) -> None:
        close = getattr(self.checker, "aclose", None)  # the judge's own HTTP client (judge.base_url)
        if close is not None:
            await close()

    def forget_verdicts(self) -> None:
        """After a review: cached input verdicts may now be wrong (an approved item is allowed)."""
        self._verdicts.clear()
        self._forgotten += 1

    # ------------------------------------------------------------------ answers

    def stream_releasable(self, ex: Exchange, pending: str) -> int:
        kb = self._kbs.get(ex.tenant)
        return releasable(pending, kb.loaded_index if kb is not None else None)

    def reads_answer(self, ex: Exchange) -> bool:  # an empty knowledge base, known to be so: nothing to judge
        return (kb := self._kbs.get(ex.tenant)) is None or not kb.settled_empty

    async def on_response(self, ex: Exchange, answer: Answer) -> Verdict | None:
        if answer.partial:
            return await self._judge_streamed(ex, answer)
        return await self._judge_answer(ex, answer)

    async def _judge_streamed(self, ex: Exchange, answer: Answer) -> Verdict | None:
        """One streamed sentence, judged within `stream.max_hold_ms` (the client is waiting for it)."""
        limit = self.config.stream.max_hold_ms / 1000
        try:
            return await asyncio.wait_for(self._judge_answer(ex, answer), limit)
        except asyncio.TimeoutError:
            self.record(ex, "stream_timeout", max_hold_ms=self.config.stream.max_hold_ms,
                        on_timeout=self.config.stream.on_timeout, claim=short(answer.text))
            self.services.metrics.add("ctxwarden.poisoning.stream_timeouts", 1, on_timeout=self.config.stream.on_timeout)
            if self.config.stream.on_timeout == "block":
                return Block("validation_timeout",
                             f"{MARK} The rest of this answer could not be validated in time, so it was withheld.")
            return None

    async def _judge_answer(self, ex: Exchange, answer: Answer) -> Verdict | None:
        text = OUR_NOTES.sub("", answer.text)
        if not text.strip():
            return None
        # Its context is what went before, up to PRIOR_CHARS (all of it, read again per piece, was quadratic)
        context = OUR_NOTES.sub("", answer.prior_text[-PRIOR_CHARS:]) if answer.partial else ""
        started = time.perf_counter()
        try:
            kb = self.kb(ex.tenant)
            picked, claims = await run_cpu(not kb.settled_empty, answer_evidence, text, kb, question_of(ex.messages), context,
                                           self.config.top_k, self.config.answer_max_claims,
                                           answer.prior_text if answer.partial else "")
        except Exception as exc:  # the knowledge base could not be read (or the embedder failed)
            return self._failed(ex, exc, "answer", store=True)
        if picked.over_cap:  # never silent: what was left unjudged is said
            self.record(ex, "partly_checked", checked=len(picked.claims), unchecked=picked.over_cap)
            self.services.metrics.add("ctxwarden.poisoning.unchecked_claims", picked.over_cap)
        try:
            assessment = await self._assess(ex, claims)
        except Exception as exc:
            return self._failed(ex, exc, "answer")
        self.services.metrics.record("ctxwarden.poisoning.validation_ms", (time.perf_counter() - started) * 1000,
                                     partial=answer.partial)
        worst = assessment.worst
        finding = Finding.of(worst) if worst else None
        ex.notes.answer_checked = True  # on_complete counts the answer once (its type when poisoned)
        verdict = await self._decide_answer(ex, finding, (answer.prior_text + answer.text) if answer.partial else answer.text)
        if not answer.partial:
            try:  # scores only report: a failure there (the embedder down) must not let the answer skip its verdict
                await self._report_scores(ex, answer, assessment)
            except Exception as exc:
                log.warning("quality scores of an answer failed (%s: %s)", type(exc).__name__, exc)
                self.record(ex, "scores_failed", error=type(exc).__name__)
        return verdict

    async def _assess(self, ex: Exchange, claims: list) -> Assessment:
        """Verdicts from the configured checker, each reported by who decided and what it cost."""
        assessment = await assess(claims, self.checker, ex)
        for event in assessment.events:
            detail = {k: v for k, v in event.items() if k != "event"}
            self.record(ex, str(event.get("event", "checker_event")), **detail)
        for v in assessment.verdicts:
            self.services.metrics.add("ctxwarden.poisoning.verdicts", 1, checker=v.checker, verdict=v.label)
            self.services.metrics.record("ctxwarden.poisoning.checker_ms", v.latency_ms, checker=v.checker)
            if v.tokens:
                self.services.metrics.add("ctxwarden.poisoning.judge_tokens", v.tokens, checker=v.checker)
        return assessment

    async def _decide_answer(self, ex: Exchange, finding: Finding | None, full_text: str) -> Verdict | None:
        if finding is None:
            return None
        low, high = self.config.quarantine_band
        sure = finding.confidence >= self.config.confidence_threshold
        suspicious = low <= finding.confidence < high
        if not sure and not suspicious:
            self.record(ex, "unsure", claim=finding.claim, confidence=round(finding.confidence, 3))
            return None
        status = await asyncio.to_thread(self.quarantine.status_of, full_text, ex.tenant)
        if status == APPROVED:  # a human approved this very text before
            self.record(ex, "approved_before", claim=finding.claim)
            return None
        if sure or status == REJECTED:
            return self._act(ex, finding)
        return await self._quarantine_answer(ex, finding, full_text)

    def _act(self, ex: Exchange, finding: Finding) -> Verdict | None:
        notice = (f'{MARK} Content rejected: hallucination detected. The claim "{finding.claim}" {finding.against_kb()} '
                  f'(confidence {finding.confidence:.2f}).')
        self._count_blocked(finding, "answer", self.config.action)
        ex.notes.answer_kind = finding.kind
        if self.config.action == "annotate":
            self.record(ex, "annotated", claim=finding.claim, evidence=finding.evidence, kind=finding.kind,
                        checker=finding.checker)
            ex.response_headers["x-ctxwarden-warning"] = header_safe(
                f'hallucination; claim="{finding.claim}"; kb="{finding.evidence}"; confidence={finding.confidence:.2f}')
            return None
        self.record(ex, "blocked", claim=finding.claim, evidence=finding.evidence, kind=finding.kind,
                    confidence=round(finding.confidence, 3), checker=finding.checker)
        if self.config.action == "error":
            return Reject(422, "hallucination_detected", notice.removeprefix(MARK).strip())
        return Block("hallucination_detected", notice)

    async def _quarantine_answer(self, ex: Exchange, finding: Finding, full_text: str) -> Verdict:
        item = await asyncio.to_thread(
            self.quarantine.put, full_text, tenant=ex.tenant, kind=finding.kind, source="answer", claim=finding.claim,
            evidence=finding.evidence, confidence=finding.confidence, request_id=ex.request_id,
            session=ex.session_id, model=ex.model, checker=finding.checker)
        ex.notes.answer_kind = finding.kind
        self.record(ex, "quarantined", quarantine_id=item["id"], claim=finding.claim, kind=finding.kind,
                    checker=finding.checker)
        self.services.metrics.add("ctxwarden.poisoning.quarantined", 1, type=finding.kind, source="answer")
        await self.refresh_quarantine_gauge()
        return Block("quarantined", (
            f'{MARK} This answer is held for human review (quarantine id {item["id"]}): the claim "{finding.claim}" '
            f'{finding.against_kb(may=True)} (confidence {finding.confidence:.2f}).'))

    async def _report_scores(self, ex: Exchange, answer: Answer, assessment: Assessment) -> None:
        """Quality scores for a whole answer: header x-ctxwarden-validation, metrics, ex.notes."""
        text, query = about(answer.text), about(question_of(ex.messages))  # head and tail: bounded (invariant 7)
        heavy = len(text) + len(query) > SHORT_EMBED_CHARS
        vectors = await run_cpu(heavy, self.services.embedder.embed, [text, query]) if query else [None, None]
        scores = Scores(relevance(vectors[0], vectors[1]), accuracy(assessment.verdicts), assessment.fresh_share,
                        completeness(answer.text, ex.body, answer.finish_reason))
        ex.notes.validation = {"quality": scores.quality, **scores.__dict__, "claims": len(assessment.claims),
                               "checked": [v.as_dict() for v in assessment.verdicts]}
        ex.response_headers["x-ctxwarden-validation"] = scores.header()
        self.services.metrics.record("ctxwarden.validation.quality", scores.quality)
        self.services.metrics.record("ctxwarden.validation.accuracy", scores.accuracy)

    # ------------------------------------------------------------------ inputs

    async def on_request(self, ex: Exchange) -> Verdict | None:
        # the text the checks read of each incoming message (None: not read), made once a message (and its next requests)
        texts = input_texts(ex.messages, self._roles, _read) if self.config.check_inputs else []
        if texts.count(None) == len(texts):
            # The stream gate reads the KB index: load it now, off the event loop (with inputs to
            # check, _input_findings loads it).
            if ex.stream:
                await self._load_kb_index(ex)
            return None
        try:
            await self.kb(ex.tenant).refreshed()  # load or refresh before reading kb.version
        except Exception as exc:
            self._failed(ex, exc, "input", store=True)
            return None
        try:
            findings = await self._input_findings(ex, texts)
        except Exception as exc:
            self._failed(ex, exc, "input")
            return None
        replaced: dict[int, Message] = {}
        for i in sorted(findings):
            verdict = await self._decide_input(ex, i, ex.messages[i].get("role", ""), texts[i], findings[i], replaced)
            if verdict is not None:
                return verdict
        if replaced:
            ex.messages = [replaced.get(i, m) for i, m in enumerate(ex.messages)]
        return None

    async def _load_kb_index(self, ex: Exchange) -> None:
        try:
            await self.kb(ex.tenant).refreshed()
        except Exception as exc:  # sentences are held; each is then judged (and reported) on its own
            self._failed(ex, exc, "stream", store=True)

    async def _input_findings(self, ex: Exchange, texts: list[str | None]) -> dict[int, Finding]:
        """Findings per message index, cached per (tenant, KB version, role, text); the caller refreshed kb.version."""
        kb = self.kb(ex.tenant)
        out: dict[int, Finding] = {}
        fresh: list[tuple[int, str, str, str]] = []
        keys = verdict_keys(ex.messages, ex.tenant, kb.version, self._roles, _read)  # once a message
        cache = self._verdicts if self.config.cache_size else None
        scope = (ex.tenant, kb.version, self._forgotten)
        known = known_verdicts(ex.messages, scope, self._roles, _read) if cache is not None else None
        for i in to_check(texts, known):
            role, text, key = ex.messages[i].get("role", ""), texts[i], keys[i]
            found = verdict_of(known, i, key, self._verdicts)
            if found is not UNSEEN:
                if found is not None:
                    out[i] = found
                continue
            fresh.append((i, role, text, key))
        for i, role, text, key in fresh:
            finding = await self._check_input(ex, kb, role, text)
            remember(known, i, key, finding, cache)
            self._observe(finding.kind if finding else None, "input")
            if finding is not None:
                out[i] = finding
        return out

    async def _check_input(self, ex: Exchange, kb: KnowledgeBase, role: str, text: str) -> Finding | None:
        """Flag rules first (a match needs no KB), then the claims (retrieval in a worker thread:
        big tool results)."""
        flag = self.flags.check(role, text)
        if flag is not None:
            return Finding("prompt_injection", flag.excerpt, f"flag rule {flag.rule!r}", 1.0, flagged=True)
        if role not in CHECKED_ROLES:
            return None
        pieces, claims = await run_cpu(not kb.settled_empty, input_evidence, text, kb, self.config.input_max_claims,
                                       self.config.top_k)  # an empty KB known to be so: no thread hop
        if pieces.over_cap:
            self.record(ex, "input_capped", role=role, judged=len(pieces.claims), skipped=pieces.over_cap,
                        unrelated=pieces.unrelated)
        worst = (await self._assess(ex, claims)).worst
        return Finding.of(worst) if worst and worst.confidence >= self.config.quarantine_band[0] else None

    async def _decide_input(self, ex: Exchange, i: int, role: str, text: str, finding: Finding,
                            replaced: dict[int, Message]) -> Verdict | None:
        message = ex.messages[i]
        sure = finding.flagged or finding.confidence >= self.config.confidence_threshold
        status = await asyncio.to_thread(self.quarantine.status_of, text, ex.tenant)
        if status == APPROVED:
            return None  # a human approved it: it may enter the context
        why = ("matches a prompt-injection rule" if finding.flagged
               else f'contradicts the knowledge base: "{finding.evidence}"')
        if sure or status == REJECTED:
            self._count_blocked(finding, "input", self.config.input_action)
            if self.config.input_action == "reject":
                self.record(ex, "input_rejected", index=i, role=role, kind=finding.kind)
                return Reject(400, "content_rejected",
                              f'messages[{i}] ({role}) was rejected: "{short(finding.claim)}" {why}.', param=f"messages[{i}]")
            self.record(ex, "input_dropped", index=i, role=role, kind=finding.kind, claim=short(finding.claim))
            replaced[i] = {**message, "content": f'{MARK} A {role} message was removed here: "{short(finding.claim)}" {why}.'}
            return None
        item = await asyncio.to_thread(
            self.quarantine.put, text, tenant=ex.tenant, kind=finding.kind, source=f"input:{role}", claim=finding.claim,
            evidence=finding.evidence, confidence=finding.confidence, request_id=ex.request_id,
            session=ex.session_id, model=ex.model, checker=finding.checker)
        self.record(ex, "input_quarantined", index=i, role=role, quarantine_id=item["id"])
        self.services.metrics.add("ctxwarden.poisoning.quarantined", 1, type=finding.kind, source="input")
        await self.refresh_quarantine_gauge()
        replaced[i] = {**message, "content": (f'{MARK} A {role} message is held for human review (quarantine id '
                                              f'{item["id"]}): "{short(finding.claim)}" may contradict the knowledge base.')}
        return None

    # ------------------------------------------------------------------ bookkeeping

    async def on_complete(self, ex: Exchange, outcome: str) -> None:
        if ex.notes.answer_checked:
            self._observe(ex.notes.answer_kind, "answer")

    def _observe(self, kind: str | None, source: str) -> None:
        """One checked item for the poisoning rate (kind: its poisoning type, None when clean)."""
        self.services.metrics.add("ctxwarden.poisoning.checked", 1, source=source)
        rate, alert = self.stats.observe(kind)
        self.services.metrics.gauge("ctxwarden.poisoning.rate", rate)
        if alert:
            self.services.metrics.add("ctxwarden.poisoning.alerts", 1)

    def _count_blocked(self, finding: Finding, source: str, action: str) -> None:
        self.services.metrics.add("ctxwarden.poisoning.blocked", 1, type=finding.kind, source=source, action=action)

    async def refresh_quarantine_gauge(self) -> None:
        try:
            sizes = await asyncio.to_thread(self.quarantine.pending_by_type)
        except Exception:
            log.exception("could not count the quarantine")
            return
        for kind, size in sizes.items():
            self.services.metrics.gauge("ctxwarden.poisoning.quarantine_size", size, type=kind)

    def _failed(self, ex: Exchange, exc: Exception, source: str, store: bool = False) -> Verdict | None:
        """Fail safe and say so: the check could not run (store or embedder down). Never silent:
        the action poisoning.unavailable, a log line, ctxwarden.poisoning.failures and, when the
        knowledge base could not be read, ctxwarden.store.errors."""
        log.warning("poisoning check of the %s failed (%s: %s); on_failure=%s", source, type(exc).__name__, exc,
                    self.config.on_failure)
        self.record(ex, "unavailable", source=source, error=type(exc).__name__)
        self.services.metrics.add("ctxwarden.poisoning.failures", 1, source=source)
        if store:
            self.services.metrics.add("ctxwarden.store.errors", 1, component="poisoning.kb", error=type(exc).__name__)
        if source == "answer" and self.config.on_failure == "block":
            return Block("validation_unavailable", f"{MARK} The answer could not be validated against the knowledge base, so it was withheld.")
        return None

    # ------------------------------------------------------------------ admin (PoisoningAdmin)

    def admin_routes(self) -> list[Route]:
        return routes(self)

    def adds_approved_to_kb(self) -> bool:
        return self.config.add_approved_to_kb

    def stats_snapshot(self) -> dict[str, Any]:
        return self.stats.snapshot()

    async def readiness(self) -> tuple[bool, dict[str, Any]]:  # /readyz: a knowledge base that cannot be read
        return await readiness(kb for _, kb in self._kbs.items())
