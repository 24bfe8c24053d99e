"""The `history` policy (work in progress: passes requests through unchanged)."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from .base import BasePolicy


class HistoryConfig(BaseModel):
    model_config = ConfigDict(extra="forbid")
    enabled: bool = True
    max_messages: int = Field(20, ge=1)
    max_tokens: int = Field(2000, ge=1)
    keep_recent: int = Field(6, ge=0)
    max_age_s: float = Field(3600, gt=0)
    summarizer_model: str | None = None


class HistoryPolicy(BasePolicy):
    name = "history"
    Config = HistoryConfig
