"""Shared by the clash tests: run the local detector over user turns written as plain strings."""

from __future__ import annotations

from ctxwarden.policies.cache import stable_hash
from ctxwarden.policies.clash.detect import Located, local_clashes
from ctxwarden.policies.text.statements.extract import extract


def clashes_in(*turns: str):
    """Turns are user messages at indices 0, 2, 4, ... (assistant replies in between)."""
    found = []
    for i, text in enumerate(turns):
        found += [Located(2 * i, -1, f"{stable_hash(text)}#{i}", st) for st in extract(text)]
    return local_clashes(found)


def contradictions(*turns: str):
    """The clashes in the turns, without restatements of one value (duplicates)."""
    return [c for c in clashes_in(*turns) if not c.duplicate]
