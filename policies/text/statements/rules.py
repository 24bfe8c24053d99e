"""Extraction rules for preferences and facts; `RULES` lists every rule, values included.

Each rule reads one sentence and yields the statements it finds. Rules aim at precision: a
value counts only when the user states it for themselves, now (see build.stated),
because a false clash costs the user a wrong edit or a pointless question.
"""

from __future__ import annotations

import re
from typing import Iterator

from . import person
from .build import place_at, scoped, stated, stmt
from .lexicon import LANGUAGES
from .model import Sentence, Statement
from .values import VALUE_RULES

# ----------------------------------------------------------------------------- price level (tier)

_TIERS = (
    ("budget", re.compile(
        r"\bbudget[- ](?:hotel|hostel|accommodation|option|place|stay|room|airline|flight|travel|friendly|end|"
        r"choice|lodging|motel|inn|car|rental|restaurant|eats?|stuff)s?\b|\bon a (?:tight |strict |small |limited |shoestring )?budget\b|"
        r"\b(?:tight|low|small|limited|shoestring) budget\b|\bbudget is tight\b|\b(?:go|going|keep it|something|stick to|stay) budget\b|"
        r"\bcheap(?:er|est)?\b|\baffordable\b|\binexpensive\b|\blow[- ]cost\b|\beconomical\b|\bno[- ]frills\b|\bbargain\b|"
        r"\bhostels?\b|\bbackpacker\b|\b(?:one|two|1|2)[- ]?stars?\b|\bfrugal\b|\bmoney is tight\b")),
    ("mid-range", re.compile(
        r"\bmid[- ]?range\b|\bmoderately priced\b|\bmid[- ]priced\b|\b(?:three|3)[- ]?stars?\b|\breasonably priced\b")),
    ("luxury", re.compile(
        r"\bluxur(?:y|ious)\b|\bupscale\b|\bhigh[- ]end\b|\bpremium(?! economy)\b|\bdeluxe\b|\bfancy\b|\bposh\b|"
        r"\blavish\b|\bswanky\b|\bopulent\b|\b(?:four|five|4|5)[- ]?stars?\b|\bsplurge\b|"
        r"\bmoney is no object\b|\bspare no expense\b|\bno expense spared\b|\btreat (?:ourselves|myself)\b")),
)
_DOMAINS = (
    ("hotel", re.compile(r"\b(?:hotels?|hostels?|accommodations?|lodging|place to stay|stay|staying|resorts?|motels?|"
                         r"inns?|b&b|bnb|airbnb|rooms?|guest ?houses?|villas?|apartments?|suites?|spa)\b")),
    ("restaurant", re.compile(r"\b(?:restaurants?|dinners?|lunch|breakfast|brunch|eat|eats|food|dining|meals?|cafes?|bistros?)\b")),
    ("flight", re.compile(r"\b(?:flights?|fly|flying|airlines?|airfares?|planes?|tickets?)\b")),
    ("car", re.compile(r"\b(?:cars?|rentals?|vehicles?|taxis?)\b")),
)


def _domain(s: Sentence, pos: int, match: str) -> str:
    """What the price level is about: the nearest domain word, in the same clause if there is one."""
    if "hostel" in match or "star" in match:
        return "hotel"
    c0, c1 = s.clause(pos)
    for lo, hi in ((c0, c1), (0, len(s.lower))):
        best, distance = "", 10_000
        for name, pattern in _DOMAINS:
            for m in pattern.finditer(s.lower, lo, hi):
                d = abs(m.start() - pos)
                if d < distance:
                    best, distance = name, d
        if best:
            return best
    return ""  # decided by the conversation (clash_detect.inherit_qualifiers)


def tier(s: Sentence) -> Iterator[Statement]:
    for value, pattern in _TIERS:
        for m in pattern.finditer(s.lower):
            if not stated(s, m.start()):
                continue
            domain = _domain(s, m.start(), m.group(0))
            label = f"{domain} preference" if domain else "price level"
            yield stmt(s, scoped(f"tier.{domain}", s), "preference", value, label, m.start(), m.end(), substitutable=False)


# ----------------------------------------------------------------------------- travel preferences

