"""The policy pipeline: budget → request policies in config order → budget's final check,
and the response policies on the way back. One span per policy; failures fail safe, loudly."""

from __future__ import annotations

import logging
import time
from typing import Any, Callable

from opentelemetry.trace import INVALID_SPAN, Status, StatusCode

from ctxwarden.policies.base import Answer, BasePolicy, Block, Exchange, Outcome, Reject, Respond, Services, Verdict
from ctxwarden.policies.budget import BudgetPolicy
from ctxwarden.policies.cache import LRU
from ctxwarden.policies.history.layout import message_keys
from ctxwarden.policies.messages import Carried, append_note, request_memo

from .config import Settings
from .registry import policy_class
from .services import services_for
from .state import SessionSync
from .telemetry import Telemetry

log = logging.getLogger("ctxwarden.pipeline")

COMPRESSING_POLICIES = ("history", "archive")


class Pipeline:
    def __init__(self, settings: Settings, services: Services, telemetry: Telemetry) -> None:
        self.services = services
        self.telemetry = telemetry
        self.policies: list[BasePolicy] = []
        for name, cfg in settings.policy_configs().items():
            if getattr(cfg, "enabled", True):
                self.policies.append(policy_class(name)(cfg, services_for(name, settings, services)))
        enabled = {p.name for p in self.policies}
        self.budget = (
            BudgetPolicy(settings.budget, services, [n for n in COMPRESSING_POLICIES if n in enabled])
            if settings.budget.enabled
            else None
        )
        # Only policies that override a hook are called for it (the base's are no-ops).
        self.stream_validators = [p for p in self.policies if p.validates_stream]
        self.response_policies = [p for p in self.policies if _overrides(p, "on_response")]
        self.completion_hooks = [p for p in self.policies if _overrides(p, "on_complete")]
        # The policies' per-session state through a shared backend (Redis), when there is one.
        self.sessions = SessionSync(services.versions, self.policies)  # type: ignore[arg-type]
        # Synchronous callables (ex, outcome) → None, called once per request as it ends: must be quick.
        self.listeners: list[Callable[[Exchange, Outcome], None]] = []
        # Per session, its last request's messages and what the policies learned of each (see run_request)
        self._carried: LRU[tuple[str | None, str], Carried] = LRU(
            10_000, max_bytes=32 * 2**20, sizeof=lambda key, carried: 300 + len(key[1]) + carried.bytes)

    def policy(self, name: str) -> BasePolicy | None:
        return next((p for p in self.policies if p.name == name), None)

    async def run_request(self, ex: Exchange) -> Verdict | None:
        # Each policy reads the whole history, which an agent sends again at every step: what is
        # known of a message (its fingerprint, key, tokens, refs) is made once per request, and the
        # messages the session's last request also sent start with what was known of them there.
        incoming = ex.messages
        with request_memo(incoming, self._carried.get(ex.session_key)) as memo:
            try:
                if not self.sessions.active:
                    verdict = await self._run_request(ex)
                else:
                    await self.sessions.load(ex)
                    try:
                        verdict = await self._run_request(ex)
                    finally:
                        await self.sessions.save(ex)
                if verdict is None and all(isinstance(m, dict) for m in ex.messages):  # forwarded: its keys, made
                    # here (in the memo) so the messages carried from the last step cost a slice, not a hash each
                    ex.notes.forwarded_keys = (ex.messages, message_keys(ex.messages))
                return verdict
            finally:
                self._carried.put(ex.session_key, Carried(incoming, memo))

    async def _run_request(self, ex: Exchange) -> Verdict | None:
        if self.budget:
            verdict = await self._call(self.budget, "on_request", ex)
            if verdict:
                return verdict
        for policy in self.policies:
            verdict = await self._call(policy, "on_request", ex)
            if verdict:
                return verdict
        if ex.notes.end_notes:  # after every policy: none of them reads a note as the user's words
            ex.messages = append_note(ex.messages, "\n\n".join(ex.notes.end_notes))
        if self.budget:
            return await self._call(self.budget, "check_final", ex, span_name="budget.final")
        return None

    async def run_response(self, ex: Exchange, answer: Answer) -> Verdict | None:
        for policy in self.response_policies:
            if answer.partial and policy not in self.stream_validators:
                continue
            verdict = await self._call(policy, "on_response", ex, answer)
            if verdict:
                return verdict
        return None

    def reads_answer(self, ex: Exchange, policies: list[BasePolicy] | None = None) -> bool:
        """Some response policy (of `policies`, default all) needs to read this exchange's answer;
        else it passes through as the upstream sent it."""
        for policy in self.response_policies if policies is None else policies:
            try:
                if policy.reads_answer(ex):
                    return True
            except Exception:
                log.exception("policy %s failed in reads_answer; the answer is read", policy.name)
                return True
        return False

    def stream_releasable(self, ex: Exchange, pending: str) -> int:
        """How much of an unfinished streamed sentence every stream validator lets through now."""
        allowed = len(pending)
        for policy in self.stream_validators:
            try:
                allowed = min(allowed, max(0, int(policy.stream_releasable(ex, pending))))
            except Exception:
                log.exception("policy %s failed in stream_releasable; the sentence is held", policy.name)
                return 0
        return allowed

    def unreadable(self, request_id: str, started: float) -> None:
        """A request refused before it became an exchange (its body unreadable or invalid): the
        listeners still see it, as an empty exchange that was rejected, so what they count is every
        request received. The policies never saw it, so they are not told."""
        ex = Exchange(request_id=request_id, model="", messages=[], tools=None, body={})
        ex.notes.started = started
        self._tell_listeners(ex, "rejected")

    async def complete(self, ex: Exchange, outcome: Outcome) -> None:
        """Tell the policies how the exchange ended ("ok", "rejected", "blocked", "responded", "cut"),
        then the listeners (the proxy's own observers: e.g. the dashboard's request log)."""
        for policy in self.completion_hooks:
            try:
                await policy.on_complete(ex, outcome)
            except Exception:
                log.exception("policy %s failed in on_complete", policy.name)
        self.sessions.remeasure(ex)  # states changed in place: their byte bounds are kept here
        if self.sessions.active:
            await self.sessions.save(ex)
        self._tell_listeners(ex, outcome)

    def _tell_listeners(self, ex: Exchange, outcome: Outcome) -> None:
        """Each listener in turn; one that fails is logged and does not stop the others."""
        for listener in self.listeners:
            try:
                listener(ex, outcome)
            except Exception:
                log.exception("completion listener %r failed", listener)

    async def _call(self, policy: Any, hook: str, ex: Exchange, *args: Any, span_name: str | None = None) -> Verdict | None:
        if not self.telemetry.exported:  # no span receiver: not even a no-op span on this path
            verdict = await self._run(policy, hook, ex, args, INVALID_SPAN)
        else:
            with self.telemetry.tracer.start_as_current_span(f"ctxwarden.policy {span_name or policy.name}") as span:
                span.set_attribute("ctxwarden.policy", policy.name)
                span.set_attribute("ctxwarden.hook", hook)
                verdict = await self._run(policy, hook, ex, args, span)
        if verdict is not None and not isinstance(verdict, (Reject, Respond, Block)):
            log.error("policy %s returned %r, which is not a verdict; ignored", policy.name, verdict)
            return None
        return verdict

    async def _run(self, policy: Any, hook: str, ex: Exchange, args: tuple, span: Any) -> Any:
        before = len(ex.actions)
        messages, tools = ex.messages, ex.tools
        start = time.perf_counter()
        try:
            verdict = await getattr(policy, hook)(ex, *args)
        except Exception as exc:
            # Fail safe and say so (invariant 5): undo the policy's partial edits, carry on.
            ex.messages, ex.tools = messages, tools
            log.exception("policy %s failed in %s; request continues unchanged by it", policy.name, hook)
            ex.record(policy.name, "failed", error=type(exc).__name__)
            self.services.metrics.add("ctxwarden.policy.failures", 1, policy=policy.name)
            span.record_exception(exc)
            span.set_status(Status(StatusCode.ERROR, str(exc)))
            verdict = None
        if span.is_recording():
            acted = ex.actions[before:]
            for action in acted:
                span.add_event(action.label, {k: _attr(v) for k, v in action.detail.items()})
            # The decision, always: the verdict's kind, else what it did, else that it let the request pass.
            decision = type(verdict).__name__ if verdict is not None else ",".join(a.name for a in acted) or "pass"
            span.set_attribute("ctxwarden.decision", decision[:200])
        if verdict is not None:
            span.set_attribute("ctxwarden.verdict", type(verdict).__name__)
            ex.notes.verdict_by = policy.name  # who refused or answered: read in on_complete
        self.services.metrics.record(
            "ctxwarden.policy.duration_ms", (time.perf_counter() - start) * 1000, policy=policy.name, hook=hook
        )
        return verdict

    async def aclose(self) -> None:
        for policy in self.policies:
            if _overrides(policy, "aclose"):
                try:
                    await policy.aclose()
                except Exception:
                    log.exception("policy %s failed to close", policy.name)


def _overrides(policy: Any, hook: str) -> bool:
    method = getattr(type(policy), hook, None)
    return method is not None and method is not getattr(BasePolicy, hook)


def _attr(value: Any) -> Any:
    if isinstance(value, (str, bool, int, float)):
        return value
    if isinstance(value, (list, tuple)) and all(isinstance(v, (str, bool, int, float)) for v in value):
        return list(value)
    return str(value)
