"""The `archive` policy (work in progress: passes requests through unchanged)."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from .base import BasePolicy


class ArchiveConfig(BaseModel):
    model_config = ConfigDict(extra="forbid")
    enabled: bool = True
    min_tokens: int = Field(500, ge=1)


class ArchivePolicy(BasePolicy):
    name = "archive"
    Config = ArchiveConfig
