"""Digests of big tool results (policies/history/digest.py): per content type, what they keep and
drop, that they fit their budget by a real tokenizer, and that they are the same bytes every time."""

from __future__ import annotations

import json
import os
import random
import re
import subprocess
import sys
from datetime import datetime, timedelta
from pathlib import Path

import pytest

from ctxwarden.policies.history.digest import content_type, digest
from ctxwarden.policies.text.tokens import TiktokenCounter

ROOT = Path(__file__).resolve().parents[1]
_COUNTER = TiktokenCounter()


def count(text: str) -> int:
    return _COUNTER.count_text(text, "gpt-4o")


# ---------------------------------------------------------------------------- realistic inputs, seeded


def customers(n: int = 200, seed: int = 7) -> str:
    rng = random.Random(seed)
    records = [{
        "id": f"CUST-{i:04d}",
        "name": f"{rng.choice(['Ada', 'Bo', 'Cyra', 'Dev', 'Eli'])} {rng.choice(['Smith', 'Jones', 'Okafor', 'Lee'])}",
        "status": rng.choice(["active", "closed"]),
        "balance": round(rng.uniform(0, 10_000), 2),
        "tags": rng.sample(["vip", "late", "eu", "b2b"], 2),
        "address": {"city": rng.choice(["Lisbon", "Porto", "Faro"]), "zip": f"{rng.randint(1000, 9999)}"},
        "notes": " ".join(rng.choice(["called", "emailed", "asked about", "invoice", "refund", "twice"])
                          for _ in range(rng.randint(5, 30))),
    } for i in range(n)]
    return json.dumps({"total": n, "next_page": "tok_9f8e7d", "results": records}, indent=2)


def service_log(seed: int = 3) -> str:
    """5,000 lines: health checks and job lines repeating, one error with its Python traceback."""
    rng = random.Random(seed)
    start = datetime(2024, 5, 1, 12, 0, 0)
    lines = []
    for i in range(4990):
        ts = (start + timedelta(milliseconds=137 * i)).isoformat(timespec="milliseconds")
        if i == 3100:
            lines += [f"{ts} ERROR worker-17 request failed: order ORD-4711 could not be charged",
                      "Traceback (most recent call last):",
                      '  File "/app/billing.py", line 88, in charge',
                      "    gateway.charge(order)",
                      '  File "/app/gateway.py", line 41, in charge',
                      "    raise PaymentDeclined(code)",
                      "PaymentDeclined: card_declined"]
        elif rng.random() < 0.8:
            lines.append(f"{ts} INFO GET /health 200 in {rng.randint(1, 40)} ms")
        else:
            lines.append(f"{ts} INFO worker-{rng.randint(1, 30)} processed job {rng.randint(10_000, 99_999)} "
                         f"in {rng.randint(5, 900)} ms")
    lines += [f"2024-05-01T12:11:24.{i:03d} INFO drained queue shard-{i}" for i in range(2)]
    lines.append("2024-05-01T12:11:25.000 INFO shutting down after 4990 requests")
    return "\n".join(lines)


def python_module(seed: int = 5) -> tuple[str, list[str], list[str]]:
    """About 900 lines of Python: imports, dataclasses, functions; returns the source, the
    function names and every def/class line."""
    rng = random.Random(seed)
    out = ['"""Billing service: invoices, payments and refunds."""', "", "from __future__ import annotations", "",
           "import json", "import logging", "from dataclasses import dataclass", "from decimal import Decimal", "",
           "log = logging.getLogger(__name__)", ""]
    names, signatures = [], []
    k = 0
    while len(out) < 880:
        if k % 9 == 0:
            signatures.append(f"class Record{k}:")
            out += ["", "@dataclass", signatures[-1], f'    """Record number {k}."""', "", "    id: str",
                    "    amount: Decimal", ""]
        name = f"{rng.choice(['compute', 'load', 'apply', 'check'])}_{rng.choice(['invoice', 'refund', 'tax'])}_{k}"
        names.append(name)
        signatures.append(f"def {name}(record, *, rate: float = 0.2) -> Decimal:")
        out += ["", signatures[-1], f'    """Step {k} of the pipeline."""', "    total = Decimal(0)"]
        for j in range(rng.randint(8, 14)):
            out.append(f"    total += Decimal(record.amount) * Decimal({rng.randint(1, 99)}) / {rng.randint(2, 9)}"
                       f"  # step {j}")
        out += ["    if total < 0:", f'        raise ValueError("negative total in {name}")', "    return total"]
        k += 1
    return "\n".join(out) + "\n", names, signatures


