"""The digest of a JSON result: its structure, counts and the items the conversation mentions.

Rendered at the most detail that fits the budget: for each array, a schema line (the union of its
records' keys with value types, and the count), the first items and the mentioned ones (an item is
mentioned when the later messages name one of its values that is rare in the array: an id or a
name, not `status: ok`), then a note counting the rest with their id range. Objects keep their
scalars (totals, status, next-page tokens) on one line; big nested values are walked into.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from dataclasses import dataclass
from typing import Any, Callable

from .content import DigestContext, clip, parse_json

MAX_DEPTH = 6  # JSON nesting walked into; deeper values are shrunk inline
MAX_KEYS = 30  # a wider object shows its first keys and the mentioned ones (a map of records: like an array)


@dataclass(frozen=True)
class _Detail:
    head: int  # first items shown per array
    mentioned: int  # most mentioned items shown per array
    clip: int  # characters kept of a string value
    item: int  # characters of one item's line; a bigger item is walked into


_DETAILS = (_Detail(20, 40, 240, 1200), _Detail(8, 20, 160, 700), _Detail(5, 12, 120, 500),
            _Detail(3, 8, 80, 360), _Detail(2, 5, 60, 260), _Detail(1, 3, 40, 180), _Detail(0, 2, 24, 120))
_ID_KEY = re.compile(r"(?i)^(?:id|uuid|guid|key|sku|code|slug|ref|number|\w*[_-]id|\w*[a-z]Id)$")


def _compact(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def _shrink(value: Any, chars: int, depth: int = 0) -> Any:
    """A small copy for one line: strings clipped, lists cut to three items, objects to 16 keys."""
    if isinstance(value, str):
        return clip(value, chars)
    if isinstance(value, list):
        kept = [_shrink(v, chars, depth + 1) for v in value[: 3 if depth < 3 else 0]]
        return kept + ([f"…+{len(value) - len(kept)} more"] if len(value) > len(kept) else [])
    if isinstance(value, dict):
        if depth >= 3:
            return f"{{…{len(value)} keys}}"
        out = {str(k): _shrink(v, chars, depth + 1) for k, v in list(value.items())[:16]}
        if len(value) > 16:
            out["…"] = f"+{len(value) - 16} more keys"
        return out
    return value


def _type_name(value: Any) -> str:
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, (int, float)):
        return "num"
    return {str: "str", list: "list", dict: "obj"}.get(type(value), "null")


def _schema(items: list) -> str:
    """`, objects with keys: id:str, note:str|null (in 37)` or `, str|num` for scalars."""
    if items and all(isinstance(item, dict) for item in items):
        types: dict[str, list[str]] = {}
        present: Counter = Counter()
        for item in items:
            for key, value in item.items():
                seen = types.setdefault(key, [])
                if _type_name(value) not in seen:
                    seen.append(_type_name(value))
                present[key] += 1
        keys = [f"{k}:{'|'.join(t)}" + ("" if present[k] == len(items) else f" (in {present[k]})")
                for k, t in list(types.items())[:40]]
        more = f", +{len(types) - 40} more keys" if len(types) > 40 else ""
        return ", objects with keys: " + ", ".join(keys) + more
    return ", " + "|".join(dict.fromkeys(_type_name(item) for item in items))


def _scalars(value: Any, limit: int = 400) -> list[str]:
    """An item's scalar values as text (ids, names, numbers), depth first, at most `limit`."""
    out: list[str] = []
    stack = [value]
    while stack and len(out) < limit:
        node = stack.pop()
        if isinstance(node, dict):
            stack += reversed(list(node.values()))
        elif isinstance(node, list):
            stack += reversed(node[:50])
        elif isinstance(node, (str, int, float)) and not isinstance(node, bool):
            out.append(str(node))
    return out


