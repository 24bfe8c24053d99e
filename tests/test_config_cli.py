"""Configuration: the embedded default, strict validation naming key and file, check-config."""

from __future__ import annotations

import subprocess
import sys

import pytest

from ctxwarden.proxy.config import ConfigError, load_settings


def test_embedded_default_is_valid_and_has_every_policy():
    settings = load_settings()
    assert list(settings.policy_configs()) == ["loops", "poisoning", "clash", "history", "archive", "tools", "memory"]
    assert settings.server.port == 8787 and settings.budget.reject == 0.95


def test_user_file_is_merged_over_the_default(tmp_path):
    path = tmp_path / "mine.yaml"
    path.write_text("upstream:\n  base_url: http://127.0.0.1:9/v1\npolicies:\n  history:\n    keep_recent: 4\n")
    settings = load_settings(path)
    assert settings.upstream.base_url == "http://127.0.0.1:9/v1"
    assert settings.upstream.timeout_s == 120
    assert settings.policy_configs()["history"].keep_recent == 4
    assert settings.policy_configs()["history"].max_messages == 20


def test_every_bad_key_is_named_with_its_path_and_file(tmp_path):
    path = tmp_path / "bad.yaml"
    path.write_text("server:\n  prot: 1\nupstream:\n  timeout_s: soon\npolicies:\n  history:\n    keep_recnt: 3\n  nosuch: {}\n")
    with pytest.raises(ConfigError) as info:
        load_settings(path)
    text = str(info.value)
    assert str(path) in text
    assert "server.prot: unknown key" in text
    assert "upstream.timeout_s" in text and "'soon'" in text
    assert "policies.history.keep_recnt: unknown key" in text
    assert "policies.nosuch: unknown policy 'nosuch'" in text


def test_check_config_command(tmp_path):
    good = tmp_path / "good.yaml"
    good.write_text("budget:\n  warn: 0.6\n")
    bad = tmp_path / "bad.yaml"
    bad.write_text("budget:\n  wran: 0.6\n")
    ok = subprocess.run([sys.executable, "-m", "ctxwarden.proxy.cli", "check-config", str(good)], capture_output=True, text=True)
    assert ok.returncode == 0 and "OK" in ok.stdout
    fail = subprocess.run([sys.executable, "-m", "ctxwarden.proxy.cli", "check-config", str(bad)], capture_output=True, text=True)
    assert fail.returncode == 2
    assert "budget.wran: unknown key" in fail.stderr and str(bad) in fail.stderr


def test_a_policy_can_have_its_own_embedder():
    from ctxwarden.proxy.app import create_app

    settings = load_settings(None, {"embeddings": {"per_policy": {"tools": {"provider": "minilm+wordllama"}}},
                                    "storage": {"path": "/tmp/ctxw-unused"}})
    pipeline = create_app(settings).state.pipeline
    tools, clash = pipeline.policy("tools"), pipeline.policy("clash")
    assert tools.services.embedder._config.provider == "minilm+wordllama"
    assert clash.services.embedder._config.provider == "wordllama"
    assert tools.services.tokens is clash.services.tokens  # everything else stays shared


def test_per_policy_embedder_must_name_a_configured_policy():
    with pytest.raises(ConfigError, match="embeddings.per_policy.tool: no policy 'tool' is configured"):
        load_settings(None, {"embeddings": {"per_policy": {"tool": {"provider": "minilm"}}}})


def test_history_and_archive_share_one_scratchpad_with_their_own_embedders():
    """A per-policy embedder gives a policy its own Services copy; the scratchpad must stay shared,
    or a span history archived could not be recalled through archive's context_recall."""
    from ctxwarden.proxy.app import create_app

    settings = load_settings(None, {"embeddings": {"per_policy": {"history": {"provider": "minilm"},
                                                                  "archive": {"provider": "wordllama"}}},
                                    "storage": {"path": "/tmp/ctxw-unused"}})
    pipeline = create_app(settings).state.pipeline
    history, archive = pipeline.policy("history"), pipeline.policy("archive")
    assert history.services is not archive.services
    assert history.scratchpad is archive.scratchpad
    history.scratchpad.memory.clear()
    assert history.scratchpad.put(None, "hs_0123456789abcdef", "archived by history")
    assert not archive.scratchpad.put(None, "hs_0123456789abcdef", "archived by history")  # already there
