"""A log's digest keeps every error and stack-trace line, however few there are: one ERROR in 500
lines, a Java stack trace, a Python traceback, and very many errors (kept up to a cap, counted)."""

from __future__ import annotations

import asyncio
import json
import random
import re

import pytest

from ctxwarden.policies.base import Exchange, Services
from ctxwarden.policies.history.blocks import summary_sections
from ctxwarden.policies.history.content import content_type
from ctxwarden.policies.history.digest import LOG_ERRORS_MAX_TOKENS, digest
from ctxwarden.policies.history.policy import HistoryConfig, HistoryPolicy
from ctxwarden.policies.text.tokens import TiktokenCounter
from tests.test_history_units import RecordingMetrics

COUNTER = TiktokenCounter()
SIZING = HistoryConfig().sizing()  # the default digest budgets: 8 % of a result, 60 to 250 tokens


def count(text: str) -> int:
    return COUNTER.count_text(text, "gpt-4o")


NPE = ('2024-05-01 12:04:41,211 ERROR [pool-3-thread-7] com.acme.billing.InvoiceService - Failed to render invoice '
       'INV-5152 for customer cust_76861: java.lang.NullPointerException: Cannot invoke "String.length()" because '
       '"name" is null')


def service_log(n: int, seed: int = 1, plant: dict[int, list[str]] | None = None) -> list[str]:
    """A Java service's log: INFO and DEBUG lines of varied shapes, a WARN now and then."""
    rng = random.Random(seed)
    lines: list[str] = []
    for i in range(n):
        lines += (plant or {}).get(i, [])
        ts = f"2024-05-01 12:{i // 60 % 60:02d}:{i % 60:02d},{rng.randint(100, 999)}"
        shape = rng.randrange(6)
        if i % 23 == 11:
            lines.append(f"{ts} WARN  [main] com.acme.cache.CacheManager - cache miss ratio {rng.random():.2f} above threshold")
        elif shape == 0:
            lines.append(f"{ts} DEBUG [http-{rng.randint(1, 40)}] o.a.c.c.C.[Tomcat] - session {rng.getrandbits(40):x} touched")
        elif shape == 1:
            lines.append(f"{ts} INFO  [scheduler] com.acme.jobs.Nightly{rng.choice('ABC')} - step {rng.randint(1, 9)} of 9 done")
        else:
            lines.append(f"{ts} INFO  [pool-3-thread-{rng.randint(1, 9)}] com.acme.billing.Worker - processed batch "
                         f"{rng.randint(1, 999)} in {rng.randint(1, 99)} ms, {rng.randint(1, 200)} items ok")
    return lines


def budget_for(text: str) -> int:
    return SIZING.digest_budget(count(text))


