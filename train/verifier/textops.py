"""Sentence-level rewrites for the training data, mechanical and deterministic.

- `sentences`, `words`, `clean`: splitting and tokens;
- `negate`: a negation inserted or removed ("was born" -> "was not born", "did not win" -> "did win",
  "X founded Y" -> "X did not found Y");
- `swap_roles`: the two names around a directed relation exchanged ("A defeated B" -> "B defeated A",
  "X was directed by Y" -> "Y was directed by X"), never around a symmetric one ("A and B", "married");
- `statement`: a question and its answer turned into one declarative sentence that reuses the
  question's words ("The Oberoi family is part of a hotel company that has a head office in what
  city?" + "Delhi" -> "... a head office in Delhi.").

Verb forms come from a small irregular table and, for regular verbs, from the words the corpus
itself uses (`Vocabulary`): "created" -> "create" because "create" occurs, "founded" -> "found".
"""

from __future__ import annotations

import re
from collections.abc import Iterable

ABBREVIATIONS = {"mr", "mrs", "ms", "dr", "st", "jr", "sr", "prof", "gen", "col", "lt", "sgt", "capt", "rev",
                 "no", "vs", "inc", "ltd", "co", "corp", "mt", "ft", "fr", "jan", "feb", "mar", "apr", "aug",
                 "sep", "sept", "oct", "nov", "dec", "u.s", "u.k", "e.g", "i.e", "c", "ca", "approx", "est"}

IRREGULAR = {  # base: (past, past participle)
    "be": ("was", "been"), "become": ("became", "become"), "begin": ("began", "begun"), "bring": ("brought", "brought"),
    "build": ("built", "built"), "buy": ("bought", "bought"), "choose": ("chose", "chosen"), "come": ("came", "come"),
    "do": ("did", "done"), "draw": ("drew", "drawn"), "drive": ("drove", "driven"), "eat": ("ate", "eaten"),
    "fall": ("fell", "fallen"), "feel": ("felt", "felt"), "fight": ("fought", "fought"), "find": ("found", "found"),
    "fly": ("flew", "flown"), "forget": ("forgot", "forgotten"), "get": ("got", "gotten"), "give": ("gave", "given"),
    "go": ("went", "gone"), "grow": ("grew", "grown"), "have": ("had", "had"), "hear": ("heard", "heard"),
    "hold": ("held", "held"), "keep": ("kept", "kept"), "know": ("knew", "known"), "lead": ("led", "led"),
    "leave": ("left", "left"), "lose": ("lost", "lost"), "make": ("made", "made"), "meet": ("met", "met"),
    "pay": ("paid", "paid"), "put": ("put", "put"), "read": ("read", "read"), "ride": ("rode", "ridden"),
    "rise": ("rose", "risen"), "run": ("ran", "run"), "say": ("said", "said"), "see": ("saw", "seen"),
    "sell": ("sold", "sold"), "send": ("sent", "sent"), "set": ("set", "set"), "shoot": ("shot", "shot"),
    "sing": ("sang", "sung"), "sink": ("sank", "sunk"), "sit": ("sat", "sat"), "speak": ("spoke", "spoken"),
    "spend": ("spent", "spent"), "stand": ("stood", "stood"), "steal": ("stole", "stolen"), "strike": ("struck", "struck"),
    "swim": ("swam", "swum"), "take": ("took", "taken"), "teach": ("taught", "taught"), "tell": ("told", "told"),
    "think": ("thought", "thought"), "throw": ("threw", "thrown"), "understand": ("understood", "understood"),
    "wear": ("wore", "worn"), "win": ("won", "won"), "write": ("wrote", "written"), "split": ("split", "split"),
    "bear": ("bore", "born"), "break": ("broke", "broken"), "catch": ("caught", "caught"), "hang": ("hung", "hung"),
    "lay": ("laid", "laid"), "lie": ("lay", "lain"), "shine": ("shone", "shone"), "slay": ("slew", "slain"),
    "spin": ("spun", "spun"), "stick": ("stuck", "stuck"), "sweep": ("swept", "swept"), "tear": ("tore", "torn"),
    "wake": ("woke", "woken"), "withdraw": ("withdrew", "withdrawn"), "overthrow": ("overthrew", "overthrown"),
    "undergo": ("underwent", "undergone"), "uphold": ("upheld", "upheld"), "rebuild": ("rebuilt", "rebuilt"),
    "rewrite": ("rewrote", "rewritten"), "outsell": ("outsold", "outsold"), "co-write": ("co-wrote", "co-written"),
}
PAST_TO_BASE = {past: base for base, (past, _) in IRREGULAR.items()}
PARTICIPLES = {pp for _, pp in IRREGULAR.values()}
AUX = ("is", "was", "are", "were", "has", "have", "had", "can", "could", "will", "would", "should", "may",
       "might", "must", "does", "did", "do")
