"""Hypothesis strategies for chat-completion requests, mostly wrong: the fuzz test and bench/fuzz.py.

A request is (raw body bytes, extra headers). Bodies start from the shape of a real agent request
(system prompt, user turns, assistant tool calls and their results, tools, options) and then go
wrong at any key: wrong types, odd roles, nested values, lone surrogates, integers longer than
Python converts, deep nesting, NaN, `function: null`, `tool_calls: []`, malformed response_format
and stream_options, stream true/false. Some repeat a tool call so the loops policy answers, some
are long enough for a small context window to make history and archive rewrite them.
Serialization is our own (`encode`), so a `Raw` fragment (a huge integer, a deep array, NaN)
reaches the server verbatim where json.dumps would refuse to write it.

`api_requests` adds the other two routes (a chat body written in the Responses or Messages shape,
then made wrong), valid session / tenant / user hints (many of each: the caches see many keys), tool
lists from a catalog of 1,000 tools, long fresh text, and in a share of the bodies one big string
(20 KB-1.5 MB) in any field (`BIG_SITES`), or the same bytes as thousands of small messages or tools.
"""

from __future__ import annotations

import copy
import json
import random
from typing import Any

from hypothesis import strategies as st

SMALL_MODEL = "fuzz-small"  # give it a small context window (CONFIG) so the compressing policies act
CONFIG = {"models": {SMALL_MODEL: {"context_window": 1200}}}
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


STREAM_ENDS = {"chat": (b"data: [DONE]",), "responses": (b'"type":"response.completed"', b'"type":"response.incomplete"',
               b'"type":"response.failed"', b'"type":"error"'), "messages": (b"event: message_stop", b"event: error")}


def problem(status: int, content_type: str, content: bytes, api: str = "chat") -> str | None:
    """What is wrong with an answer to a generated request (None: nothing). Any 5xx is wrong; a 4xx
    needs an error body in the API's shape (OpenAI's, or Anthropic's for /v1/messages); a 2xx the
    API's answer (JSON) or a stream whose last event closes it (chat: [DONE])."""
    if status >= 500:
        return f"{status}: {content[:300]!r}"
    if "text/event-stream" in content_type:
        last = content.rstrip().rsplit(b"\n\n", 1)[-1].replace(b'": "', b'":"')
        return None if status < 300 and any(end in last for end in STREAM_ENDS[api]) else \
            f"{status} stream not closed: {last[:200]!r}"
    try:
        data = json.loads(content)
    except ValueError:
        return f"{status}: not JSON: {content[:200]!r}"
    if not isinstance(data, dict):
        return f"{status}: not an object: {content[:200]!r}"
    if status >= 400:
        error = data.get("error")
        if api == "messages":
            ok = data.get("type") == "error" and isinstance(error, dict) and isinstance(error.get("message"), str)
        else:
            ok = isinstance(error, dict) and set(error) == ERROR_KEYS and isinstance(error["message"], str)
        return None if ok else f"{status}: not an error in the {api} shape: {content[:200]!r}"
    answered = {"chat": isinstance(data.get("choices"), list),
                "responses": data.get("object") == "response" and isinstance(data.get("output"), list),
                "messages": data.get("type") == "message" and isinstance(data.get("content"), list)}[api]
    return None if answered else f"{status}: not a {api} answer: {content[:200]!r}"


# ---------------------------------------------------------------------------- three APIs, big fields, many keys

APIS = ("chat", "responses", "messages")
PATHS = {"chat": "/v1/chat/completions", "responses": "/v1/responses", "messages": "/v1/messages"}
API_HEADERS = {"chat": {}, "responses": {}, "messages": {b"anthropic-version": b"2023-06-01", b"x-api-key": b"sk-fuzz"}}
BIG_MIN, BIG_MAX = 20_000, 1_500_000
_WORDS = ("order invoice shipment refund Paris Lisbon Osaka flight hotel budget ticket delayed confirmed warehouse "
          "account balance region forecast price status carrier my manager is Priya I prefer csv never after 9pm "
          "under $400 2024-05-01 eu-west-1 ERROR Traceback {\"id\": 17} the quick brown fox 中文 café \U0001f600")
VOCAB = _WORDS.split()
_SERVERS, _VERBS, _NOUNS = ("github jira slack gdrive postgres stripe calendar weather maps shell",
                             "get list create update delete search send open query sync",
                             "issue page file user event invoice row message branch forecast")
