"""Where compaction summaries travel: never a late system message, user/assistant turns alternating,
accepted by litellm's Anthropic and Gemini transforms and by a strict (Mistral-style) chat template."""

from __future__ import annotations

import asyncio
import json
import os
from datetime import datetime, timedelta, timezone
from typing import Any

import pytest

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

from ctxwarden.policies.base import BudgetNote, Exchange, Services
from ctxwarden.policies.history.blocks import SUMMARY_END, SUMMARY_TAG, summary_sections, without_summaries
from ctxwarden.policies.history.placement import Gap, Note, place, turns
from ctxwarden.policies.history.policy import HistoryConfig, HistoryPolicy
from ctxwarden.policies.messages import content_text
from ctxwarden.policies.text.tokens import TiktokenCounter
from ctxwarden.proxy.config import StorageConfig
from ctxwarden.proxy.storage import ChromaStore
from tests.test_compression_e2e import SYSTEM, agent_conversation, assert_pairs_intact
from tests.test_history_events import agent_loop
from tests.test_history_units import RecordingMetrics

jinja2 = pytest.importorskip("jinja2")
from jinja2.sandbox import ImmutableSandboxedEnvironment  # noqa: E402


@pytest.fixture
def services(tmp_path) -> Services:
    return Services(tokens=TiktokenCounter(), metrics=RecordingMetrics(), store=ChromaStore(StorageConfig(path=str(tmp_path))))


# ---------------------------------------------------------------------------- the checks


# A strict template in the style of the Mistral / Gemma / Llama-2 templates vLLM and llama.cpp
# serve: a system message only first, then user and assistant alternating, an assistant's tool
# calls and their results (and the assistant's answer after them) being the assistant's turn.
STRICT_TEMPLATE = """
{%- if messages[0]['role'] in ['system', 'developer'] -%}
  {%- set loop_messages = messages[1:] -%}[SYS]{{ messages[0]['content'] }}[/SYS]
{%- else -%}{%- set loop_messages = messages -%}{%- endif -%}
{%- set ns = namespace(index=0, prev='') -%}
{%- for m in loop_messages -%}
  {%- if m['role'] in ['system', 'developer'] -%}
    {{ raise_exception('System message must be at the beginning.') }}
  {%- elif m['role'] == 'tool' -%}
    {%- if ns.prev not in ['assistant_calls', 'tool'] -%}{{ raise_exception('A tool result must follow its call.') }}{%- endif -%}
    [RESULT]{{ m['content'] }}[/RESULT]
  {%- elif m['role'] == 'assistant' and ns.prev == 'tool' -%}
    {{ m['content'] or '' }}
  {%- else -%}
    {%- if (m['role'] == 'user') != (ns.index % 2 == 0) -%}
      {{ raise_exception('Conversation roles must alternate user/assistant/user/assistant/...') }}
    {%- endif -%}
    {%- set ns.index = ns.index + 1 -%}
    {%- if m['role'] == 'user' -%}[INST]
      {%- if m['content'] is string -%}{{ m['content'] }}{%- else -%}{%- for p in m['content'] -%}{{ p['text'] if p['type'] == 'text' else '[media]' }}{%- endfor -%}{%- endif -%}
    [/INST]{%- else -%}{{ m['content'] or '' }}{%- endif -%}
  {%- endif -%}
  {%- set ns.prev = 'assistant_calls' if m['role'] == 'assistant' and m.get('tool_calls') else m['role'] -%}
{%- endfor -%}
"""


def render_strict(messages: list[dict[str, Any]]) -> str:
    def raise_exception(message: str) -> None:
        raise jinja2.exceptions.TemplateError(message)

    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True)
    env.globals["raise_exception"] = raise_exception
    return env.from_string(STRICT_TEMPLATE).render(messages=messages)


def anthropic_request(messages: list[dict[str, Any]]) -> dict[str, Any]:
    import litellm

    tools = [{"type": "function", "function": {"name": n, "parameters": {"type": "object", "properties": {}}}}
             for n in ("search_flights", "search_hotels", "search_orders", "f")]
    return litellm.AnthropicConfig().transform_request(
        "claude-3-5-sonnet-20240620", json.loads(json.dumps(messages)), {"tools": tools, "max_tokens": 100}, {}, {})


def gemini_request(messages: list[dict[str, Any]]) -> dict[str, Any]:
    from litellm.llms.vertex_ai.gemini.transformation import transform_request_body

    return transform_request_body(json.loads(json.dumps(messages)), "gemini-2.5-flash", {}, "gemini", {}, None)


