"""A memory: one durable thing a user said, with its kind, scope, provenance and history.

Stored in Chroma as a document (the text) with its metadata (everything else; Chroma keeps no
None, so absent values are ""). The id is derived from where the memory belongs and what it
says, so the same sentence said again in the same place merges into the same memory.
"""

from __future__ import annotations

import re
import time
from dataclasses import asdict, dataclass, field
from typing import Any

from ..cache import stable_hash

_SPACE = re.compile(r"\s+")


def normalized(text: str) -> str:
    """The text as compared for duplicates: case and spacing do not make a new memory."""
    return _SPACE.sub(" ", text).strip().rstrip(".!").lower()


def memory_id(tenant: str | None, user: str, task: str, scope: str, text: str) -> str:
    """Injective in everything that separates memories (a shared memory belongs to no task)."""
    return "mem_" + stable_hash([tenant or "", user, "" if scope == "shared" else task, scope, normalized(text)])


@dataclass
class Memory:
    id: str
    text: str
    kind: str
    scope: str  # private | shared
    user: str
    task: str = ""  # the task that wrote it ("" : the user's default task)
    tenant: str | None = None
    created_at: float = field(default_factory=time.time)
    updated_at: float = 0.0  # last time it was said again (a merged duplicate)
    session: str = ""
    message_hash: str = ""  # the user text it came from
    superseded_by: str = ""  # the newer memory's id, when it was superseded ("" : live)
    reason: str = ""  # why it was superseded
    source: str = "conversation"  # conversation | tool | api
    quality: float = 1.0  # how plainly the turn stated it (extract.py: recorded, not a gate)
    slots: tuple[str, ...] = ()  # the statement slots it sets (clash/supersede reads only these)

    @property
    def live(self) -> bool:
        return not self.superseded_by

    def visible_to(self, task: str) -> bool:
        return self.scope == "shared" or self.task == task

    def metadata(self) -> dict[str, Any]:
        data = asdict(self)
        for key in ("id", "text"):
            data.pop(key)
        data["tenant"] = self.tenant or ""
        data["slots"] = "|".join(self.slots)
        return data

    @classmethod
    def from_store(cls, mid: str, text: str, meta: dict[str, Any]) -> "Memory":
        known = {k: meta[k] for k in cls.__dataclass_fields__ if k in meta and k not in ("id", "text")}
        known["tenant"] = known.get("tenant") or None
        known["slots"] = tuple(s for s in str(meta.get("slots", "")).split("|") if s)
        return cls(id=mid, text=text, **known)

    def public(self) -> dict[str, Any]:
        """What the admin API shows."""
        return {"id": self.id, "text": self.text, "kind": self.kind, "scope": self.scope, "user": self.user,
                "task": self.task or None, "created_at": self.created_at, "updated_at": self.updated_at or None,
                "superseded_by": self.superseded_by or None, "reason": self.reason or None, "source": self.source,
                "session": self.session or None, "message_hash": self.message_hash or None, "quality": self.quality}