BE = {"is", "was", "are", "were"}
STOP = {"a", "an", "the", "of", "in", "on", "at", "to", "for", "by", "with", "and", "or", "is", "was", "are",
        "were", "be", "been", "has", "have", "had", "it", "its", "as", "from", "that", "this", "which", "who",
        "what", "when", "where", "did", "does", "do", "also", "both", "than", "but", "not", "their", "his", "her"}
DETERMINERS = {"the", "a", "an", "his", "her", "its", "their", "this", "that", "these", "those", "my", "our", "your"}
WH = ("what", "which", "who", "whom", "whose", "when", "where", "how")
NOT_SUBJECTS = {"in", "on", "at", "after", "before", "during", "he", "she", "it", "they", "this", "these", "those",
                "his", "her", "its", "their", "a", "an", "there", "since", "from", "as", "by", "with", "for",
                "although", "while", "when", "if", "however", "following", "born", "today", "later", "between"}
SYMMETRIC = re.compile(r"\b(?:and|with|or|married|met|versus|vs|tied|drew|shares?|shared|alongside|together|"
                       r"partnered|collaborated|fought|against|also known|known as|same|both|like|nor|than|"
                       r"neighbou?rs?|borders?|bordered|twinned|merged|became|becomes|become)\b")

_WORD = re.compile(r"[a-z0-9]+")
_FUNCTION_CAPS = r"(?:The|A|An|In|On|At|For|By|From|With|And|Or|But|As|To|Of|It|He|She|They|This|That|His|Her|Its)\b"
CAP = rf"(?!{_FUNCTION_CAPS})(?:[A-Z][\w'’\-]*|\d[\w'’\-]*)"
NAME = rf"(?:The\s+)?(?!{_FUNCTION_CAPS})[A-Z][\w'’\-]*(?:\s+(?:(?:of|the|de|da|del|di|von|van|der|la|le|&)\s+)*{CAP})*"


def words(text: str) -> list[str]:
    return _WORD.findall(text.lower())


def clean(knowledge: str) -> str:
    """HaluEval joins Wikipedia paragraphs without a space ("...century.First for Women is")."""
    return re.sub(r'(?<=[a-z0-9)\]"])\.(?=[A-Z])', ". ", knowledge).strip()


def sentences(text: str) -> list[str]:
    """Sentences of `text` (initials, abbreviations and decimals do not end one)."""
    pieces = re.split(r"(?<=[.!?])\s+(?=[\"“'(\[A-Z0-9])", text.strip())
    out: list[str] = []
    for piece in pieces:
        if out:
            last = out[-1].rstrip(".").split()[-1] if out[-1].split() else ""
            if last.lower() in ABBREVIATIONS or re.fullmatch(r"[A-Z]", last) or re.fullmatch(r"(?:[A-Z]\.)+[A-Z]", last):
                out[-1] = f"{out[-1]} {piece}"
                continue
        out.append(piece)
    return [s.strip() for s in out if len(words(s)) >= 3]


