"""The `tools` policy (work in progress: passes requests through unchanged)."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from .base import BasePolicy


class ToolsConfig(BaseModel):
    model_config = ConfigDict(extra="forbid")
    enabled: bool = True
    max_tools: int = Field(30, ge=1)
    top_k: int = Field(5, ge=1)
    min_score: float = 0.0


class ToolsPolicy(BasePolicy):
    name = "tools"
    Config = ToolsConfig
