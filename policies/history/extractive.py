"""Extractive summaries made locally: keep the sentences that carry facts, drop the filler.

A sentence carries facts when it holds numbers, names, identifiers, quotes, or words of decision,
preference and obligation ("decided", "prefer", "must", "budget", "deadline"). Greetings,
acknowledgements and narration of what the agent is about to do are dropped. Tool results are
reduced to their most factual fields (JSON) or sentences (text). Nothing here calls a model: a
200-message span takes a few milliseconds, and the same span always gives the same summary.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any, Callable, Sequence

from ..messages import Message, content_text
from ..text.calls import call_parts
from ..text.sentences import split_sentences as sentences_of

Count = Callable[[str], int]

_NUMBER = re.compile(r"\d")
_WORD = re.compile(r"[A-Za-z][A-Za-z0-9&'_-]*")
_IDENTIFIER = re.compile(r"@\w|https?://|\w/\w|\b[a-z]+_[a-z0-9_]+\b|\b[a-z]+[A-Z]|\b[A-Z]{2,}\d*\b")
_QUOTED = re.compile(r"\"[^\"]{2,80}\"|'[^']{3,80}'|“[^”]{2,80}”")
# Words of decision, preference, obligation and planning (prefixes: "decid" covers decide/decided/deciding).
_DECISION_PREFIXES = (
    "decid", "decision", "chose", "choose", "chosen", "prefer", "agree", "confirm", "must", "never", "always",
    "avoid", "only", "plan", "deadline", "budget", "todo", "remember", "important", "requir", "need", "want",
    "book", "order", "select", "approv", "reject", "cancel", "switch", "instead", "goal", "constraint", "limit",
    "allerg", "favorite", "favourite", "don't", "won't", "we'll", "pick", "settl", "opt for", "stick with",
)
_DECISION_RE = re.compile(r"\b(?:" + "|".join(re.escape(p) for p in _DECISION_PREFIXES) + r")")
_DECISION_PHRASES = ("go with", "going with", "do not", "will use", "to-do", "next step", "name is", "call me")
_MY_X_IS = re.compile(r"\bmy \w+ (is|are)\b")
_FILLER = re.compile(
    r"^(sure|ok(ay)?|great|perfect|awesome|thanks?|thank you|got it|of course|certainly|absolutely|no problem|"
    r"hello|hi|hey|let me|let's see|i'll (check|look|search|find|get|fetch|see)|one moment|here (is|are)|"
    r"hope this helps|happy to help|i can help|good question|alright|understood|noted)\b",
    re.IGNORECASE,
)
_INTERJECTION = re.compile(
    r"^(sure|ok(ay)?|great|perfect|awesome|thanks?|thank you|got it|of course|certainly|absolutely|no problem|"
    r"hello|hi|hey|alright|understood|noted)\s*[,!.:;-]+\s*",
    re.IGNORECASE,
)
_COMMON_CAPS = frozenset(
    "I I'm I'll I've I'd The A An This That These Those It Its We You Your Our My He She They There Here "
    "What When Where Which Who Why How If But And Or So Also Then Yes No Not Please Let Sure Okay Thanks".split()
)

USER_KEEP, ASSISTANT_KEEP, TOOL_KEEP = 0, 2, 2  # minimum score a sentence needs, by author (users: all but filler)
MAX_SENTENCE_CHARS = 320
TOOL_FACTS = 5  # most factual fields/sentences kept from one tool result
ARG_CHARS = 160


@dataclass(frozen=True)
class Line:
    """One line of a summary: where it came from, its text and how factual it is."""

    order: int
    text: str
    score: float


def split_sentences(text: str) -> list[str]:
    """Sentences without list bullets."""
    return [s.strip(" \t-•*") for s in sentences_of(text) if s.strip(" \t-•*")]


def has_decision(sentence: str) -> bool:
    lower = sentence.lower()
    if _DECISION_RE.search(lower):
        return True
    return any(p in lower for p in _DECISION_PHRASES) or ("my " in lower and _MY_X_IS.search(lower) is not None)


def score_sentence(sentence: str) -> float:
    """How much a sentence is worth keeping: facts score, filler costs."""
    words = _WORD.findall(sentence)
    proper = sum(1 for w in words[1:] if w[0].isupper() and w not in _COMMON_CAPS)
    if words and words[0][0].isupper() and words[0] not in _COMMON_CAPS and any(c.isupper() for c in words[0][1:]):
        proper += 1  # a CamelCase name opening the sentence
    score = 0.0
    if _NUMBER.search(sentence):
        score += 2
    score += min(proper, 3)
    if has_decision(sentence):
        score += 2
    if _IDENTIFIER.search(sentence):
        score += 1
    if ('"' in sentence or "'" in sentence or "“" in sentence) and _QUOTED.search(sentence):
        score += 1
    if score < 3 and _FILLER.match(sentence):
        score -= 2
    return score


def _clip(text: str, limit: int = MAX_SENTENCE_CHARS) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1].rstrip() + "…"


def _strip_filler(sentence: str) -> str:
    """Drop a leading interjection ("Sure, ...", "Great! ...") but keep what follows it."""
    match = _INTERJECTION.match(sentence)
    if match and len(sentence) > match.end() + 12:
        rest = sentence[match.end():]
        return rest[0].upper() + rest[1:]
    return sentence


def _json_leaves(value: Any, path: str = "") -> list[tuple[str, str]]:
    """Flatten JSON to (path, scalar) pairs; long lists keep their first three items and a count."""
    if isinstance(value, dict):
        out: list[tuple[str, str]] = []
        for key, item in value.items():
            out += _json_leaves(item, f"{path}.{key}" if path else str(key))
        return out
    if isinstance(value, list):
        out = [(path, f"{len(value)} items")] if len(value) > 3 else []
        for i, item in enumerate(value[:3]):
            out += _json_leaves(item, f"{path}[{i}]")
        return out
    if value is None or value == "":
        return []
    return [(path, str(value))]


def _leaf_score(value: str) -> float:
    """Short scalars (amounts, names, ids, dates) are the facts; prose inside JSON is description."""
    if len(value) > 120:
        return -1.0
    score = 0.0 if len(value) <= 40 else -1.0  # titles and phrases rank below short values
    if _NUMBER.search(value):
        score += 3
    if value[:1].isupper():
        score += 2
    if value.startswith(("http://", "https://")):
        score = 1.0
    return score


_DECODER = json.JSONDecoder()


def _parse_json(text: str) -> Any:
    """The JSON value a text starts with (tools often append a line of prose after it), or None."""
    stripped = text.strip()
    if not stripped or stripped[0] not in "[{":
        return None
    try:
        return _DECODER.raw_decode(stripped)[0]
    except ValueError:
        return None


def _render_leaves(leaves: list[tuple[str, str]]) -> str:
    """(path, value) pairs grouped by parent: `flights[0]: code=TP100, price=420`."""
    groups: dict[str, list[str]] = {}
    for path, value in leaves:
        parent, _, leaf = path.rpartition(".")
        groups.setdefault(parent, []).append(f"{leaf}={_clip(value, 80)}" if parent else f"{leaf}: {_clip(value, 80)}")
    return "; ".join(f"{parent}: {', '.join(items)}" if parent else ", ".join(items) for parent, items in groups.items())


def tool_facts(text: str, limit: int = TOOL_FACTS) -> list[tuple[str, float]]:
    """The most factual pieces of a tool result, in their original order, with scores."""
    data = _parse_json(text)
    if data is not None:
        leaves = _json_leaves(data)
        scored = [(i, leaf, _leaf_score(leaf[1])) for i, leaf in enumerate(leaves)]
        best = sorted((s for s in scored if s[2] >= TOOL_KEEP), key=lambda s: (-s[2], s[0]))[:limit]
        if not best:
            return []
        ordered = [leaf for _, leaf, _ in sorted(best)]
        return [(_render_leaves(ordered), max(s for _, _, s in best))]
    seen: set[str] = set()
    scored_text = []
    for i, sentence in enumerate(split_sentences(text)):
        key = sentence.lower()
        if key in seen:
            continue
        seen.add(key)
        scored_text.append((i, _clip(sentence, 200), score_sentence(sentence)))
    best_text = sorted((s for s in scored_text if s[2] >= TOOL_KEEP), key=lambda s: (-s[2], s[0]))[:limit]
    return [(t, score) for _, t, score in sorted(best_text)]


def gist(text: str, limit: int = 160) -> str:
    """One line saying what a (tool) text is: its shape or opening, and its most factual piece."""
    data = _parse_json(text)
    if isinstance(data, dict):
        keys = ", ".join(list(map(str, data))[:6])
        sizes = [f"{k}: {len(v)} items" for k, v in data.items() if isinstance(v, list)][:2]
        head = f"JSON object with {keys}" + (f" ({'; '.join(sizes)})" if sizes else "")
    elif isinstance(data, list):
        head = f"JSON list of {len(data)} items"
    else:
        head = _clip(next((s for s in split_sentences(text) if len(s) > 3), ""), 80)
    facts = tool_facts(text, limit=1)
    best = facts[0][0] if facts else ""
    parts = [p.rstrip(". ") for p in (head, best) if p.strip()]
    if len(parts) == 2 and parts[1] in parts[0]:
        parts = parts[:1]
    return _clip("; ".join(parts) or "(empty)", limit)


def _call_text(call: dict[str, Any]) -> str:
    name, args = call_parts(call)
    args = " ".join(str(args or "").split())
    return f"{'?' if name is None else name}({_clip(args, ARG_CHARS)})"


def message_lines(messages: Sequence[Message]) -> list[Line]:
    """Every candidate line of a span, scored; the caller keeps what fits.

    A tool call and its result share one line: `assistant → name(args) ⇒ facts of the result`.
    """
    lines: list[Line] = []
    seen: set[str] = set()
    call_line: dict[str, int] = {}  # tool_call_id → index of its line
    for msg in messages:
        role = msg.get("role", "")
        text = content_text(msg)
        if role == "tool":
            facts = tool_facts(text)
            result = "; ".join(f for f, _ in facts) or gist(text, 120)
            if result.lower() in seen:
                result = "(same result as before)"
            seen.add(result.lower())
            score = 3 if any(_NUMBER.search(f) for f, _ in facts) else 2  # details rank below what people said
            at = call_line.get(msg.get("tool_call_id", ""))
            if at is None:
                lines.append(Line(len(lines), f"{msg.get('name') or 'tool'} result ⇒ {result}", score))
            else:
                old = lines[at]
                lines[at] = Line(old.order, f"{old.text} ⇒ {result}", max(old.score, score))
            continue
        threshold = USER_KEEP if role == "user" else ASSISTANT_KEEP
        kept: list[str] = []
        best = 0.0
        for sentence in split_sentences(text):
            key = sentence.lower()
            score = score_sentence(sentence) + (1 if role == "user" and sentence.endswith("?") else 0)
            if score < threshold or key in seen:
                continue
            seen.add(key)
            kept.append(_clip(_strip_filler(sentence)))
            best = max(best, score)
        if kept:
            lines.append(Line(len(lines), f"{role}: {' '.join(kept)}", best + (2 if role == "user" else 0)))
        for call in msg.get("tool_calls") or []:
            call_line[call.get("id", "")] = len(lines)
            lines.append(Line(len(lines), f"{role} → {_call_text(call)}", 1))
    return lines


def summarize_messages(messages: Sequence[Message], max_tokens: int | None = None, count: Count | None = None) -> str:
    """An extractive summary of a span: one line per kept message (or tool call), oldest first.

    With `max_tokens`, the most factual lines are kept until the budget is spent (order kept).
    """
    return select_lines(message_lines(messages), max_tokens, count)


def select_lines(lines: Sequence[Line], max_tokens: int | None = None, count: Count | None = None) -> str:
    count = count or (lambda s: max(1, len(s) // 4))
    if max_tokens is None:
        return "\n".join(f"- {line.text}" for line in lines)
    chosen: list[Line] = []
    spent = 0
    lines = [Line(l.order, _ARGS.sub(" ⇒", l.text), l.score) for l in lines]  # under a cap, tool arguments go first
    for line in sorted(lines, key=lambda l: (-l.score, l.order)):
        cost = count(f"- {line.text}\n")
        if spent + cost > max_tokens:
            continue
        chosen.append(line)
        spent += cost
    return "\n".join(f"- {line.text}" for line in sorted(chosen, key=lambda l: l.order))


_ARGS = re.compile(r"\((?:[^()]|\([^()]*\))*\) ⇒")


def line_score(line: str) -> float:
    """A summary line's priority: what the user said first, then facts, then tool details."""
    role, _, rest = line.partition(":")
    if " → " in line.split(":", 1)[0] or " → " in role:
        return 3.0 if _NUMBER.search(line.partition("⇒")[2]) else 2.0
    base = score_sentence(rest or line)
    return base + 2 if role.strip() == "user" else base


def lines_of_summary(text: str) -> list[Line]:
    """Re-read a summary's lines (to merge or cap summaries without the original messages)."""
    out = []
    for raw in text.splitlines():
        line = raw.strip().lstrip("-").strip()
        if line and not line.startswith("["):
            out.append(Line(len(out), line, line_score(line)))
    return out