class Vocabulary:
    """The words a corpus uses: to choose a regular verb's base or past form among the candidates."""

    def __init__(self, texts: Iterable[str]) -> None:
        self.words: set[str] = set()
        for t in texts:
            self.words.update(words(t))

    def base_of(self, verb: str) -> str | None:
        """The base form of a past or third-person verb, or None when the corpus does not settle it."""
        v = verb.lower()
        if v in PAST_TO_BASE:
            return PAST_TO_BASE[v]
        cands: list[str] = []
        if v.endswith("ied"):
            cands.append(v[:-3] + "y")
        if v.endswith("ed"):
            cands += [v[:-2], v[:-1]]
            if len(v) > 4 and v[-3] == v[-4]:
                cands.append(v[:-3])
        elif v.endswith("ies"):
            cands.append(v[:-3] + "y")
        elif v.endswith("es"):
            cands += [v[:-2], v[:-1]]
        elif v.endswith("s") and not v.endswith("ss"):
            cands.append(v[:-1])
        for c in cands:
            if c in self.words and len(c) >= 3 and c != v:
                return c
        return None

    def past(self, base: str) -> str:
        b = base.lower()
        if b in IRREGULAR:
            return IRREGULAR[b][0]
        for cand in ([b[:-1] + "ied"] if b.endswith("y") and b[-2:-1] not in "aeiou" else []) + [b + "d" if b.endswith("e") else b + "ed", b + b[-1] + "ed"]:
            if cand in self.words:
                return cand
        return b + "d" if b.endswith("e") else b[:-1] + "ied" if b.endswith("y") and b[-2:-1] not in "aeiou" else b + "ed"

    def third(self, base: str) -> str:
        b = base.lower()
        if b == "have":
            return "has"
        if b.endswith("y") and b[-2:-1] not in "aeiou":
            return b[:-1] + "ies"
        if b.endswith(("s", "sh", "ch", "x", "z", "o")):
            return b + "es"
        return b + "s"

    def is_verb_form(self, word: str) -> bool:
        """A past or third-person verb form the corpus vouches for."""
        w = word.lower()
        if w in PAST_TO_BASE or w in AUX:
            return True
        if w.endswith("ed") or (w.endswith("s") and not w.endswith(("ss", "us", "is"))):
            return self.base_of(w) is not None
        return False


# ---- negation ----------------------------------------------------------------------------------

_NEG_REMOVE = [
    (re.compile(r"\b(is|was|are|were|has|have|had|does|did|do|can|could|will|would|should|must)\s+not\b", re.I), r"\1"),
    (re.compile(r"\b(is|was|are|were|has|have|had|does|did|do|could|would|should)n[’']t\b", re.I), r"\1"),
    (re.compile(r"\bcannot\b", re.I), "can"),
    (re.compile(r"\bcan[’']t\b", re.I), "can"),
    (re.compile(r"\bwon[’']t\b", re.I), "will"),
    (re.compile(r"\bnever\s+", re.I), ""),
    (re.compile(r"\bno longer\s+", re.I), ""),
]
_AUX_RE = re.compile(r"(?<=\s)(is|was|are|were|has|have|had|can|could|will|would|should|must)\s+(?!not\b|n[’']t)(\S+)")


def negate(sentence: str, vocab: Vocabulary) -> tuple[str, str] | None:
    """The sentence with its first negation removed, or a negation inserted at its first auxiliary
    (or as "did not" + base before the verb right after its subject)."""
    for pattern, repl in _NEG_REMOVE:
        out, n = pattern.subn(repl, sentence, count=1)
        if n:
            return re.sub(r"\s{2,}", " ", out), "negation_removed"
    m = _AUX_RE.search(sentence)
    if m and m.start() < 120:
        aux, nxt = m.group(1), m.group(2)
        if aux.lower() in ("has", "have", "had") and not (nxt in PARTICIPLES or nxt.endswith(("ed", "en")) or nxt == "been"):
            repl = {"has": "does not have", "have": "do not have", "had": "did not have"}[aux.lower()]
            return sentence[:m.start()] + repl + " " + sentence[m.start(2):], "negation_inserted"
        return sentence[:m.end(1)] + " not" + sentence[m.end(1):], "negation_inserted"
    m = re.match(rf"^({NAME})\s+(?:(also|later|then|first|originally|subsequently|once)\s+)?([a-z]+)\b", sentence)
    if m and m.group(1).split()[0].lower() not in NOT_SUBJECTS:
        verb = m.group(3)
        base = vocab.base_of(verb)
        if base and vocab.is_verb_form(verb) and verb not in AUX:
            aux = "did" if verb.endswith("ed") or verb in PAST_TO_BASE else "does"
            return sentence[:m.start(3)] + f"{aux} not {base}" + sentence[m.end(3):], "negation_inserted"
    return None


