"""What the memory policy remembers per session: which block went into which user message.

Held in a SessionLRU keyed by `Exchange.session_key` (tenant, session) with a TTL (`session_ttl_s`);
with a shared state backend (`state.redis_url`) it travels between replicas as the document
`encode` makes, so a session served by another replica gets the same bytes back into the same
messages (prefix stability) and its messages are not read for memories twice.

Inside a session, entries are per owner (user, task, scope: one session may speak for several).
Each block keeps the ids of the memories it was built from: a block naming a memory that was
deleted since is dropped (the next request chooses again), on this replica at once, on the others
as soon as their copy of the user's memories is refreshed (`refresh_s`). A question asked about two
contradicting memories (ask_user, ask.py) waits here for the next user turn, on whichever replica.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from typing import Any, Callable

from ..messages import Message
from .hints import Owner
from .inject import with_block

MAX_KEYS = 1000  # user messages remembered per owner and session (oldest forgotten first)


@dataclass(frozen=True)
class Given:
    """The block given to one user message ("" : selected, nothing to add) and its memories' ids."""

    text: str = ""
    ids: tuple[str, ...] = ()


@dataclass(frozen=True)
class Pending:
    """ask_user: the question put to the user about two contradicting memories, awaiting the answer."""

    older: str  # the live memory's id
    newer: str  # the contradicting memory's id
    older_text: str
    newer_text: str
    asked: str  # the key of the user message that wrote the newer memory (its answer comes after it)


@dataclass
class OwnerBlocks:
    blocks: dict[str, Given] = field(default_factory=dict)  # user-message key → block
    written: dict[str, None] = field(default_factory=dict)  # user-message keys already read for memories
    pending: Pending | None = None  # a question asked (ask_user), answered by the next user turn

    def mark_written(self, key: str) -> None:
        self.written[key] = None
        _trim(self.written)

    def give(self, key: str, given: Given) -> None:
        self.blocks[key] = given
        _trim(self.blocks)

    def drop_missing(self, exists: Callable[[str], bool]) -> int:
        """Forget the blocks that name a memory that no longer exists; how many."""
        gone = [k for k, g in self.blocks.items() if any(not exists(i) for i in g.ids)]
        for key in gone:
            del self.blocks[key]
        return len(gone)

    def apply(self, messages: list[Message], keys: dict[int, str]) -> list[Message] | None:
        """The messages with every remembered block back in place; None when there is none."""
        if not any(g.text for k in keys.values() if (g := self.blocks.get(k)) is not None):
            return None
        out: list[Any] = list(messages)
        for i, key in keys.items():
            given = self.blocks.get(key)
            if given is not None and given.text:
                out[i] = with_block(messages[i], given.text)
        return out


@dataclass
class SessionState:
    owners: dict[str, OwnerBlocks] = field(default_factory=dict)

    def of(self, owner: Owner) -> OwnerBlocks:
        return self.owners.setdefault(owner_key(owner), OwnerBlocks())


def owner_key(owner: Owner) -> str:
    """The owner inside a session (the tenant is the session key's already)."""
    return json.dumps([owner.user, owner.task, owner.scope], ensure_ascii=False, separators=(",", ":"))


def _trim(entries: dict[str, Any]) -> None:
    while len(entries) > MAX_KEYS:
        del entries[next(iter(entries))]


def encode(state: SessionState) -> dict[str, Any]:
    return {"owners": {name: {"blocks": {k: [g.text, list(g.ids)] for k, g in entry.blocks.items()},
                              "written": list(entry.written),
                              **({"pending": asdict(entry.pending)} if entry.pending is not None else {})}
                       for name, entry in state.owners.items()}}


def decode(doc: dict[str, Any]) -> SessionState:
    state = SessionState()
    for name, entry in doc["owners"].items():
        blocks = {str(k): Given(str(text), tuple(str(i) for i in ids)) for k, (text, ids) in entry["blocks"].items()}
        pending = entry.get("pending")  # absent in documents written before ask_user was asked
        state.owners[str(name)] = OwnerBlocks(blocks, dict.fromkeys(str(k) for k in entry["written"]),
                                              Pending(**{k: str(v) for k, v in pending.items()}) if pending else None)
    return state
