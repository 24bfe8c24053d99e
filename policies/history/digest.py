"""Digests of big tool results: what stays in the forwarded context once the whole text is archived.

A digest is a pure function of its inputs (same bytes every time: providers' prompt caches depend
on it) and always fits its token budget. What it keeps depends on the content type:
- json (json_digest.py): the schema (keys and value types of an array's records), counts, top-level
  scalars, the first items and every item the later conversation mentions; the rest is counted.
- log, and other line data (file listings, `ls -l`, tables): lines equal once digits, hex and
  timestamps are masked fold into one `[×N]` line; every error line (ERROR, FATAL, CRITICAL, an
  exception, a panic) and every line of a stack trace (Java `at …`/`Caused by`, Python's
  `Traceback`/`File …`) stays, however few there are: the digest passes its budget for them (by
  their size at most, the rest of the lines keeping half the budget), up to `LOG_ERRORS_MAX_TOKENS`
  of them, and says how many error lines did not fit (repeated lines fold into one `[×N]` line).
  Then mentioned lines, warnings, the first and the last lines; dropped lines are counted.
- code: imports, signatures with their decorators, the regions around mentioned identifiers and
  the whole body of a mentioned function; elided line ranges are noted.
- text: the most factual sentences (extractive.py's scoring), mentioned ones first.
`mentions` is the text of the later messages: what it names is kept (content.py reads it). Each
digest renders the most detail that fits, then lines by priority, at worst clipped on a line boundary.
"""

from __future__ import annotations

import functools
import re
from collections import Counter
from dataclasses import dataclass
from typing import Callable

from .content import (
    DECORATOR,
    DIFF,
    IMPORT,
    LOG_LINE,
    SIGNATURE,
    VARIABLE,
    Count,
    DigestContext,
    Mentions,
    clip,
    clip_to_budget,
    content_type,
    estimate_tokens,
    largest,
)
from .extractive import Line, score_sentence, select_lines, split_sentences
from .json_digest import digest_json
from .log_lines import TAIL_LINES, TRACE_PRIORITY, log_priorities

LOG_ERRORS_MAX_TOKENS = 800  # a log digest grows past its budget to this, at most, to keep every error line
CODE_CONTEXT = 3  # lines kept on each side of a line naming a mentioned identifier
BODY_LINES = 80  # lines of a mentioned function's body offered first
LINE_CHARS = 300  # longest line shown in a log or code digest
MAX_MISSES = 64  # lines in a row that do not fit: the line digest stops looking


# ---------------------------------------------------------------------------- the digest

@functools.lru_cache(maxsize=1)  # the last one made: a span's results share one text
def _mentions(text: str) -> Mentions:
    """Mentions(text), made once for the tool results of a span (they share the later messages):
    made per result, it cost a quarter of the proxy's CPU at steps 40-60 of an agent loop."""
    return Mentions(text)


def digest(text: str, budget_tokens: int, mentions: str = "", count: Count | None = None,
           recall_hint: str = "") -> str:
    """The compact form of `text` in at most `budget_tokens` (by `count`); the text itself if it fits.
    `mentions`: the later messages (what they name is kept); `recall_hint`: e.g. "ref=ar_1", in notes."""
    count = count or estimate_tokens
    if budget_tokens <= 0:
        return ""
    if len(text) <= 64 * budget_tokens and count(text) <= budget_tokens:
        return text
    ctx = DigestContext(_mentions(mentions), count, budget_tokens, recall_hint.strip())
    kind = content_type(text)
    body = {"json": digest_json, "log": _digest_log, "code": _digest_code}.get(kind, _digest_text)(text, ctx)
    if ctx.budget > budget_tokens and len(text) <= 16 * ctx.budget and count(text) <= ctx.budget:
        return text  # a log's error lines raised the budget (below) enough for the whole text
    return clip_to_budget(body, ctx.budget, count, f"… (clipped{ctx.full()})")


# ---------------------------------------------------------------------------- lines (log, code)


@dataclass(frozen=True)
class _Entry:
    at: int  # the line it stands for
    sub: int  # order among entries of one line
    priority: float
    text: str
    group: int = -1  # a folded log line: its group of near-identical lines


