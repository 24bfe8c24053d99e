"""Search inside archived texts: "the order with id 4711" finds that item of an archived JSON result
without the model knowing which result holds it.

Each text is cut into chunks by its content type (content.py): JSON, one chunk per array item
(compact, labelled with its path: `results[41]: {...}`) plus one of an object's scalars; logs,
groups of LOG_GROUP lines; code, top-level def/class blocks (long ones in CODE_WINDOW-line windows);
text, paragraphs of about TEXT_CHUNK characters. Archived transcripts ("user: …", "tool <name>
result: …") are cut per message, a JSON tool result per item (even when the transcript clipped it).

Chunks are ranked by BM25 (bm25s) over words that keep identifiers findable whole and in pieces
("ORD-4711" indexes "ord-4711", "ord" and "4711"). Chunking is cached per text hash and the index
per set of texts, so repeated searches over one archive cost a query each. Ties rank in ref order,
then in the order of the chunks in their text.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any, Iterator, Mapping, Sequence

import numpy as np

from ..cache import LRU, stable_hash
from ..text.sentences import split_sentences
from .content import clip, content_type, distinctive_terms, parse_json, starts_block, tokens

LOG_GROUP = 5  # log lines per chunk
CODE_WINDOW = 40  # lines per chunk of a long code block
TEXT_CHUNK = 600  # characters per chunk of prose
CHUNK_CHARS = 2000  # longest chunk: a longer JSON item is walked into, longer prose cut
MAX_CHUNKS = 20_000  # per text
HIT_CHARS = 1200  # characters of one hit render_hits shows
RENDER_CHARS = 6000  # characters render_hits returns at most

_STOPWORDS = frozenset(
    "a an and are as at be but by for from has have how i if in into is it its me my no not of on or our "
    "please show so that the their them then there these they this to was we were what when where which who "
    "why will with you your find get give".split())
_TRANSCRIPT = re.compile(r"^(?:user|assistant|system|developer)(?: called [\w.-]+\(.*)?: |^tool [\w.-]* ?result: "
                         r"|^assistant called ")
_TOOL_RESULT = re.compile(r"^(tool [\w.-]* ?result): (.*)$", re.DOTALL)
_DECODER = json.JSONDecoder()
_LABEL = re.compile(r"(?:[\w.-]*\[[\d-]+\]|top-level|lines \d+-\d+|tool [\w.-]* ?result[^:\n]{0,40}): ")  # chunks(): its label

Piece = tuple[str, str]  # (label, body): the label locates the body in its text


@dataclass(frozen=True)
class Hit:
    ref: str
    chunk: str
    score: float


# ---------------------------------------------------------------------------- chunking


def chunks(text: str) -> list[str]:
    """The searchable parts of an archived text, each with its location (`results[41]: {...}`)."""
    return [_joined(label, body) for label, body in _pieces(text)]


def _joined(label: str, body: str) -> str:
    return f"{label}:{body}" if body.startswith("\n") else f"{label}: {body}" if label else body


def _pieces(text: str) -> list[Piece]:
    if _is_transcript(text):
        found = [piece for line in text.split("\n") for piece in _transcript_line(line)]
    else:
        found = list(_typed(text))
    return [(label, cut) for label, body in found if body.strip() for cut in _cut(body)][:MAX_CHUNKS]


def _typed(text: str) -> Iterator[Piece]:
    kind = content_type(text)
    if kind == "json":
        yield from _json_pieces(parse_json(text)[0], "")  # type: ignore[index]
    elif kind == "log":
        lines = text.rstrip("\n").split("\n")
        for at in range(0, len(lines), LOG_GROUP):
            yield f"lines {at + 1}-{min(len(lines), at + LOG_GROUP)}", "\n".join(lines[at: at + LOG_GROUP])
    elif kind == "code":
        yield from _code_pieces(text.rstrip("\n").split("\n"))
    else:
        yield from (("", p) for p in _prose(text))


def _compact(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def _json_pieces(value: Any, path: str, depth: int = 0) -> Iterator[Piece]:
    """One piece per array item (a big one walked into) and one for each object's small members."""
    if isinstance(value, list):
        if value and not any(isinstance(v, (dict, list)) for v in value):
            yield from _scalar_runs(value, path)
            return
        for i, item in enumerate(value):
            text = _compact(item)
            if isinstance(item, (dict, list)) and len(text) > CHUNK_CHARS and depth < 8:
                yield from _json_pieces(item, f"{path}[{i}]", depth + 1)
            else:
                yield f"{path}[{i}]", text
    elif isinstance(value, dict):  # arrays always go item by item; small objects stay with the scalars
        small = {k: v for k, v in value.items() if v == [] or isinstance(v, dict) and len(_compact(v)) <= 200
                 or not isinstance(v, (dict, list))}
        if small:
            yield path or "top-level", _compact(small)
        for key, item in value.items():
            if key not in small:
                yield from _json_pieces(item, f"{path}.{key}" if path else str(key), depth + 1)


