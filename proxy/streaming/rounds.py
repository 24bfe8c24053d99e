"""One chat stream across the proxy's tool rounds (streaming/relay.py).

When the model calls only the proxy's own tools (`find_tools`, `context_recall`), the proxy answers
them and streams the next round on the same response. Text is never held back for that, so a round's
text has already reached the client when its tool calls turn out to be the proxy's. The chunks of the
later rounds are made part of the first round's stream: the same `id` and `created` (a client sees
one completion), no second `role` delta, and a choice's first text in a new round set apart by a
blank line from what it streamed before ("Let me look." then "Pushing.", not "Let me look.Pushing.").
"""

from __future__ import annotations

from typing import Any

SEPARATOR = "\n\n"


class OneStream:
    def __init__(self) -> None:
        self.rounds = 0  # proxy-tool rounds answered so far
        self.stream_id: dict[str, Any] = {}  # the first chunk's id and created
        self.texted: set[int] = set()  # choices that streamed text in any round so far
        self.apart: set[int] = set()  # choices whose next text is set apart from an earlier round's

    def next_round(self) -> None:
        self.rounds += 1
        self.apart = set(self.texted)

    def chunk(self, obj: dict[str, Any]) -> dict[str, Any] | None:
        """A chat chunk (`choices` a list) as part of the one stream; None when it goes out as it came."""
        if not self.stream_id:
            self.stream_id = {k: obj[k] for k in ("id", "created") if k in obj}
        if not self.rounds:
            self.texted.update(c.get("index", 0) for c in obj["choices"] if (c.get("delta") or {}).get("content"))
            return None
        choices = []
        for choice in obj["choices"]:
            if not isinstance(choice.get("delta"), dict):
                choices.append(choice)
                continue
            delta = {k: v for k, v in choice["delta"].items() if k != "role"}
            idx = choice.get("index", 0)
            if isinstance(delta.get("content"), str) and delta["content"]:
                self.texted.add(idx)
                if idx in self.apart:
                    self.apart.discard(idx)
                    delta["content"] = SEPARATOR + delta["content"]
            choices.append({**choice, "delta": delta})
        return {**obj, **self.stream_id, "choices": choices}