_CLASSES = re.compile(
    r"\b(premium economy)\b|\b(?:fly(?:ing)? |in |book |the )?(economy|coach)(?: class| cabin| seat| ticket| fare)?\b|"
    r"\b(business)[- ]class\b|\bfly(?:ing)? (business|first)\b|\b(business) (?:seat|cabin|fare|ticket)s?\b|\b(first)[- ]class\b|"
    r"\b(?:class|cabin)\s*:\s*(economy|business|first|premium economy)\b"
)
_CAR_CONTEXT = re.compile(r"\b(?:cars?|rentals?|vehicles?)\b")
_FLIGHT_CONTEXT = re.compile(r"\b(?:fly|flying|flights?|class|cabin|seats?|tickets?|fares?|airlines?|plane)\b")


def flight_class(s: Sentence) -> Iterator[Statement]:
    for m in _CLASSES.finditer(s.lower):
        value = next(g for g in m.groups() if g)
        if value == "coach":
            value = "economy"
        if value == "economy" and (_CAR_CONTEXT.search(s.lower) or not (_FLIGHT_CONTEXT.search(s.lower) or s.elliptical)):
            continue
        if stated(s, m.start()):
            start = m.start(m.lastindex or 0)
            yield stmt(s, scoped("flight.class", s), "preference", value, "flight class", start, m.end(m.lastindex or 0))


_SEATS = re.compile(
    r"\b(window|aisle|middle)(?:[- ]seats?)\b|\bseat (?:by|near|next to|at|on) the (window|aisle)\b|"
    r"\bsit (?:by|near|next to|at|on) the (window|aisle)\b|\bseat\s*:\s*(window|aisle|middle)\b|"
    r"\bseats?\s+(?:number\s+)?(\d{1,2}[a-k])\b"
)
_BARE_SEAT = re.compile(r"\b(window|aisle)\b")


def seat(s: Sentence) -> Iterator[Statement]:
    found = list(_SEATS.finditer(s.lower))
    if not found and (s.elliptical or re.search(r"\b(?:seat|sit)\b", s.lower)):
        found = list(_BARE_SEAT.finditer(s.lower))
    for m in found:
        group = m.lastindex or 0
        if stated(s, m.start()):
            value = m.group(group)
            yield stmt(s, scoped("seat", s), "value", value.upper() if value[0].isdigit() else value, "seat",
                       m.start(group), m.end(group))


_DISH = (r"(vegetarian|vegan|kosher|halal|gluten[- ]free|chicken|beef|fish|pasta|salmon|steak|lamb|pork|risotto|"
         r"salad|lasagna|curry|tofu|seafood|shrimp|duck|burger|pizza|soup|omelett?e|noodles|rice|cod|veggie)")
_MEALS = re.compile(
    rf"\b(?:the\s+)?{_DISH}\s+(?:meal|dish|option|entr[eé]e|main|plate)s?\b|"
    rf"\b(?:i'll have|i will have|i'd have|i'll take|i'd take|i'll go with|i'd like|i would like|we'll have|"
    rf"make (?:it|mine)|switch (?:\w+ ){{0,2}}to|change (?:\w+ ){{0,2}}to|give me)\s+the\s+{_DISH}\b|\bmeal\s*:\s*{_DISH}\b"
)


def meal(s: Sentence) -> Iterator[Statement]:
    for m in _MEALS.finditer(s.lower):
        group = next(i for i in range(1, 4) if m.group(i))
        if stated(s, m.start()):
            value = m.group(group).replace(" ", "-")
            yield stmt(s, scoped("meal", s), "value", value, "meal choice", m.start(group), m.end(group))


_DIETS = re.compile(
    r"\b(?:i'm|i am|im|we're|we are)\s+(?:(?:a|an|strictly|fully|now|still|actually|also|not|no longer)\s+)*"
    r"(vegetarian|vegan|pescatarian|pescetarian|omnivore|carnivore|meat[- ]eater)\b"
    r"|\bi\s+(?:do not|don't|dont|never)\s+eat\s+(?:any\s+)?(meat)\b"
    r"|\b(?:i|we)\s+(?:now\s+|do\s+|also\s+|actually\s+)?eat\s+(meat|everything|anything|pretty much (?:anything|everything))\b"
    r"|\bdiet\s*:\s*(vegetarian|vegan|pescatarian|omnivore)\b"
)
_DIET_NAMES = {"pescetarian": "pescatarian", "carnivore": "omnivore", "meat-eater": "omnivore", "meat eater": "omnivore"}


