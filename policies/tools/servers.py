"""Catalog structure: which tools come from one server (an MCP server, an API, a plugin).

An agent that uses one of a server's tools usually needs its siblings next (`cd` then `mv` then
`grep`; `search_issues` then `create_issue`). MCP clients name a server's tools `server__tool`
(`mcp__server__tool`), others `server.tool`, `server/tool` or `server:tool`; catalogs without a
separator share a prefix (`Movies_1_FindMovies`, `github_create_issue`). A bare two-word name
(`search_flights`, `get_weather`) is a verb and an object, not a server and a tool, so a prefix
counts only before at least two more words, or with a version segment (`Movies_1_…`).
"""

from __future__ import annotations

import re
from collections import Counter
from typing import Sequence

import numpy as np

_EXPLICIT = re.compile(r"__|[./:]")
_WORDS = re.compile(r"[_-]")
NO_SERVER = -1
# A "server" holding more than this share of a large catalog is a naming habit (`get_…`), not a server.
MAX_PREFIX_SHARE = 0.25


def bare_name(name: str) -> str:
    """A tool's own name, without its server (`mcp__github__create_issue` → `create_issue`)."""
    return _EXPLICIT.split(name)[-1]


def explicit_server(name: str) -> str | None:
    """The server of an MCP-style name: everything before the last separator (`mcp__github`)."""
    parts = _EXPLICIT.split(name)
    if len(parts) < 2 or not all(parts):
        return None
    return "__".join(parts[:-1]).lower()


def prefix_server(name: str) -> str | None:
    """A shared-prefix candidate: the leading word of a name of three or more words, with its
    version segment if one follows (`Movies_1`)."""
    words = _WORDS.split(name)
    if len(words) >= 3 and words[1].isdigit():
        return f"{words[0]}_{words[1]}".lower()
    if len(words) >= 3 and all(words):
        return words[0].lower()
    return None


def server_groups(names: Sequence[str | None]) -> tuple[np.ndarray, list[str]]:
    """Each tool's server index (NO_SERVER when it has none) and the server names.

    Explicit names always form a server; a shared prefix does when at least two tools share it and
    it is not a habit of the whole catalog (more than MAX_PREFIX_SHARE of 20+ tools)."""
    explicit = [explicit_server(n) if n else None for n in names]
    prefixes = [None if e or not n else prefix_server(n) for n, e in zip(names, explicit)]
    counts = Counter(p for p in prefixes if p)
    limit = max(2, int(MAX_PREFIX_SHARE * len(names))) if len(names) >= 20 else len(names)
    keys = [e or (p if p and 2 <= counts[p] <= limit else None) for e, p in zip(explicit, prefixes)]
    servers = sorted({k for k in keys if k})
    index = {s: i for i, s in enumerate(servers)}
    return np.array([index[k] if k else NO_SERVER for k in keys], dtype=np.int64), servers


def server_mask(groups: np.ndarray, wanted: Sequence[int] | set[int]) -> np.ndarray:
    """True for each tool of the `wanted` servers (never for a tool with none): one lookup in a
    table of the servers, ~10x cheaper than np.isin (a sort) on a 500-tool set, and it runs several
    times a request."""
    keys = [int(g) for g in wanted if g != NO_SERVER]
    table = np.zeros(max(int(groups.max(initial=0)), *keys, 0) + 2, dtype=bool)  # the last slot: NO_SERVER (-1)
    table[keys] = True
    return table[groups]


def sibling_boost(scores: np.ndarray, groups: np.ndarray, anchors: Sequence[int], boost: float) -> np.ndarray:
    """Scores with the siblings of the anchor tools (chosen, called, already forwarded) ranked up.

    The boost grows with a sibling's own relevance (`boost · max(score, 0)`), so a server's
    close siblings rise and its unrelated ones stay where they were."""
    if boost <= 0 or not len(anchors):
        return scores
    anchored = {int(groups[i]) for i in anchors if groups[i] != NO_SERVER}
    if not anchored:
        return scores
    return scores + boost * np.maximum(scores, 0) * server_mask(groups, anchored)


def focus(chosen: Sequence[int], groups: np.ndarray, anchors: Sequence[int], keep: int) -> list[int]:
    """The chosen tools (best first) past the first `keep` narrowed to the servers in play: the best
    tool's and the anchors' (called or already forwarded). An agent's step works with one or two
    servers; past the few best, another server's tool scoring alike is mostly noise, and on an
    append-only list it stays for the rest of the session. A catalog with no server behind the
    best tool is left as it is (nothing says what is in play)."""
    if keep <= 0 or not len(chosen) or groups[chosen[0]] == NO_SERVER:
        return list(chosen)
    in_play = {int(groups[i]) for i in [chosen[0], *anchors] if groups[i] != NO_SERVER}
    return [i for rank, i in enumerate(chosen) if rank < keep or int(groups[i]) in in_play]


def in_use(groups: np.ndarray, called: Sequence[int]) -> np.ndarray:
    """1.0 for each tool of a server the session called (a tool with no server: only itself), else 0."""
    used = {int(groups[i]) for i in called if groups[i] != NO_SERVER}
    mask = server_mask(groups, used).astype(np.float64)
    mask[[i for i in called if groups[i] == NO_SERVER]] = 1.0
    return mask
