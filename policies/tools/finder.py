"""The `find_tools` tool, as the tools policy offers and answers it (search.py: its definition and texts).

A mixin of ToolsPolicy: it uses the policy's scoring (`_scores`, `_structure`), loadouts and config, and
its `search_reader` (a PreparedOnce of `_prepare_search_reader`: the embedder of reread.py).
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

import numpy as np

from ..base import Embedder, Exchange, ProxyTool
from ..text.prepared import other_embedder
from .query import QueryPart
from .ranking import ToolSetIndex
from .reread import reread
from .search import FIND_TOOLS, FIND_TOOLS_TOOL, answer, description_of, invalid, parse_query
from .text import tool_name
from .twins import with_twins

log = logging.getLogger("ctxwarden.tools")


class SearchTool:
    """find_tools for one request: offered when tools are hidden, answered here, found tools appended."""

    def _offer_search(self, ex: Exchange, step: Step, index: ToolSetIndex) -> None:
        """Add find_tools for this request, unless the client owns the name or tool_choice rules it out."""
        choice = step.tool_choice
        if choice == "none" or isinstance(choice, dict):  # a named tool or an allowed list: find_tools can't be called
            return
        if FIND_TOOLS in index.positions:
            self.record(ex, "search_name_taken", tool=FIND_TOOLS)
            return
        if FIND_TOOLS in ex.proxy_tools:
            return
        ex.proxy_tools[FIND_TOOLS] = ProxyTool(FIND_TOOLS_TOOL, self._search_handler(step, index), owner=self.name)
        self.search_reader.start()  # loaded while the model thinks, not when it first searches
        rounds = ex.notes.proxy_tool_rounds
        ex.notes.proxy_tool_rounds = self.config.max_inner_rounds if rounds is None else max(rounds, self.config.max_inner_rounds)

    def _search_handler(self, step: Step, index: ToolSetIndex) -> Any:
        async def handle(ex: Exchange, raw_arguments: str) -> str:
            query = parse_query(raw_arguments)
            if query is None:
                self.record(ex, "search_invalid", arguments=(raw_arguments or "")[:200])
                return invalid()
            have = {tool_name(t) for t in ex.tools or []}
            anchors = [index.positions[n] for n in have if n in index.positions]
            found, reread_as = await asyncio.to_thread(self.search, index, query, anchors, step.tenant, have)
            names = [str(index.names[i]) for i in found]
            added = [n for n in names if n not in have]
            self.loadouts.append(step.session, added, set(index.positions))  # kept from the next step on
            ex.tools = [*(ex.tools or []), *(step.tools[index.positions[n]] for n in added)]  # callable in the next round
            self.record(ex, "search", query=query, found=names, added=added, reread=reread_as)
            self.services.metrics.add("ctxwarden.tools.search", 1, model=ex.model, found=bool(added))
            return answer(query, [(n, description_of(step.tools[index.positions[n]])) for n in names], added)

        return handle

    def search(self, index: ToolSetIndex, query: str, anchors: list[int] | None = None, tenant: str | None = None,
               have: set[Any] | None = None) -> tuple[list[int], str]:
        """The catalog's best matches for a query the model wrote, among the named tools it does not
        have yet (it sees those already: each result slot goes to a tool it could not call); the
        siblings of the tools it has rank up, as in the selection (a vague query means its servers).
        With how the second reader took part (the search's action reports it): `read`, `off` (none
        configured, or no model to be had), `failed` (it raised: the first ranking answered)."""
        parts = [QueryPart("request", query, 1.0)]
        scores, _ = self._scores(index, parts, None)
        scores = self._structure(index, scores, anchors or [], tenant)
        named = np.array([n is not None and n not in (have or ()) for n in index.names])
        order = np.argsort(-np.where(named, scores, -np.inf), kind="stable")
        reader = self.search_reader.get() if len(index.facts) == len(index.names) else None
        read_as = "off"
        if reader is None:
            found = [int(i) for i in order[: self.config.search_results] if named[i]]
        else:  # the first ranking's best, read again (reread.py)
            candidates = [int(i) for i in order[: self.config.search_candidates] if named[i]]
            try:
                extra = reread(reader, query, [index.facts[i].text.document for i in candidates],
                               self.config.search_reader_weight)
                read_as = "read"
            except Exception as exc:  # the search still answers, as the first ranking has it
                log.warning("tools: find_tools' second reading failed, the first ranking answers: %s", exc)
                extra = np.zeros(len(candidates))
                read_as = "failed"
            found = [candidates[j] for j in np.argsort(-(scores[candidates] + extra), kind="stable")]
            found = found[: self.config.search_results]
        if self.config.twins:  # the twins of a match: the agent may know the other server's (twins.py)
            found = [i for i in with_twins(found, self.twins(index)) if named[i]]
        return found, read_as

    def _prepare_search_reader(self) -> Embedder | None:
        try:
            embedder = other_embedder(self.services, self.config.search_reader)
        except Exception as exc:  # a model that cannot load: searches rank as without it, and say so once
            log.error("tools: search_reader %s is not available, so find_tools ranks with the policy's embedder: %s",
                      self.config.search_reader, exc)
            return None
        if embedder is not None:
            log.info("tools: find_tools' best matches are read again with %s", embedder.name)
        return embedder
