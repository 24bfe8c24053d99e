"""Word lists for statement extraction: places, languages, professions, number words, cue words.

Kept apart from the rules so the rules read as grammar, and so a deployment can see at a glance
what vocabulary the local clash detector knows.
"""

from __future__ import annotations

import re

from ..slots import SPELLED_NUMBER, spelled_number

# ----------------------------------------------------------------------------- places

# city → (country, region or ""): containment makes "I'm in the UK" and "I'm in London" compatible.
CITIES: dict[str, tuple[str, str]] = {
    "new york": ("united states", "new york"), "los angeles": ("united states", "california"),
    "san francisco": ("united states", "california"), "san diego": ("united states", "california"),
    "chicago": ("united states", "illinois"), "boston": ("united states", "massachusetts"),
    "seattle": ("united states", "washington"), "portland": ("united states", "oregon"),
    "denver": ("united states", "colorado"), "miami": ("united states", "florida"),
    "orlando": ("united states", "florida"), "austin": ("united states", "texas"),
    "dallas": ("united states", "texas"), "houston": ("united states", "texas"),
    "atlanta": ("united states", "georgia"), "washington": ("united states", ""),
    "las vegas": ("united states", "nevada"), "phoenix": ("united states", "arizona"),
    "philadelphia": ("united states", "pennsylvania"), "detroit": ("united states", "michigan"),
    "new orleans": ("united states", "louisiana"), "nashville": ("united states", "tennessee"),
    "honolulu": ("united states", "hawaii"), "toronto": ("canada", "ontario"),
    "vancouver": ("canada", "british columbia"), "montreal": ("canada", "quebec"),
    "calgary": ("canada", "alberta"), "ottawa": ("canada", "ontario"),
    "mexico city": ("mexico", ""), "cancun": ("mexico", ""), "london": ("united kingdom", "england"),
    "manchester": ("united kingdom", "england"), "liverpool": ("united kingdom", "england"),
    "edinburgh": ("united kingdom", "scotland"), "glasgow": ("united kingdom", "scotland"),
    "dublin": ("ireland", ""), "paris": ("france", ""), "lyon": ("france", ""), "nice": ("france", ""),
    "marseille": ("france", ""), "bordeaux": ("france", ""), "berlin": ("germany", ""),
    "munich": ("germany", ""), "hamburg": ("germany", ""), "frankfurt": ("germany", ""),
    "cologne": ("germany", ""), "madrid": ("spain", ""), "barcelona": ("spain", ""),
    "seville": ("spain", ""), "valencia": ("spain", ""), "lisbon": ("portugal", ""),
    "porto": ("portugal", ""), "rome": ("italy", ""), "milan": ("italy", ""), "florence": ("italy", ""),
    "venice": ("italy", ""), "naples": ("italy", ""), "amsterdam": ("netherlands", ""),
    "rotterdam": ("netherlands", ""), "brussels": ("belgium", ""), "vienna": ("austria", ""),
    "zurich": ("switzerland", ""), "geneva": ("switzerland", ""), "prague": ("czech republic", ""),
    "budapest": ("hungary", ""), "warsaw": ("poland", ""), "krakow": ("poland", ""),
    "copenhagen": ("denmark", ""), "stockholm": ("sweden", ""), "oslo": ("norway", ""),
    "bergen": ("norway", ""), "helsinki": ("finland", ""), "athens": ("greece", ""),
    "istanbul": ("turkey", ""), "moscow": ("russia", ""), "dubai": ("united arab emirates", ""),
    "abu dhabi": ("united arab emirates", ""), "doha": ("qatar", ""), "cairo": ("egypt", ""),
    "marrakech": ("morocco", ""), "cape town": ("south africa", ""), "johannesburg": ("south africa", ""),
    "nairobi": ("kenya", ""), "lagos": ("nigeria", ""), "tokyo": ("japan", ""), "osaka": ("japan", ""),
    "kyoto": ("japan", ""), "seoul": ("south korea", ""), "beijing": ("china", ""),
    "shanghai": ("china", ""), "hong kong": ("china", ""), "taipei": ("taiwan", ""),
    "singapore": ("singapore", ""), "bangkok": ("thailand", ""), "kuala lumpur": ("malaysia", ""),
    "jakarta": ("indonesia", ""), "bali": ("indonesia", ""), "manila": ("philippines", ""),
    "hanoi": ("vietnam", ""), "ho chi minh city": ("vietnam", ""), "delhi": ("india", ""),
    "new delhi": ("india", ""), "mumbai": ("india", ""), "bangalore": ("india", ""),
    "sydney": ("australia", "new south wales"), "melbourne": ("australia", "victoria"),
    "brisbane": ("australia", "queensland"), "perth": ("australia", "western australia"),
    "auckland": ("new zealand", ""), "wellington": ("new zealand", ""),
    "sao paulo": ("brazil", ""), "rio de janeiro": ("brazil", ""), "buenos aires": ("argentina", ""),
    "lima": ("peru", ""), "bogota": ("colombia", ""), "santiago": ("chile", ""), "reykjavik": ("iceland", ""),
}

