"""The `poisoning` policy (work in progress: passes requests through unchanged)."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from .base import BasePolicy


class PoisoningConfig(BaseModel):
    model_config = ConfigDict(extra="forbid")
    enabled: bool = True
    action: Literal["block", "error", "annotate"] = "block"
    check_inputs: bool = True
    input_action: Literal["drop", "reject"] = "drop"
    confidence_threshold: float = Field(0.8, ge=0, le=1)
    quarantine_band: tuple[float, float] = (0.5, 0.8)


class PoisoningPolicy(BasePolicy):
    name = "poisoning"
    Config = PoisoningConfig
