"""`ctxwarden demo` runs the whole product offline and shows every policy acting."""

from __future__ import annotations

import subprocess
import sys


def test_demo_shows_each_policy_at_work(tmp_path):
    result = subprocess.run([sys.executable, "-m", "ctxwarden.proxy.cli", "demo"], capture_output=True, text=True,
                            timeout=240, cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    rows = {line[:20].strip(): line for line in result.stdout.splitlines()}
    assert "(none)" in rows["plain question"]
    assert "tools.filter" in rows["45 tools offered"]
    assert "history.compaction" in rows["bulky tool result"]  # over budget.compress: compacted to a digest behind a ref
    assert "history.summarize" in rows["29-message history"]
    assert "clash.resolve" in rows["changed preference"]
    assert "loops.stop" in rows["agent loop"] and " — " in rows["agent loop"]  # the upstream was not called
    assert "poisoning.blocked" in rows["hallucinated answer"]
    tokens = {name: [int(x) for x in rows[name][20:40].split()] for name in ("45 tools offered", "bulky tool result", "29-message history")}
    assert all(sent_up < sent for sent, sent_up in tokens.values())
