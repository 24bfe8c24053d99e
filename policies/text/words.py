"""Words as every text reader compares them: folded (lower case, no accents or possessives),
stemmed crudely, function words set aside; and negation. The tables are English's closed classes.
"""

from __future__ import annotations

import re
import unicodedata

from ..cache import cache_short

FUNCTION_WORDS = frozenset("""
a an the and or but nor so yet of in on at to for from by with without about into onto over under
between among through during before after above below up down out off than then as is are was
were be been being am do does did done has have had having will would shall should can could may
might must it its it's this that these those there here which who whom whose what when where why
how whether if while because although though also too very just only even still already not no
never none neither either both each every all any some many much more most less least few other
another such same own i me my mine we us our ours you your yours he him his she her hers they yes
them their theirs one ones s t i'm i've i'd you're we're they're isn't aren't wasn't weren't
don't doesn't didn't won't can't cannot couldn't shouldn't wouldn't hasn't haven't hadn't
i'll you'll he'll she'll it'll we'll they'll he's she's it's that's there's here's what's let's
since until unless upon onto perhaps maybe please thanks okay ok oh well around nearly almost roughly approximately
""".split())
NEGATORS = frozenset("not no never none neither nor cannot without n't".split())
_WORD = re.compile(r"[A-Za-zÀ-ÖØ-öø-ÿ0-9][\w'’.\-]*|[$€£%]")
_POSSESSIVE = re.compile(r"['’]s\b")


def fold(text: str) -> str:
    """Lower case without accents or possessive marks: how names and words are compared."""
    if text.isascii():  # nothing to decompose: the same result without reading each character
        return _POSSESSIVE.sub("", text.lower())
    text = unicodedata.normalize("NFKD", text)
    text = "".join(c for c in text if not unicodedata.combining(c)).lower()
    return _POSSESSIVE.sub("", text)


def words(text: str) -> list[str]:
    return [w.strip(".'’-").lower() for w in _WORD.findall(text)]


def content_words(text: str) -> set[str]:
    """Words that carry meaning (not function words), folded, with a crude stem."""
    return {_key(w) for w in words(text) if w and w not in FUNCTION_WORDS and not w.isdigit()}


@cache_short(maxsize=65536, max_chars=64)  # a long token (a base64 blob) is not kept
def _key(word: str) -> str:
    return stem(fold(word))


@cache_short(maxsize=65536, max_chars=64)  # a long token (a base64 blob) is not kept
def stem(word: str) -> str:
    for suffix in ("ies", "es", "s", "ing", "ed", "ly"):
        if word.endswith(suffix) and len(word) - len(suffix) >= 4:
            return word[: -len(suffix)]
    return word


def negated(text: str) -> bool:
    return any(w in NEGATORS or w.endswith("n't") for w in words(text))
