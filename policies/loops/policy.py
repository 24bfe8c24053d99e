"""The `loops` policy: stop agents that repeat themselves, and sessions that keep being refused.

On the way in it looks at the current turn (everything after the last user message) for a
repeated tool call or a repeated cycle of calls that brought no new information (detect.py).
A long run of distinct calls is never a loop: the count limit `max_tool_rounds` is off unless a
user sets it. `action: inject` (the default) forwards the request with a note to the model, and
stops the loop if it continues after the note; `action: stop` answers the client from the proxy at
once, marked as the proxy's (`finish_reason: "content_filter"`, text opening with "[ctxwarden]",
action `loops.stop`).

Independently it is a per-session circuit breaker: exchanges refused by other policies
(rejected or blocked) are counted in `on_complete`; after `max_retries` in a row, a retry of the
same turn is answered with an error-state message instead of being forwarded again. A success
resets the count; a new user message gets one trial.

The note goes at the END of the forwarded messages (`ex.notes.end_notes`: the pipeline appends it
after every request policy ran, inside the last user message or as a user message after the last
tool results, so no later policy reads it as the user's request), never as a system message — many
providers' templates accept a system message only first. Every byte the client sent before it
stays a byte-identical prefix, so the provider's prompt cache still covers the conversation, and
the note is the most recent thing the model reads. Its text is derived from the loop alone, so
the same request gets the same bytes.
"""

from __future__ import annotations

import functools
import logging
from typing import Literal

from pydantic import Field

from ..base import BasePolicy, Exchange, PolicyConfig, Respond, Services, Verdict, run_cpu
from ..cache import stable_hash
from ..messages import Message, content_text, last_user_index
from ..state import SessionLRU
from .detect import Loop, arguments_chars, find_loop
from .replies import error_state_answer, loop_note, stop_answer
from .state import SessionState, decode, encode, merge_state

log = logging.getLogger("ctxwarden.loops")

MAX_REASONS = 10
OFFLOAD_ARGUMENT_CHARS = 32_000  # tool-call arguments (of the rounds read) past this are checked in a worker thread


class LoopsConfig(PolicyConfig):
    max_repeats: int = Field(3, ge=2)
    max_period: int = Field(6, ge=1, le=20)
    max_tool_rounds: int | None = Field(None, ge=1)  # off: a long run is not a loop; set it for a count limit
    # inject: a note to the model first, a stop only if it carries on (a real agent that retried a
    # timed-out call three times was changing course by itself when `stop` answered in its place)
    action: Literal["stop", "inject"] = "inject"
    max_retries: int | None = Field(3, ge=1)
    max_sessions: int = Field(10_000, ge=1)
    session_ttl_s: float = Field(3600, gt=0)


def turn_key(messages: list[Message]) -> str:
    """Identifies the current turn: the last user message and where it stands."""
    i = last_user_index(messages)
    return stable_hash([i, content_text(messages[i]) if i >= 0 else ""])


