"""What one big user message costs: 10 KB, 100 KB, 1 MB and 5 MB of real text, default policies
vs policies off, in one run.

    python bench/message_size.py [--sizes 10k,100k,1m,5m] [--timeout 60] [--texts prose,log]

Two `ctxwarden serve` processes (uvicorn, one worker each) in front of the recording upstream
(bench/_no_harm_upstream.py): the default configuration, and every policy off
(`policies: {<name>: {enabled: false}}`). Both also know a model `big` with a 2,000,000-token
window (`models: {big: {context_window: 2000000}}`), so the policies run on the 1 MB and 5 MB
texts too, where gpt-4o's 128k window ends in a 400 context_length_exceeded (a clear answer).

The texts: `prose` is ShareGPT messages (bench/data/no_harm/sharegpt.jsonl.gz) joined in file
order until the size is reached; `log` is a seeded log-like paste (timestamped INFO/WARN/DEBUG lines
with request ids, a few ERROR lines and stack traces). Each request is one [user] message under a
header of its own ("Here is paste N…", the same size in all: no send repeats an earlier text, so no
cache keyed by a text's hash answers it), sent to each server, with a client timeout: past it the row reads "no answer", the server is
restarted (so a stuck one does not slow the next rows) and larger sizes of that row are not sent.

Printed per row: wall time and its ratio to policies off, the server's policy time (server-timing
ctxwarden-policies) and its ratio (when policies-off took ≥ 1 ms), the status and x-ctxwarden-actions (rows under 1 MB: the median of
--repeat sends). Last, whether the server
stops working when the client leaves: a 5 MB request to model `big` with a 1 s client timeout (--leave-after),
then the server process's CPU time over the next 5 s, and the latency of a small request sent
right after those 5 s; the same request waited for to its end gives the CPU it costs in all.
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import random
import sys
import time
from pathlib import Path

import httpx
from no_harm import start_server, start_upstream

HERE = Path(__file__).resolve().parent
SHAREGPT = HERE / "data" / "no_harm" / "sharegpt.jsonl.gz"
POLICIES = ("loops", "poisoning", "clash", "history", "archive", "tools", "memory")
BIG = {"models": {"big": {"context_window": 2_000_000}}}
CONFIGS = {"off": {**BIG, "policies": {p: {"enabled": False} for p in POLICIES}}, "default": BIG}
SIZES = {"10k": 10_000, "30k": 30_000, "100k": 100_000, "300k": 300_000, "1m": 1_000_000, "5m": 5_000_000}
TICKS = os.sysconf("SC_CLK_TCK")


def prose(size: int) -> str:
    parts, total = [], 0
    with gzip.open(SHAREGPT, "rt", encoding="utf-8") as f:
        rows = [json.loads(line) for line in f]
    texts = [r["text"] for r in rows if r["kind"] == "first"] + [t["content"] for r in rows if r["kind"] == "multi" for t in r["turns"]]
    while total < size:
        for t in texts:
            parts.append(t)
            total += len(t.encode()) + 2
            if total >= size:
                break
    return cut("\n\n".join(parts), size)


def log(size: int) -> str:
    rng = random.Random(7)
    services = ["api-gateway", "auth", "billing", "orders", "inventory", "scheduler", "mailer"]
    infos = ["request completed in {ms} ms status=200 path=/v1/orders/{n}", "cache hit key=user:{n} ttl={s}s",
             "connected to postgres pool size={s}", "job {n} picked by worker-{s}", "GET /healthz 200 {ms}ms",
             "user {n} logged in from 10.0.{s}.{ms}", "flushed {n} metrics to collector"]
    warns = ["slow query took {ms} ms: SELECT * FROM orders WHERE customer_id = {n}", "retrying upstream call attempt {s}/3",
             "queue depth {n} above threshold 5000"]
    lines, total, t = [], 0, 1_700_000_000.0
    while total < size:
        t += rng.random() * 2
        stamp = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(t)) + f".{int(t * 1000) % 1000:03d}Z"
        roll, svc = rng.random(), rng.choice(services)
        fill = {"ms": rng.randint(1, 900), "n": rng.randint(1000, 99999), "s": rng.randint(1, 64)}
        if roll < 0.002:
            block = [f"{stamp} ERROR [{svc}] java.lang.NullPointerException: order {fill['n']} has no customer",
                     *[f"\tat com.shop.{svc.replace('-', '')}.Handler.step{i}(Handler.java:{rng.randint(10, 400)})" for i in range(6)]]
        elif roll < 0.05:
            block = [f"{stamp} WARN  [{svc}] " + rng.choice(warns).format(**fill)]
        elif roll < 0.15:
            block = [f"{stamp} DEBUG [{svc}] trace id={rng.getrandbits(64):016x} span={rng.getrandbits(32):08x}"]
        else:
            block = [f"{stamp} INFO  [{svc}] " + rng.choice(infos).format(**fill)]
        for line in block:
            lines.append(line)
            total += len(line) + 1
    return cut("\n".join(lines), size)


def cut(text: str, size: int) -> str:
    return text.encode()[:size].decode("utf-8", "ignore")


def label(size: int) -> str:
    return f"{size // 1_000_000} MB" if size >= 1_000_000 else f"{size // 1000} KB"


PASTES = iter(range(1, 1_000_000))


def fresh(text: str) -> str:
    """`text` under a header of its own, as long as before: every send is a message the server has not
    seen (its caches keyed by a text's hash would otherwise answer the second send of the same text)."""
    head = f"Here is paste {next(PASTES)}, please read it:\n\n"
    return head + cut(text, len(text.encode()) - len(head.encode()))


def send(url: str, model: str, text: str, timeout: float) -> dict:
    body = {"model": model, "messages": [{"role": "user", "content": fresh(text)}]}
    started = time.perf_counter()
    try:
        r = httpx.post(f"{url}/v1/chat/completions", json=body, timeout=httpx.Timeout(timeout, connect=10),
                       headers={"authorization": "Bearer sk-bench", "x-bench-id": "size"})
    except httpx.TimeoutException:
        return {"s": time.perf_counter() - started, "status": "no answer", "actions": "", "policies_ms": None, "why": ""}
    seconds = time.perf_counter() - started
    timing = r.headers.get("server-timing", "")
    policies_ms = float(timing.split("dur=")[1].split(",")[0]) if "ctxwarden-policies;dur=" in timing else None
    why = ""
    if r.status_code >= 400:
        try:
            err = r.json().get("error", {})
            why = f"{err.get('code')}: {err.get('message', '')[:90]}"
        except ValueError:
            why = r.text[:90]
    return {"s": seconds, "status": r.status_code, "actions": r.headers.get("x-ctxwarden-actions", ""),
            "policies_ms": policies_ms, "why": why}


def measure(url: str, model: str, text: str, timeout: float, repeat: int) -> dict:
    """The median-time row of `repeat` sends (a no-answer ends the repeats)."""
    rows = []
    for _ in range(repeat):
        rows.append(send(url, model, text, timeout))
        if rows[-1]["status"] == "no answer":
            return rows[-1]
    return sorted(rows, key=lambda r: r["s"])[len(rows) // 2]


def cpu_seconds(pid: int) -> float:
    """utime + stime of `pid` and its children (all threads), from /proc."""
    total = 0.0
    pids = [pid] + [int(p) for p in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()] \
        if Path(f"/proc/{pid}/task/{pid}/children").exists() else [pid]
    for p in pids:
        try:
            fields = Path(f"/proc/{p}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        total += (int(fields[11]) + int(fields[12])) / TICKS
    return total


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sizes", default="10k,100k,1m,5m", help=f"of {','.join(SIZES)}")
    parser.add_argument("--texts", default="prose,log")
    parser.add_argument("--models", default="gpt-4o,big")
    parser.add_argument("--timeout", type=float, default=60, help="client timeout per request, s")
    parser.add_argument("--no-disconnect", action="store_true", help="skip the client-leaves measurement")
    parser.add_argument("--leave-after", type=float, default=1.0, help="client timeout of the client-leaves request, s")
    parser.add_argument("--repeat", type=int, default=3, help="sends per row under 1 MB (the median is printed)")
    args = parser.parse_args()
    sizes = [SIZES[s.strip().lower()] for s in args.sizes.split(",")]
    makers = {"prose": prose, "log": log}
    texts = {(kind, size): makers[kind](size) for kind in args.texts.split(",") for size in sizes}
    upstream, upstream_url = start_upstream()
    servers = {name: start_server(upstream_url, cfg) for name, cfg in CONFIGS.items()}
    try:
        for name in CONFIGS:  # warm both (imports, embedders, each model's lookup) before timing anything
            for model in args.models.split(","):
                send(servers[name][1], model, "Hello, what can you do?", args.timeout)
        print(f"[one user message of real text; client timeout {args.timeout:g} s; one worker per server; "
              f"{os.cpu_count()} CPUs]")
        print(f"  {'text':5} {'size':>6} {'model':7} {'config':8} {'wall s':>8} {'× off':>7} {'policies ms':>11} {'× off':>7} "
              f"{'status':>9}  actions / error")
        for kind in args.texts.split(","):
            for model in args.models.split(","):
                dead: set[str] = set()
                for size in sizes:
                    off = None
                    for name in CONFIGS:
                        if name in dead:
                            print(f"  {kind:5} {label(size):>6} {model:7} {name:8} {'':>8} {'':>7} {'':>11} {'':>7} {'not sent':>9}  "
                                  "(a smaller message got no answer)")
                            continue
                        row = measure(servers[name][1], model, texts[(kind, size)], args.timeout,
                                      args.repeat if size < 1_000_000 else 1)
                        if name == "off":
                            off = row
                        both = off and name != "off" and off["status"] != "no answer" and row["status"] != "no answer"
                        ratio = f"{row['s'] / off['s']:7.1f}" if both else f"{'':>7}"
                        pol = f"{row['policies_ms']:11.1f}" if row["policies_ms"] is not None else f"{'-':>11}"
                        pratio = f"{row['policies_ms'] / max(off['policies_ms'], 0.01):7.1f}" \
                            if both and row["policies_ms"] is not None and (off["policies_ms"] or 0) >= 1.0 else f"{'':>7}"
                        print(f"  {kind:5} {label(size):>6} {model:7} {name:8} {row['s']:8.2f} {ratio} {pol} {pratio} "
                              f"{row['status']!s:>9}  {row['actions'] or '-'}{'  ' + row['why'] if row['why'] else ''}",
                              flush=True)
                        if row["status"] == "no answer":
                            dead.add(name)
                            servers[name][0].stop()  # a server still busy with it would slow every later row
                            servers[name] = start_server(upstream_url, CONFIGS[name])
        if not args.no_disconnect:
            disconnect(servers["default"], upstream_url, args.leave_after)
    finally:
        for proc, _ in servers.values():
            proc.stop()
        upstream.stop()


def disconnect(server, upstream_url: str, leave_after: float) -> None:
    """CPU the server spends on a 5 MB request the client stops waiting for, against the same request
    waited for to its end: if the work stops with the client, the CPU after it left stays near 0."""
    proc, url = server
    proc.stop()
    proc, url = start_server(upstream_url, CONFIGS["default"])
    try:
        send(url, "big", "Hello, what can you do?", 30)
        text = prose(5_000_000)
        pid = proc.proc.pid
        before = cpu_seconds(pid)
        whole = send(url, "big", text, 300)
        full = cpu_seconds(pid) - before
        before = cpu_seconds(pid)
        row = send(url, "big", text, leave_after)
        waited = cpu_seconds(pid) - before
        time.sleep(5.0)
        after = cpu_seconds(pid) - before - waited
        small = send(url, "gpt-4o", "What is the capital of France?", 30)
        left = full - waited
        if left < 0.5:
            verdict = f"too short to tell: the whole request's work ends within the client's {leave_after:g} s (try --leave-after)"
        elif after < 0.5 * left:
            verdict = "stopped"
        else:
            verdict = f"ran on: {after:.2f} of the {left:.2f} s the request had left"
        print("\n[the client leaves: 5 MB of prose to model big, default policies]")
        print(f"  waited for: {whole['status']} in {whole['s']:.2f} s, {full:.2f} s server CPU")
        print(f"  {leave_after:g} s client timeout: {row['status']} after {row['s']:.2f} s; server CPU while the client waited "
              f"{waited:.2f} s, in the 5 s after it left {after:.2f} s → {verdict}")
        print(f"  a small request sent 5 s after the client left: {small['status']} in {small['s']:.2f} s")
    finally:
        proc.stop()


if __name__ == "__main__":
    sys.exit(main())
