"""`ctxwarden stats` prints what the dashboard shows, from a running server."""

from __future__ import annotations

import os
import subprocess
import sys

import httpx
import yaml

from tests.conftest import openai_client

ADMIN_KEY = "stats-admin-key"


def test_stats_prints_the_servers_figures(start_proxy, tmp_path, monkeypatch):
    monkeypatch.setenv("CTXWARDEN_ADMIN_KEY", ADMIN_KEY)
    proxy = start_proxy()
    client = openai_client(proxy)
    for _ in range(3):
        client.chat.completions.create(model="gpt-4o", messages=[{"role": "user", "content": "hi"}])
    expected = httpx.get(f"{proxy.url}/admin/stats", headers={"authorization": f"Bearer {ADMIN_KEY}"}).json()
    config = tmp_path / "c.yaml"
    config.write_text(yaml.safe_dump({"upstream": {"base_url": "http://127.0.0.1:9/v1"}}))
    run = subprocess.run([sys.executable, "-m", "ctxwarden.proxy.cli", "stats", "--config", str(config), "--server", proxy.url],
                         capture_output=True, text=True, timeout=60, env={**os.environ})
    assert run.returncode == 0, run.stderr
    lines = {line.split()[0]: line for line in run.stdout.splitlines()[1:] if line.strip()}
    assert lines["requests"].split()[1] == f"{expected['requests']['total']:,.0f}" == "3"
    assert "gpt-4o 3" in run.stdout and "breaker: closed" in run.stdout
    resident, _, caches = lines["memory"].partition(" MB resident   caches ")
    assert int(resident.split()[1].replace(",", "")) > 10 and caches.endswith(" of 128 MB")


def test_stats_without_the_key_or_the_server_says_so(tmp_path, monkeypatch):
    config = tmp_path / "c.yaml"
    config.write_text(yaml.safe_dump({"upstream": {"base_url": "http://127.0.0.1:9/v1"}}))
    env = {k: v for k, v in os.environ.items() if k != "CTXWARDEN_ADMIN_KEY"}
    no_key = subprocess.run([sys.executable, "-m", "ctxwarden.proxy.cli", "stats", "--config", str(config)],
                            capture_output=True, text=True, timeout=60, env=env)
    assert no_key.returncode == 2 and "CTXWARDEN_ADMIN_KEY" in no_key.stderr
    nobody = subprocess.run([sys.executable, "-m", "ctxwarden.proxy.cli", "stats", "--config", str(config),
                             "--server", "127.0.0.1:9"], capture_output=True, text=True, timeout=60,
                            env={**env, "CTXWARDEN_ADMIN_KEY": "k"})
    assert nobody.returncode == 1 and "no ctxwarden server answers" in nobody.stderr


def test_stats_prints_cost_saved_when_a_price_is_known():
    from ctxwarden.proxy.stats_cli import render

    stats = {"requests": {"total": 2}, "tokens": {"received": 1000, "forwarded": 600, "saved": 400}}
    assert "saved 400 (40.0 %), $0.12" in render({**stats, "cost_saved_usd": 0.123}, "1h", "http://x")
    assert "$" not in render({**stats, "cost_saved_usd": None}, "1h", "http://x")
