"""Issue 45, part 4: the poisoning policy's input verdicts are carried per message to the session's
next request (policies/poisoning/inputs.py: known_verdicts), so a step looks up the verdict cache
for its new messages only. Each check counts lookups, never times them."""

from __future__ import annotations

import httpx

from tests.conftest import policies_off
from tests.test_step_cost_incremental import steps


def test_a_step_looks_up_the_verdicts_of_its_new_messages_only(fake, start_proxy):
    proxy = start_proxy({"policies": policies_off("poisoning")})
    policy = proxy.app.state.pipeline.policy("poisoning")
    lookups: list[int] = []
    original = policy._verdicts.get

    def counting(key, default=None):
        lookups[-1] += 1
        return original(key, default)

    policy._verdicts.get = counting
    for n, messages in enumerate(steps(24)):
        if n == 16:
            policy.forget_verdicts()  # a review: every verdict is looked up (and made) again
        lookups.append(0)
        response = httpx.post(f"{proxy.url}/v1/chat/completions", timeout=30, headers={"x-ctxwarden-session": "agent"},
                              json={"model": "gpt-4o", "messages": messages})
        assert response.status_code == 200
    # A step reads the verdict of its new tool result; after a review, those of all of them.
    assert lookups == [1] * 16 + [17] + [1] * 7, str(lookups)
    lookups.append(0)
    other = httpx.post(f"{proxy.url}/v1/chat/completions", timeout=30, headers={"x-ctxwarden-session": "another"},
                       json={"model": "gpt-4o", "messages": steps(24)[-1]})
    assert other.status_code == 200 and lookups[-1] == 24  # a new session: the cache, once a tool result