# ---- roles -------------------------------------------------------------------------------------

_ROLE = re.compile(rf"^(?P<a>{NAME})\s+(?P<rel>(?:[a-z][\w-]*\s+){{0,5}}?[a-z][\w-]*)\s+(?P<b>{NAME})(?P<rest>\s*(?:[,;]|\.\s*$|\s+in\s+\d{{4}}\b|\s+on\s|\s+at\s|\s+for\s|$).*)$")


def swap_roles(sentence: str, vocab: Vocabulary) -> str | None:
    """"A <directed relation> B ..." -> "B <relation> A ...", or None when the sentence has no such
    frame or the relation reads the same both ways."""
    m = _ROLE.match(sentence)
    if not m:
        return None
    a, rel, b = m.group("a"), m.group("rel"), m.group("b")
    if a.split()[0].lower() in NOT_SUBJECTS or b.split()[0].lower() in NOT_SUBJECTS | {"january", "february", "march",
                                                                                        "april", "may", "june", "july",
                                                                                        "august", "september", "october",
                                                                                        "november", "december"}:
        return None
    if SYMMETRIC.search(rel) or rel in BE or rel in ("is a", "was a", "is the", "was the", "is an", "was an"):
        return None
    first = rel.split()[0]
    if not (vocab.is_verb_form(first) or first in PARTICIPLES or first in AUX):
        return None
    if len(a.split()) == 1 and a.lower().endswith("ly"):
        return None
    if a.lower() == b.lower() or re.fullmatch(r"\d[\w.,]*", b) or re.fullmatch(r"\d[\w.,]*", a):
        return None
    if rel.endswith(" the"):  # "renamed the Yankees": the article goes with the name
        rel, b = rel[:-4], f"The {b}"
    a_out = "the " + a[4:] if a.startswith("The ") else a
    return f"{b} {rel} {a_out}{m.group('rest')}"


# ---- question -> statement ---------------------------------------------------------------------


def _cap(text: str) -> str:
    return text[:1].upper() + text[1:] if text else text


def _lower_first(text: str) -> str:
    """Lower-case a sentence-initial article ("The band ..." inside a sentence: "the band ...")."""
    return re.sub(r"^(The|A|An|This|These|That|Those|Its|His|Her|Their)\b", lambda m: m.group(1).lower(), text)


def _date_prep(answer: str) -> str:
    a = answer.strip()
    if re.fullmatch(r"\d{3,4}s?", a) or re.fullmatch(r"(?:the\s+)?\d{2}(?:st|nd|rd|th) century", a) or re.match(r"[A-Z][a-z]+ \d{4}$", a):
        return "in"
    if re.search(r"\d", a):
        return "on"
    return "in"


def _is_base_verb(word: str, vocab: Vocabulary) -> bool:
    w = word.lower()
    if not word[:1].islower() or w in STOP or w in AUX or w.endswith(("ed", "ing")) or len(w) < 2:
        return False
    if w in IRREGULAR:
        return True
    return w + "ed" in vocab.words or w + "d" in vocab.words or (w.endswith("y") and w[:-1] + "ied" in vocab.words)


