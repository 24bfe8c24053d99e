"""What a session's carried messages hold must count against their cache's byte bound, whatever
field holds it: a tool call's arguments were held uncounted (a fuzzed 1 MB argument sized ~1 KB)."""
from ctxwarden.policies.messages import Carried, request_memo

BIG = "x" * 1_000_000


def _carried(messages):
    with request_memo(messages, None) as memo:
        pass
    return Carried(messages, memo)


def test_tool_call_arguments_count():
    call = {"id": "c1", "type": "function", "function": {"name": "f", "arguments": BIG}}
    messages = [{"role": "user", "content": "hi"}, {"role": "assistant", "content": None, "tool_calls": [call]},
                {"role": "tool", "tool_call_id": "c1", "content": "done"}]
    carried = _carried(messages)
    assert len(carried.messages) == 3
    assert carried.bytes >= len(BIG)


def test_text_counts_and_small_messages_stay_small():
    assert _carried([{"role": "user", "content": BIG}]).bytes >= len(BIG)
    assert _carried([{"role": "user", "content": "hello"}, {"role": "assistant", "content": "hi there"}]).bytes < 5_000


def test_wide_text_counts_as_stored():
    """CPython keeps a text with one emoji at 4 bytes a character: counted in characters, such
    sessions held ~2x their share of the bound."""
    wide = "\U0001F600" + "x" * 250_000  # outside the BMP: 4 bytes a character
    assert _carried([{"role": "user", "content": wide}]).bytes >= 4 * len(wide)


def test_what_the_facts_hold_counts():
    """A policy's analysis of a message (here a copy of its text) is carried with it."""
    text = "y" * 300_000
    message = {"role": "tool", "tool_call_id": "c1", "content": text}
    with request_memo([message], None) as memo:
        from ctxwarden.policies.messages import remembered
        remembered("copy", message, lambda m: "".join(reversed(m["content"])))
    assert Carried([message], memo).bytes >= 2 * len(text)
