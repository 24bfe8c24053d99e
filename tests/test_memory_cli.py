"""`ctxwarden memory list|add|rm` against a running server."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
import yaml

from tests.conftest import policies_off

ADMIN_KEY = "memory-cli-admin-key"


@pytest.fixture
def cli(start_proxy, tmp_path, monkeypatch):
    monkeypatch.setenv("CTXWARDEN_ADMIN_KEY", ADMIN_KEY)
    proxy = start_proxy({"policies": policies_off("memory")})
    config = tmp_path / "c.yaml"
    config.write_text(yaml.safe_dump({"upstream": {"base_url": "http://127.0.0.1:9/v1"}}))

    def run(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, "-m", "ctxwarden.proxy.cli", "memory", args[0], "--config", str(config),
                               "--server", proxy.url, *args[1:]], capture_output=True, text=True, timeout=60,
                              env={**os.environ})
    return run


def test_add_list_and_rm(cli):
    added = cli("add", "--user", "zoe", "Always write dates as YYYY-MM-DD.", "--kind", "instruction", "--tenant", "acme")
    assert added.returncode == 0, added.stderr
    mid = added.stdout.split()[0]
    assert mid.startswith("mem_") and "instruction" in added.stdout
    cli("add", "--user", "zoe", "I keep a cat called Miso.", "--tenant", "acme")
    listed = cli("list", "--user", "zoe", "--tenant", "acme")
    assert listed.returncode == 0 and listed.stdout.startswith("2 memories of zoe") and mid in listed.stdout
    assert cli("list", "--user", "zoe").stdout.startswith("0 memories")  # another tenant sees none
    assert cli("rm", mid, "--tenant", "acme").stdout.strip() == f"forgot {mid}"
    assert cli("list", "--user", "zoe", "--tenant", "acme").stdout.startswith("1 memories")
    assert cli("rm", "--user", "zoe", "--all", "--tenant", "acme").stdout.strip() == "forgot 1 memories of zoe"
    missing = cli("rm", mid, "--tenant", "acme")
    assert missing.returncode == 1 and "404" in missing.stderr
    assert cli("rm", "--tenant", "acme").returncode == 2  # neither an id nor --user --all
    bad = cli("add", "--user", "zoe", "   ", "--tenant", "acme")
    assert bad.returncode == 1 and "400" in bad.stderr
