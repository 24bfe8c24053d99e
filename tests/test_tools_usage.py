"""What the traffic says about tools: a tool most of a tenant's sessions call ranks up for a task
whose words never point to it (usage.py's popularity), and only for that tenant."""

from __future__ import annotations

from tests.test_tools_policy import exchange, policy, step_of, user
from tests.tools_fixtures import all_tools, names

REQUESTS = ["What will the weather be like in Oslo tomorrow?", "Find me a flight from Paris to Rome on Friday.",
            "Play some jazz music.", "What's the latest price of Apple stock?"]
NEW_TASK = "Find hotels in Lisbon for next weekend."


async def _sessions_that_call(p, tool: str, tenant: str) -> None:
    """Each request is its own session; each calls `tool` after its first step."""
    for k, text in enumerate(REQUESTS):
        convo = user(text)
        ex = exchange(convo, all_tools(), session=f"{tenant}-{k}")
        ex.tenant = tenant
        await p.on_request(ex)
        ex = exchange(step_of(convo, tool), all_tools(), session=f"{tenant}-{k}")
        ex.tenant = tenant
        await p.on_request(ex)


async def _first_list(p, tenant: str, session: str = "new") -> list[str]:
    ex = exchange(user(NEW_TASK), all_tools(), session=f"{tenant}-{session}")
    ex.tenant = tenant
    await p.on_request(ex)
    return names(ex.tools)


async def test_a_tool_most_sessions_call_is_forwarded_for_a_task_that_never_names_it(tmp_path):
    on = policy(tmp_path / "on", popularity_boost=0.4, budget_ms=None)  # a busy host must not skip the selection
    assert "create_todo" not in await _first_list(on, "acme", "before")  # nothing learned yet: the task's words decide
    await _sessions_that_call(on, "create_todo", "acme")
    assert "create_todo" in await _first_list(on, "acme")
    assert "create_todo" not in await _first_list(on, "other")  # another tenant's traffic says nothing here

    off = policy(tmp_path / "off", popularity_boost=0.0, budget_ms=None)
    await _sessions_that_call(off, "create_todo", "acme")
    assert "create_todo" not in await _first_list(off, "acme")
