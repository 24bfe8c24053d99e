"""The `loops` policy (work in progress: passes requests through unchanged)."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from .base import BasePolicy


class LoopsConfig(BaseModel):
    model_config = ConfigDict(extra="forbid")
    enabled: bool = True
    max_repeats: int = Field(3, ge=2)
    action: Literal["stop", "inject"] = "stop"


class LoopsPolicy(BasePolicy):
    name = "loops"
    Config = LoopsConfig