def assert_accepted_everywhere(messages: list[dict[str, Any]], system: dict[str, Any]) -> None:
    """(a) no late system message, (b) alternating turns, (c) litellm's Anthropic and Gemini
    transforms take it and make no system block of a summary, (d) the strict template renders it."""
    assert messages[0] is system
    assert all(m["role"] not in ("system", "developer") for m in messages[1:]), "a late system message"
    sides = turns(messages[1:])
    assert sides[0] == "user" and all(a != b for a, b in zip(sides, sides[1:])), sides
    assert_pairs_intact(messages)
    found = [s for m in messages for s in summary_sections(m)]
    assert all(m["role"] == "user" for m in messages if summary_sections(m))

    anthropic = anthropic_request(messages)
    system_text = json.dumps(anthropic.get("system", ""))
    assert SUMMARY_TAG not in system_text and "Operator note" not in json.dumps(anthropic)
    roles = [m["role"] for m in anthropic["messages"]]
    assert roles[0] == "user" and all(a != b for a, b in zip(roles, roles[1:])), roles
    if found:
        assert SUMMARY_TAG in json.dumps(anthropic["messages"])

    gemini = gemini_request(messages)
    instruction = json.dumps(gemini.get("system_instruction", ""))
    assert SUMMARY_TAG not in instruction and system["content"] in instruction
    if found:
        assert SUMMARY_TAG in json.dumps(gemini["contents"])

    rendered = render_strict(messages)
    assert all(s.split("\n")[0] in rendered for s in found)