def _fit_lines(entries: list[_Entry], render: Callable[[list[_Entry]], str], ctx: DigestContext,
               required: list[_Entry] | None = None) -> str:
    """The highest-priority entries whose rendering fits: greedy by priority on estimated costs, checked
    on the real rendering (cut back if over; topped up from what is left if the estimate was high).
    `required` entries (known to fit) are in whatever the estimates say."""
    ranked = sorted(entries, key=lambda e: (-e.priority, e.at, e.sub))
    chosen: list[_Entry] = list(required or ())
    floor = len(chosen)
    text = render(chosen)
    spent = ctx.count(text)
    for _ in range(3):
        added = _greedy(ranked, chosen, spent, ctx)
        if not added:
            return text
        text = render(chosen)
        spent = ctx.count(text)
        if spent > ctx.budget:
            extra = largest(len(chosen) - floor, lambda k: ctx.count(render(chosen[: floor + k])) <= ctx.budget)
            return render(chosen[: floor + extra])
    return text


def _greedy(ranked: list[_Entry], chosen: list[_Entry], spent: int, ctx: DigestContext) -> int:
    """Add to `chosen` the entries not yet in it that the estimate says fit; how many were added."""
    note = ctx.count("… lines 1000-2000 elided") + 1
    taken = set(chosen)
    kept = {e.at for e in chosen}
    added = misses = 0
    for entry in ranked:
        if entry in taken:
            continue
        alone = entry.at not in kept and entry.at - 1 not in kept and entry.at + 1 not in kept
        cost = ctx.count(entry.text) + 1 + (note if alone else 0)
        if spent + cost <= ctx.budget:
            chosen.append(entry)
            kept.add(entry.at)
            spent += cost
            added, misses = added + 1, 0
        elif (misses := misses + 1) >= MAX_MISSES:  # the budget is spent: counting the rest costs time
            break
    return added


def _mask(line: str) -> tuple[str, tuple[str, ...]]:
    """A line with its variable parts (timestamps, hex, numbers) masked, and those parts."""
    pieces, values, last = [], [], 0
    for match in VARIABLE.finditer(line):
        pieces += [line[last: match.start()], f"<{match.lastgroup}>"]
        values.append(match.group())
        last = match.end()
    pieces.append(line[last:])
    return "".join(pieces), tuple(values)


def _fold(lines: list[str], exact: list[bool] | None = None) -> tuple[list[int], list[list[int]], list[str]]:
    """Groups of near-identical lines: each line's group, each group's lines, and each group's
    `[×N]` line, which shows a variable part only where it differs between the lines. Lines marked
    `exact` (stack frames: `Stage1.apply(Stage1.java:41)` is not `Stage2…`) fold only with equal lines."""
    group_of: list[int] = []
    members: list[list[int]] = []
    first: list[tuple[str, tuple[str, ...]]] = []
    same: list[list[bool]] = []
    index: dict[str, int] = {}
    for i, line in enumerate(lines):
        if exact is not None and exact[i]:
            key, values = "\x00" + " ".join(line.split()), ()
        else:
            key, values = _mask(" ".join(line.split()))  # runs of spaces (aligned columns) do not matter
        g = index.setdefault(key, len(members))
        if g == len(members):
            members.append([])
            first.append((line, values))
            same.append([True] * len(values))
        else:
            same[g] = [s and a == b for s, a, b in zip(same[g], first[g][1], values)]
        members[g].append(i)
        group_of.append(g)
    shown = []
    for g, (line, _) in enumerate(first):
        flags = iter(same[g])
        text = VARIABLE.sub(lambda m: m.group() if next(flags, True) else f"<{m.lastgroup}>", line.rstrip())
        shown.append(f"[×{len(members[g]):,}] {clip(text, LINE_CHARS)}")
    return group_of, members, shown