def diet(s: Sentence) -> Iterator[Statement]:
    for m in _DIETS.finditer(s.lower):
        if not stated(s, m.start()):
            continue
        if m.group(2):  # "I don't eat meat": vegetarian, stated positively
            yield stmt(s, "diet", "preference", "vegetarian", "diet", m.start(2), m.end(2), negated=False, substitutable=False)
            continue
        group = 1 if m.group(1) else 3 if m.group(3) else 4
        raw = m.group(group)
        value = "omnivore" if group == 3 else _DIET_NAMES.get(raw, raw)
        yield stmt(s, "diet", "preference", value, "diet", m.start(group), m.end(group), substitutable=group != 3)


_ROOMS = re.compile(r"\b(single|double|twin|triple|family|studio)\s+rooms?\b|\b(suite)s?\b|\broom(?: type)?\s*:\s*(single|double|twin|triple|suite)\b")
_HOTEL_CONTEXT = re.compile(r"\b(?:hotels?|rooms?|stay|staying|book|reserve|nights?|upgrade|resort|honeymoon)\b")
_BEDS = re.compile(r"\b(king|queen)(?:[- ]size[d]?)?\s+(?:bed|room)s?\b")
_SMOKING = re.compile(r"\b(non[- ]?smoking|no[- ]smoking|smoking)\s+(?:room|floor)s?\b")


def room(s: Sentence) -> Iterator[Statement]:
    for m in _ROOMS.finditer(s.lower):
        group = m.lastindex or 0
        if m.group(2) and not _HOTEL_CONTEXT.search(s.lower):
            continue  # "a suite of tools"
        if stated(s, m.start()):  # "a double room for my parents" is theirs
            yield stmt(s, scoped("room.type", s), "value", m.group(group), "room type", m.start(group), m.end(group))
    for m in _BEDS.finditer(s.lower):
        if stated(s, m.start()):
            yield stmt(s, "room.bed", "value", m.group(1), "bed size", m.start(1), m.end(1))
    for m in _SMOKING.finditer(s.lower):
        if stated(s, m.start(), own=False):
            value = "smoking" if m.group(1) == "smoking" else "non-smoking"
            yield stmt(s, "room.smoking", "preference", value, "smoking preference", m.start(1), m.end(1))


_MODES = re.compile(
    r"\b(?:take|taking)\s+(?:the|a)\s+(train|bus|ferry|plane|flight|coach)\b|\bby\s+(train|rail|bus|coach|car|plane|air|ferry|boat)\b|"
    r"\b(fly|drive|driving)\b(?=\s*(?:$|[,.!;?]|to\b|there\b|instead\b|up\b|down\b|from\b|across\b|around\b|through\b|"
    r"back\b|home\b|ourselves\b|myself\b|rather\b|all the way\b|direct\b|out\b|in\b|if\b|since\b|because\b|this time\b))|\b(road[- ]trip)\b|\b(?:prefer|rather)\s+(?:to\s+)?(?:take\s+)?(?:the\s+)?(train|bus|plane|car|ferry)\b"
)
_MODE_NAMES = {"rail": "train", "coach": "bus", "drive": "car", "driving": "car", "road trip": "car", "road-trip": "car",
               "air": "plane", "flight": "plane", "fly": "plane", "ferry": "boat"}
_CHOICE = re.compile(
    r"\b(?:rather|prefer(?:s|red|ring)?|want|wanna|would like|'d like|like to|let's|lets|we'll|i'll|decided|decide|"
    r"choose|go with|plan to|planning to|stick with|opt for|instead)\b"
)