def forward(policy: HistoryPolicy, messages: list[dict], pressure: str = "none", target: int | None = None) -> Exchange:
    ex = Exchange("t", "gpt-4o", messages, None, {"model": "gpt-4o", "messages": messages}, tenant="acme", session_id="s1")
    if target is not None:
        ex.pressure = pressure  # type: ignore[assignment]
        ex.notes.budget = BudgetNote(0, window=128_000, compress_at=target * 4 // 3, target_at=target,
                                     aggressive_at=target * 3 // 2)
    asyncio.run(policy.on_request(ex))
    return ex


# ---------------------------------------------------------------------------- the checks check


def test_the_checks_reject_the_shapes_providers_reject():
    late = [SYSTEM, {"role": "user", "content": "hi"}, {"role": "system", "content": "[ctxwarden summary of 3]"},
            {"role": "assistant", "content": "ok"}]
    with pytest.raises(jinja2.exceptions.TemplateError, match="System message"):
        render_strict(late)
    with pytest.raises(jinja2.exceptions.TemplateError, match="alternate"):
        render_strict([SYSTEM, {"role": "user", "content": "a"}, {"role": "user", "content": "b"}])
    with pytest.raises(jinja2.exceptions.TemplateError, match="alternate"):
        render_strict([{"role": "user", "content": "a"}, {"role": "assistant", "content": "b"}, {"role": "assistant", "content": "c"}])
    assert "Operator note" in json.dumps(anthropic_request(late))  # litellm rewrites a late system message ...
    assert "ctxwarden summary" in json.dumps(gemini_request(late)["system_instruction"])  # ... or hoists it
    call = {"id": "c", "type": "function", "function": {"name": "f", "arguments": "{}"}}
    render_strict([SYSTEM, {"role": "user", "content": "a"}, {"role": "assistant", "content": None, "tool_calls": [call]},
                   {"role": "tool", "tool_call_id": "c", "content": "r"}, {"role": "assistant", "content": "done"},
                   {"role": "user", "content": "b"}])


# ---------------------------------------------------------------------------- placement


def test_a_summary_joins_the_user_turn_next_to_it_or_stands_between_assistant_turns():
    u1, u2 = {"role": "user", "content": "Book Lisbon."}, {"role": "user", "content": "And a hotel."}
    a1 = {"role": "assistant", "content": "Done."}
    s1, s2 = Note("[S1]"), Note("[S2]")
    assert place([s1, a1]) == [{"role": "user", "content": "[S1]"}, a1]  # first: a user turn of its own
    assert place([s1, u1]) == [{"role": "user", "content": "[S1]\n\nBook Lisbon."}]  # before the user's words
    assert place([u1, s1, a1]) == [{"role": "user", "content": "Book Lisbon.\n\n[S1]"}, a1]  # after them
    assert place([a1, s1, a1]) == [a1, {"role": "user", "content": "[S1]"}, a1]
    assert place([u1, s1, s2, u2]) == [{"role": "user", "content": "Book Lisbon.\n\n[S1]\n\n[S2]\n\nAnd a hotel."}]
    assert place([u1, u2, s1])[0] is u1  # two user messages of the client's stay as they came
    listed = {"role": "user", "content": [{"type": "text", "text": "See this."}, {"type": "image_url", "image_url": {"url": "x"}}]}
    assert place([s1, listed]) == [{"role": "user", "content": [{"type": "text", "text": "[S1]"}, *listed["content"]]}]
    assert place([u1, a1])[0] is u1 and place([u1, a1])[1] is a1  # nothing touched without a summary


def test_a_trimmed_span_leaves_a_note_only_where_the_alternation_needs_one():
    u1, a1, a2 = {"role": "user", "content": "u"}, {"role": "assistant", "content": "a"}, {"role": "assistant", "content": "b"}
    gap = Gap("[ctxwarden: 1 earlier message older than 3600 s left out]")
    assert place([u1, gap, a1]) == [u1, a1]
    assert place([a1, gap, a2]) == [a1, {"role": "user", "content": gap.text}, a2]
    assert place([gap, a1]) == [{"role": "user", "content": gap.text}, a1]
    assert place([gap, gap, u1]) == [u1]


def test_summary_sections_and_the_users_own_words_are_told_apart():
    note = f"{SUMMARY_TAG} 4 earlier messages, written by the proxy, not the user]\nPriya flies March 14.\n{SUMMARY_END}"
    merged = place([{"role": "user", "content": "Which option is cheapest?"}, Note(note), {"role": "assistant", "content": "x"}])[0]
    assert summary_sections(merged) == [note]
    assert without_summaries(content_text(merged)) == "Which option is cheapest?"
    assert without_summaries(f"{note}\n\nAnd now?") == "And now?"


# ---------------------------------------------------------------------------- compacted conversations


@pytest.mark.parametrize("keep_recent", [0, 1, 2, 3, 4, 5, 6, 7])
@pytest.mark.parametrize("n", [26, 41, 58])
def test_compacted_conversations_are_accepted_by_every_template(services, n, keep_recent):
    conv = agent_conversation(n)
    assert turns(conv[1:])[0] == "user" and all(a != b for a, b in zip(turns(conv[1:]), turns(conv[1:])[1:]))
    policy = HistoryPolicy(HistoryConfig(keep_recent=keep_recent, max_messages=10, event_min_exchanges=4, max_summaries=2), services)
    ex = forward(policy, conv)
    assert "history.summarize" in ex.action_labels() and [s for m in ex.messages for s in summary_sections(m)]
    assert ex.messages[-1]["content"].endswith(conv[-1]["content"])  # the user's words, whole
    assert_accepted_everywhere(ex.messages, conv[0])


def test_every_step_of_an_agent_loop_is_accepted_and_its_task_keeps_its_words(services):
    policy = HistoryPolicy(HistoryConfig(max_messages=20, max_tokens=2000, keep_recent=6, event_min_exchanges=8,
                                         event_min_tokens=10**9, max_summaries=3), services)
    events = 0
    for sent in agent_loop(40):
        ex = forward(policy, sent)
        events += "history.compaction" in ex.action_labels()
        assert_accepted_everywhere(ex.messages, sent[0])
        task = ex.messages[1]
        assert task["role"] == "user" and task["content"].startswith(sent[1]["content"])  # its words first, whole
    assert events >= 3


def test_a_budget_event_and_its_roll_up_are_accepted(services):
    conv = agent_conversation(60, result_words=120)
    conv = conv + [{"role": "assistant", "content": None, "tool_calls": [{"id": "now", "type": "function", "function": {"name": "f", "arguments": "{}"}}]},
                   {"role": "tool", "tool_call_id": "now", "content": "current result"}]
    for target in (10, 2000, 6000):
        ex = forward(HistoryPolicy(HistoryConfig(max_messages=1000, max_tokens=10**6), services), conv, "aggressive", target)
        assert ex.messages[-2:] == conv[-2:]
        assert_accepted_everywhere(ex.messages, conv[0])


def test_trimmed_conversations_are_accepted(services):
    now = datetime.now(timezone.utc)
    for n, old in ((30, 12), (41, 5), (41, 20)):
        conv = agent_conversation(n)
        stamped = [dict(m, timestamp=(now - timedelta(hours=3 if i < old else 0)).isoformat()) for i, m in enumerate(conv)]
        ex = forward(HistoryPolicy(HistoryConfig(max_age_s=3600, keep_recent=3), services), stamped)
        assert "history.trim" in ex.action_labels()
        assert_accepted_everywhere(ex.messages, stamped[0])


def test_the_forwarded_bytes_repeat_between_events(services):
    """Cache-stable: each step forwards the bytes of the step before plus its new messages, except at
    an event; the user turn holding the summaries grows only at an event."""
    policy = HistoryPolicy(HistoryConfig(max_messages=20, max_tokens=2000, keep_recent=6, event_min_exchanges=8,
                                         event_min_tokens=10**9), services)
    previous: list[dict] | None = None
    steady = 0
    for sent in agent_loop(30):
        ex = forward(policy, sent)
        event = "history.compaction" in ex.action_labels()
        if previous is not None and not event:
            assert json.dumps(ex.messages[:len(previous)]) == json.dumps(previous)
            steady += 1
        previous = ex.messages
    assert steady >= 20
