"""The `context_recall` tool: the proxy offers it when the forwarded context holds archive refs,
and answers the model's calls to it from the scratchpad (the proxy's tool rounds run it).

By ref it returns the archived text whole; with a query it searches inside what this conversation
archived (the refs its forwarded context shows, so nothing of another conversation or tenant is
reachable) and returns the best-matching parts: "the order with id 4711" finds that item of a JSON
result whose digest elided it. Either way only what this tenant, user and task archived is found
(scratchpad.py: isolation); someone else's ref is answered as an unknown one."""

from __future__ import annotations

import asyncio
import json
import re
from typing import Any, Awaitable, Callable

from ..base import Exchange, ProxyTool, Services
from .archive_search import ArchiveSearch, render_hits
from .scratchpad import REF_RE, RECALL_TOOL_NAME, Scratchpad, owner_of, refs_in

VALID_REF = re.compile(r"^[A-Za-z0-9_-]{1,100}$")

RECALL_TOOL: dict[str, Any] = {
    "type": "function",
    "function": {
        "name": RECALL_TOOL_NAME,
        "description": (
            "Bring back content archived out of this conversation to save context. Archived tool results "
            "and summarized history show a reference as ref=<id>. Pass ref for the whole text, query to "
            "search everything archived here (e.g. an id or a name), or both to search inside one ref."
        ),
        "parameters": {
            "type": "object",
            "properties": {
                "ref": {"type": "string", "description": "The id after ref= in an archive stub or summary."},
                "query": {"type": "string", "description": "What to look for in the archived content."},
            },
            "additionalProperties": False,
        },
    },
}


RecordFn = Callable[..., Any]


SEARCH_HITS = 5
MAX_SEARCHED = 2000  # archived texts one search reads, at most
_search = ArchiveSearch()


def _arguments(raw_arguments: str) -> tuple[str, str]:
    try:
        args = json.loads(raw_arguments or "{}")
    except ValueError:
        args = {}
    if not isinstance(args, dict):
        return "", ""
    ref = str(args.get("ref") or "").strip()
    return (ref[4:] if ref.startswith("ref=") else ref), str(args.get("query") or "").strip()


def recall_handler(pad: Scratchpad, record: RecordFn) -> Callable[[Exchange, str], Awaitable[str]]:
    async def handle(ex: Exchange, raw_arguments: str) -> str:
        ref, query = _arguments(raw_arguments)
        if ref and not VALID_REF.match(ref) or not ref and not query:
            record(ex, "recall_invalid", ref=ref[:100])
            return (f'error: {RECALL_TOOL_NAME} needs {{"ref": "<id>"}} (the id shown as ref=<id> in an archive stub '
                    'or summary), {"query": "<what to find>"}, or both.')
        if query:
            return await _search_archive(ex, pad, record, ref, query)
        text = await pad.get(ex.tenant, ref, owner_of(ex))
        if text is None:
            record(ex, "recall_unknown", ref=ref)
            return f"error: nothing is archived under ref={ref} for this conversation (unknown or expired reference)."
        record(ex, "recall", ref=ref, chars=len(text))
        return text

    return handle


async def _search_archive(ex: Exchange, pad: Scratchpad, record: RecordFn, ref: str, query: str) -> str:
    refs = [ref] if ref else refs_in(ex.messages)
    docs, owner = {}, owner_of(ex)
    while refs and len(docs) < MAX_SEARCHED:
        r = refs.pop(0)
        if r in docs:
            continue
        text = await pad.get(ex.tenant, r, owner)
        if text is None:
            continue
        docs[r] = text
        if r.startswith("hs_"):
            # An archived span names the tool results it held: a roll-up keeps the span's ref in the
            # context but may drop the lines that named its results, which are still this conversation's.
            refs += [x for x in REF_RE.findall(text) if x.startswith("ar_") and x not in docs]
    hits = await asyncio.to_thread(_search.search, docs, query, SEARCH_HITS)
    record(ex, "recall_search", refs=len(docs), hits=len(hits))
    if not hits:
        return f"nothing archived in this conversation matches {query!r}."
    return render_hits(hits, query=query)


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