def prose(seed: int = 1) -> str:
    rng = random.Random(seed)
    subjects = ["The committee", "Our team", "The vendor", "Maria Lopez", "The board"]
    verbs = ["reviewed", "approved", "rejected", "discussed", "postponed"]
    objects = ["the Q3 budget of $48,000", "the migration plan", "the contract renewal", "the office move"]
    filler = ["Thanks everyone for joining.", "Let me know if you have questions.", "Sure, that sounds good."]
    sentences = [rng.choice(filler) if rng.random() < 0.3 else
                 f"{rng.choice(subjects)} {rng.choice(verbs)} {rng.choice(objects)} on day {i}." for i in range(300)]
    sentences[150] = "The invoice INV-88231 was disputed by Globex on March 3."
    return " ".join(sentences)


# ---------------------------------------------------------------------------- json


def test_json_keeps_schema_count_scalars_first_items_and_the_mentioned_record():
    text = customers()
    out = digest(text, 400, mentions="Please close CUST-0117 today.", count=count, recall_hint="ref=ar_123abc")
    assert count(out) <= 400 < count(text)
    schema = next(line for line in out.splitlines() if line.startswith("results: "))
    assert "200 items" in schema
    for key in ("id:str", "name:str", "status:str", "balance:num", "tags:list", "address:obj", "notes:str"):
        assert key in schema
    assert '"next_page":"tok_9f8e7d"' in out and '"total":200' in out
    assert re.search(r'^results\[0\]: \{"id":"CUST-0000"', out, re.M)
    assert re.search(r'^results\[117\]: \{"id":"CUST-0117"', out, re.M)  # mentioned
    assert "CUST-0150" not in out  # neither first nor mentioned
    note = next(line for line in out.splitlines() if line.startswith("… "))
    assert re.match(r"… 19\d more items in results \(ids CUST-00\d\d … CUST-0199\)", note), note
    assert "context_recall(ref=ar_123abc, query=...)" in note


def test_json_mentions_of_a_common_value_do_not_pull_in_records():
    """`status: active` is shared by half the records: naming it names none of them."""
    plain = digest(customers(), 400, count=count)
    assert digest(customers(), 400, mentions="show me the active ones", count=count) == plain


def test_json_nested_arrays_are_digested_inside_and_fenced_json_is_json():
    rng = random.Random(2)
    orders = [{"order": f"ORD-{i}", "lines": [{"sku": f"SKU-{i}-{j}", "qty": rng.randint(1, 9)} for j in range(40)]}
              for i in range(30)]
    text = "```json\n" + json.dumps({"data": {"page": {"next": "p2"}, "orders": orders}}) + "\n```"
    assert content_type(text) == "json"
    out = digest(text, 300, mentions="What about SKU-21-33?", count=count, recall_hint="ref=ar_n")
    assert count(out) <= 300
    assert 'data: {"page":{"next":"p2"}}' in out  # a small object stays inline
    assert "data.orders: 30 items" in out
    assert "data.orders[21].lines: 40 items" in out and '"sku":"SKU-21-33"' in out  # walked into, mentioned
    assert "SKU-21-34" not in out


# ---------------------------------------------------------------------------- logs


