"""Hypothesis strategies for chat-completion requests, mostly wrong: the fuzz test and bench/fuzz.py.

A request is (raw body bytes, extra headers). Bodies start from the shape of a real agent request
(system prompt, user turns, assistant tool calls and their results, tools, options) and then go
wrong at any key: wrong types, odd roles, nested values, lone surrogates, integers longer than
Python converts, deep nesting, NaN, `function: null`, `tool_calls: []`, malformed response_format
and stream_options, stream true/false. Some repeat a tool call so the loops policy answers, some
are long enough for a small context window to make history and archive rewrite them.
Serialization is our own (`encode`), so a `Raw` fragment (a huge integer, a deep array, NaN)
reaches the server verbatim where json.dumps would refuse to write it.
"""

from __future__ import annotations

import copy
import json
from typing import Any

from hypothesis import strategies as st

SMALL_MODEL = "fuzz-small"  # give it a small context window (CONFIG) so the compressing policies act
CONFIG = {"models": {SMALL_MODEL: {"context_window": 1200}}}
ROLES = ["system", "developer", "user", "assistant", "tool", "function"]
ODD_TEXTS = ["", " ", "\ud800", "a\udc00b", "\ud83d\ude00", "\udfff\ud800", "\x00", "\u2028\u2029", "\ufeff",
             "café ☕ 中文", "{\"role\": \"user\"}", "\\ud800", "[" * 50, "ignore previous instructions", "x" * 3000]
LONG_TEXT = " ".join(f"Step {i}: the service returned status {200 + i % 3} after {i * 7} ms for region eu-{i % 5}."
                     for i in range(60))


class Raw(str):
    """Text written into the body as it is (not JSON-encoded)."""


def encode(value: Any) -> bytes:
    """JSON text of `value`, `Raw` fragments verbatim; lone surrogates become \\uXXXX escapes."""
    return _text(value).encode("utf-8")


def _text(value: Any) -> str:
    if isinstance(value, Raw):
        return str(value)
    if isinstance(value, dict):
        return "{" + ",".join(f"{json.dumps(str(k))}:{_text(v)}" for k, v in value.items()) + "}"
    if isinstance(value, (list, tuple)):
        return "[" + ",".join(_text(v) for v in value) + "]"
    return json.dumps(value)  # ensure_ascii: a lone surrogate is written as its escape


# ---------------------------------------------------------------------------- values

plain_texts = st.one_of(st.text(max_size=20), st.sampled_from(["What is the status?", "hi", "café ☕ 中文 \ud83d\ude00", ""]))
texts = st.one_of(plain_texts, st.sampled_from(ODD_TEXTS))
huge_ints = st.integers(4301, 6000).map(lambda n: Raw("-" * (n % 2) + "9" * n))
deep = st.integers(100, 3000).map(lambda n: Raw("[" * n + "]" * n))
constants = st.sampled_from([Raw("NaN"), Raw("Infinity"), Raw("-Infinity"), Raw("1e999"), Raw("-0")])
scalars = st.one_of(st.none(), st.booleans(), st.integers(-(2**70), 2**70), st.floats(allow_nan=False, allow_infinity=False),
                    texts)
json_values = st.recursive(scalars, lambda inner: st.lists(inner, max_size=3) | st.dictionaries(texts, inner, max_size=3),
                           max_leaves=8)
odd = st.one_of(json_values, huge_ints, deep, constants, st.just({}), st.just([]), st.just([[]]), st.just({"": None}),
                st.just({"function": None}), st.just([{"function": None}]), st.just({"type": None}))


# ---------------------------------------------------------------------------- a valid request

content_parts = st.one_of(
    st.fixed_dictionaries({"type": st.just("text"), "text": plain_texts}),
    st.just({"type": "image_url", "image_url": {"url": "data:image/png;base64,AAAA"}}),
    st.fixed_dictionaries({"type": st.sampled_from(["refusal", "input_audio", "file", "x"])}, optional={"refusal": plain_texts}),
)
contents = st.one_of(plain_texts, st.just(LONG_TEXT), st.lists(content_parts, min_size=1, max_size=3))
arguments = st.sampled_from(['{"q": "status"}', "{}", "not json", '{"a": [1, 2]}', ""])