def _mentioned(items: list, ctx: DigestContext) -> list[int]:
    """Indexes of items the mentions name by a value rare in this array (an id, not `status: ok`)."""
    if not ctx.mentions.words:
        return []
    values = [list(dict.fromkeys(_scalars(item))) for item in items]
    frequency = Counter(v for vs in values for v in vs)
    rare = max(2, len(items) // 50)
    return [i for i, vs in enumerate(values) if any(frequency[v] <= rare and ctx.mentions.names(v) for v in vs)]


def _id_range(items: list, rest: list[int]) -> str:
    """` (ids CUST-0004 … CUST-0199)`: the id key's values of the first and last elided items."""
    first, last = items[rest[0]], items[rest[-1]]
    if not (isinstance(first, dict) and isinstance(last, dict)):
        return ""
    key = next((k for k in first if _ID_KEY.match(k)), None) or next((k for k in ("name", "title") if k in first), None)
    if key is None or key not in last or isinstance(first[key], (dict, list)):
        return ""
    ends = [clip(str(items[i].get(key)), 40) for i in dict.fromkeys((rest[0], rest[-1]))]
    return f" ({key}s {' … '.join(ends)})" if len(ends) == 2 else f" ({key} {ends[0]})"


# Which lines a tight budget keeps first (a rendering that does not fit is cut by these).
MENTIONED, SCHEMA, SCALARS, NOTE, HEAD, TRAILER = 8, 7, 6, 5, 3, 2


class _JsonWriter:
    """Renders one JSON value as (priority, line) pairs at one level of detail."""

    def __init__(self, ctx: DigestContext, detail: _Detail) -> None:
        self.ctx, self.detail = ctx, detail
        self.out: list[tuple[int, str]] = []
        self.floor = 0  # inside a mentioned item, every line ranks as mentioned

    def add(self, priority: int, line: str) -> None:
        self.out.append((max(priority, self.floor), line))

    def value(self, value: Any, path: str, depth: int) -> None:
        if isinstance(value, dict):
            self.object(value, path, depth)
        elif isinstance(value, list):
            self.array(value, path, depth)
        else:
            self.add(SCALARS, f"{path}: {_compact(_shrink(value, self.detail.clip))}")

    def object(self, obj: dict, path: str, depth: int) -> None:
        keys = list(obj)
        if len(keys) > MAX_KEYS and self.remember("map", obj, lambda: _is_map(obj)):
            return self.map(obj, path, depth)
        named: list[str] = []
        if len(keys) > MAX_KEYS:  # a wide object of scalars: its first keys, and the mentioned ones on their own line
            picked, mentioned = self.pick([[k, obj[k]] for k in keys], MAX_KEYS, obj)
            named = [keys[i] for i in picked if i in mentioned and i >= MAX_KEYS]
            keys = [keys[i] for i in picked if i < MAX_KEYS]
        inline = {k: obj[k] for k in keys if depth >= MAX_DEPTH or _is_small(obj[k])}
        inline_named = {k: obj[k] for k in named if _is_small(obj[k])}
        for priority, members in ((SCALARS, inline), (MENTIONED, inline_named)):
            if members:
                line = _compact({k: _shrink(v, self.detail.clip, 1) for k, v in members.items()})
                self.add(priority, f"{path or 'top-level'}: {clip(line, 2 * self.detail.item)}")
        if len(keys) + len(named) < len(obj):
            self.add(NOTE, f"… {len(obj) - len(keys) - len(named):,} more keys in {path or 'the object'}"
                           f"{self.ctx.recall()}")
        for key in keys + named:
            if key not in inline and key not in inline_named:
                self.value(obj[key], f"{path}.{key}" if path else str(key), depth + 1)

    def map(self, obj: dict, path: str, depth: int) -> None:
        """An object keyed by ids (a map of records): shown like an array."""
        keys = list(obj)
        values = list(obj.values())
        schema = self.remember("schema", obj, lambda: _schema(values))
        self.add(SCHEMA, f"{path or 'top-level'}: object of {len(keys):,} keys{schema}")
        picked, mentioned = self.pick([[k, v] for k, v in obj.items()], self.detail.head, obj)
        for i in picked:
            where = f"{path}.{keys[i]}" if path else str(keys[i])
            self.item(values[i], where, depth, MENTIONED if i in mentioned else HEAD)
        if len(picked) < len(keys):
            rest = sorted(set(range(len(keys))) - set(picked))
            ends = " … ".join(clip(keys[i], 40) for i in dict.fromkeys((rest[0], rest[-1])))
            self.add(NOTE, f"… {len(rest):,} more keys in {path or 'the object'} ({ends}){self.ctx.recall()}")

    def array(self, items: list, path: str, depth: int) -> None:
        schema = self.remember("schema", items, lambda: _schema(items))
        picked, mentioned = self.pick(items, self.detail.head, items)
        if not self.remember("scalars", items, lambda: not any(isinstance(v, (dict, list)) for v in items)):
            self.add(SCHEMA, f"{path or 'top-level'}: {len(items):,} items{schema}")
            for i in picked:
                self.item(items[i], f"{path}[{i}]", depth, MENTIONED if i in mentioned else HEAD)
        else:  # scalars: the shown ones on the schema's line
            shown = _compact([_shrink(items[i], self.detail.clip) for i in picked])
            self.add(MENTIONED if mentioned else SCHEMA,
                     f"{path or 'top-level'}: {len(items):,} items{schema}: {clip(shown, self.detail.item)}")
        if len(picked) < len(items):
            chosen = set(picked)
            rest = [i for i in range(len(items)) if i not in chosen]
            self.add(NOTE, f"… {len(rest):,} more items in {path or 'the array'}{_id_range(items, rest)}"
                           f"{self.ctx.recall()}")

    def item(self, item: Any, path: str, depth: int, priority: int) -> None:
        floor, self.floor = self.floor, max(self.floor, priority if priority == MENTIONED else 0)
        if isinstance(item, (dict, list)) and depth < MAX_DEPTH and len(_compact(item)) > 2 * self.detail.item:
            self.value(item, path, depth + 1)  # a big item: its own arrays get their own digest
        else:
            self.add(priority, f"{path}: {clip(_compact(_shrink(item, self.detail.clip)), self.detail.item)}")
        self.floor = floor

    def pick(self, items: list, head: int, owner: Any) -> tuple[list[int], set[int]]:
        """The first `head` items and the mentioned ones, in order; and the mentioned ones."""
        mentioned = set(self.remember("mentioned", owner, lambda: _mentioned(items, self.ctx))[: self.detail.mentioned])
        return sorted(set(range(min(head, len(items)))) | mentioned), mentioned

    def remember(self, what: str, owner: Any, make: Callable[[], Any]) -> Any:
        """What is worked out once per value, not once per level of detail."""
        key = (what, id(owner))
        if key not in self.ctx.memo:
            self.ctx.memo[key] = make()
        return self.ctx.memo[key]


def _is_map(obj: dict) -> bool:
    """Most values are objects or arrays: the keys are ids, not fields."""
    return sum(1 for v in obj.values() if isinstance(v, (dict, list))) * 2 >= len(obj)


def _is_small(value: Any) -> bool:
    if not isinstance(value, (dict, list)):
        return True
    return len(value) == 0 or (len(value) <= 4 and len(_compact(value)) <= 120)


def digest_json(text: str, ctx: DigestContext) -> str:
    """The most detailed rendering that fits; at the least detail, the lines that rank first."""
    value, rest = parse_json(text)  # type: ignore[misc]
    lines: list[tuple[int, str]] = []
    for detail in _DETAILS:
        writer = _JsonWriter(ctx, detail)
        writer.value(value, "", 0)
        lines = writer.out
        if rest:
            lines.append((TRAILER, f"then: {clip(' '.join(rest.split()), 2 * detail.clip)}"))
        body = "\n".join(line for _, line in lines)
        if ctx.count(body) <= ctx.budget:
            return body
    kept: list[int] = []
    spent = 0
    for i in sorted(range(len(lines)), key=lambda i: (-lines[i][0], i)):
        cost = ctx.count(lines[i][1]) + 1
        if spent + cost <= ctx.budget:
            kept.append(i)
            spent += cost
    return "\n".join(lines[i][1] for i in sorted(kept))
