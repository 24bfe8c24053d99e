"""`ctxwarden demo` runs the whole product offline and shows every policy acting."""

from __future__ import annotations

import re
import subprocess
import sys


def test_demo_shows_each_policy_at_work(tmp_path):
    result = subprocess.run([sys.executable, "-m", "ctxwarden.proxy.cli", "demo"], capture_output=True, text=True,
                            timeout=240, cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    blocks = {}
    for block in result.stdout.split("▸ ")[1:]:
        head, _, rest = block.partition("\n")
        blocks[head.split("  (")[0]] = (head, " ".join(rest.split()))
    assert "(none)" in blocks["plain question"][1]
    assert "tools.filter" in blocks["45 tools offered"][1]
    assert "history.compaction" in blocks["bulky tool result"][1]  # over budget.compress: compacted to a digest behind a ref
    assert "history.summarize" in blocks["29-message history"][1]
    assert "clash.note" in blocks["changed preference"][1]
    assert "loops.inject" in blocks["agent loop"][1] and "forwarded" in blocks["agent loop"][0]  # a note to the model
    after = blocks["agent loop, on after the note"]
    assert "loops.stop" in after[1] and "answered by the proxy" in after[0] and "after a note" in after[1]
    assert "poisoning.blocked" in blocks["hallucinated answer"][1]
    assert 'contradicts the knowledge base: "The Eiffel Tower is located in Paris, France."' in blocks["hallucinated answer"][1]
    for name in ("45 tools offered", "bulky tool result", "29-message history"):  # the whole answer, never cut
        sent, forwarded = (int(w) for w in blocks[name][0].split("(")[1].replace(",", "").split() if w.isdigit())
        assert forwarded < sent
    assert "http://127.0.0.1:8787/dashboard" in result.stdout and "/metrics" not in result.stdout  # no dead links
    urls = set(re.findall(r"https?://[^\s,)]+", result.stdout))
    assert urls == {"http://127.0.0.1:8787/v1", "http://127.0.0.1:8787/dashboard"}, urls  # none of the demo's own ports
    assert result.stdout.rstrip().splitlines()[-2].endswith("(the admin key is CTXWARDEN_ADMIN_KEY).")  # ends at the dashboard
    assert "DEBUG" not in result.stderr and "bm25s" not in result.stderr  # no library chatter between the scenes