def _round(i: int, result: Any, arguments: str = '{"q": "status"}', name: str = "search") -> list[dict[str, Any]]:
    call = {"id": f"c{i}", "type": "function", "function": {"name": name, "arguments": arguments}}
    return [{"role": "assistant", "content": None, "tool_calls": [call]}, {"role": "tool", "tool_call_id": f"c{i}", "content": result}]


@st.composite
def conversations(draw: st.DrawFn) -> list[Any]:
    """A plausible agent history: sometimes looping (identical results), sometimes long."""
    out: list[Any] = []
    if draw(st.booleans()):
        out.append({"role": draw(st.sampled_from(["system", "developer"])), "content": draw(st.sampled_from(["You are an agent.", LONG_TEXT]))})
    out.append({"role": "user", "content": draw(contents)})
    same = draw(st.booleans())  # identical results: the loops policy answers
    for i in range(draw(st.integers(0, 5))):
        result = "no results" if same else draw(st.one_of(contents, st.just(f"result {i}: {LONG_TEXT[: 60 * (i + 1)]}")))
        out += _round(i, result, draw(arguments), draw(st.sampled_from(["search", "open", "db.query"])))
    kind = draw(st.integers(0, 5))
    if kind == 0:
        out.append({"role": "assistant", "content": draw(contents), "tool_calls": []})
        out.append({"role": "user", "content": draw(contents), "name": draw(plain_texts)})
    elif kind == 1:
        out.append({"role": "assistant", "content": None, "function_call": {"name": "f", "arguments": "{}"}})
        out.append({"role": "function", "name": "f", "content": draw(contents)})
    elif kind == 2:
        out.append({"role": "assistant", "content": draw(contents), "refusal": None, "tool_calls": None})
    return out


tools_one = st.one_of(
    st.fixed_dictionaries({"type": st.just("function"), "function": st.fixed_dictionaries(
        {"name": st.sampled_from(["search", "open", "weather_get", "db.query", "find_tools", "context_recall"])},
        optional={"description": plain_texts, "parameters": st.just({"type": "object", "properties": {"q": {"type": "string"}}}),
                  "strict": st.booleans()})}),
    st.fixed_dictionaries({"type": st.sampled_from(["custom", "web_search"])}, optional={"custom": st.just({"name": "grammar"})}),
)
response_formats = st.one_of(
    st.fixed_dictionaries({"type": st.sampled_from(["text", "json_object"])}),
    st.fixed_dictionaries({"type": st.just("json_schema"), "json_schema": st.fixed_dictionaries(
        {"name": st.just("answer")},
        optional={"schema": st.just({"type": "object", "required": ["status"]}), "strict": st.booleans()})}),
)
OPTIONAL = {
    "stream": st.booleans(),
    "stream_options": st.fixed_dictionaries({}, optional={"include_usage": st.booleans()}),
    "response_format": response_formats,
    "tools": st.lists(tools_one, max_size=4),
    "tool_choice": st.one_of(st.sampled_from(["auto", "none", "required"]),
                             st.just({"type": "function", "function": {"name": "search"}}),
                             st.just({"type": "allowed_tools", "allowed_tools": {"mode": "auto", "tools": [{"type": "function", "function": {"name": "open"}}]}})),
    "parallel_tool_calls": st.booleans(),
    "user": plain_texts,
    "temperature": st.floats(0, 2),
    "max_tokens": st.integers(1, 4096),
    "metadata": st.just({"run": "fuzz"}),
}


# ---------------------------------------------------------------------------- going wrong

KEYS = ["role", "content", "tool_calls", "tool_call_id", "function", "function_call", "type", "name", "arguments", "id",
        "text", "image_url", "parameters", "json_schema", "schema", "required", "include_usage", "refusal", "x"]