def _log_entries(lines: list[str], ctx: DigestContext) -> tuple[list[_Entry], list[list[int]], list[bool]]:
    priority, problem = log_priorities(lines)
    frames = [p and not LOG_LINE.match(line) for p, line in zip(problem, lines)]  # a trace's lines, not log records
    group_of, members, folded = _fold(lines, frames)
    entries: list[_Entry] = []
    raw_mentions: Counter = Counter()  # a folded group offers its first two mentioned lines raw
    naming = ctx.mentions.lines_naming(lines)
    for i, line in enumerate(lines):
        g = group_of[i]
        raw = clip(line.rstrip(), LINE_CHARS)
        mentioned = naming[i]
        if len(members[g]) == 1:
            entries.append(_Entry(i, 0, priority[i] if problem[i] else 95.0 if mentioned else priority[i], raw))
            continue
        if members[g][0] == i:  # big groups rank with the tail: they say what the log is mostly about
            size = len(members[g])
            rank = 82.0 + min(9, len(str(size))) / 10 if size >= 10 else 65.0
            top = max(priority[k] for k in members[g]) if any(problem[k] for k in members[g]) else 0.0
            entries.append(_Entry(i, 0, max(priority[i], rank, top), folded[g], g))  # a repeated error: [×N], kept
        if mentioned and raw_mentions[g] < 2:
            raw_mentions[g] += 1
            entries.append(_Entry(i, 1, 95.0, raw))
        elif i >= len(lines) - TAIL_LINES:  # the tail, as it was
            entries.append(_Entry(i, 1, min(priority[i], 90.0), raw))  # the group's [×N] line keeps a repeated error
    return entries, members, problem