def transport(s: Sentence) -> Iterator[Statement]:
    for m in _MODES.finditer(s.lower):
        group = m.lastindex or 0
        if not _CHOICE.search(s.lower[: m.start(group)]) or not stated(s, m.start()):
            continue
        value = _MODE_NAMES.get(m.group(group), m.group(group))
        slot = scoped("transport", s)
        to = re.match(r"\s+to\s+", s.lower[m.end():])
        place = place_at(s, m.end() + to.end()) if to else None
        if place:
            slot = f"{slot}>{place[0]}"
        yield stmt(s, slot, "preference", value, "way of travelling", m.start(group), m.end(group))


_TIMES_OF_DAY = re.compile(
    r"\b(morning|afternoon|evening|night|red[- ]?eye|overnight|early|late)[- ](?:flights?|departures?)\b|"
    r"\bfly(?:ing)? (?:out )?in the (morning|afternoon|evening)\b"
)
_DAYPART = {"red-eye": "night", "redeye": "night", "red eye": "night", "overnight": "night", "early": "morning", "late": "evening"}


def flight_time(s: Sentence) -> Iterator[Statement]:
    for m in _TIMES_OF_DAY.finditer(s.lower):
        group = m.lastindex or 0
        if stated(s, m.start()):
            value = _DAYPART.get(m.group(group), m.group(group))
            yield stmt(s, scoped("flight.daypart", s), "preference", value, "time of day for flights", m.start(group), m.end(group))


# ----------------------------------------------------------------------------- how to answer

_LANGUAGE = "(" + "|".join(sorted(LANGUAGES)) + ")"
_LANGUAGES = re.compile(
    rf"\b(?:answer|reply|respond|write|speak|talk|communicate|chat|converse|answers|replies|responses|explain)\b"
    rf"(?:\s+[\w']+){{0,3}}?\s+in\s+{_LANGUAGE}\b|^\W*(?:(?:please|and)\s+)?in\s+{_LANGUAGE}(?:\s+please)?\W*$|"
    rf"\bswitch\s+to\s+{_LANGUAGE}\b|\blanguage\s*:\s*{_LANGUAGE}\b"
)


def language(s: Sentence) -> Iterator[Statement]:
    for m in _LANGUAGES.finditer(s.lower):
        group = m.lastindex or 0
        if stated(s, m.start()):
            yield stmt(s, "answer.language", "preference", m.group(group), "reply language", m.start(group), m.end(group))


_LENGTHS = (
    ("short", re.compile(
        r"\bkeep (?:it|them|things|(?:your |the |my )?(?:answers|responses|replies|explanations))\s+(?:short|brief|concise|succinct)\b|"
        r"\bbe (?:brief|concise|succinct|short)\b|\b(?:short|brief|concise|succinct)(?:er)? (?:answers|responses|replies|explanations)\b|"
        r"\bone[- ]liners? (?:only|please)\b|\bkeep it (?:to the point|brief)\b")),
    ("detailed", re.compile(
        r"\b(?:detailed|in[- ]depth|thorough|long|longer|comprehensive|elaborate|extensive|step[- ]by[- ]step) "
        r"(?:answers|responses|replies|explanations)\b|\bmore detail(?:ed)?\b|\bexplain (?:every|each) step\b|"
        r"\bgo into (?:more )?detail\b|\bbe (?:detailed|thorough)\b")),
)
_TONES = re.compile(
    r"\b(?:be|use a|in a|keep it|more|sound|stay)\s+(?:\w+\s+)?(formal|casual|informal|friendly|relaxed|professional|laid[- ]back)\b|"
    r"\b(formal|casual|informal|professional|friendly|relaxed)\s+(?:tone|style|register|language)\b"
)
_TONE_NAMES = {"professional": "formal", "informal": "casual", "friendly": "casual", "relaxed": "casual",
               "laid-back": "casual", "laid back": "casual"}


def answer_style(s: Sentence) -> Iterator[Statement]:
    for value, pattern in _LENGTHS:
        for m in pattern.finditer(s.lower):
            if stated(s, m.start()):
                yield stmt(s, "answer.length", "preference", value, "answer length", m.start(), m.end(), substitutable=False)
    for m in _TONES.finditer(s.lower):
        group = m.lastindex or 0
        if stated(s, m.start()):
            value = _TONE_NAMES.get(m.group(group), m.group(group))
            yield stmt(s, "answer.tone", "preference", value, "tone", m.start(group), m.end(group))


