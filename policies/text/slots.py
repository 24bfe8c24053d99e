"""The slots that decide whether two statements agree: quantities (with units), dates, names,
negation and the content words around them. Shared by the answer checker and the clash detector.

Values are normalized so that different wordings compare equal: "8,849 m" = "8.849 km" =
"eight thousand eight hundred and forty-nine metres"; "2 March 1991" = "March 2, 1991" and agrees
with "1991"; "Nixon" agrees with "President Richard Nixon", "USA" with "United States of America".
The tables here are the closed classes of English (number words, units, months, negators,
function words), not lists of facts or sentence templates.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from ..cache import cache_short
from .sentences import abbreviation_at
from .units import UNITS as _UNITS
from .words import FUNCTION_WORDS, NEGATORS, content_words, fold, negated, stem, words  # noqa: F401 (the slot readers' words)

_NUMBER_WORDS = {w: n for n, w in enumerate(
    "zero one two three four five six seven eight nine ten eleven twelve thirteen fourteen fifteen "
    "sixteen seventeen eighteen nineteen".split())}
_NUMBER_WORDS.update({w: 10 * (n + 2) for n, w in enumerate("twenty thirty forty fifty sixty seventy eighty ninety".split())})
SCALES = {"hundred": 100, "thousand": 1e3, "million": 1e6, "billion": 1e9, "trillion": 1e12}
_UNITS_WORD = "one|two|three|four|five|six|seven|eight|nine"
_SMALL = (r"(?:(?:twenty|thirty|forty|fifty|sixty|seventy|eighty|ninety)(?:[\s-](?:" + _UNITS_WORD + r"))?|"
          r"ten|eleven|twelve|thirteen|fourteen|fifteen|sixteen|seventeen|eighteen|nineteen|" + _UNITS_WORD + r"|zero)")
_GROUP = rf"(?:(?:{_SMALL}|an?)\s+hundred(?:\s+(?:and\s+)?{_SMALL})?|{_SMALL})"
# a number said in words, as one phrase: "twenty-five", "two thousand", "a hundred and five" (not "five six")
SPELLED_NUMBER = rf"(?:(?:{_GROUP}|an?)\s+(?:thousand|million|billion)(?:\s+(?:and\s+)?{_GROUP})?|{_GROUP})"
_MONTHS = {m: n + 1 for n, m in enumerate(
    "january february march april may june july august september october november december".split())}
_MONTHS.update({m[:3]: n for m, n in list(_MONTHS.items())})
_MONTHS["sept"] = 9

_CONNECTORS = frozenset("of de du des la le van von der den da di del y & the".split())

_NUMBER = re.compile(r"(?<![\w.])([$€£])?\s?(\d{1,3}(?:[,\u00a0 ]\d{3})+|\d+)(?:\.(\d+))?(?![\d])")
_ORDINAL_CENTURY = re.compile(r"\b(\d{1,2})(?:st|nd|rd|th)[\s-]+century\b", re.I)
_DECADE = re.compile(r"\b(1\d|20)(\d)0'?s\b")
_YEAR = re.compile(r"(?<![\w$€£.,])(1[0-9]\d\d|20\d\d)(?![\w%]|,\d|\.\d)")
# two dates glued where a dash went missing ("26 September 188926 May 1976", "January 14,
# 1925November 25, 1970"): a date may end where the next one's day or month begins
_DATE_END = r"(?:\b|(?=\d{1,2}\s+[A-Za-z]{3,9}\b|[A-Z][a-z]))"
_DAY_MONTH = re.compile(r"(?:\b|(?<=\b(?:1\d|20)\d\d))(\d{1,2})(?:st|nd|rd|th)?(?:\s+of)?\s+([A-Za-z]{3,9})\.?,?\s+(\d{3,4})" + _DATE_END)
_MONTH_DAY = re.compile(r"(?:\b|(?<=\d))([A-Za-z]{3,9})\.?\s+(\d{1,2})(?:st|nd|rd|th)?,?\s+(\d{3,4})" + _DATE_END)
_MONTH_YEAR = re.compile(r"\b([A-Za-z]{3,9})\s+(?:of\s+)?(\d{4})\b")
_ISO = re.compile(r"\b(\d{4})-(\d{2})-(\d{2})\b")
_CAPITAL = re.compile(r"[A-ZÀ-ÖØ-Þ]")


@dataclass(frozen=True)
class Slot:
    kind: str  # "number" | "date" | "name"
    text: str
    start: int
    end: int
    value: tuple = ()  # number: (amount in base unit, dimension); date: (year, month, day); name: tokens

    def agrees(self, other: "Slot") -> bool:
        return agree(self, other)


# ----------------------------------------------------------------------------- extraction


def slots(text: str) -> list[Slot]:
    """Every date, quantity and name in the text, by position (a date's digits are not also a number)."""
    found = _dates(text)
    taken = [(s.start, s.end) for s in found]
    found += [s for s in _numbers(text) if not _overlaps(s, taken)]
    taken = [(s.start, s.end) for s in found]
    found += [s for s in _names(text) if not _overlaps(s, taken)]
    return sorted(found, key=lambda s: s.start)


def _overlaps(slot: Slot, spans: list[tuple[int, int]]) -> bool:
    return any(slot.start < b and a < slot.end for a, b in spans)


def _dates(text: str) -> list[Slot]:
    out: list[Slot] = []

    def add(m: re.Match, y: int, mo: int = 0, d: int = 0) -> None:
        if not any(m.start() < s.end and s.start < m.end() for s in out):
            out.append(Slot("date", m.group(0), m.start(), m.end(), (y, mo, d)))

    for m in _ISO.finditer(text):
        add(m, int(m.group(1)), int(m.group(2)), int(m.group(3)))
    for m in _DAY_MONTH.finditer(text):
        if (mo := _MONTHS.get(m.group(2).lower())) and 1 <= int(m.group(1)) <= 31:
            add(m, int(m.group(3)), mo, int(m.group(1)))
    for m in _MONTH_DAY.finditer(text):
        if (mo := _MONTHS.get(m.group(1).lower())) and 1 <= int(m.group(2)) <= 31:
            add(m, int(m.group(3)), mo, int(m.group(2)))
    for m in _MONTH_YEAR.finditer(text):
        if (mo := _MONTHS.get(m.group(1).lower())) and m.group(1)[0].isupper():
            add(m, int(m.group(2)), mo)
    for m in _DECADE.finditer(text):
        add(m, int(m.group(1) + m.group(2) + "0"), -1)  # month -1: the whole decade
    for m in _ORDINAL_CENTURY.finditer(text):
        add(m, (int(m.group(1)) - 1) * 100, -100)  # month -100: the whole century
    for m in _YEAR.finditer(text):
        add(m, int(m.group(1)))
    return out


def _numbers(text: str) -> list[Slot]:
    out = [_quantity(text, m.start(), m.end(), _digits(m), m.group(1), _step(m)) for m in _NUMBER.finditer(text)]
    taken = [(s.start, s.end) for s in out]
    return out + [s for s in _number_words(text) if not _overlaps(s, taken)]


def _digits(m: re.Match) -> float:
    whole = re.sub(r"[,\u00a0 ]", "", m.group(2))
    return float(f"{whole}.{m.group(3)}") if m.group(3) else float(whole)


def _step(m: re.Match) -> float:
    """The precision a number is given at: "8.85" to 0.01, "276" to 1, "728,000" to 1,000 (a
    round number is read to two significant digits at least: "5,000" to 100)."""
    if m.group(3):
        return 10.0 ** -len(m.group(3))
    return _round_step(re.sub(r"[,\u00a0 ]", "", m.group(2)))


def _round_step(digits: str) -> float:
    significant = digits.rstrip("0") or "0"
    zeros = len(digits) - len(significant)
    return 10.0 ** max(0, zeros - max(0, 2 - len(significant.lstrip("0"))))


def _quantity(text: str, start: int, end: int, amount: float, currency: str | None, step: float = 1.0) -> Slot:
    """The number with what follows it: a scale word ("3.5 million"), then a unit ("km", "euros").
    Its value is (amount, dimension, precision), amount and precision in the dimension's base unit."""
    rest = text[end:]
    # "3.5 million"; "$3.5m" and "5k" only with a currency or glued on ("8,849 m" is metres)
    scale = re.match(r"\s*(hundred|thousand|million|billion|trillion)\b", rest, re.I) or (
        re.match(r"(k|mn|m|bn|b)\b", rest, re.I) if currency or re.match(r"[kK]\b", rest) else None)
    if scale:
        word = scale.group(1).lower()
        scaled = SCALES.get(word, {"k": 1e3, "m": 1e6, "mn": 1e6, "b": 1e9, "bn": 1e9}.get(word, 1))
        amount, step = amount * scaled, step * scaled
        end += scale.end()
        rest = text[end:]
    unit_match = re.match(r"(?:\s*|-)(km/h|°[cf]|%|[a-zA-Z]+)", rest)  # "3.5-inch" too
    dim = "count"
    if currency:
        dim, factor = _UNITS[currency]
        amount, step = amount * factor, step * factor
    elif unit_match and unit_match.group(1).lower() in _UNITS:
        dim, factor = _UNITS[unit_match.group(1).lower()]
        amount, step = amount * factor, step * factor
        end += unit_match.end()
    return Slot("number", text[start:end].strip(), start, end, (amount, dim, step))


# a whole run of ASCII letters that is a number word, in any case (re.A: no Unicode case folding)
_ANY_NUMBER_WORD = re.compile(rf"(?<![A-Za-z])(?:{'|'.join([*_NUMBER_WORDS, *SCALES])})(?![A-Za-z])", re.I | re.A)


def _number_words(text: str) -> list[Slot]:
    """Spelled-out numbers of two words or more, or with a unit ("eight thousand ... metres",
    "three hours"); a lone "one" is usually not a quantity."""
    out: list[Slot] = []
    if not _ANY_NUMBER_WORD.search(text):
        return out
    spans = [(m.start(), m.end(), m.group(0).lower()) for m in re.finditer(r"[A-Za-z]+", text)]
    i = 0
    while i < len(spans):
        j = i
        while j < len(spans) and (spans[j][2] in _NUMBER_WORDS or spans[j][2] in SCALES or (j > i and spans[j][2] == "and")):
            j += 1
        while j > i and spans[j - 1][2] == "and":
            j -= 1
        used = sum(word != "and" for _, _, word in spans[i:j])
        if used:
            value = spelled_number(" ".join(word for _, _, word in spans[i:j])) or 0.0
            slot = _quantity(text, spans[i][0], spans[j - 1][1], value, None, _round_step(str(int(value))))
            if used >= 2 or slot.value[1] != "count":
                out.append(slot)
            i = j
        else:
            i += 1
    return out


def spelled_number(phrase: str) -> float | None:
    """The value of a number said in words ("two thousand", "twenty-five", "a hundred and five");
    None when a word of `phrase` is not part of a number."""
    total = current = 0.0
    used = False
    for word in re.findall(r"[a-z]+", phrase.lower()):
        if word in _NUMBER_WORDS:
            current += _NUMBER_WORDS[word]
        elif word in SCALES:
            current = max(current, 1) * SCALES[word]
            if SCALES[word] >= 1000:
                total, current = total + current, 0.0
        elif word not in ("and", "a", "an"):
            return None
        used = used or word not in ("and", "a", "an")
    return total + current if used else None


def _names(text: str) -> list[Slot]:
    """Runs of capitalised words (joined by "of", "de", "and"...), quoted titles, acronyms. A
    sentence's first word counts only when it is not a function word ("The", "In")."""
    out: list[Slot] = []
    for m in re.finditer(r"[\"“]([^\"”]{2,80})[\"”]", text):
        out.append(Slot("name", m.group(1), m.start(1), m.end(1), name_key(m.group(1))))
    tokens = _tokens(text)
    run: list[re.Match] = []
    for tok in tokens + [None]:
        joined = tok is not None and (not run or text[run[-1].end():tok.start()].isspace() and not _ends_sentence(text, run[-1]))
        if joined and _is_name_word(tok, text, run):
            run.append(tok)
            continue
        _close_run(run, text, out)
        run = [tok] if tok is not None and _is_name_word(tok, text, []) else []
    return out


_TOKEN = re.compile(r"[\w][\w'’.\-]*")
# a missing space between two texts ("...starring Ophelia LovibondNo Strings Attached", "...was
# released 20112011 was"): a lower-case run then a capital is where one word ended and the next began
_GLUED = re.compile(r"(?<=[a-z]{4})(?=[A-Z][a-z])|(?<=[a-z]{3})(?=\d{4}\b)|(?<=\d)(?=[A-Z][a-z])")


def _tokens(text: str) -> list[re.Match]:
    # the glue is found in one pass over the text: each cut lies between two word characters, so
    # inside a token, and what its look-arounds see there is the token's own characters
    cuts = [m.start() for m in _GLUED.finditer(text)]
    if not cuts:
        return list(_TOKEN.finditer(text))
    out = []
    for tok in _TOKEN.finditer(text):
        inside = [c for c in cuts if tok.start() < c < tok.end()]
        if not inside:
            out.append(tok)
            continue
        bounds = [tok.start(), *inside, tok.end()]
        out += [_TOKEN.match(text, a, b) for a, b in zip(bounds, bounds[1:])]
    return [t for t in out if t]


def _ends_sentence(text: str, tok: re.Match) -> bool:
    """A name word with a full stop that ends its sentence ("... the Eiffel Tower. Gustave Eiffel
    built it"), not an initial or abbreviation ("J. K. Rowling", "D.C. Cab", "St. Louis")."""
    return tok.group(0).endswith(".") and not abbreviation_at(text, tok.end())


def _close_run(run: list, text: str, out: list[Slot]) -> None:
    while run and run[-1].group(0).lower() in _CONNECTORS:
        run.pop()
    if run:
        start, end = run[0].start(), run[-1].end()
        phrase = text[start:end].rstrip(".")
        if not any(s.start <= start and end <= s.end for s in out) and name_key(phrase):
            out.append(Slot("name", phrase, start, start + len(phrase), name_key(phrase)))


def _is_name_word(tok: re.Match, text: str, run: list) -> bool:
    word = tok.group(0)
    if run and word.lower() in _CONNECTORS:
        return True
    if not _CAPITAL.match(word):
        return False
    if not run and (word.lower() in FUNCTION_WORDS or sentence_start(text, tok.start())
                    and (_inflected(word) and not _SPACE_CAPITAL.match(text, tok.end()) or _PREPOSITION_NEXT.match(text, tok.end()))):
        return False  # "The ...", "In 1889 ...", "Completed in 1889, ...", "Born on 3 May ..."
    return not word.isdigit()


_SPACE_CAPITAL = re.compile(r"\s+[A-Z]")
# a sentence's first word followed by a preposition is a participle or adverb ("Born on", "Built in",
# "Once in"); a name opening a sentence is followed by its verb or the rest of the name ("Guitars for Wounded Warriors")
_PREPOSITION_NEXT = re.compile(r"\s+(?:on|in|at|by|as|into|under|after|before|during|with|from|for|to)\s+(?![A-Z])")


def sentence_start(text: str, at: int) -> bool:
    """Only white space, or a sentence end, quote or bracket, before `at`."""
    i = at - 1
    while i >= 0 and text[i].isspace():
        i -= 1
    return i < 0 or text[i] in ".!?:;\"“(\n"


def _inflected(word: str) -> bool:
    return word.lower().endswith(("ed", "ing", "ly"))


@cache_short(maxsize=65536, max_chars=200)  # a long token (a base64 blob) is not kept
def name_key(phrase: str) -> tuple[str, ...]:
    """The folded words of a name that identify it (connectors and function words dropped)."""
    return tuple(w for w in re.findall(r"\w+", fold(phrase)) if w not in _CONNECTORS and w not in FUNCTION_WORDS)


# ----------------------------------------------------------------------------- agreement


def agree(a: Slot, b: Slot) -> bool:
    """Could both slots name the same thing? Dates agree at the precision both give; numbers of
    one dimension within rounding; names when one's words are all in the other (or initials)."""
    if a.kind == "date" or b.kind == "date":
        return a.kind == b.kind and _dates_agree(a.value, b.value) or _year_number(a, b)
    if a.kind == "number" and b.kind == "number":
        return _numbers_agree(a.value, b.value)
    if a.kind == "name" and b.kind == "name":
        return names_agree(a.value, b.value)
    return False


def _year_number(a: Slot, b: Slot) -> bool:
    """"in 1889" read as a date and "1889" read as a count are the same year."""
    date, number = (a, b) if a.kind == "date" else (b, a)
    return number.kind == "number" and number.value[1] == "count" and number.value[0] == date.value[0]


def _dates_agree(x: tuple, y: tuple) -> bool:
    (y1, m1, d1), (y2, m2, d2) = x, y
    for span in (-1, -100):  # a decade or century holds any year inside it
        width = 10 if span == -1 else 100
        if m1 == span:
            return y1 <= y2 < y1 + width + (1 if span == -100 else 0)
        if m2 == span:
            return y2 <= y1 < y2 + width + (1 if span == -100 else 0)
    return y1 == y2 and (not m1 or not m2 or m1 == m2) and (not d1 or not d2 or d1 == d2)


def _numbers_agree(x: tuple, y: tuple) -> bool:
    """Equal at the precision the less precise one is given at: "8.85 km" is 8,849 m rounded,
    "29,032 ft" is 8,849 m converted; 276 is not 275, 728,000 is not 722,664."""
    (a, dim_a), (b, dim_b) = x[:2], y[:2]
    if dim_a != dim_b and "count" not in (dim_a, dim_b):
        return False
    if a == b:
        return True
    if len(x) > 2 and len(y) > 2:
        return abs(a - b) <= 0.5 * max(x[2], y[2]) * 1.001 + 1e-9
    big = max(abs(a), abs(b))
    return big > 0 and abs(a - b) / big <= 0.015


def names_agree(x: tuple[str, ...], y: tuple[str, ...]) -> bool:
    if not x or not y:
        return False
    short, long = (x, y) if len(x) <= len(y) else (y, x)
    if all(any(_word_match(w, v) for v in long) for w in short):
        return True
    initials = "".join(w[0] for w in long)
    return len(short) == 1 and len(short[0]) >= 2 and short[0] == initials


def _word_match(a: str, b: str) -> bool:
    """Same word, or the same stem ("India" / "Indian", "Paris" / "Parisian")."""
    if a == b:
        return True
    n = min(len(a), len(b))
    if n >= 4 and a[:n] == b[:n] and max(len(a), len(b)) - n <= 3 and n >= max(len(a), len(b)) - 3:
        return True
    return n >= 5 and a[0] == b[0] and _one_edit(a, b)


def _one_edit(a: str, b: str) -> bool:
    """A misspelling: one letter added, dropped, changed or two swapped ("Thorne" / "Throne",
    "Siddhartha" / "Siddharta", "Johansson" / "Johanson")."""
    if abs(len(a) - len(b)) > 1:
        return False
    if len(a) == len(b):
        diff = [i for i in range(len(a)) if a[i] != b[i]]
        return len(diff) == 1 or len(diff) == 2 and diff[1] == diff[0] + 1 and a[diff[0]] == b[diff[1]] and a[diff[1]] == b[diff[0]]
    short, long = (a, b) if len(a) < len(b) else (b, a)
    i = next((k for k in range(len(short)) if short[k] != long[k]), len(short))
    return short[i:] == long[i + 1:]
