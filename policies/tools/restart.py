"""What the session's list starts again with when appending would pass `max_forwarded` (loadout.py).

A restart is the one change the cache pays for a long session, so what survives it is chosen by
evidence, not only by the step's words:

- the tools the conversation called (must-keep, as on every step);
- ranked together by the step's scores (relevance, siblings, servers in use, usage): the step's
  own ranked tools, and the tools the list held of the servers the agent has called. It is working
  with those servers; their other tools it was shown (by the ranking or by its own `find_tools`)
  are the likeliest next calls that no word of the step points to;
- at most `restart_size` tools in all (the must-keep ones may pass it): a list that starts again
  nearly full passes `max_forwarded` again a step or two later, and forwards more tools meanwhile.
"""

from __future__ import annotations

from typing import Sequence

import numpy as np

from .ranking import ToolSetIndex
from .servers import NO_SERVER


def restart_list(index: ToolSetIndex, scores: np.ndarray | None, must: Sequence[str], chosen: Sequence[str],
                 previous: Sequence[str], size: int) -> list[str]:
    """The must-keep tools, then the best of (this step's chosen tools, the previous list's tools of
    servers the conversation called) by this step's scores, up to `size` in all (at least one)."""
    positions, groups = index.positions, index.groups
    keep = set(must)
    in_use = {int(groups[positions[n]]) for n in must if n in positions} - {NO_SERVER}
    of_servers = [n for n in previous if n in positions and n not in keep and int(groups[positions[n]]) in in_use]
    candidates = [n for n in dict.fromkeys([*chosen, *of_servers]) if n not in keep and n in positions]
    if scores is not None and len(scores):
        order = {n: k for k, n in enumerate(candidates)}  # ties: chosen first, then the list's order
        candidates.sort(key=lambda n: (-float(scores[positions[n]]), order[n]))
    room = max(size - len(keep), 1)
    return [*must, *candidates[:room]]
