"""Applying resolutions to the forwarded messages, sentence by sentence, on copies.

A losing statement stops being a live instruction in one of three ways:
- removed: its sentence goes, when every statement in the sentence lost and what is left of the
  message still says something ("I'm planning a trip to Paris.");
- marked: a short bracketed note goes in front of the sentence ("[superseded by a later
  message: hotel preference]"); used when removal would empty the message or lose other
  information, and always for the newer statement under keep_existing;
- merged (strategy merge): the newer value is written into the older sentence, so the rest of
  it still holds ("Book me an aisle seat on the 9am flight to Rome. [updated by a later message]").

Only user message contents change; roles, order, tool calls and tool results stay as they
are, so tool-call pairs are intact. The client's dicts are never touched: changed messages are
new dicts in a new list.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Sequence

from ..messages import Message
from .detect import Located
from .question import Texts, literal_of
from .resolve import Loss

NOTES = {
    "supersede": "[superseded by a later message: {labels}]",
    "merge": "[superseded by a later message: {labels}]",
    "reject": "[not applied, it conflicts with an earlier message: {labels}]",
    "user": "[no longer applies, the user confirmed a different {labels}]",
}
MERGED_NOTE = "[updated by a later message]"
_FILLER = {
    "i", "im", "id", "ill", "ive", "me", "my", "we", "us", "our", "a", "an", "the", "to", "in", "on", "at", "for", "of",
    "and", "or", "but", "is", "are", "be", "it", "its", "please", "like", "want", "would", "need", "actually", "just",
    "so", "also", "that", "this", "with", "thanks", "thank", "you", "ok", "okay", "hi", "hello", "hey", "yes", "no",
    "sure", "great", "well", "now", "then", "as", "said", "mentioned", "again", "by", "way", "oh", "sorry",
}


@dataclass
class EditStats:
    removed: int = 0
    marked: int = 0
    merged: int = 0
    merge_fallbacks: int = 0


def content_words(text: str) -> list[str]:
    return [w for w in re.findall(r"[a-z0-9]+", text.lower().replace("'", "")) if w not in _FILLER]


def apply_losses(
    messages: Sequence[Message], losses: Sequence[Loss], found: Sequence[Located], texts: Texts
) -> tuple[list[Message], EditStats]:
    stats = EditStats()
    by_text: dict[tuple[int, int], list[Loss]] = {}
    for loss in losses:
        by_text.setdefault((loss.loser.message, loss.loser.part), []).append(loss)
    new_texts: dict[tuple[int, int], str] = {}
    for where, group in by_text.items():
        losers = {loss.loser.key for loss in group}
        statements = [loc for loc in found if (loc.message, loc.part) == where  # a clause read whole keeps nothing alive
                      and (loc.st.slot != "v.act" or loc.key in losers)]
        new_texts[where] = _edit_text(texts[where], group, statements, texts, stats)
    out = list(messages)
    for (i, part), text in new_texts.items():
        out[i] = _with_text(messages[i], part, text)
    return out, stats


def _with_text(message: Message, part: int, text: str) -> Message:
    copy = dict(message)
    if part < 0:
        copy["content"] = text
    else:
        parts = list(message["content"])
        parts[part] = {**parts[part], "text": text}
        copy["content"] = parts
    return copy


def _edit_text(text: str, losses: list[Loss], statements: list[Located], texts: Texts, stats: EditStats) -> str:
    by_sentence: dict[tuple[int, int], list[Loss]] = {}
    for loss in losses:
        by_sentence.setdefault((loss.loser.st.start, loss.loser.st.end), []).append(loss)
    lost_keys = {loss.loser.key for loss in losses}
    lost_keys |= {  # "under $50 a night" goes with the "budget hotels" it qualifies
        loc.key for loc in statements for loss in losses
        if loc.st.start == loss.loser.st.start and _coupled(loc.st.slot, loss.loser.st.slot)
    }
    edits: dict[tuple[int, int], str] = {}
    removable: list[tuple[int, int]] = []
    for span, group in by_sentence.items():
        sentence = text[span[0]:span[1]]
        modes = {loss.mode for loss in group}
        if modes == {"merge"}:
            in_sentence = [loc for loc in statements if loc.st.start == span[0]]
            merged = _merged(sentence, group, in_sentence, texts) if len(group) == 1 else None
            if merged:
                edits[span] = merged
                stats.merged += 1
                continue
            stats.merge_fallbacks += 1
        newer_kept = bool(modes & {"reject", "user"})  # a statement the user may still be reading: mark, never cut
        if not newer_kept and all(loc.key in lost_keys for loc in statements if loc.st.start == span[0]):
            removable.append(span)
        else:
            edits[span] = _marked(sentence, group)
            stats.marked += 1
    if removable and len(content_words(_replace(text, {**edits, **{span: "" for span in removable}}))) >= 2:
        stats.removed += len(removable)
        return _replace(text, {**edits, **{span: "" for span in removable}})
    for span in removable:  # cutting would leave nothing meaningful: mark instead
        edits[span] = _marked(text[span[0]:span[1]], by_sentence[span])
        stats.marked += 1
    return _replace(text, edits)


def _marked(sentence: str, group: list[Loss]) -> str:
    mode = next((m for m in ("user", "reject", "supersede", "merge") if any(l.mode == m for l in group)), "supersede")
    labels = ", ".join(dict.fromkeys(loss.loser.st.label for loss in group))
    return f"{NOTES[mode].format(labels=labels)} {sentence}"


def _coupled(a: str, b: str) -> bool:
    """A price level and a price cap in one sentence are one preference ("budget hotels under $50")."""
    families = {a.split(".", 1)[0], b.split(".", 1)[0]}
    return families == {"tier", "amount"}


def _merged(sentence: str, group: list[Loss], in_sentence: list[Located], texts: Texts) -> str | None:
    loss = group[0]
    old, new = loss.loser.st, loss.winner.st
    if not (old.substitutable and new.substitutable) or old.negated or new.negated:
        return None
    if any(_coupled(old.slot, loc.st.slot) for loc in in_sentence if loc.key != loss.loser.key):
        return None
    vs, ve = old.vstart - old.start, old.vend - old.start
    if len(content_words(sentence[:vs] + " " + sentence[ve:])) < 3:
        return None  # nothing besides the value to keep: superseding says the same
    value = literal_of(loss.winner, texts)
    if new.vstart == new.start and sentence[vs:vs + 1].islower():
        value = value[:1].lower() + value[1:]  # capitalised only because it opened its own sentence
    return f"{_fix_article(sentence[:vs], value)}{value}{sentence[ve:]} {MERGED_NOTE}"


def _fix_article(before: str, word: str) -> str:
    m = re.search(r"\b([Aa]n?)\s+$", before)
    if not m:
        return before
    article = "an" if word[:1].lower() in "aeiou" else "a"
    if m.group(1)[0] == "A":
        article = article.capitalize()
    return before[: m.start(1)] + article + before[m.end(1):]


def _replace(text: str, edits: dict[tuple[int, int], str]) -> str:
    for (start, end), new in sorted(edits.items(), reverse=True):
        if new:
            text = text[:start] + new + text[end:]
            continue
        after = len(text[end:]) - len(text[end:].lstrip())
        if end + after >= len(text):  # the last sentence: take the space before it instead
            before = len(text[:start]) - len(text[:start].rstrip())
            text = text[: start - before]
        else:
            text = text[:start] + text[end + after:]
    return text
