"""The poisoning policy's settings (`policies.poisoning` in YAML)."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from ..base import PolicyConfig
from .flags import FlagRulesConfig


class StreamConfig(BaseModel):
    model_config = ConfigDict(extra="forbid")
    max_hold_ms: float = Field(1500, gt=0)  # judging one streamed sentence may take at most this long
    on_timeout: Literal["release", "block"] = "release"  # then: let the sentence out, or end the answer


class PoisoningConfig(PolicyConfig):
    action: Literal["block", "error", "annotate"] = "block"
    check_inputs: bool = True
    input_action: Literal["drop", "reject"] = "drop"
    confidence_threshold: float = Field(0.8, ge=0, le=1)
    quarantine_band: tuple[float, float] = (0.5, 0.8)
    judge_model: str | None = None
    judge_when: Literal["unsure", "always", "never"] = "unsure"
    flag_rules: FlagRulesConfig = FlagRulesConfig()
    alert_rate: float = Field(0.05, ge=0, le=1)
    alert_window: float = Field(3600, gt=0)
    alert_min_samples: int = Field(20, ge=1)
    add_approved_to_kb: bool = False
    top_k: int = Field(4, ge=1, le=50)
    similarity_floor: float = Field(0.8, ge=0, le=1)
    on_failure: Literal["pass", "block"] = "pass"
    kb_refresh_s: float = Field(5.0, ge=0)
    cache_size: int = Field(10_000, ge=0)
    grounding: Literal["off", "covered_subjects"] = "off"
    stream: StreamConfig = StreamConfig()

    @field_validator("grounding", mode="before")
    @classmethod
    def _yaml_off(cls, value: Any) -> Any:
        return "off" if value is False else value  # YAML reads a bare `off` as false

    @model_validator(mode="after")
    def _band_ordered(self) -> "PoisoningConfig":
        low, high = self.quarantine_band
        if not 0 <= low <= high <= 1:
            raise ValueError(f"quarantine_band must be [low, high] with 0 <= low <= high <= 1 (got {list(self.quarantine_band)})")
        return self
