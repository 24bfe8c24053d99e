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