# ----------------------------------------------------------------------------- likes

_LIKES = re.compile(
    r"\b(?:i|we)\s+(?:(?:really|absolutely|truly|also|do|just|totally|actually|still|genuinely)\s+)*"
    r"(?P<neg>(?:don't|do not|dont|never|no longer)\s+(?:really\s+|particularly\s+|much\s+)?)?"
    r"(?P<verb>love|like|enjoy|adore|hate|dislike|detest|loathe|can't stand|cannot stand|can't bear|can't stomach)\s+(?P<obj>[^,.;!?]+)"
    r"|\b(?:i'm|i am|im|we're|we are)\s+(?P<fneg>not\s+)?(?:(?:a|really|so|totally|very|big|huge|massive|really big)\s+)*"
    r"(?P<fan>fans?\s+of|into)\s+(?P<fobj>[^,.;!?]+)"
)
_OBJECT_END = re.compile(r"\b(?:but|and|because|so|when|if|although|though|as|which|that|since|while|especially|unless|or|with)\b")
_OBJECT_TAIL = re.compile(r"\s+(?:too|as well|either|very much|a lot|much|anymore|any more|these days|now|at all|really|though|"
                          r"the most|more|so much|in general|generally)$")
_OBJECT_PRONOUN = {"it", "that", "this", "them", "those", "these", "him", "her", "you", "what", "how", "when", "where", "your",
                   "are", "is", "was", "were", "be", "being", "been", "can", "will", "would"}
_DISLIKE = {"hate", "dislike", "detest", "loathe", "can't stand", "cannot stand", "can't bear", "can't stomach"}


def _object(raw: str) -> str:
    text = _OBJECT_END.split(raw, 1)[0].strip()
    previous = None
    while previous != text:
        previous, text = text, _OBJECT_TAIL.sub("", text).strip()
    words = [w.strip("\"'()") for w in text.split() if w not in ("the", "a", "an", "some", "any", "most", "all", "to")]
    if not words or len(words) > 4 or words[0] in _OBJECT_PRONOUN:
        return ""
    last = words[-1]
    if len(last) > 3 and last.endswith("s") and not last.endswith(("ss", "us", "is")):
        words[-1] = last[:-1]
    return " ".join(words)


def likes(s: Sentence) -> Iterator[Statement]:
    for m in _LIKES.finditer(s.lower):
        fan = m.group("fan") is not None
        obj_group = "fobj" if fan else "obj"
        obj = _object(m.group(obj_group))
        if not obj or not stated(s, m.start()):
            continue
        dislikes = (m.group("verb") in _DISLIKE) if not fan else False
        negated = bool(m.group("fneg" if fan else "neg")) != dislikes
        start = m.start(obj_group)
        yield stmt(s, f"like.{obj}", "preference", "like", f"opinion of {obj}", start, start + len(m.group(obj_group).rstrip()),
                   display=obj, negated=negated, substitutable=False)


_FAVOURITES = re.compile(
    r"\bmy\s+(?:favou?rite|preferred)\s+([a-z]+(?:\s+[a-z]+)?)\s+is\s+(?:(?:now|still|actually|definitely)\s+)?(?:the\s+|an?\s+)?"
    r"([^,.;!?]+?)(?=\s*(?:$|[,.;!?]|\band\b|\bbut\b|\bbecause\b|\bnow\b))"
)


def favourites(s: Sentence) -> Iterator[Statement]:
    for m in _FAVOURITES.finditer(s.lower):
        thing, value = m.group(1), m.group(2).strip()
        if len(value.split()) <= 5 and stated(s, m.start(), past=False):
            yield stmt(s, f"favourite.{thing}", "preference", value, f"favourite {thing}", m.start(2), m.start(2) + len(value))


RULES = (tier, flight_class, seat, meal, diet, room, transport, flight_time, language, answer_style, likes,
         person.location, person.name, person.age, person.work, favourites, *VALUE_RULES)
