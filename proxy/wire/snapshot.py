"""Cheap snapshots of what the adapters hand to policies, so that render can tell what changed.

Policies replace lists, but may also edit a message in place; the adapters compare each message
(and tool) the policies return with its snapshot as parsed, using `==`, which runs in C and
short-cuts on identity: an unchanged message, still holding the very strings it was parsed with,
compares in a few microseconds however long its text.
"""

from __future__ import annotations

import copy
from typing import Any

_ATOMS = frozenset((str, int, float, bool, type(None)))  # immutable: shared, never copied


def snapshot(value: Any) -> Any:
    """A copy of JSON-like `value` sharing nothing mutable with it: an edit of `value` in place, at
    any depth, leaves the copy as it was. Dicts and lists are rebuilt; strings, numbers, booleans
    and None are shared (immutable); anything else is deep-copied."""
    kind = type(value)
    if kind is dict:
        return {k: v if type(v) in _ATOMS else snapshot(v) for k, v in value.items()}
    if kind is list:
        return [v if type(v) in _ATOMS else snapshot(v) for v in value]
    if kind in _ATOMS:
        return value
    return copy.deepcopy(value)


def tool_snapshot(tool: Any) -> Any:
    """A chat tool as parsed, copied two levels deep: a tool or its `function` edited in place
    (a new description, name, strict, parameters object) no longer equals it. The values inside
    `function` (the `parameters` schema above all) are shared, not copied: the adapters give the
    chat tool the client's own schema object, so an edit inside it is an edit of the client's
    tool too, and the original tool, sent back as it is, carries it."""
    if type(tool) is not dict:
        return snapshot(tool)
    function = tool.get("function")
    return {**tool, "function": dict(function)} if type(function) is dict else dict(tool)