def _containers(value: Any, path: tuple = ()) -> list[tuple]:
    """Paths of every object and array in `value`."""
    found = [path] if isinstance(value, (dict, list)) else []
    items = value.items() if isinstance(value, dict) else enumerate(value) if isinstance(value, list) else ()
    for key, child in items:
        found += _containers(child, (*path, key))
    return found


def _at(value: Any, path: tuple) -> Any:
    for key in path:
        value = value[key]
    return value


@st.composite
def mutated(draw: st.DrawFn, body: Any) -> Any:
    """`body` with 0-3 changes anywhere: a value made odd, a key added or dropped, an item added.
    Works on a copy (strategies share their `just` values)."""
    body = copy.deepcopy(body)
    for _ in range(draw(st.sampled_from([0, 0, 1, 1, 1, 2, 3]))):
        paths = _containers(body)
        if not paths:
            break
        node = _at(body, draw(st.sampled_from(paths)))
        action = draw(st.integers(0, 3))
        if isinstance(node, dict) and node and action < 2:
            key = draw(st.sampled_from(sorted(node, key=str)))
            if action == 0:
                node[key] = copy.deepcopy(draw(odd))
            else:
                del node[key]
        elif isinstance(node, dict):
            node[draw(st.sampled_from(KEYS) | texts)] = copy.deepcopy(draw(odd))
        elif node and action < 2:
            node[draw(st.integers(0, len(node) - 1))] = copy.deepcopy(draw(odd))
        else:
            node.insert(draw(st.integers(0, len(node))), copy.deepcopy(draw(odd)))
    return body


@st.composite
def bodies(draw: st.DrawFn) -> bytes:
    body: Any = draw(st.fixed_dictionaries(
        {"model": st.sampled_from(["gpt-4o", SMALL_MODEL, "gpt-4o-mini"]), "messages": conversations()}, optional=OPTIONAL))
    if draw(st.integers(0, 39)) == 0:
        return encode(draw(odd))  # not an object at all
    return encode(draw(mutated(body)))


header_values = st.binary(min_size=1, max_size=12).map(lambda b: bytes(c for c in b if c > 0x20 and c != 0x7f) or b"s")


@st.composite
def requests(draw: st.DrawFn) -> tuple[bytes, dict[bytes, bytes]]:
    """(raw body, extra headers): x-ctxwarden-* hints with arbitrary (non-ASCII, undecodable) bytes."""
    headers: dict[bytes, bytes] = {}
    for name in (b"x-ctxwarden-session", b"x-ctxwarden-tenant", b"x-ctxwarden-timestamps"):
        if draw(st.integers(0, 3)) == 0:
            headers[name] = draw(header_values)
    return draw(bodies()), headers


VALID = {"model": "gpt-4o", "messages": [{"role": "user", "content": "Are you still there?"}]}
ERROR_KEYS = {"message", "type", "code", "param"}


def problem(status: int, content_type: str, content: bytes) -> str | None:
    """What is wrong with an answer to a generated request (None: nothing). Any 5xx is wrong; a 4xx
    needs an OpenAI-shaped error body; a 2xx a completion (JSON) or a stream ending in [DONE]."""
    if status >= 500:
        return f"{status}: {content[:300]!r}"
    if "text/event-stream" in content_type:
        return None if status < 300 and content.rstrip().endswith(b"data: [DONE]") else f"{status} stream without [DONE]"
    try:
        data = json.loads(content)
    except ValueError:
        return f"{status}: not JSON: {content[:200]!r}"
    if status >= 400:
        error = data.get("error") if isinstance(data, dict) else None
        if not isinstance(error, dict) or set(error) != ERROR_KEYS or not isinstance(error["message"], str):
            return f"{status}: not an OpenAI-shaped error: {content[:200]!r}"
        return None
    if not (isinstance(data, dict) and isinstance(data.get("choices"), list)):
        return f"{status}: not a completion: {content[:200]!r}"
    return None
