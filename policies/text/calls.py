"""A tool call's name and arguments, whatever its kind: a function call (`function: {name,
arguments}`) or a custom tool call (`custom: {name, input}`, OpenAI's free-text custom tools, whose
input plays the arguments' part). Policies read calls through this, so a custom call is counted,
compared by the loop detector and written into digests like a function call (read as a function
call, every custom call looked the same: one name, no arguments)."""

from __future__ import annotations

from typing import Any


def call_parts(call: Any) -> tuple[Any, Any]:
    """(name, arguments) as the call holds them (either may be None or not a string)."""
    if not isinstance(call, dict):
        return None, None
    fn = call.get("function")
    if isinstance(fn, dict):
        return fn.get("name"), fn.get("arguments")
    custom = call.get("custom")
    if isinstance(custom, dict):
        return custom.get("name"), custom.get("input")
    return None, None
