"""The tools policy's settings (config/ctxwarden.yaml, `policies.tools`, explains each one)."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from ..base import PolicyConfig


class WeightsConfig(BaseModel):
    model_config = ConfigDict(extra="forbid")
    description: float = Field(1.0, ge=0)
    segments: float = Field(0.5, ge=0)
    lexical: float = Field(0.1, ge=0)

    @model_validator(mode="after")
    def _some_semantic_weight(self) -> "WeightsConfig":
        if self.description + self.segments <= 0:
            raise ValueError("description and segments cannot both be 0; to rank mostly lexically, make them small instead")
        return self


class QueryConfig(BaseModel):
    """How much each part of the agent's state counts in the query (query.py)."""

    model_config = ConfigDict(extra="forbid")
    request: float = Field(1.0, ge=0)
    task: float = Field(0.3, ge=0)
    assistant: float = Field(1.0, ge=0)  # 1.0 (was 0.5): the plan the agent just wrote names its next server
    result: float = Field(0.3, ge=0)

    @model_validator(mode="after")
    def _request_counts(self) -> "QueryConfig":
        if self.request <= 0:
            raise ValueError("request must be > 0: the user's latest message is the one part every request has")
        return self


class ToolsConfig(PolicyConfig):
    max_tools: int = Field(30, ge=1)  # more tools than this in a request → filter
    # The session's forwarded list never grows past this (null → max_tools); appending past it starts
    # the list again from what the step needs. 17 and max_k 8: measured on the dev tasks of bench/mcp_tools.py
    # (20 and 12 before: as available, 1.8 more tools a step; 18 before twins, which bring a tool or two more).
    max_forwarded: int | None = Field(17, ge=1)
    # A list that starts again holds at most this many tools (the called ones may pass it): the step's ranked tools
    # and the listed tools of servers the session called, best first (restart.py). null → max_forwarded
    restart_size: int | None = Field(12, ge=1)
    # A step appends its ranked tools when one of the first grow_top of them (a tool's twins right after it) is missing.
    # restart_size 12 and grow_top 2 (null and 1 before): measured on the dev tasks of bench/mcp_tools.py
    grow_top: int = Field(2, ge=1)
    top_k: int | None = Field(None, ge=1)  # a fixed number of relevant tools; null → adaptive (min_k..max_k)
    min_k: int = Field(5, ge=1)
    max_k: int = Field(8, ge=1)
    gap: float = Field(0.18, ge=0)
    min_score: float = 0.0
    always_keep: list[str] = Field(default_factory=list)
    weights: WeightsConfig = WeightsConfig()
    query: QueryConfig = QueryConfig()
    server_focus: int = Field(3, ge=0)  # past this many relevant tools, only the servers in play; 0 = off
    sibling_boost: float = Field(0.1, ge=0)
    server_boost: float = Field(0.1, ge=0)  # added to each tool of a server called since the latest user message (in use)
    usage_boost: float = Field(0.3, ge=0)
    popularity_boost: float = Field(0.4, ge=0)  # the share of the tenant's sessions that called a tool, ranked up
    twins: bool = True  # a forwarded or found tool brings its twins: the same function on another server (twins.py)
    grow: bool = True  # mid-task steps may add a missing top tool (not only a new user request)
    stable_list: bool = True
    search_tool: bool = True
    search_results: int = Field(5, ge=1, le=20)
    # find_tools' best search_candidates matches read again by this embedder (reread.py); none: not read again.
    # Weight 2: measured on the dev tasks of bench/mcp_tools.py and bench/tool_agent.py (reread.py has the figures)
    search_reader: Literal["minilm", "none"] = "minilm"
    search_candidates: int = Field(15, ge=1, le=200)
    search_reader_weight: float = Field(2.0, ge=0)
    # find_tools rounds the proxy answers in one request; past them a search is dropped and the model's turn ends
    # without a call. 8 (was 3): real agents search up to 7-9 times in a row (LiveMCPBench: 18 of 530 steps past 3)
    max_inner_rounds: int = Field(8, ge=0)
    max_sessions: int = Field(10_000, ge=1)
    session_ttl_s: float = Field(3600, gt=0)
    # The work of one request (embedding the tools never seen: ~1 ms a tool with wordllama); past it the
    # request goes on with all its tools, and the tools embedded so far are kept for the next one. None: no limit
    budget_ms: float | None = Field(2000, gt=0)

    @model_validator(mode="after")
    def _k_range(self) -> "ToolsConfig":
        if self.min_k > self.max_k:
            raise ValueError(f"min_k ({self.min_k}) must not exceed max_k ({self.max_k})")
        return self

    def list_cap(self) -> int:
        return min(self.max_forwarded or self.max_tools, self.max_tools)

    def restart_cap(self) -> int:
        return min(self.restart_size or self.list_cap(), self.list_cap())

    def k_range(self) -> tuple[int, int]:
        """(min_k, max_k): a fixed top_k is the range top_k..top_k."""
        return (self.top_k, self.top_k) if self.top_k is not None else (self.min_k, self.max_k)
