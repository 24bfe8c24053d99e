"""Token counting with tiktoken, offline, cached per message.

tiktoken downloads its BPE files on first use; litellm ships cl100k_base and o200k_base, so we
point tiktoken's cache at litellm's copy before the first `get_encoding`, so counting works offline.
"""

from __future__ import annotations

import importlib.util
import json
import os
from pathlib import Path
from typing import Sequence

from ..cache import LRU, content_key, parts_hash, stable_hash
from ..messages import WHOLE_TOOL_LIST, Message, Tool, content_text, remembered
from .calls import call_parts

# OpenAI's chat format: every message costs a few tokens of framing, and the reply is primed.
TOKENS_PER_MESSAGE = 3
TOKENS_PER_NAME = 1
REPLY_PRIMING = 3

_O200K_PREFIXES = ("gpt-4o", "gpt-4.1", "gpt-4.5", "gpt-5", "o1", "o3", "o4", "chatgpt-4o")


def use_bundled_tiktoken_files() -> None:
    """Make tiktoken read the BPE files litellm ships instead of downloading them."""
    if os.environ.get("TIKTOKEN_CACHE_DIR") and os.environ.get("CUSTOM_TIKTOKEN_CACHE_DIR"):
        return
    spec = importlib.util.find_spec("litellm")
    if spec is None or not spec.submodule_search_locations:
        return
    bundled = Path(list(spec.submodule_search_locations)[0]) / "litellm_core_utils" / "tokenizers"
    if bundled.is_dir():
        os.environ.setdefault("TIKTOKEN_CACHE_DIR", str(bundled))
        os.environ.setdefault("CUSTOM_TIKTOKEN_CACHE_DIR", str(bundled))


def _message_key(message: Message) -> tuple:
    """A cache key that costs a tuple hash for the common shapes (str hashing runs in C), and the
    sorted JSON's hash only for list-form content or unusual fields."""
    content = message.get("content")
    if (content is None or isinstance(content, str)) and message.keys() <= _PLAIN_FIELDS:
        calls = message.get("tool_calls")
        fields = (message.get("role"), content, message.get("name"), message.get("tool_call_id"),
                  _calls_key(calls) if calls else None)
        # Keep a 64-bit hash, not the text: the cache must not hold every message ever seen.
        try:
            return ("plain", hash(fields), len(content or ""))
        except TypeError:  # an unhashable name or tool_call_id (a list): hash the JSON below
            pass
    return ("json", stable_hash(message))


_PLAIN_FIELDS = {"role", "content", "name", "tool_call_id", "tool_calls", "refusal"}


def _calls_key(calls: list) -> tuple:
    """What `count_message` reads of the tool calls (each call's name and arguments, as text), as a
    tuple: the sorted JSON of every call of every assistant message, every request, cost more than
    the rest of the budget's measure."""
    return tuple(_call_text(c) for c in calls)


def _call_text(call: object) -> tuple[str, str]:
    """A tool call's name and arguments (a custom call's input) as text, "" for what it lacks."""
    name, arguments = call_parts(call)
    return ("" if name is None else str(name)), ("" if arguments is None else str(arguments))


def encoding_name_for(model: str) -> str:
    bare = model.split("/")[-1].lower()
    return "o200k_base" if bare.startswith(_O200K_PREFIXES) else "cl100k_base"


LONG_TEXT = 512  # characters from which a text's count is cached by its hash
ENTRY_BYTES = 200  # one cached count: its key (an encoding name and a hash), the int, the LRU's node
CACHE_BYTES = 8 * 2**20  # each of the counter's two caches, before the cache budget scales it


def _entry_bytes(key: object, count: int) -> int:
    return ENTRY_BYTES


