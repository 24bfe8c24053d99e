"""Third-party policies, as a plugin package would ship them (registered in tests by entry point)."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict

from ctxwarden.policies.base import BasePolicy, Exchange


class ShoutConfig(BaseModel):
    model_config = ConfigDict(extra="forbid")
    enabled: bool = True
    suffix: str = "!"


class ShoutPolicy(BasePolicy):
    """Appends a suffix to the last user message (a new dict: the client's stays untouched)."""

    name = "shout"
    Config = ShoutConfig

    async def on_request(self, ex: Exchange):
        last = ex.messages[-1]
        ex.messages = [*ex.messages[:-1], {**last, "content": f"{last['content']}{self.config.suffix}"}]
        self.record(ex, "appended")
        return None


class BrokenConfig(BaseModel):
    model_config = ConfigDict(extra="forbid")
    enabled: bool = True


class BrokenPolicy(BasePolicy):
    """Edits the request, then fails: the pipeline must undo the edit and carry on."""

    name = "broken"
    Config = BrokenConfig

    async def on_request(self, ex: Exchange):
        ex.messages = []
        raise RuntimeError("dependency down")
