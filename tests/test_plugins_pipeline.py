"""Policies from the `ctxwarden.policies` entry point group, and the pipeline's fail-safe."""

from __future__ import annotations

from importlib.metadata import EntryPoint

import httpx
import pytest

from ctxwarden.proxy import registry
from ctxwarden.proxy.config import ConfigError, load_settings
from tests.conftest import ALL_POLICIES, openai_client

PLUGINS = [
    EntryPoint(name="shout", value="tests.plugin_example:ShoutPolicy", group=registry.ENTRY_POINT_GROUP),
    EntryPoint(name="broken", value="tests.plugin_example:BrokenPolicy", group=registry.ENTRY_POINT_GROUP),
]


@pytest.fixture(autouse=True)
def plugins(monkeypatch):
    installed = registry.entry_points

    def with_plugins(group):
        found = list(installed(group=group))
        return found + PLUGINS if group == registry.ENTRY_POINT_GROUP else found

    monkeypatch.setattr(registry, "entry_points", with_plugins)
    registry.policy_class.cache_clear()
    yield
    registry.policy_class.cache_clear()


def only(**policies):
    return {"policies": {**{name: {"enabled": False} for name in ALL_POLICIES}, **policies}}


def test_plugin_policy_is_configured_and_runs(fake, start_proxy):
    proxy = start_proxy(only(shout={"suffix": "!!"}))
    raw = openai_client(proxy).chat.completions.with_raw_response.create(
        model="gpt-4o", messages=[{"role": "user", "content": "hello"}])
    assert fake.chat_requests[-1]["messages"] == [{"role": "user", "content": "hello!!"}]
    assert raw.headers["x-ctxwarden-actions"] == "shout.appended"


def test_plugin_config_is_validated_like_builtins():
    with pytest.raises(ConfigError, match="policies.shout.sufix: unknown key"):
        load_settings(None, only(shout={"sufix": "?"}))


def test_failing_policy_is_undone_reported_and_the_request_goes_through(fake, start_proxy):
    proxy = start_proxy(only(broken={}))
    r = httpx.post(f"{proxy.url}/v1/chat/completions", json={"model": "gpt-4o", "messages": [{"role": "user", "content": "hi"}]})
    assert r.status_code == 200
    assert fake.chat_requests[-1]["messages"] == [{"role": "user", "content": "hi"}]
    assert r.headers["x-ctxwarden-actions"] == "broken.failed"
    metrics = httpx.get(f"{proxy.url}/metrics").text
    assert 'ctxwarden_policy_failures_total{policy="broken"} 1' in metrics