CATALOG = [f"{s}__{v}_{n}" for s in _SERVERS.split() for v in _VERBS.split() for n in _NOUNS.split()]  # 1,000 tool names


def big_text(kind: str, size: int, seed: int) -> str:
    """`size` characters of one kind: words, one letter repeated, random characters, JSON, log lines."""
    rng = random.Random(seed)
    if kind == "same":
        return "x" * size
    if kind == "chars":
        return "".join(rng.choices('abcdefghij klmnop,.;:{}[]\\"0123456789é中\U0001f600\n', k=size))
    if kind == "json":
        text = json.dumps([{"id": i, "name": rng.choice(VOCAB), "v": rng.random()} for i in range(size // 40 + 1)])
    elif kind == "lines":
        text = "\n".join(f"2024-05-01T10:{i % 60:02d}:00 {rng.choice(('INFO', 'WARN', 'ERROR'))} svc-{i % 7} "
                         f"{' '.join(rng.choices(VOCAB, k=6))}" for i in range(size // 60 + 1))
    else:
        text = " ".join(rng.choices(VOCAB, k=size // 6 + 1))
    return text[:size]


BIG_KINDS = ("words", "words", "same", "chars", "json", "lines")


def random_big_text(rng: random.Random, low: int = BIG_MIN, high: int = BIG_MAX) -> str:
    """A big string of any kind, its size log-uniform in [low, high): as many of 20-200 KB as of 0.2-1.5 MB."""
    return big_text(rng.choice(BIG_KINDS), int(low * (high / low) ** rng.random()), rng.randrange(2**32))


def _tool(name: str, description: str = "", parameters: Any = None) -> dict[str, Any]:
    return {"type": "function", "function": {"name": name, "description": description,
                                             "parameters": parameters or {"type": "object", "properties": {"q": {"type": "string"}}}}}


def _call_round(arguments: str, call_id: str = "cb", result: str = "ok") -> list[dict[str, Any]]:
    call = {"id": call_id, "type": "function", "function": {"name": "search", "arguments": arguments}}
    return [{"role": "assistant", "content": None, "tool_calls": [call]}, {"role": "tool", "tool_call_id": call_id, "content": result}]


def _nest(value: Any, depth: int) -> Any:
    for i in range(depth):
        value = {f"k{i}": value, "n": i} if i % 2 else [value, i]
    return value


BIG_SITES = ("tool_description", "tool_parameters", "tool_name", "many_tools", "arguments", "arguments_json",
             "tool_call_id", "name", "system", "tool_result", "user_message", "assistant_message", "user_field",
             "metadata", "nested", "many_messages")


def put_big(chat: dict[str, Any], site: str, big: str) -> dict[str, Any]:
    """`chat` (a copy) with `big` at `site`."""
    chat = copy.deepcopy(chat)
    messages, tools = chat["messages"], chat.setdefault("tools", [])
    last_user = next(i for i in range(len(messages) - 1, -1, -1) if messages[i].get("role") == "user")
    if site == "tool_description":
        tools.append(_tool("big_tool", big))
    elif site == "tool_parameters":
        tools.append(_tool("big_tool", "a tool", {"type": "object", "properties": {"q": {"type": "string", "description": big}}}))
    elif site == "tool_name":
        tools.append(_tool(big[:200_000]))
    elif site == "many_tools":
        tools += [_tool(f"t{i}_{CATALOG[i % len(CATALOG)]}", big[i * 2000:(i + 1) * 2000]) for i in range(len(big) // 2000)]
    elif site in ("arguments", "arguments_json", "tool_call_id", "tool_result"):
        args = json.dumps({"q": big}) if site == "arguments_json" else big if site == "arguments" else "{}"
        messages[last_user:last_user] = _call_round(args, big if site == "tool_call_id" else "cb",
                                                    big if site == "tool_result" else "ok")
    elif site == "name":
        messages[last_user] = {**messages[last_user], "name": big}
    elif site == "system":
        messages.insert(0, {"role": "system", "content": big})
    elif site in ("user_message", "assistant_message"):
        role = site.split("_")[0]
        messages[last_user:last_user] = [{"role": role, "content": big}] + ([{"role": "user", "content": "go on"}] if role == "user" else [])
    elif site in ("user_field", "metadata", "nested"):
        chat["user" if site == "user_field" else "metadata"] = big if site == "user_field" else \
            {"note": big} if site == "metadata" else {"deep": _nest(big, 40)}
    else:  # many_messages: the same bytes as many small turns
        messages[last_user:last_user] = [{"role": ("user", "assistant")[i % 2], "content": big[i * 100:(i + 1) * 100]}
                                         for i in range(len(big) // 100)]
    if not tools:
        del chat["tools"]
    return chat


def in_api(api: str, chat: dict[str, Any]) -> dict[str, Any]:
    """A chat body written as `api`'s request (bench/_api_wire.py); what that shape has no place for is
    set aside: a tool that is not a function stays as it is, arguments that are not an object are wrapped."""
    if api == "chat":
        return chat
    from _api_wire import request_body  # the bench folder is on sys.path wherever these strategies run

    chat = copy.deepcopy(chat)
    tools = chat.pop("tools", None)
    for message in chat["messages"]:
        for call in message.get("tool_calls") or []:
            try:
                ok = isinstance(json.loads(call["function"]["arguments"] or "{}"), dict)
            except ValueError:
                ok = False
            if not ok and api == "messages":
                call["function"]["arguments"] = json.dumps({"text": call["function"]["arguments"]})
    functions = [t for t in tools or [] if t.get("type") == "function" and t["function"].get("name")]
    body = request_body(api, {**chat, "tools": functions} if functions else chat)
    if tools is not None:
        body["tools"] = body.get("tools", []) + [t for t in tools if t not in functions]
    for key in ("user", "metadata") if api == "responses" else ("metadata",):
        if key in chat:
            body[key] = chat[key]
    if api == "messages" and "user" in chat:  # Anthropic's place for it
        body["metadata"] = {**(body.get("metadata") if isinstance(body.get("metadata"), dict) else {}), "user_id": chat["user"]}
    return body


tool_lists = st.lists(st.sampled_from(CATALOG), max_size=45, unique=True).map(
    lambda names: [_tool(n, f"{n.split('__')[1].replace('_', ' ')} in {n.split('__')[0]}") for n in names])


@st.composite
def api_requests(draw: st.DrawFn, big_share: float = 0.05) -> tuple[str, bytes, dict[bytes, bytes], str]:
    """(API, raw body, headers, where its big string is or ""): a body of `bodies`' kind in any of the three shapes, with valid hints
    (sessions, tenants, users: many of each), a tool list from the catalog, long fresh text, and with
    probability `big_share` one big string somewhere."""
    api = draw(st.sampled_from(APIS))
    chat: Any = draw(st.fixed_dictionaries(
        {"model": st.sampled_from(["gpt-4o", SMALL_MODEL, "gpt-4o-mini"]), "messages": conversations()}, optional=OPTIONAL))
    if draw(st.booleans()):
        chat["tools"] = draw(tool_lists)
    if draw(st.integers(0, 3)) == 0:  # a long message of fresh text (its statements, tokens and verdicts are new)
        chat["messages"].append({"role": "user", "content": big_text("words", draw(st.integers(2_000, 20_000)),
                                                                      draw(st.integers(0, 2**32 - 1)))})
    # A true share, an even pick of the site and sizes spread as said: hypothesis leans to small numbers and
    # repeats them, so the dice are seeded by the body drawn so far too (reproducible: no hash of Python's)
    rng = random.Random(f"{draw(st.integers(0, 2**32 - 1))}:{json.dumps(chat)[:4000]}")
    site = rng.choice(BIG_SITES) if rng.random() < big_share else ""
    if site:
        chat = put_big(chat, site, random_big_text(rng))
    body = encode(draw(odd)) if draw(st.integers(0, 39)) == 0 else encode(draw(mutated(in_api(api, chat))))
    headers: dict[bytes, bytes] = dict(API_HEADERS[api])
    for name, pool in ((b"x-ctxwarden-session", 5000), (b"x-ctxwarden-tenant", 50), (b"x-ctxwarden-user", 2000)):
        pick = rng.randrange(8)
        if pick < 5:  # one of many valid names: s0-s4999, t0-t49, u0-u1999
            headers[name] = f"{name.decode()[12]}{rng.randrange(pool)}".encode()
        elif pick == 5:
            headers[name] = draw(header_values)
    return api, body, headers, site
