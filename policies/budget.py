"""The token budget: measure usage against the model's window, ask for compression, reject.

Runs twice per request (see the data flow in docs/ARCHITECTURE.md): first, to set the pressure the compressing
policies act on (`compress` → bring usage to `target`; `aggressive` → their aggressive mode);
last, to reject with `context_length_exceeded` if usage is still at or above `reject`.
"""

from __future__ import annotations

import logging
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, model_validator

from .base import BasePolicy, BudgetNote, Exchange, PolicyConfig, Reject, Services, Verdict, run_cpu
from .messages import heavy, last_user_index, message_token_list, system_prefix_length, tools_tokens

log = logging.getLogger("ctxwarden.budget")


class ComponentBudgets(BaseModel):
    """Shares of the context window per component; reported, and used by compressing policies."""

    model_config = ConfigDict(extra="forbid")
    system: float = Field(0.15, ge=0, le=1)
    history: float = Field(0.50, ge=0, le=1)
    tools: float = Field(0.15, ge=0, le=1)
    query: float = Field(0.20, ge=0, le=1)

    @model_validator(mode="after")
    def _fits(self) -> "ComponentBudgets":
        total = self.system + self.history + self.tools + self.query
        if total > 1.0 + 1e-9:
            raise ValueError(f"component shares add up to {total:.2f}; they must not exceed 1.0")
        return self


class BudgetConfig(PolicyConfig):
    warn: float = Field(0.70, gt=0, le=1)
    compress: float = Field(0.85, gt=0, le=1)
    aggressive: float = Field(0.90, gt=0, le=1)
    reject: float = Field(0.95, gt=0, le=1.5)
    target: float = Field(0.60, gt=0, le=1)
    components: ComponentBudgets = ComponentBudgets()

    @model_validator(mode="after")
    def _ordered(self) -> "BudgetConfig":
        if not (self.warn <= self.compress <= self.aggressive <= self.reject):
            raise ValueError("thresholds must satisfy warn <= compress <= aggressive <= reject")
        if self.target > self.compress:
            raise ValueError("target must not be above compress (compression would never finish)")
        return self


def component_tokens(ex: Exchange, services: Services) -> dict[str, int]:
    """Tokens per component: system prompt, history, tools, and the current query."""
    msgs = ex.messages
    # One count per message, carried for the messages the session's last request sent (a slice of its list)
    tokens = message_token_list(services.tokens, msgs, ex.model)
    n_sys = system_prefix_length(msgs)
    last_user = last_user_index(msgs)
    query_from = last_user if last_user >= n_sys else len(msgs)
    return {
        "system": sum(tokens[:n_sys]),
        "history": sum(tokens[n_sys:query_from]),
        "query": sum(tokens[query_from:]),
        "tools": tools_tokens(services.tokens, ex.tools, ex.model, ex.proxy_tool_definitions()),  # = forwarded_tools()
    }


class BudgetPolicy(BasePolicy):
    name = "budget"
    Config = BudgetConfig

    def __init__(self, config: BudgetConfig, services: Services, compressors: list[str] | None = None) -> None:
        super().__init__(config, services)
        self.compressors = compressors or []

    async def measure(self, ex: Exchange) -> dict[str, Any]:
        parts = await run_cpu(heavy(ex), component_tokens, ex, self.services)
        total = sum(parts.values())
        return {"tokens": total, "usage": total / ex.context_window, "components": parts}

    async def on_request(self, ex: Exchange) -> Verdict | None:
        cfg: BudgetConfig = self.config
        m = await self.measure(ex)
        window = ex.context_window
        ex.notes.budget = BudgetNote(m["tokens"], None, window, m["components"], compress_at=int(cfg.compress * window),
                                     target_at=int(cfg.target * window), aggressive_at=int(cfg.aggressive * window),
                                     reject_at=int(cfg.reject * window))
        self.services.metrics.record("ctxwarden.budget.usage", m["usage"], model=ex.model)
        over = [
            name for name, tokens in m["components"].items()
            if tokens > getattr(cfg.components, name) * window
        ]
        if over:
            self.record(ex, "component_over", components=over)
        usage = m["usage"]
        if usage >= cfg.warn:
            log.warning("request %s uses %.0f%% of %s's %d-token window", ex.request_id, usage * 100, ex.model, window)
            self.record(ex, "warn", usage=round(usage, 4), tokens=m["tokens"], window=window)
        if self.compressors and usage >= cfg.compress:
            ex.pressure = "aggressive" if usage >= cfg.aggressive else "compress"
            ex.target_tokens = int(cfg.target * window)
            self.record(ex, ex.pressure, usage=round(usage, 4), target_tokens=ex.target_tokens)
        return None

    async def check_final(self, ex: Exchange) -> Verdict | None:
        """After every other policy: reject what still does not fit."""
        cfg: BudgetConfig = self.config
        m = await self.measure(ex)
        ex.notes.budget = ex.notes.budget or BudgetNote(m["tokens"], window=ex.context_window)
        ex.notes.budget.tokens_after = m["tokens"]
        if m["usage"] < cfg.reject:
            return None
        tried = [a.label for a in ex.actions if a.policy != "budget"] or ["nothing (no compressing policy enabled)"]
        self.record(ex, "reject", tokens=m["tokens"], window=ex.context_window)
        parts = ", ".join(f"{k} {v}" for k, v in m["components"].items())
        return Reject(
            400,
            "context_length_exceeded",
            (
                f"This request needs {m['tokens']} tokens, {m['usage']:.0%} of {ex.model}'s "
                f"{ex.context_window}-token context window (the limit is {cfg.reject:.0%}, "
                f"{int(cfg.reject * ex.context_window)} tokens). By component: {parts}. "
                f"Tried: {', '.join(tried)}. Shorten the conversation or split the content."
            ),
            param="messages",
        )
