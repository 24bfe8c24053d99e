"""The `clash` policy (work in progress: passes requests through unchanged)."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from .base import BasePolicy


class ClashConfig(BaseModel):
    model_config = ConfigDict(extra="forbid")
    enabled: bool = True
    strategy: Literal["prefer_recent", "ask_user", "merge", "keep_existing"] = "prefer_recent"


class ClashPolicy(BasePolicy):
    name = "clash"
    Config = ClashConfig
