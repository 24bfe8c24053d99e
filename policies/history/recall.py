"""The `context_recall` tool: the proxy offers it when the forwarded context holds archive refs,
and answers the model's calls to it from the scratchpad (the proxy's tool rounds run it)."""

from __future__ import annotations

import json
import re
from typing import Any, Awaitable, Callable

from ..base import Exchange, ProxyTool, Services
from .scratchpad import RECALL_TOOL_NAME, Scratchpad

VALID_REF = re.compile(r"^[A-Za-z0-9_-]{1,100}$")

RECALL_TOOL: dict[str, Any] = {
    "type": "function",
    "function": {
        "name": RECALL_TOOL_NAME,
        "description": (
            "Fetch the full text of content archived out of this conversation to save context. "
            "Archived tool results and summarized history show a reference as ref=<id>; pass that id."
        ),
        "parameters": {
            "type": "object",
            "properties": {"ref": {"type": "string", "description": "The id after ref= in an archive stub or summary."}},
            "required": ["ref"],
            "additionalProperties": False,
        },
    },
}


RecordFn = Callable[..., Any]


def recall_handler(pad: Scratchpad, record: RecordFn) -> Callable[[Exchange, str], Awaitable[str]]:
    async def handle(ex: Exchange, raw_arguments: str) -> str:
        try:
            args = json.loads(raw_arguments or "{}")
        except ValueError:
            args = {}
        ref = str(args.get("ref", "")).strip() if isinstance(args, dict) else ""
        if ref.startswith("ref="):
            ref = ref[4:]
        if not VALID_REF.match(ref):
            record(ex, "recall_invalid", ref=ref[:100])
            return f'error: {RECALL_TOOL_NAME} needs {{"ref": "<id>"}}, the id shown as ref=<id> in an archive stub or summary.'
        text = await pad.get(ex.tenant, ref)
        if text is None:
            record(ex, "recall_unknown", ref=ref)
            return f"error: nothing is archived under ref={ref} for this conversation's tenant (unknown or expired reference)."
        record(ex, "recall", ref=ref, chars=len(text))
        return text

    return handle


def ensure_recall_tool(ex: Exchange, pad: Scratchpad, record: RecordFn, rounds: int | None = None) -> bool:
    """Offer `context_recall` when the forwarded context holds refs. False if the client owns the name."""
    if RECALL_TOOL_NAME in ex.proxy_tools:
        if rounds is not None:
            ex.notes.proxy_tool_rounds = rounds
        return True
    client_names = {(t.get("function") or {}).get("name") for t in ex.tools or []}
    if RECALL_TOOL_NAME in client_names:
        record(ex, "recall_name_taken")
        return False
    ex.proxy_tools[RECALL_TOOL_NAME] = ProxyTool(RECALL_TOOL, recall_handler(pad, record), owner="archive")
    if rounds is not None:
        ex.notes.proxy_tool_rounds = rounds
    return True


def recall_recorder(services: Services) -> RecordFn:
    """Recall actions are the archive's (`archive.recall`), whichever policy offered the tool."""

    def record(ex: Exchange, name: str, **detail: Any) -> None:
        services.metrics.add("ctxwarden.policy.actions", 1, policy="archive", action=name)
        ex.record("archive", name, **detail)

    return record