def _scalar_runs(values: list, path: str) -> Iterator[Piece]:
    """A list of scalars in runs of about TEXT_CHUNK characters."""
    start, size = 0, 0
    for i, value in enumerate(values):
        size += len(_compact(value)) + 1
        if size >= TEXT_CHUNK or i == len(values) - 1:
            yield f"{path}[{start}-{i}]", _compact(values[start: i + 1])
            start, size = i + 1, 0


def _code_pieces(lines: list[str]) -> Iterator[Piece]:
    """Top-level blocks (a decorator starts its function's block), long ones in windows."""
    starts = [0] + [i for i in range(1, len(lines)) if starts_block(lines[i]) and not starts_block(lines[i - 1])]
    for start, end in zip(starts, starts[1:] + [len(lines)]):
        for at in range(start, end, CODE_WINDOW):
            stop = min(end, at + CODE_WINDOW)
            yield f"lines {at + 1}-{stop}", "\n" + "\n".join(lines[at:stop])


def _prose(text: str) -> list[str]:
    """Paragraphs, joined or split at sentence ends into parts of about TEXT_CHUNK characters."""
    out: list[str] = []
    current = ""
    for paragraph in re.split(r"\n\s*\n", text):
        for sentence in split_sentences(paragraph):
            if current and len(current) + len(sentence) >= TEXT_CHUNK:
                out.append(current)
                current = ""
            current = f"{current} {sentence}" if current else sentence
        if len(current) >= TEXT_CHUNK // 2:
            out.append(current)
            current = ""
    return out + [current] if current else out