COUNTRIES = {
    "united states", "canada", "mexico", "united kingdom", "ireland", "france", "germany", "spain",
    "portugal", "italy", "netherlands", "belgium", "austria", "switzerland", "czech republic",
    "hungary", "poland", "denmark", "sweden", "norway", "finland", "greece", "turkey", "russia",
    "united arab emirates", "qatar", "egypt", "morocco", "south africa", "kenya", "nigeria", "japan",
    "south korea", "china", "taiwan", "singapore", "thailand", "malaysia", "indonesia", "philippines",
    "vietnam", "india", "australia", "new zealand", "brazil", "argentina", "peru", "colombia", "chile",
    "iceland", "scotland", "england", "wales",
    "california", "texas", "florida", "illinois", "massachusetts", "oregon", "colorado", "georgia",
    "nevada", "arizona", "pennsylvania", "michigan", "louisiana", "tennessee", "hawaii", "ontario",
    "quebec", "british columbia", "alberta",
}

PLACE_ALIASES = {
    "nyc": "new york", "new york city": "new york", "ny": "new york", "manhattan": "new york",
    "brooklyn": "new york", "la": "los angeles", "sf": "san francisco", "dc": "washington",
    "washington dc": "washington", "washington d.c.": "washington", "uk": "united kingdom",
    "the uk": "united kingdom", "britain": "united kingdom", "great britain": "united kingdom",
    "us": "united states", "usa": "united states", "the us": "united states", "the usa": "united states",
    "the states": "united states", "america": "united states", "the netherlands": "netherlands",
    "holland": "netherlands", "uae": "united arab emirates", "the uae": "united arab emirates",
    "the philippines": "philippines", "saigon": "ho chi minh city", "bombay": "mumbai",
    "são paulo": "sao paulo", "bogotá": "bogota", "kraków": "krakow", "zürich": "zurich",
    "köln": "cologne", "münchen": "munich", "rio": "rio de janeiro", "kl": "kuala lumpur",
}

KNOWN_PLACES = sorted(set(CITIES) | COUNTRIES | set(PLACE_ALIASES), key=len, reverse=True)
KNOWN_PLACE_RE = re.compile(r"(?<![\w-])(" + "|".join(re.escape(p) for p in KNOWN_PLACES) + r")(?![\w-])", re.I)

# Capitalised words that follow "in"/"at" but are not places.
NOT_PLACES = {
    "terminal", "gate", "room", "hall", "building", "economy", "business", "first", "class", "seat",
    "row", "i", "the", "a", "an", "my", "our", "english", "spanish", "french", "german", "italian",
    "monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday", "january",
    "february", "march", "april", "may", "june", "july", "august", "september", "october",
    "november", "december", "christmas", "easter", "summer", "winter", "spring", "autumn", "fall",
    "charge", "love", "trouble", "pain", "shock", "doubt", "touch", "favor", "favour", "need", "bed",
    "zoom", "teams", "slack", "a hurry", "hurry", "meeting", "meetings", "town", "transit", "line",
}


def canonical_place(raw: str) -> str:
    name = re.sub(r"\s+", " ", raw.strip().lower()).strip(" .,")
    name = PLACE_ALIASES.get(name, name)
    if name.startswith("the ") and name[4:] in COUNTRIES:
        name = name[4:]
    return name


def places_compatible(a: str, b: str) -> bool:
    """Same place, or one contains the other (London is in the United Kingdom)."""
    if a == b:
        return True
    for city, other in ((a, b), (b, a)):
        country, region = CITIES.get(city, ("", ""))
        if other and other in (country, region):
            return True
    if a in ("england", "scotland", "wales") and b == "united kingdom" or b in ("england", "scotland", "wales") and a == "united kingdom":
        return True
    return False


# ----------------------------------------------------------------------------- words

NUMBER_WORDS = {
    "one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "seven": 7, "eight": 8,
    "nine": 9, "ten": 10, "eleven": 11, "twelve": 12, "thirteen": 13, "fourteen": 14, "fifteen": 15,
    "sixteen": 16, "seventeen": 17, "eighteen": 18, "nineteen": 19, "twenty": 20, "a dozen": 12,
}
NUMBER = rf"(?:\d{{1,3}}|{SPELLED_NUMBER}|a dozen)"  # a small count: "3", "twenty-five", "a dozen"