class TiktokenCounter:
    """Counts tokens of texts, messages and tool definitions; caches per message hash."""

    def __init__(self, cache_size: int = 50_000) -> None:
        use_bundled_tiktoken_files()
        self._encodings: dict[str, object] = {}
        # A key is an encoding name and a hash, never the text (_message_key): ~180 bytes an entry whatever
        # the message (measured in a probe of bench/fuzz.py's proxy), so each entry counts ENTRY_BYTES, and
        # both caches are shares of the one cache budget (`server.cache_mb`) like every other
        self._cache: LRU[tuple[str, tuple], int] = LRU(cache_size, max_bytes=CACHE_BYTES, sizeof=_entry_bytes)
        # Long texts by hash: digests and summaries count the same tool result again at every compaction
        # event and every recount of a forwarded summary; hashing is ~20x cheaper than encoding
        self._texts: LRU[tuple[str, str], int] = LRU(cache_size, max_bytes=CACHE_BYTES, sizeof=_entry_bytes)

    def _encoding(self, model: str):
        name = encoding_name_for(model)
        enc = self._encodings.get(name)
        if enc is None:
            import tiktoken

            enc = self._encodings[name] = tiktoken.get_encoding(name)
        return name, enc

    def count_text(self, text: str, model: str) -> int:
        if not text:
            return 0
        name, enc = self._encoding(model)
        if len(text) < LONG_TEXT:
            return len(enc.encode(text, disallowed_special=()))
        key = (name, parts_hash(text))
        hit = self._texts.get(key)
        if hit is None:
            # the tokens as one numpy buffer, not a list of Python ints: a 1 MB text made ~460,000 int
            # objects (14 MB of CPython's small-object arenas, freed but pinning arenas the rest of the
            # process keeps using) and took 3.7x as long (0.32 s → 0.09 s); the count is the same
            hit = int(enc.encode_to_numpy(text, disallowed_special=()).size)
            self._texts.put(key, hit)
        return hit

    def count_message(self, message: Message, model: str) -> int:
        name, _ = self._encoding(model)
        key = (name, _message_key(message))
        hit = self._cache.get(key)
        if hit is not None:
            return hit
        n = TOKENS_PER_MESSAGE + self.count_text(str(message.get("role", "")), model)
        n += self.count_text(content_text(message), model)
        if message.get("name"):
            n += TOKENS_PER_NAME + self.count_text(str(message["name"]), model)
        for call in message.get("tool_calls") or []:
            name, arguments = _call_text(call)
            n += 3 + self.count_text(name, model)
            n += self.count_text(arguments, model)
        self._cache.put(key, n)
        return n

    def count_messages(self, messages: Sequence[Message], model: str) -> int:
        return sum(self.count_message(m, model) for m in messages) + REPLY_PRIMING

    def count_tools(self, tools: Sequence[Tool] | None, model: str) -> int:
        if not tools:
            return 0
        if len(tools) < WHOLE_TOOL_LIST:
            return self._each_tool(tools, model)
        # An agent sends the same long catalog on every request: counted once per list (by content_key,
        # ~0.2 ms for 525 tools, and once per list object in a request), not once per definition (a JSON
        # encoding and a hash each: 4.4 ms)
        name, _ = self._encoding(model)
        key = (name, "tools:" + tool_list_key(tools))
        hit = self._texts.get(key)
        if hit is None:
            hit = self._each_tool(tools, model)
            self._texts.put(key, hit)
        return hit

    def _each_tool(self, tools: Sequence[Tool], model: str) -> int:
        return sum(self.count_message({"role": "tool_definition", "content": json.dumps(t)}, model) for t in tools)


def tool_list_key(tools: Sequence[Tool]) -> str:
    """`content_key` of a tool list, made once per list object within `request_memo`. The budget, the
    history policy and the tools policy each key the request's catalog; serializing a 525-tool list
    took ~0.5-0.65 ms each time in a server under bench/mcp_tools.py (0.2 ms alone, fresh strings),
    three times a request. Lists are never changed in place (policies assign new ones), so the
    object is the key."""
    return remembered("tool_list_key", tools, content_key)