@pytest.mark.parametrize("budget", [None, 40, 60, 120, 250])
@pytest.mark.parametrize("at", [3, 250, 496])
def test_the_one_error_in_500_lines_survives(budget, at):
    text = "\n".join(service_log(500, plant={at: [NPE]}))
    assert content_type(text) == "log"
    budget = budget or budget_for(text)
    out = digest(text, budget, count=count, recall_hint="ref=ar_log")
    assert NPE in out, out
    assert "error and trace lines not shown" not in out
    assert count(out) <= max(budget, count(NPE) + 40 + budget // 2)
    assert re.match(r"\[log of 501 lines, [\d,]+ not shown;", out)


JAVA_TRACE = [
    "2024-05-01 12:04:41,211 ERROR [pool-3-thread-7] c.a.b.InvoiceService - Failed to render invoice INV-5152",
    "java.lang.IllegalStateException: renderer failed for INV-5152",
    *[f"\tat com.acme.billing.render.Stage{k}.apply(Stage{k}.java:{40 + k})" for k in range(14)],
    "\tat java.base/java.util.concurrent.ThreadPoolExecutor.runWorker(ThreadPoolExecutor.java:1136)",
    "Caused by: java.lang.NullPointerException: Cannot invoke \"String.length()\" because \"name\" is null",
    "\tat com.acme.billing.model.Customer.displayName(Customer.java:88)",
    "\tat com.acme.billing.render.Header.build(Header.java:31)",
    "\t... 15 more",
]
PYTHON_TRACE = [
    "2024-05-01 12:09:02,017 ERROR [worker-3] billing.sync - sync of ledger L-7 crashed",
    "Traceback (most recent call last):",
    '  File "/app/billing/sync.py", line 214, in run',
    "    self._apply(batch)",
    '  File "/app/billing/sync.py", line 188, in _apply',
    "    entry = ledger.post(row)",
    '  File "/app/billing/ledger.py", line 57, in post',
    '    raise LedgerLocked(f"ledger {self.id} is locked by {owner}")',
    "billing.ledger.LedgerLocked: ledger L-7 is locked by reconcile-42",
]


@pytest.mark.parametrize("budget", [None, 60, 250])
def test_a_java_stack_trace_and_a_python_traceback_inside_a_log_survive_whole(budget):
    text = "\n".join(service_log(500, seed=4, plant={120: JAVA_TRACE, 380: PYTHON_TRACE}))
    assert content_type(text) == "log"
    budget = budget or budget_for(text)
    out = digest(text, budget, count=count)
    lines = out.split("\n")
    for trace in (JAVA_TRACE, PYTHON_TRACE):
        positions = [lines.index(line) for line in trace]  # every line, whole, in order
        assert positions == sorted(positions)
    assert "error and trace lines not shown" not in out
    assert count(out) <= max(budget, LOG_ERRORS_MAX_TOKENS + budget // 2)


def test_unindented_frames_count_as_a_trace():
    frames = ["2024-05-01 12:04:41,211 ERROR c.a.Job - boom", "java.lang.RuntimeException: boom",
              "at com.acme.Job.run(Job.java:12)", "at java.base/java.lang.Thread.run(Thread.java:833)"]
    out = digest("\n".join(service_log(300, plant={150: frames})), 60, count=count)
    assert all(f in out for f in frames), out


def test_very_many_errors_are_kept_up_to_a_cap_repeats_folded_and_the_rest_counted():
    rng = random.Random(9)
    plant: dict[int, list[str]] = {}
    for i in range(0, 1500, 3):  # 500 distinct errors ...
        column = "".join(rng.choice("abcdefghijklmnopqrstuvwxyz") for _ in range(8))  # no digits: no folding
        plant[i] = [f"2024-05-01 12:00:00,000 ERROR [job-{i}] c.a.Importer - row {i}: column {column} has a bad value"]
    for i in range(1, 1500, 3):  # ... and one error repeated 500 times with different ids
        plant[i] = [f"2024-05-01 12:00:0{i % 10},{i % 1000:03d} ERROR [pool-1] c.a.Db - connection {i} refused by db-primary"]
    text = "\n".join(service_log(1500, seed=2, plant=plant))
    budget = budget_for(text)
    out = digest(text, budget, count=count)
    assert count(out) <= LOG_ERRORS_MAX_TOKENS + budget // 2 + 5
    folded = re.search(r"^\[×([\d,]+)\] <ts> ERROR \[pool-1\] c\.a\.Db - connection <n> refused by db-primary$", out, re.M)
    assert folded and int(folded.group(1).replace(",", "")) == 500  # the repeats: one line, counted
    missing = re.search(r"; ([\d,]+) of ([\d,]+) error and trace lines not shown", out)
    assert missing, out[:300]
    shown = sum(1 for line in out.split("\n") if "c.a.Importer" in line)
    assert int(missing.group(2).replace(",", "")) == 1000 and int(missing.group(1).replace(",", "")) == 500 - shown
    assert shown >= 10


def test_a_log_without_errors_keeps_its_budget():
    text = "\n".join(service_log(500, seed=5))
    for budget in (40, 60, 120, 250):
        assert count(digest(text, budget, count=count)) <= budget


def test_a_log_whose_errors_need_more_than_it_has_is_returned_whole():
    text = "\n".join(JAVA_TRACE + ["2024-05-01 12:04:42,000 INFO [main] c.a.App - retrying"])
    assert digest(text, 60, count=count) == text


def test_a_compaction_keeps_the_error_line_of_a_tool_result_log():
    """The issue's case: a 30-step loop whose step 3 read a 60-line log; after the compaction every
    forwarded request still carries its ERROR line."""
    rng = random.Random(7)
    log = "\n".join(NPE if i == 41 else f"12:04:{i % 60:02d} {'WARN ' if i % 9 == 4 else 'INFO '} batch {rng.randint(1, 999)} ok"
                    for i in range(60))  # short lines: the digest gets its smallest budget
    history: list[dict] = [{"role": "system", "content": "You are an SRE agent."},
                           {"role": "user", "content": "Why do invoices fail to render since Monday?"}]
    policy = HistoryPolicy(HistoryConfig(max_messages=20, max_tokens=2000, keep_recent=6, event_min_exchanges=8,
                                         event_min_tokens=10**9), Services(tokens=COUNTER, metrics=RecordingMetrics()))
    compacted = 0
    for step in range(30):
        call = {"id": f"c{step}", "type": "function", "function": {"name": "read_log" if step == 3 else "run_query",
                                                                    "arguments": json.dumps({"step": step})}}
        result = log if step == 3 else "\n".join(f"row {step}-{k}: ok" for k in range(30))
        history = history + [{"role": "assistant", "content": f"Step {step}.", "tool_calls": [call]},
                             {"role": "tool", "tool_call_id": f"c{step}", "content": result}]
        ex = Exchange("t", "gpt-4o", history, None, {"model": "gpt-4o", "messages": history}, session_id="s")
        asyncio.run(policy.on_request(ex))
        summaries = [s for m in ex.messages for s in summary_sections(m)]
        if any("read_log" in s for s in summaries):
            compacted += 1
            assert NPE in "".join(summaries), summaries
    assert compacted >= 5