def number_value(raw: str) -> int | None:
    raw = raw.strip().lower()
    if raw.isdigit():
        return int(raw)
    if raw in NUMBER_WORDS:
        return NUMBER_WORDS[raw]
    value = spelled_number(raw)
    return int(value) if value is not None and value == int(value) else None


LANGUAGES = {
    "english", "spanish", "french", "german", "italian", "portuguese", "dutch", "japanese", "chinese",
    "mandarin", "cantonese", "korean", "russian", "arabic", "hindi", "polish", "swedish", "turkish",
    "greek", "danish", "norwegian", "finnish", "czech", "hungarian", "romanian", "ukrainian",
    "hebrew", "thai", "vietnamese", "indonesian", "catalan", "basque", "galician", "irish", "welsh",
}

PROFESSIONS = {
    "teacher", "nurse", "doctor", "physician", "surgeon", "dentist", "engineer", "software engineer",
    "developer", "programmer", "lawyer", "attorney", "accountant", "architect", "designer", "chef",
    "cook", "student", "pilot", "pharmacist", "journalist", "writer", "photographer", "scientist",
    "researcher", "professor", "consultant", "manager", "salesperson", "electrician", "plumber",
    "mechanic", "firefighter", "police officer", "paramedic", "veterinarian", "vet", "therapist",
    "psychologist", "farmer", "banker", "analyst", "data scientist", "artist", "musician", "actor",
    "waiter", "waitress", "bartender", "cashier", "retiree", "freelancer", "entrepreneur", "carpenter",
}

# People a statement may be about instead of the user ("my wife prefers the window").
RELATIONS = (
    "wife", "husband", "partner", "spouse", "son", "daughter", "kid", "kids", "child", "children",
    "friend", "friends", "boss", "colleague", "colleagues", "coworker", "mom", "mother", "dad",
    "father", "parents", "brother", "sister", "siblings", "cousin", "uncle", "aunt", "grandma",
    "grandpa", "grandmother", "grandfather", "girlfriend", "boyfriend", "fiance", "fiancee",
    "manager", "client", "clients", "team", "family", "baby", "niece", "nephew", "guest", "guests",
    "roommate", "neighbor", "neighbour", "assistant",
)
RELATION = r"(?:" + "|".join(RELATIONS) + r")"

MONTHS = {
    "jan": 1, "january": 1, "feb": 2, "february": 2, "mar": 3, "march": 3, "apr": 4, "april": 4,
    "may": 5, "jun": 6, "june": 6, "jul": 7, "july": 7, "aug": 8, "august": 8, "sep": 9, "sept": 9,
    "september": 9, "oct": 10, "october": 10, "nov": 11, "november": 11, "dec": 12, "december": 12,
}
MONTH = r"(?:" + "|".join(sorted(MONTHS, key=len, reverse=True)) + r")\.?"
WEEKDAYS = ("monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday")
WEEKDAY = r"(?:" + "|".join(WEEKDAYS) + r")"
# the weekday a calendar date may open with: "Monday, April 7" and "Friday the 3rd" are one date
WEEKDAY_OF_DATE = rf"(?:{WEEKDAY},?\s+)?"
# ... and the date that follows a weekday, so that the weekday is not read as a date of its own
DATE_AFTER_WEEKDAY = rf",?\s+(?:the\s+)?(?:{MONTH}\s+\d|\d{{1,2}}(?:st|nd|rd|th)\b|\d{{1,2}}\s+(?:of\s+)?{MONTH})"
ORDINALS = ("first", "second", "third", "fourth", "fifth", "sixth", "seventh", "eighth", "ninth", "tenth")
# words that say which one of a series a thing is ("the first night", "on monday", "in june")
WHICH_OF_SERIES = frozenset((*ORDINALS[:5], "last", "final", *WEEKDAYS, *(m for m in MONTHS if len(m) > 3)))


# what a dish of the meal rule (rules._DISH) is made of, and what each diet leaves out
_DISH_CLASS = {
    **dict.fromkeys(("chicken", "beef", "steak", "lamb", "pork", "duck", "burger"), "meat"),
    **dict.fromkeys(("fish", "salmon", "cod", "seafood", "shrimp"), "fish"),
    **dict.fromkeys(("omelette", "omelet"), "egg"),
}
_DIET_EXCLUDES = {"vegetarian": {"meat", "fish"}, "vegan": {"meat", "fish", "egg"}, "pescatarian": {"meat"}}


def diet_allows(diet: str, dish: str) -> bool:
    """Whether a dish fits a diet: "steak" does not fit "vegetarian"; unknown dishes fit."""
    return _DISH_CLASS.get(dish) not in _DIET_EXCLUDES.get(diet, set())