def test_log_folds_repeats_keeps_the_error_with_its_trace_and_the_tail():
    text = service_log()
    assert content_type(text) == "log"
    out = digest(text, 400, count=count, recall_hint="ref=ar_log")
    assert count(out) <= 400
    health = re.search(r"^\[×([\d,]+)\] <ts> INFO GET /health 200 in <n> ms$", out, re.M)
    assert health and int(health.group(1).replace(",", "")) > 3500
    assert re.search(r"^\[×[\d,]+\] <ts> INFO worker-<n> processed job <n> in <n> ms$", out, re.M)
    trace = ["ERROR worker-17 request failed: order ORD-4711 could not be charged",
             "Traceback (most recent call last):",
             '  File "/app/gateway.py", line 41, in charge', "    raise PaymentDeclined(code)",
             "PaymentDeclined: card_declined"]
    positions = [out.find(line) for line in trace]
    assert -1 not in positions and positions == sorted(positions), positions
    assert out.rstrip().endswith("2024-05-01T12:11:25.000 INFO shutting down after 4990 requests")
    assert re.match(r"\[log of 4,999 lines, [\d,]+ not shown; context_recall\(ref=ar_log, query=\.\.\.\)", out)
    assert out.count("\n") < 60


def test_log_keeps_a_mentioned_line_and_counts_dropped_lines():
    lines = service_log().splitlines()
    lines[1234] = "2024-05-01T12:02:49.058 INFO worker-4 processed job 42424 in 77 ms"
    out = digest("\n".join(lines), 120, mentions="Why was job 42424 slow?", count=count)
    assert count(out) <= 120 + 60 + 5  # the error's trace (~120 tokens) is kept on top of half the budget
    assert "INFO worker-4 processed job 42424 in 77 ms" in out and "PaymentDeclined: card_declined" in out
    dropped = [int(n.replace(",", "")) for n in re.findall(r"^… ([\d,]+) lines? dropped$", out, re.M)]
    assert dropped and out.startswith(f"[log of 4,999 lines, {sum(dropped):,} not shown]")


# ---------------------------------------------------------------------------- code


def test_code_keeps_imports_every_signature_and_the_mentioned_function_body():
    text, names, signatures = python_module()
    assert 850 <= len(text.splitlines()) <= 950 and content_type(text) == "code"
    target = names[20]
    out = digest(text, 2000, mentions=f"The bug is in {target}: it divides before multiplying.", count=count,
                 recall_hint="ref=ar_py")
    assert count(out) <= 2000 < count(text)
    kept = set(out.splitlines())
    for line in ("from __future__ import annotations", "import json", "import logging",
                 "from dataclasses import dataclass", "from decimal import Decimal", "@dataclass", *signatures):
        assert line in kept, line
    body = text.split(f"def {target}(")[1].split("\n\n")[0].splitlines()[1:]
    assert len(body) >= 11 and all(line in kept for line in body)
    other = text.split(f"def {names[30]}(")[1].split("\n\n")[0].splitlines()[3]  # a body line of another function
    assert other not in kept
    assert re.search(r"^… lines \d+-\d+ elided$", out, re.M)


def test_code_under_a_small_budget_puts_the_mentioned_function_first():
    text, names, _ = python_module()
    out = digest(text, 250, mentions=f"fix {names[5]}", count=count)
    assert count(out) <= 250
    assert f"def {names[5]}(" in out and f'raise ValueError("negative total in {names[5]}")' in out


# ---------------------------------------------------------------------------- text


def test_text_extract_keeps_the_mentioned_sentence_within_budget():
    text = prose()
    assert content_type(text) == "text"
    out = digest(text, 200, mentions="Why was INV-88231 disputed?", count=count, recall_hint="ref=ar_t")
    assert count(out) <= 200
    assert "- The invoice INV-88231 was disputed by Globex on March 3." in out
    assert "Thanks everyone for joining." not in out
    assert out.startswith("[text: ") and "context_recall(ref=ar_t)" in out.splitlines()[0]


def test_a_text_that_fits_is_returned_unchanged():
    for text in ("short answer: 42", customers(3), "line one\nline two"):
        assert digest(text, count(text), count=count) == text
        assert digest(text, 10_000) == text  # the default estimate


# ---------------------------------------------------------------------------- every digest


INPUTS = {"json": customers, "log": service_log, "code": lambda: python_module()[0], "text": prose}


