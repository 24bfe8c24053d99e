"""History and archive: keep long conversations inside the budget without breaking tool-call pairs.

`HistoryPolicy` summarizes old spans into frozen blocks; `ArchivePolicy` moves bulky tool results
into the scratchpad behind `ref=` stubs, recalled through the `context_recall` tool.
"""

from .archive import ArchivePolicy
from .policy import HistoryPolicy

__all__ = ["ArchivePolicy", "HistoryPolicy"]