def _errors_first(entries: list[_Entry], render: Callable[[list[_Entry]], str], ctx: DigestContext) -> list[_Entry]:
    """The error and trace entries the digest keeps whatever its budget, most important first: all
    of them when they fit in `LOG_ERRORS_MAX_TOKENS`. When they take more than half the budget, the
    budget grows so that the other lines (mentioned ones, warnings, the tail) still get half of it."""
    needed = sorted((e for e in entries if e.priority >= TRACE_PRIORITY), key=lambda e: (-e.priority, e.at, e.sub))
    if not needed:
        return []
    cap = max(ctx.budget, LOG_ERRORS_MAX_TOKENS)
    if ctx.count(render(needed)) > cap:
        needed = needed[: largest(len(needed), lambda k: ctx.count(render(needed[:k])) <= cap)]
    ctx.budget = max(ctx.budget, ctx.count(render(needed)) + ctx.budget // 2)
    return needed


def _digest_log(text: str, ctx: DigestContext) -> str:
    lines = text.rstrip("\n").split("\n")
    entries, members, problem = _log_entries(lines, ctx)
    n = len(lines)
    problems = sum(problem)

    def render(chosen: list[_Entry]) -> str:
        accounted = bytearray(n)
        groups = sorted({e.group for e in chosen if e.group >= 0})
        for g in groups:
            for i in members[g]:
                accounted[i] = 1
        ordered = sorted(chosen, key=lambda e: (e.at, e.sub))
        for e in ordered:
            accounted[e.at] = 1
        out, previous = [], -1
        for e in [*ordered, None]:
            at = n if e is None else e.at
            dropped = accounted[previous + 1: at].count(0) if at > previous + 1 else 0
            if dropped:
                out.append(f"… {dropped:,} line{'s' if dropped > 1 else ''} dropped")
            if e is not None:
                out.append(e.text)
                previous = max(previous, e.at)
        missing = sum(1 for i in range(n) if problem[i] and not accounted[i]) if problems else 0
        errors = f"; {missing:,} of {problems:,} error and trace lines not shown" if missing else ""
        head = f"[log of {n:,} lines, {accounted.count(0):,} not shown{errors}{ctx.recall('any line')}]"
        return "\n".join([head, *out])

    return _fit_lines(entries, render, ctx, _errors_first(entries, render, ctx))


# ---------------------------------------------------------------------------- code

_NAME = re.compile(r"(\w+)\s*(?:<[^>]*>)?\s*\(|\b(?:def|class|function|func|fn|struct|interface|enum|trait|type"
                   r"|impl|module|namespace|record|object)\s+\*?\s*(\w+)")


def _block_end(lines: list[str], start: int) -> int:
    """The last line of the block a signature opens: up to the next line indented no deeper
    (a closing bracket there belongs to the block)."""
    indent = len(lines[start]) - len(lines[start].lstrip())
    last = start
    for j in range(start + 1, len(lines)):
        stripped = lines[j].strip()
        if not stripped:
            continue
        if len(lines[j]) - len(lines[j].lstrip()) <= indent:
            return j if stripped[0] in ")]}" else last
        last = j
    return last


def _signatures(lines: list[str]) -> dict[int, str]:
    """Signature lines (multi-line ones whole) by index, with the name each defines ("" for a continuation)."""
    found: dict[int, str] = {}
    for i, line in enumerate(lines):
        if not SIGNATURE.match(line):
            continue
        match = _NAME.search(line)
        found[i] = (match.group(1) or match.group(2)) if match else ""
        depth, j = line.count("(") - line.count(")"), i
        while depth > 0 and j + 1 < len(lines) and j < i + 8:
            j += 1
            depth += lines[j].count("(") - lines[j].count(")")
            found.setdefault(j, "")
    return found


def _code_priorities(lines: list[str], ctx: DigestContext) -> list[float]:
    n = len(lines)
    priority = [40.0 if i < 3 else 5.0 for i in range(n)]
    signatures = _signatures(lines)
    named = frozenset(name.lower() for name in signatures.values()
                      if len(name) >= 3 and name.lower() in ctx.mentions.words)
    for i, line in enumerate(lines):
        if IMPORT.match(line):
            priority[i] = 62.0
        elif DIFF.match(line):
            priority[i] = 65.0
        elif i in signatures or DECORATOR.match(line):
            priority[i] = 60.0
        elif line[:1] in "+-" and not line.startswith(("+++", "---")):
            priority[i] = max(priority[i], 45.0)
        elif i - 1 in signatures and line.strip():
            priority[i] = max(priority[i], 30.0)  # a docstring or first statement
    for i, name in signatures.items():
        if name.lower() in named:  # the whole body of a function the conversation names
            for j in range(i, min(_block_end(lines, i), i + BODY_LINES) + 1):
                priority[j] = max(priority[j], 80.0)
    for i, naming in enumerate(ctx.mentions.lines_naming(lines, named)):
        if naming:
            for j in range(max(0, i - CODE_CONTEXT), min(n, i + CODE_CONTEXT + 1)):
                priority[j] = max(priority[j], 92.0 if j == i else 85.0)
    return priority


def _digest_code(text: str, ctx: DigestContext) -> str:
    lines = text.rstrip("\n").split("\n")
    n = len(lines)
    entries = [_Entry(i, 0, p, clip(line.rstrip(), LINE_CHARS))
               for i, (line, p) in enumerate(zip(lines, _code_priorities(lines, ctx)))]

    def render(chosen: list[_Entry]) -> str:
        out = [f"[code of {n:,} lines: imports, signatures, mentioned code{ctx.full()}]"]
        previous = -1
        for e in [*sorted(chosen, key=lambda e: e.at), None]:
            at = n if e is None else e.at
            gap = lines[previous + 1: at]
            if len(gap) == 1 and len(gap[0]) <= 40 or not any(g.strip() for g in gap):
                out += [g.rstrip() for g in gap]  # cheaper than a note
            elif gap:
                out.append(f"… line {at} elided" if len(gap) == 1 else f"… lines {previous + 2}-{at} elided")
            if e is not None:
                out.append(e.text)
                previous = e.at
        return "\n".join(out)

    return _fit_lines(entries, render, ctx)


# ---------------------------------------------------------------------------- text


def _digest_text(text: str, ctx: DigestContext) -> str:
    """An extractive summary: the most factual and the mentioned sentences, in their order."""
    sentences = list(dict.fromkeys(split_sentences(text)))
    lines: list[Line] = []
    for sentence, naming in zip(sentences, ctx.mentions.lines_naming(sentences)):
        score = score_sentence(sentence) + (6 if naming else 0) + (2 if not lines else 0)
        lines.append(Line(len(lines), clip(" ".join(sentence.split()), 400), score))
    best = sorted(lines, key=lambda line: (-line.score, line.order))
    room, chars = [], 0
    for line in best:  # no more candidates than could ever fit: counting each costs time
        if chars > 8 * ctx.budget:
            break
        room.append(line)
        chars += len(line.text)

    def head(kept: int) -> str:
        return f"[text: {kept:,} of {len(lines):,} sentences{ctx.full()}]"

    left = ctx.budget - ctx.count(head(len(lines))) - 1
    body = select_lines(sorted(room, key=lambda line: line.order), left, ctx.count)
    if not body and best and left > 0:  # one sentence longer than the budget (a blob): its start
        body = clip_to_budget(f"- {best[0].text}", left, ctx.count)
    kept = body.count("\n") + 1 if body else 0
    return head(kept) + ("\n" + body if body else "")