@pytest.mark.parametrize("kind", sorted(INPUTS))
def test_every_digest_fits_its_budget(kind):
    text = INPUTS[kind]()
    assert content_type(text) == kind
    for budget in (1, 3, 10, 25, 40, 80, 150, 250, 600, 1500):
        out = digest(text, budget, mentions="CUST-0042 worker-17 check_tax_9 INV-88231", count=count,
                     recall_hint="ref=ar_0123456789abcdef0123")
        if kind == "log":  # a log's error lines are kept whatever the budget: it grows by their size at most
            assert "PaymentDeclined: card_declined" in out and "raise PaymentDeclined(code)" in out
            assert count(out) <= max(budget, 160 + budget // 2), (budget, out)
            continue
        assert count(out) <= budget, (kind, budget, out)
        assert (len(digest(text, budget)) + 3) // 4 <= budget  # the default estimate
    assert digest(text, 0) == ""


@pytest.mark.parametrize("kind", sorted(INPUTS))
def test_digest_is_the_same_bytes_every_time(kind):
    text = INPUTS[kind]()
    args = (text, 300, "CUST-0042 and worker-17 and check_tax_9", count, "ref=ar_x")
    assert digest(*args) == digest(*args)


def test_digest_does_not_depend_on_hash_seeds():
    """Set and dict orders of strings change with PYTHONHASHSEED: the digest must not."""
    script = (
        "import sys; sys.path.insert(0, %r)\n"
        "from test_digest import INPUTS, count\n"
        "from ctxwarden.policies.history.digest import digest\n"
        "import hashlib\n"
        "for kind in sorted(INPUTS):\n"
        "    out = digest(INPUTS[kind](), 300, 'CUST-0042 worker-17 check_tax_9 INV-88231 active', count, 'ref=ar_x')\n"
        "    print(kind, hashlib.sha256(out.encode()).hexdigest())\n" % str(ROOT / "tests"))
    outputs = set()
    for seed in ("1", "2"):
        run = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120,
                             env={**os.environ, "PYTHONHASHSEED": seed}, cwd=ROOT)
        assert run.returncode == 0, run.stderr
        outputs.add(run.stdout)
    assert len(outputs) == 1


# ---------------------------------------------------------------------------- content types


@pytest.mark.parametrize("text, kind", [
    ('{"a": 1, "b": [1, 2]}', "json"),
    ('  \n [ {"id": 1}, {"id": 2} ]  \n', "json"),
    ('```json\n{"ok": true}\n```', "json"),
    ('{"results": []}\nShowing 0 results.', "json"),  # a short line after the value
    ('"just a JSON string"', "text"),
    ("42", "text"),
    ('{"a": 1}\n{"a": 2}\n{"a": 3}', "log"),  # JSON lines are line data, not one value
    ("Note: the meeting moved to Tuesday. Reminder: bring the signed contract.\nAgenda: budget, hiring.", "text"),
    ("Dear team,\n\nThe review is done: we ship on Friday.\nThanks,\nAda", "text"),
    ("2024-05-01 12:00:01 INFO started\n2024-05-01 12:00:02 WARN slow disk\n2024-05-01 12:00:03 ERROR failed", "log"),
    ("[worker-3] INFO ready\n[worker-4] INFO ready\n[worker-3] ERROR lost connection", "log"),
    ("level=info msg=started\nlevel=warn msg=slow\nlevel=info msg=done", "log"),
    ("\n".join(f"GET /api/items/{i} 200 {i * 3} ms" for i in range(20)), "log"),  # near-identical lines
    ("\n".join(f"-rw-r--r--  1 ada  staff  {i * 100}  Jan  {i % 9 + 1} 12:00 file_{i}.txt" for i in range(10)), "log"),
    ("\n".join(f"src/pkg/mod_{i}.py" for i in range(10)), "log"),
    ("id,name,amount\n" + "\n".join(f"{i},name {i},{i * 3.5}" for i in range(10)), "log"),
    ("import os\n\ndef main():\n    path = os.getcwd()\n    return path\n", "code"),
    ("package main\n\nfunc main() {\n\tfmt.Println(\"hi\")\n}\n", "code"),
    ("class A {\n  constructor() {\n    this.x = 1;\n  }\n}\n", "code"),
    ("diff --git a/x.py b/x.py\n--- a/x.py\n+++ b/x.py\n@@ -1,2 +1,2 @@\n-a = 1\n+a = 2\n", "code"),
    ("", "text"),
])
def test_content_type(text, kind):
    assert content_type(text) == kind
