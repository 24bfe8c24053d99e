"""Resolution: for each clash, which statement stays live, by strategy, answer or memory.

- note (the default): nothing is edited; the model is told, in a note after the message that said
  the later value, that the user said both and which is their latest word.
- prefer_recent: the older statement loses (superseded).
- merge: the older statement loses, and is rewritten with the newer value when that keeps
  something worth keeping (edit.py decides; otherwise it is superseded as prefer_recent).
- keep_existing: the newer statement loses (marked as not applied).
- ask_user: the proxy asks; the user's reply picks the loser on the next turn. Clashes that are
  only in the history (the conversation moved on since) are settled as prefer_recent.
- An explicit correction ("correction: ...", "sorry, I meant ...", "actually, make it ...") is an
  update, not a disagreement: the corrected statement loses as under prefer_recent, whatever the
  strategy, and the policy reports it as a correction.

Clashes are settled oldest-newest first; a statement that already lost is not judged again, so
"budget → luxury → budget" leaves the last "budget" live and both earlier ones superseded.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal, Sequence

from ..messages import Message, content_text
from .detect import Clash, Located
from .question import Texts, find_answer, normalise, parse_choice, question
from .state import Decision, SessionState

LossMode = Literal["supersede", "merge", "reject", "user"]


@dataclass(frozen=True)
class Loss:
    loser: Located  # the statement that no longer applies
    winner: Located
    mode: LossMode


@dataclass
class Resolution:
    losses: list[Loss] = field(default_factory=list)
    ask: Clash | None = None
    question: str = ""
    decided: list[tuple[Clash, Decision]] = field(default_factory=list)  # decisions taken this turn
    remembered: int = 0  # decisions reused from earlier turns
    noted: list[Clash] = field(default_factory=list)  # clashes the `note` strategy tells the model about


def _auto(strategy: str) -> Decision:
    if strategy == "note":
        return Decision("newer", "note")
    if strategy == "keep_existing":
        return Decision("older", "keep_existing")
    if strategy == "merge":
        return Decision("newer", "merge")
    return Decision("newer", "prefer_recent")


def _last_real_answer(messages: Sequence[Message], ours: set[str]) -> int:
    """Index of the last assistant message that is not one of our clarifying questions."""
    for i in range(len(messages) - 1, -1, -1):
        m = messages[i]
        if m.get("role") == "assistant" and normalise(content_text(m)) not in ours:
            return i
    return -1


def resolve(
    clashes: Sequence[Clash],
    strategy: str,
    state: SessionState,
    messages: Sequence[Message],
    texts: Texts,
) -> Resolution:
    contradictions = [c for c in clashes if not c.duplicate]
    questions = {c.key: question(c, texts) for c in contradictions}
    answered_up_to = _last_real_answer(messages, {normalise(q) for q in questions.values()})
    out = Resolution()
    lost: set[str] = set()
    for c in contradictions:
        if c.older.key in lost or c.newer.key in lost:
            continue
        decision = state.decisions.get(c.key)
        if decision is not None:
            out.remembered += 1
        else:
            decision = _decide(c, strategy, questions[c.key], messages, texts, pending=c.newer.message > answered_up_to)
            if decision.winner == "ask":
                out.ask, out.question = c, questions[c.key]
                return out
            state.decisions[c.key] = decision
            out.decided.append((c, decision))
        if decision.how == "note":
            out.noted.append(c)
            continue
        loss = _loss(c, decision)
        if loss:
            out.losses.append(loss)
            lost.add(loss.loser.key)
    return out


def _decide(c: Clash, strategy: str, asked: str, messages: Sequence[Message], texts: Texts, pending: bool) -> Decision:
    reply = find_answer(asked, messages)
    if reply is not None:
        choice = parse_choice(reply, c, texts)
        return Decision(choice, "user") if choice else Decision("both", "unclear")
    if strategy == "note":  # a correction too: the user's words are never edited unless they chose it
        return _auto(strategy)
    if c.correction:  # "sorry, I meant ...": an update, whatever editing strategy was chosen
        return Decision("newer", "correction")
    if strategy == "ask_user":
        return Decision("ask", "ask_user") if pending else Decision("newer", "prefer_recent")
    return _auto(strategy)


def _loss(c: Clash, d: Decision) -> Loss | None:
    if d.winner == "newer":
        mode: LossMode = "user" if d.how == "user" else "merge" if d.how == "merge" else "supersede"
        return Loss(c.older, c.newer, mode)
    if d.winner == "older":
        return Loss(c.newer, c.older, "user" if d.how == "user" else "reject")
    return None
