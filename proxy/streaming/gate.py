"""The answer checker's gate over one streamed text, for the typed-event APIs (Responses, Messages).

The stream's events are held in order, each with the length the answer's text had once it
arrived. Complete sentences are judged as they finish; of a sentence still arriving, what the
validators clear (`releasable`) may go out unjudged. An event goes out once all the text up to it
is judged or cleared, so events without text (item added, tool-call arguments) go out as soon as
the text before them has. Chat completions keeps its own relay (streaming/relay.py), which also
gates the choices of an n > 1 request; these APIs stream one answer.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Awaitable, Callable

from ctxwarden.policies.base import Answer, Block, Exchange, Reject
from ctxwarden.policies.poisoning.assess import MAX_CLAIM_CHARS
from ctxwarden.policies.text.sentences import piece_end

Validate = Callable[[Exchange, Answer], Awaitable[Any]]  # a Verdict or None
Releasable = Callable[[Exchange, str], int]


@dataclass
class TextGate:
    ex: Exchange
    validate: Validate
    releasable: Releasable | None = None
    text: str = ""
    validated: int = 0  # text[:validated] passed the validators
    cleared: int = 0  # text[:cleared] may go out unjudged
    released: int = 0  # text[:released] reached the client
    verdict: Block | Reject | None = None  # set once the answer is blocked
    held: list[tuple[bytes, int]] = field(default_factory=list)  # (event bytes, text length it needs)

    @property
    def blocked(self) -> bool:
        return self.verdict is not None

    def hold(self, raw: bytes, text: str = "") -> None:
        """An event, and the text it adds to the answer (if any), waiting its turn."""
        self.text += text
        self.held.append((raw, len(self.text)))

    async def judge(self, final: bool) -> None:
        """Judge every complete sentence not yet judged (all remaining text when `final`)."""
        if self.blocked or self.validated >= len(self.text):
            return
        end = len(self.text) if final else piece_end(self.text, self.validated, MAX_CLAIM_CHARS)
        if end > self.validated:
            piece = self.text[self.validated:end]
            verdict = await self.validate(
                self.ex, Answer(text=piece, partial=not final, prior_text=self.text[:self.validated], finish_reason=None))
            if isinstance(verdict, (Block, Reject)):
                self.verdict = verdict
                return
            self.validated = end
        if not final and self.releasable is not None:
            pending = self.text[self.validated:]
            if pending:
                self.cleared = max(self.cleared, self.validated + self.releasable(self.ex, pending))

    def release(self) -> list[bytes]:
        """Held events whose text is all judged or cleared, in order; stops at the first that is not."""
        limit = max(self.validated, self.cleared)
        out: list[bytes] = []
        while self.held and self.held[0][1] <= limit:
            raw, end = self.held.pop(0)
            self.released = max(self.released, end)
            out.append(raw)
        return out

    def ending(self) -> tuple[str, str]:
        """After a block: the judged text that had not gone out yet, and the notice to follow it."""
        assert self.verdict is not None
        remainder = self.text[self.released:self.validated].rstrip()
        notice = self.verdict.notice if isinstance(self.verdict, Block) else self.verdict.message
        said = self.text[:self.released] + remainder
        return remainder, ("\n\n" if said.strip() else "") + notice
