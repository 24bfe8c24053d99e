"""The prefix watch keys what a step forwards; an agent sends its whole history again at every step,
so keying every message anew cost ~1 ms a step at 600 KB. The pipeline now keys the forwarded list
within the request's memo: messages carried from the session's last step come as one slice."""
import httpx

from ctxwarden.policies.history import layout


def test_a_step_keys_only_its_new_messages(start_proxy, monkeypatch):
    proxy = start_proxy({"policies": {"history": {"enabled": False}}})  # nothing else keys messages then
    keyed: list[int] = []
    real = layout._known_key
    monkeypatch.setattr(layout, "_known_key", lambda m: keyed.append(1) or real(m))
    messages = [{"role": "system", "content": "You are an agent."}, {"role": "user", "content": "Start the job."}]
    per_step, states = [], []
    for step in range(12):
        before = len(keyed)
        r = httpx.post(f"{proxy.url}/v1/chat/completions", timeout=60, headers={"x-ctxwarden-session": "agent-1"},
                       json={"model": "gpt-4o", "messages": messages})
        assert r.status_code == 200
        per_step.append(len(keyed) - before)
        states.append(r.headers["x-ctxwarden-prefix"])
        messages = messages + [{"role": "assistant", "content": f"Step {step} done."},
                               {"role": "user", "content": f"Now step {step + 1}: " + "log line " * 200}]
    assert states[0] == "new" and set(states[1:]) == {"extends"}  # what it reports is unchanged
    assert per_step[0] == 2 and max(per_step[1:]) <= 2  # the two new messages, whatever the history's length