def _cut(body: str) -> list[str]:
    """A body longer than CHUNK_CHARS in parts, cut at white space where there is some."""
    parts = []
    while len(body) > CHUNK_CHARS:
        at = body.rfind(" ", CHUNK_CHARS // 2, CHUNK_CHARS)
        at = at if at > 0 else CHUNK_CHARS
        parts.append(body[:at])
        body = body[at:].lstrip()
    return parts + [body] if body else parts


def _is_transcript(text: str) -> bool:
    lines = [line for line in text.split("\n", 200)[:200] if line.strip()]
    return len(lines) >= 2 and sum(1 for line in lines if _TRANSCRIPT.match(line)) >= 0.6 * len(lines)


def _transcript_line(line: str) -> list[Piece]:
    """A message line as prose; a tool result by its own type, a JSON one per item."""
    match = _TOOL_RESULT.match(line)
    if match is None:
        return [("", p) for p in _prose(line)]
    label, result = match.groups()
    parsed = parse_json(result)
    if parsed is not None:
        return [(f"{label} {path}", body) for path, body in _json_pieces(parsed[0], "")]
    salvaged = _salvage(result)
    if salvaged:
        return [(f"{label} {path}", body) for path, body in salvaged]
    return [(label, p) for p in _prose(result)]


def _salvage(text: str) -> list[Piece]:
    """The whole items of a JSON array of objects cut short (a transcript clips long results)."""
    start = text.find("[{")
    if start < 0:
        return []
    name = re.search(r"\"([^\"]{1,60})\"\s*:\s*$", text[:start])
    path = name.group(1) if name else ""
    found, at = [], start + 1
    while text[at: at + 1] == "{":
        try:
            item, at = _DECODER.raw_decode(text, at)
        except ValueError:
            break
        found.append((f"{path}[{len(found)}]", _compact(item)))
        while text[at: at + 1] in (",", " "):
            at += 1
    return found


# ---------------------------------------------------------------------------- the index


def search_words(text: str) -> list[str]:
    """content.tokens, plurals folded into their singular ("orders" finds "order"; identifiers are left alone)."""
    return [w[:-1] if w[-1] == "s" and len(w) > 3 and w[-2] != "s" and w.isalpha() else w for w in tokens(text)]


def _indexed(label: str, body: str) -> list[str]:
    """A piece's words: its body's, and its label's names without positions (`results[41]` adds "result")."""
    return search_words(re.sub(r"\d+", " ", label) + " " + body)


@dataclass(frozen=True)
class _Chunked:
    chunks: tuple[str, ...]
    words: tuple[list[str], ...]


class _Index:
    """BM25 over the chunks of a set of texts, with a vocabulary in first-seen order (the same
    texts always give the same index)."""

    def __init__(self, owners: list[tuple[str, str]], words: list[list[str]]) -> None:
        import bm25s

        self.owners = owners  # (ref, chunk) per indexed chunk
        self.vocab: dict[str, int] = {}
        ids = [[self.vocab.setdefault(w, len(self.vocab)) for w in chunk_words] for chunk_words in words]
        self.vocab.setdefault("", len(self.vocab))  # an empty chunk still has a word
        self.bm25 = bm25s.BM25()
        self.bm25.index((ids, self.vocab), create_empty_token=False, show_progress=False)

    @property
    def nbytes(self) -> int:
        """BM25's score arrays and the vocabulary: ~200 bytes a word (its str, our dict slot, and
        BM25's own dict and set of ids; measured 1.4 MB for 7.3k words, 100 chunks)."""
        arrays = sum(getattr(v, "nbytes", 0) for v in getattr(self.bm25, "scores", {}).values())
        return arrays + 200 * len(self.vocab)

    def top(self, words: Sequence[str], k: int, identifiers: Sequence[str] = ()) -> list[Hit]:
        ids = [self.vocab[w] for w in dict.fromkeys(words) if w in self.vocab]
        if not ids:
            return []
        scores = np.round(self.bm25.get_scores(ids).astype(np.float64), 6)  # rounded: ties are ties
        matched = np.flatnonzero(scores > 0)
        # A chunk holding more of the query's identifiers ranks first, whatever its length: BM25 alone
        # lets a short chunk that shares the question's common words ("confirmation code for
        # reference") outrank the long one holding the id asked about.
        named = np.zeros(len(scores))
        for word in dict.fromkeys(identifiers):
            if word in self.vocab:
                named += self.bm25.get_scores([self.vocab[word]]) > 0
        best = matched[np.lexsort((matched, -scores[matched], -named[matched]))[:k]]  # by ids, score, chunk order
        return [Hit(self.owners[i][0], self.owners[i][1], float(scores[i])) for i in best.tolist()]


def _chunked_size(key: str, value: _Chunked) -> int:
    """A chunking's bytes, about: its chunks' text (~1 byte a character: mostly ASCII) and ~70 bytes
    a word (a short str and its list slot)."""
    return 200 + sum(len(c) + 60 for c in value.chunks) + 70 * sum(len(w) for w in value.words)


def _index_size(key: tuple[tuple[str, str], ...], value: _Index) -> int:
    """An index's bytes, about: its owners (ref, chunk), BM25's score arrays and its vocabulary."""
    return 100 * len(key) + sum(len(chunk) + 120 for _, chunk in value.owners) + value.nbytes


class ArchiveSearch:
    """Lexical search over archived texts; chunkings and indexes cached in LRUs bounded by count and
    by bytes (one archived text can be megabytes: a count alone could hold gigabytes)."""

    def __init__(self, max_texts: int = 1024, max_indexes: int = 8, max_bytes: int = 32 * 2**20) -> None:
        self._chunked: LRU[str, _Chunked] = LRU(max_texts, max_bytes=max_bytes, sizeof=_chunked_size)
        self._indexes: LRU[tuple[tuple[str, str], ...], _Index] = LRU(max_indexes, max_bytes=max_bytes,
                                                                       sizeof=_index_size)

    def chunked(self, text: str, digest: str | None = None) -> _Chunked:
        key = digest or stable_hash(text)
        found = self._chunked.get(key)
        if found is None:
            pieces = _pieces(text)
            found = _Chunked(tuple(_joined(label, body) for label, body in pieces),
                             tuple(_indexed(label, body) for label, body in pieces))
            self._chunked.put(key, found)
        return found

    def search(self, docs: Mapping[str, str], query: str, k: int = 5) -> list[Hit]:
        """The `k` chunks of `docs` (ref → archived text) that best match `query`, best first."""
        words = [w for w in search_words(query or "") if w not in _STOPWORDS]
        if not words or k <= 0:
            return []
        key = tuple((ref, stable_hash(docs[ref])) for ref in sorted(docs))
        index = self._indexes.get(key)
        if index is None:
            owners: list[tuple[str, str]] = []
            corpus: list[list[str]] = []
            for ref, digest in key:
                chunked = self.chunked(docs[ref], digest)
                owners += [(ref, chunk) for chunk in chunked.chunks]
                corpus += chunked.words
            if not any(corpus):  # nothing to rank (and BM25 would divide by a zero average length)
                return []
            index = _Index(owners, corpus)
            self._indexes.put(key, index)
        named = distinctive_terms(query)
        return index.top(words, k, [w for w in words if w in named])


def render_hits(hits: Sequence[Hit], limit: int = RENDER_CHARS, query: str = "") -> str:
    """The hits as the model reads them: `ref=<ref>: <chunk>` each, best first, within `limit` characters.
    A chunk longer than HIT_CHARS shows the part around what `query` names (its head otherwise)."""
    if not hits:
        return "no archived content matches the query."
    out = ["archived parts matching the query, best first (context_recall(ref=...) returns a whole text):"]
    used = len(out[0])
    named = distinctive_terms(query)
    weights = {w: 10 if w in named else 1 for w in search_words(query) if w not in _STOPWORDS and len(w) > 1}
    for hit in hits:
        line = f"ref={hit.ref}: {_excerpt(hit.chunk, weights, HIT_CHARS)}"
        if used + len(line) + 1 > limit:
            if limit - used > 200:
                out.append(clip(line, limit - used - 1))
            break
        out.append(line)
        used += len(line) + 1
    return "\n".join(out)


def _excerpt(chunk: str, weights: Mapping[str, int], size: int) -> str:
    """`chunk`, or the `size` characters of it that cover the most of the query's words (an identifier
    counts ten). A hit is ranked by words anywhere in a chunk of up to CHUNK_CHARS; a head clipped
    at `size` can miss the very line asked for."""
    if len(chunk) <= size or not weights:
        return clip(chunk, size)
    low = chunk.lower()
    spots = sorted({i for w in weights for i in _occurrences(low, w)})
    lead = size // 4  # the window starts this far before the spot it is built around

    def covered(spot: int) -> int:
        window = low[max(0, spot - lead): max(0, spot - lead) + size]
        return sum(weight for w, weight in weights.items() if w in window)

    best = max(spots, key=lambda spot: (covered(spot), -spot), default=0)
    label = _LABEL.match(chunk)
    head = label.group(0) if label else ""  # where the part is (`results[41]: `, `lines 1-12: `) stays in view
    size -= len(head)
    start = min(max(0, best - lead), len(chunk) - size)
    if start <= len(head):
        return clip(chunk, size + len(head))
    end = start + size
    return head + "…" + chunk[start + 1: end - 1] + ("…" if end < len(chunk) else chunk[end - 1: end])


def _occurrences(text: str, word: str, at_most: int = 50) -> Iterator[int]:
    at = text.find(word)
    while at >= 0 and at_most > 0:
        yield at
        at, at_most = text.find(word, at + 1), at_most - 1