def _do_support(words_: list[str], aux: str, answer: str, vocab: Vocabulary, prep: str, after_verb: bool) -> str | None:
    """"<aux> SUBJ VERB OBJ" with the answer put back: after the verb (an object question), after a
    final preposition, or at the end behind `prep` (when/where/in what year)."""
    for i in range(1, len(words_)):
        if _is_base_verb(words_[i], vocab) and words_[i - 1].lower() not in DETERMINERS:
            base = words_[i].lower()
            verb = vocab.past(base) if aux == "did" else vocab.third(base) if aux == "does" else base
            subj, obj = " ".join(words_[:i]), " ".join(words_[i + 1:])
            if not subj:
                return None
            if re.search(r"\b(?:in|on|at|from|to|with|for|by|of|about)$", obj) or (obj and not after_verb):
                tail = f" {obj}{'' if re.search(r'(?:in|on|at|from|to|with|for|by|of|about)$', obj) else prep} {answer}"
            elif after_verb:
                tail = f" {answer}{(' ' + obj) if obj else ''}"
            else:
                tail = f"{prep} {answer}"
            return f"{_cap(subj)} {verb}{tail}."
    return None


def statement(question: str, answer: str, vocab: Vocabulary) -> tuple[str, str]:
    """The question and its answer as one declarative sentence, and the rule that made it."""
    q = re.sub(r"\s+", " ", question.strip()).rstrip("?").rstrip().rstrip(".")
    a = answer.strip().rstrip(".")
    if not q or not a:
        return f"{_cap(a)}.", "bare"
    yesno = a.lower() in ("yes", "no")
    # yes/no: "Are A and B both novelists?" -> "A and B are (not) both novelists."
    m = re.match(r"^(are|is|were|was|do|does|did|have|has|can|could)\s+(.+)$", q, re.I)
    if m and yesno:
        aux, rest = m.group(1).lower(), m.group(2)
        neg = " not" if a.lower() == "no" else ""
        sm = re.match(r"^(.+?)\s+(both|all|each|the same|ever|also|from the same|of the same|in the same)\b(.*)$", rest)
        if sm:
            if aux in ("do", "does", "did"):
                return f"{_cap(sm.group(1))} {aux}{neg} {sm.group(2)}{sm.group(3)}.", "yesno"
            return f"{_cap(sm.group(1))} {aux}{neg} {sm.group(2)}{sm.group(3)}.", "yesno"
        nm = re.match(rf"^({NAME})\s+(.+)$", rest)
        if nm:
            return f"{nm.group(1)} {aux}{neg} {nm.group(2)}.", "yesno"
        return f"{'Yes' if not neg else 'No'}, {_lower_first(rest)} — {a.lower()}.", "yesno_fallback"
    # "Which X, A or B?" comparisons: "Which began their career first, A or B?" -> "A began their career first."
    m = re.match(r"^(?:who|which|what)(?:\s+(?P<noun>[\w\s'-]+?))?\s+(?P<vp>(?:is|was|are|were|has|had|did|does|can)\b.*?|\w+(?:ed|s)\b.*?)[,:]?\s+(?P<x>[^,:]+?)\s+or\s+(?P<y>[^,:]+)$", q, re.I)
    if m and not yesno:
        vp = m.group("vp").strip().rstrip(",")
        if m.group("noun") and re.fullmatch(r"(?:is|was|are|were)", vp.split()[0]) and len(vp.split()) == 1:
            vp = f"{vp} the {m.group('noun')}"
        return f"{_cap(a)} {vp}.", "comparison"
    # copula: "What is the name of X" -> "The name of X is A"; "Who was the director of X" -> "The director of X was A"
    m = re.match(r"^(?:what|who|which)\s+(is|was|are|were)\s+(.+)$", q, re.I)
    if m:
        return f"{_cap(m.group(2))} {m.group(1).lower()} {a}.", "copula"
    # when/where/what year ... was X born/founded -> "X was born in A"
    m = re.match(r"^(?:(?:in|on|at|from)\s+)?(when|where|what year|which year|what month|what date|what city|what country|what state|what place)\s+(is|was|are|were|did|does|do)\s+(.+)$", q, re.I)
    if m:
        wh, aux, rest = m.group(1).lower(), m.group(2).lower(), m.group(3)
        prep = _date_prep(a) if wh in ("when", "what year", "which year", "what month", "what date") else "in"
        words_ = rest.split()
        if aux in BE:
            # the tail participle ("born", "founded", "located in", "first built")
            for i in range(len(words_) - 1, max(-1, len(words_) - 4), -1):
                w = words_[i].lower().strip(",")
                if w in PARTICIPLES or w.endswith("ed") or w in ("born", "located", "situated", "based", "held"):
                    subj, tail = " ".join(words_[:i]), " ".join(words_[i:])
                    if subj:
                        tail_prep = "" if re.search(r"\b(?:in|on|at|from|to)$", tail) else f" {prep}"
                        return f"{_cap(subj)} {aux} {tail}{tail_prep} {a}.", "wh_passive"
            return f"{_cap(rest)} {aux} {prep} {a}.", "wh_be"
        # did/does: "When did X release Y" -> "X released Y in A" (the verb: the first base form after the subject)
        done = _do_support(words_, aux, a, vocab, f" {prep}", after_verb=False)
        if done:
            return done, "wh_do"
    # object questions: "What show does X appear in" -> "X appears in A"; "Who did X have a child with"
    m = re.match(r"^(?P<prep>(?:in|on|at|from|for|with|to|by)\s+)?(?:what|which|who|whom)(?:\s+(?P<noun>[\w'’-]+(?:\s+[\w'’-]+){0,3}?))?\s+(?P<aux>did|does|do)\s+(?P<rest>.+)$", q, re.I)
    if m and not (m.group("noun") and set(words(m.group("noun"))) & set(WH)):
        prep = f" {m.group('prep').strip().lower()}" if m.group("prep") else ""
        done = _do_support(m.group("rest").split(), m.group("aux").lower(), a, vocab, prep, after_verb=not prep)
        if done:
            return done, "wh_object"
    # in-situ wh: "... founded in what year?" / "... a head office in what city?" / "... by who?"
    last = None
    for last in re.finditer(r"\b(?:what|which|whom|who|whose)\b", q, re.I):
        pass
    if last is not None and last.start() > 0:
        tail = q[last.end():].split()
        if len(tail) <= 4 and not set(w.lower() for w in tail) & (set(AUX) | set(WH) | {"that"}):
            return f"{_cap(q[:last.start()].rstrip())} {a}.", "in_situ"
    m = re.search(r"\bwhat\b((?:\s+[\w'’-]+){0,3}?)(?=\s+(?:that|which|who)\s+(?:is|was|were|are|has|had|[a-z]+ed|[a-z]+s)\b)", q, re.I)
    if m and m.start() > 0:
        return f"{_cap(q[:m.start()].rstrip())} {a}{q[m.end():]}.", "in_situ_relative"
    # subject question: "Who wrote X" / "What member of Y made X" -> "A wrote X" / "A, the member of Y, made X"
    m = re.match(r"^(who|what|which)\s+(.+)$", q, re.I)
    if m:
        rest = m.group(2).split()
        for i, w in enumerate(rest[:8]):
            lw = w.lower()
            if lw in ("did", "does", "do"):
                break
            if lw in BE or lw in ("has", "had", "have") or lw in PAST_TO_BASE or (vocab.is_verb_form(lw) and lw.endswith("ed")):
                noun = " ".join(rest[:i])
                vp = " ".join(rest[i:])
                if "," in noun or set(words(noun)) & (set(WH) | {"that"}):
                    break
                if noun:
                    return f"{_cap(a)}, the {noun}, {vp}.", "wh_subject_noun"
                return f"{_cap(a)} {vp}.", "wh_subject"
    # "Name the X ..." / "This X ..." descriptions
    m = re.match(r"^(?:name|identify|give)\s+(.+)$", q, re.I)
    if m:
        return f"{_cap(m.group(1))} is {a}.", "name"
    return f"{q}: {a}.", "fallback"
