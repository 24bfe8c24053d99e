"""The stream gate: how much of a streamed answer may go out before it is judged.

Text flows until the sentence names something the KB could judge (a quantity, a date, or a name
whose words the KB uses): from there the sentence is held until it is judged. A word still being
written is held too (it may become a name), and so is a last run of capitalised words ("The" may
open "The Eiffel Tower"). With an empty KB nothing can be judged, so everything flows.
"""

from __future__ import annotations

import re

from ..text.sentences import last_sentence_end
from ..text.slots import fold, slots
from .evidence import EvidenceIndex

_LAST_WORD = re.compile(r"(\S+)\s+$")


def _settled_end(pending: str) -> int:
    """Where the words that can no longer grow into a name end: before the word still being
    written, and before the run of complete words at the end that start with a capital or a digit."""
    end = max(pending.rfind(" "), pending.rfind("\n")) + 1
    while (last := _LAST_WORD.search(pending, 0, end)) and (last.group(1)[0].isupper() or last.group(1)[0].isdigit()):
        end = last.start(1)  # a run of capitalised words may be one name still being written
    return end


def releasable(pending: str, index: EvidenceIndex | None) -> int:
    """How many characters of `pending` may be released now."""
    if index is None:
        return 0  # not loaded yet (on_request loads it for streams): hold
    if len(index) == 0:
        return len(pending)
    end = _settled_end(pending)
    for slot in slots(pending[:end]):
        if slot.kind != "name" or any(w in index.vocabulary for w in fold(slot.text).split()):
            return last_sentence_end(pending[: slot.start])  # from its sentence's start: judged whole
    return end
