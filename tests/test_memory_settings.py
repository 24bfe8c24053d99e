"""Memory settings taken from the other policies when the user's config sets none (issue 15):
memory.strategy from clash.strategy, memory.judge_model (extract: llm) from poisoning.judge.model."""

from __future__ import annotations

import pytest

from ctxwarden.proxy.config import ConfigError, load_settings
from tests.conftest import policies_off
from tests.test_memory_gates import BUDGET, LUXURY, send


def memory_config(policies: dict, path=None):
    return load_settings(path, {"policies": policies}).policy_configs()["memory"]


def test_memory_strategy_is_the_clash_policys_unless_set():
    assert memory_config({}).strategy == "prefer_recent"
    assert memory_config({"clash": {"strategy": "ask_user"}}).strategy == "ask_user"
    assert memory_config({"clash": {"enabled": False, "strategy": "keep_existing"}}).strategy == "keep_existing"
    explicit = {"clash": {"strategy": "ask_user"}, "memory": {"strategy": "keep_existing"}}
    assert memory_config(explicit).strategy == "keep_existing"
    # an explicit prefer_recent (the embedded default's value too) still wins
    assert memory_config({"clash": {"strategy": "ask_user"}, "memory": {"strategy": "prefer_recent"}}).strategy == "prefer_recent"
    assert memory_config({"clash": {"strategy": "merge"}, "memory": {"strategy": None}}).strategy == "merge"  # null: unset


def test_the_strategy_is_taken_from_a_config_file_too(tmp_path):
    path = tmp_path / "ctxwarden.yaml"
    path.write_text("policies:\n  clash:\n    strategy: ask_user\n", encoding="utf-8")
    assert load_settings(path).policy_configs()["memory"].strategy == "ask_user"
    path.write_text("policies:\n  clash:\n    strategy: ask_user\n  memory:\n    strategy: merge\n", encoding="utf-8")
    assert load_settings(path).policy_configs()["memory"].strategy == "merge"


def test_llm_extraction_takes_the_poisoning_judges_model():
    judge = {"poisoning": {"judge": {"model": "judge-mini"}}}
    assert memory_config({**judge, "memory": {"extract": "llm"}}).judge_model == "judge-mini"
    assert memory_config({**judge, "memory": {"extract": "llm", "judge_model": "mine"}}).judge_model == "mine"
    assert memory_config({**judge}).judge_model is None  # local extraction asks no model
    with pytest.raises(ConfigError, match="judge_model"):
        memory_config({"memory": {"extract": "llm"}})


def test_a_judge_with_an_endpoint_of_its_own_is_not_taken():
    """Memory calls its model through the proxy's upstream; judge.base_url / api_key_env it cannot honour."""
    judge = {"poisoning": {"judge": {"model": "judge-mini", "base_url": "http://judge.internal/v1",
                                     "api_key_env": "JUDGE_KEY"}}}
    with pytest.raises(ConfigError, match="judge.base_url"):
        memory_config({**judge, "memory": {"extract": "llm"}})
    assert memory_config({**judge, "memory": {"extract": "llm", "judge_model": "mine"}}).judge_model == "mine"


def test_the_server_settles_memory_clashes_with_the_clash_strategy(start_proxy, fake, monkeypatch):
    """clash.strategy ask_user, memory's unset: a contradicting memory is asked about (the clash policy off)."""
    monkeypatch.setenv("CTXWARDEN_ADMIN_KEY", "admin-test")
    proxy = start_proxy({"policies": {**policies_off("memory"), "clash": {"enabled": False, "strategy": "ask_user"}}})
    send(proxy, [{"role": "user", "content": BUDGET}], session="old")
    calls = len(fake.chat_requests)
    asked, actions = send(proxy, [{"role": "user", "content": LUXURY}])
    assert "memory.ask_user" in actions and len(fake.chat_requests) == calls
