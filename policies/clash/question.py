"""ask_user: the clarifying question, finding it again in the history, and reading the answer.

The question is a pure function of the clash (it quotes the user's own sentences), so on the
next turn the policy recognises its own question among the assistant messages, takes the user
message after it as the answer, and never asks the same thing twice — even after a restart.
"""

from __future__ import annotations

import re
from typing import Literal, Sequence

from ..messages import Message, content_text
from ..text.statements.extract import extract
from .detect import Clash, Located

Texts = dict[tuple[int, int], str]  # (message index, part index) → text of a user message part
Choice = Literal["older", "newer", "both"]

_NOUN_AFTER = re.compile(
    r"(?:\s+[\w-]+){0,2}?\s+(?:hotels?|hostels?|resorts?|accommodation|places? to stay|flights?|cars?|restaurants?|"
    r"seats?|class|rooms?|meals?|option)\b"
)
_PRICE_CAP = re.compile(
    r"(?:under|below|less than|up to|max(?:imum)?|no more than|at most|around|about)\s+[$€£]\s?\d[\d,.]*k?"
    r"(?:\s*(?:/|per|a|an|each)\s*(?:night|day|week|person))?",
    re.I,
)


def sentence_of(loc: Located, texts: Texts) -> str:
    return texts[(loc.message, loc.part)][loc.st.start:loc.st.end]


def literal_of(loc: Located, texts: Texts) -> str:
    return texts[(loc.message, loc.part)][loc.st.vstart:loc.st.vend]


def option(loc: Located, texts: Texts) -> str:
    """How a side of the clash is offered: "Budget hotels (under $50 a night)", "Luxury 5-star hotel"."""
    text = texts[(loc.message, loc.part)]
    phrase = literal_of(loc, texts)
    if loc.st.slot.startswith("tier."):
        noun = _NOUN_AFTER.match(text, loc.st.vend, loc.st.end)
        if noun and not re.search(r"\b(?:hotels?|hostels?|flights?|cars?|restaurants?)\b", phrase, re.I):
            phrase += noun.group(0)
        cap = _PRICE_CAP.search(text, loc.st.start, loc.st.end)
        if cap:
            phrase += f" ({cap.group(0)})"
    phrase = " ".join(phrase.split())
    if loc.st.negated:
        phrase = f"not {phrase}"
    return phrase[:1].upper() + phrase[1:]


def _quote(text: str, limit: int = 160) -> str:
    text = " ".join(text.split()).rstrip(".!;,")
    return text if len(text) <= limit else text[: limit - 1].rstrip() + "…"


def question(c: Clash, texts: Texts) -> str:
    """The clarifying question for one clash (strategy ask_user). Its first words say the proxy
    asks, not the model; the user's reply is read on the next turn."""
    first, second = option(c.older, texts), option(c.newer, texts)
    return (
        f"[ctxwarden] Before I go on, one thing to check: earlier you said \"{_quote(sentence_of(c.older, texts))}\", "
        f"but now you said \"{_quote(sentence_of(c.newer, texts))}\". Which {c.label} should I go with?\n"
        f"1. {first}\n2. {second}\n3. Flexible, either is fine\n"
        "Reply with 1, 2 or 3, or in your own words."
    )


def note_line(c: Clash, texts: Texts) -> str:
    """The `note` strategy's line for one clash: both statements in the user's own words, and which
    one is their latest. A pure function of the clash, so every turn writes the same bytes."""
    return (f"Earlier the user said \"{_quote(sentence_of(c.older, texts))}\"; here they say "
            f"\"{_quote(sentence_of(c.newer, texts))}\". Go by the later one unless they say otherwise.")


def normalise(text: str) -> str:
    return " ".join(text.split())


def find_answer(asked: str, messages: Sequence[Message]) -> str | None:
    """The user's reply to our question `asked`, if the question is in the history and was answered."""
    target = normalise(asked)
    for i, m in enumerate(messages):
        if m.get("role") == "assistant" and normalise(content_text(m)) == target:
            for later in messages[i + 1:]:
                if later.get("role") == "user":
                    return content_text(later)
    return None


# ----------------------------------------------------------------------------- reading the answer

_FIRST = re.compile(r"^\W*(?:(?:option|number|choice|#)\s*)?(?:1|one|first|the first(?: one)?|the former)\b(?!\s*(?:more|of))|"
                    r"\b(?:the (?:first|former|earlier|old|older|previous|original) (?:one|option|choice)|option 1|number 1|keep the (?:first|old|original))\b")
_SECOND = re.compile(r"^\W*(?:(?:option|number|choice|#)\s*)?(?:2|two|second|the second(?: one)?|the latter)\b(?!\s*(?:more|of))|"
                     r"\b(?:the (?:second|latter|later|new|newer|latest|last|recent) (?:one|option|choice)|option 2|number 2)\b")
_FLEXIBLE = re.compile(r"^\W*(?:(?:option|number|choice|#)\s*)?(?:3|three)\b|\b(?:flexible|either|both|doesn't matter|does not matter|"
                       r"don't mind|do not mind|no preference|whatever|any(?:thing)? (?:is|would be) fine|up to you|don't care)\b")
_COMMON = {"the", "and", "for", "with", "not", "seat", "hotel", "hotels", "room", "class", "star", "per", "night", "please"}


def parse_choice(reply: str, c: Clash, texts: Texts) -> Choice | None:
    """Which side the user's reply picks, or None when it cannot be told."""
    by_value = _by_statement(reply, c)
    if by_value:
        return by_value
    lower = reply.lower().strip()
    first, second = bool(_FIRST.search(lower)), bool(_SECOND.search(lower))
    if first != second:
        return "older" if first else "newer"
    if _FLEXIBLE.search(lower):
        return "both"
    return _by_words(lower, option(c.older, texts), option(c.newer, texts))


def _base(slot: str) -> str:
    base = slot.split("@", 1)[0].split(">", 1)[0]
    return "tier" if base.startswith("tier.") else base


def _by_statement(reply: str, c: Clash) -> Choice | None:
    picks = set()
    for st in extract(reply):
        if _base(st.slot) != _base(c.slot) or st.negated:
            continue
        if st.value == c.older.st.value and not c.older.st.negated:
            picks.add("older")
        if st.value == c.newer.st.value and not c.newer.st.negated:
            picks.add("newer")
    return picks.pop() if len(picks) == 1 else None  # type: ignore[return-value]


def _by_words(reply: str, first: str, second: str) -> Choice | None:
    words_first = set(re.findall(r"[a-z0-9$€£-]{3,}", first.lower())) - _COMMON
    words_second = set(re.findall(r"[a-z0-9$€£-]{3,}", second.lower())) - _COMMON
    said = set(re.findall(r"[a-z0-9$€£-]{3,}", reply))
    hit_first, hit_second = bool(said & (words_first - words_second)), bool(said & (words_second - words_first))
    if hit_first != hit_second:
        return "older" if hit_first else "newer"
    return None