class LoopsPolicy(BasePolicy):
    name = "loops"
    Config = LoopsConfig

    def __init__(self, config: LoopsConfig, services: Services) -> None:
        super().__init__(config, services)
        self.memory: SessionLRU[SessionState] = SessionLRU(config.max_sessions, config.session_ttl_s, encode=encode, decode=decode,
                                                             merge=merge_state)
        self.session_states = self.memory  # carried between replicas by a shared state backend

    # ------------------------------------------------------------------ request

    async def on_request(self, ex: Exchange) -> Verdict | None:
        cfg: LoopsConfig = self.config
        turn = turn_key(ex.original_messages)
        verdict = self._retries_exhausted(ex, turn)
        if verdict:
            return verdict
        detect = functools.partial(
            find_loop,
            ex.original_messages,
            max_repeats=cfg.max_repeats,
            max_period=cfg.max_period,
            max_tool_rounds=cfg.max_tool_rounds,
        )
        # find_loop reads the last max_period × max_repeats rounds, their calls memoized: inline,
        # unless their arguments are long (parsed again each time: a file written whole).
        window = cfg.max_period * cfg.max_repeats
        loop = await run_cpu(arguments_chars(ex.original_messages, window) > OFFLOAD_ARGUMENT_CHARS, detect)
        if loop is None:
            return None
        self.services.metrics.add("ctxwarden.loops.detected", 1, kind=loop.kind)
        log.warning(
            "loop detected (%s, period %d, %d repeats, %d tool rounds) in session %s request %s; history: %s",
            loop.kind, loop.period, loop.repeats, loop.tool_rounds, ex.session_id, ex.request_id,
            " → ".join(loop.history),
        )
        if cfg.action == "stop":
            return self._stop(ex, loop, after_note=False)
        return self._inject_or_stop(ex, loop, turn)

    def _inject_or_stop(self, ex: Exchange, loop: Loop, turn: str) -> Verdict | None:
        state = self.memory.get_or_create(ex.session_key, SessionState)
        key = stable_hash([turn, loop.signature])
        noted_at = state.notes.get(key)
        if noted_at is not None and loop.tool_rounds > noted_at:
            return self._stop(ex, loop, after_note=True)  # the model saw the note and carried on
        state.remember_note(key, loop.tool_rounds)  # first note, or the same request sent again
        ex.notes.end_notes.append(loop_note(loop))
        self.services.metrics.add("ctxwarden.loops.injections", 1, kind=loop.kind)
        self.record(ex, "inject", **self._detail(loop))
        return None

    def _stop(self, ex: Exchange, loop: Loop, after_note: bool) -> Respond:
        self.services.metrics.add("ctxwarden.loops.stops", 1, kind=loop.kind)
        self.record(ex, "stop", after_note=after_note, **self._detail(loop))
        # content_filter: OpenAI's value for "the gateway intervened", which every typed client accepts.
        return Respond(stop_answer(loop, after_note), reason="loops.stop", finish_reason="content_filter")

    @staticmethod
    def _detail(loop: Loop) -> dict:
        return {
            "kind": loop.kind,
            "period": loop.period,
            "repeats": loop.repeats,
            "tool_rounds": loop.tool_rounds,
            "cycle": loop.cycle,
            "history": loop.history,
        }

    # ------------------------------------------------------------------ retry circuit breaker

    def _retries_exhausted(self, ex: Exchange, turn: str) -> Respond | None:
        limit = self.config.max_retries
        state = self.memory.get(ex.session_key) if limit else None
        if state is None or state.failures < limit or state.failed_turn != turn:
            return None  # closed, or a new turn: one trial goes through
        self.services.metrics.add("ctxwarden.loops.retries_exhausted", 1)
        self.record(ex, "retries_exhausted", failures=state.failures, reasons=state.failure_reasons)
        log.warning(
            "session %s: %d refused attempts in a row (%s); answering with the error state instead of retrying",
            ex.session_id, state.failures, " → ".join(state.failure_reasons),
        )
        return Respond(error_state_answer(state.failures, state.failure_reasons[-state.failures:]),
                       reason="loops.retries_exhausted", finish_reason="content_filter")

    async def on_complete(self, ex: Exchange, outcome: str) -> None:
        if not self.config.max_retries:
            return
        if outcome == "ok":
            state = self.memory.get(ex.session_key)
            if state is not None and state.failures:
                log.info("session %s succeeded after %d refused attempts; retry counter reset", ex.session_id, state.failures)
                state.reset_failures()
            return
        if outcome not in ("rejected", "blocked"):
            return  # answered by the proxy, or a cut stream: neither a success nor a refusal
        reason = self._refusal(ex, outcome)
        if reason is None:
            return  # an upstream or transport error, not a policy's refusal: the client's retry is legitimate
        state = self.memory.get_or_create(ex.session_key, SessionState)
        state.failures += 1
        state.failure_reasons = [*state.failure_reasons, reason][-MAX_REASONS:]
        state.failed_turn = turn_key(ex.original_messages)
        self.services.metrics.add("ctxwarden.loops.refusals", 1, reason=reason)
        log.info("session %s: attempt refused by %s (%d/%d)", ex.session_id, reason, state.failures, self.config.max_retries)

    def _refusal(self, ex: Exchange, outcome: str) -> str | None:
        """Which policy refused the exchange (its last action's label), or None if no policy did.

        The pipeline notes the policy whose verdict ended the exchange in `ex.notes.verdict_by`;
        without it (an upstream or transport error) nobody refused.
        """
        by = ex.notes.verdict_by
        if not by or by == self.name:
            return None
        return next((a.label for a in reversed(ex.actions) if a.policy == by), by)
