"""Do the default policies harm ordinary traffic? Real user prompts through the real server.

    python bench/no_harm.py [--sets metatool,bfcl,bfcl_multi,sharegpt_first,sharegpt_multi]
                            [--limit N] [--config FILE] [--concurrency 8] [--examples 3]
                            [--system "You are a helpful assistant."] [--blind] [--out FILE]

The proxy runs as `ctxwarden serve` (uvicorn, one worker) with the default configuration (or
--config FILE merged over it), in front of a recording upstream on 127.0.0.1
(bench/_no_harm_upstream.py) that keeps every body it receives and answers one plain assistant
message. Requests carry no session or user header, as a plain OpenAI client sends them (each
carries `x-bench-id`, which the proxy passes upstream untouched, so the bench can find what was
forwarded); the proxy keys a session on the opening messages, so each prompt and each replayed
conversation is its own session. A fresh server serves each set.

The sets (bench/data/no_harm/README.md says where each comes from; each row is `dev` or `blind`,
by a hash of its id; the bench reads `dev` unless --blind, which is meant to be run once, at the end):
- metatool: the MetaTool user queries (bench/data/metatool/queries.csv, ~10k per split), one request each ([user]);
- bfcl: BFCL's single-turn questions, with the system message BFCL gives some of them;
- bfcl_multi: BFCL's multi-turn tasks replayed turn by turn, the proxy's own answers between turns;
- sharegpt_first: the first human message of real ShareGPT conversations (long pastes included);
- sharegpt_multi: real ShareGPT conversations of 2-8 human turns, replayed turn by turn
  (request k = the first k human turns with the real gpt replies between them).

Counted per set, per request:
- hijacked: the upstream never called (proxy-answered: a 2xx the proxy wrote; rejected: a non-2xx);
- altered: the latest user message forwarded differently from how it was sent: `noted` (its text
  intact, something appended to it or after it) or `words_changed` (the user's own text changed or cut);
- proxy-authored: an answer the proxy wrote or replaced ("[ctxwarden…" text, a top-level
  `ctxwarden` field with author proxy, the actions clash.ask_user / loops.stop, or an answer that
  is not the upstream's);
- history edited: an earlier message forwarded differently (or messages added/removed before the
  latest user message): `noted` (every earlier text intact, something appended: a note the proxy
  carries from turn to turn) or `changed`; late system: a system message forwarded anywhere but first;
- non-2xx (or no answer within the client timeout), and every x-ctxwarden-actions label seen.
"""

from __future__ import annotations

import argparse
import asyncio
import copy
import csv
import gzip
import hashlib
import json
import random
import statistics
import sys
import tempfile
import time
import uuid
from collections import Counter, defaultdict
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import yaml
from _harness import launch
from _no_harm_upstream import ANSWER

from ctxwarden.proxy.local_server import free_port
from ctxwarden.proxy.processes import start_replica

HERE = Path(__file__).resolve().parent
DATA = HERE / "data" / "no_harm"
METATOOL = HERE / "data" / "metatool" / "queries.csv"
SETS = ("metatool", "bfcl", "bfcl_multi", "sharegpt_first", "sharegpt_multi")
SEED = 41
PROXY_STOPS = ("clash.ask_user", "loops.stop")
KINDS = ("proxy_answered", "rejected", "noted", "words_changed", "authored", "history_noted", "history_changed",
         "late_system", "non_2xx")


# ---------------------------------------------------------------------------- data

def split_of(set_name: str, row_id: str) -> str:
    return "dev" if hashlib.sha256(f"{set_name}:{row_id}".encode()).digest()[0] % 2 == 0 else "blind"


def _jsonl_gz(name: str) -> list[dict]:
    with gzip.open(DATA / name, "rt", encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


@dataclass
class Item:
    """One prompt (`messages`) or one conversation to replay (`turns`)."""
    id: str
    messages: list[dict] | None = None
    turns: list[dict] | None = None   # [{"role": "user"|"assistant", "content"}]; assistant None = the proxy's answer


def load_set(name: str, split: str, system: str | None) -> list[Item]:
    def single(row_id: str, messages: list[dict]) -> Item:
        if system and not any(m["role"] in ("system", "developer") for m in messages):
            messages = [{"role": "system", "content": system}, *messages]
        return Item(row_id, messages=messages)

    def replay(row_id: str, turns: list[dict]) -> Item:
        return Item(row_id, turns=([{"role": "system", "content": system}] if system else []) + turns)

    items: list[Item] = []
    if name == "metatool":
        with METATOOL.open(encoding="utf-8", newline="") as f:
            queries = sorted({row["Query"].strip() for row in csv.DictReader(f) if row["Query"].strip()})
        ids = {q: hashlib.sha256(q.encode()).hexdigest()[:12] for q in queries}
        items = [single(f"mt-{ids[q]}", [{"role": "user", "content": q}]) for q in queries if split_of("metatool", ids[q]) == split]
    elif name in ("bfcl", "bfcl_multi"):
        for row in _jsonl_gz("bfcl.jsonl.gz"):
            if row["split"] != split:
                continue
            if name == "bfcl" and row["kind"] == "single":
                items.append(single(row["id"], row["messages"]))
            elif name == "bfcl_multi" and row["kind"] == "multi":
                turns: list[dict] = []
                for text in row["turns"]:
                    turns += [{"role": "user", "content": text}, {"role": "assistant", "content": None}]
                items.append(replay(row["id"], turns[:-1]))
    elif name in ("sharegpt_first", "sharegpt_multi"):
        for row in _jsonl_gz("sharegpt.jsonl.gz"):
            if row["split"] != split:
                continue
            if name == "sharegpt_first" and row["kind"] == "first":
                items.append(single(row["id"], [{"role": "user", "content": row["text"]}]))
            elif name == "sharegpt_multi" and row["kind"] == "multi":
                items.append(replay(row["id"], row["turns"]))
    else:
        raise SystemExit(f"unknown set {name!r} (known: {', '.join(SETS)})")
    random.Random(SEED).shuffle(items)  # so that --limit N takes a sample of every category, not the first file's
    # Two items with the same opening would share a session (the proxy keys it on the opening messages).
    seen, unique = set(), []
    for item in items:
        opening = json.dumps((item.messages or item.turns)[:2], ensure_ascii=False, sort_keys=True)
        if opening not in seen:
            seen.add(opening)
            unique.append(item)
    return unique


# ---------------------------------------------------------------------------- comparing

def text_of(message: dict | None) -> str:
    if not isinstance(message, dict):
        return ""
    content = message.get("content")
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(p.get("text", "") for p in content if isinstance(p, dict))
    return ""


def _shape(messages: list[dict]) -> list[tuple[str, str]]:
    return [(m.get("role", ""), text_of(m)) for m in messages]


def compare(sent: list[dict], forwarded: list[dict]) -> dict[str, Any]:
    """How the forwarded messages differ from the sent ones, around the latest user message."""
    out: dict[str, Any] = {"altered": None, "history": None, "history_kind": None, "late_system": False}
    out["late_system"] = any(m.get("role") == "system" for m in forwarded[1:])
    last = max(i for i, m in enumerate(sent) if m.get("role") == "user")
    wanted = text_of(sent[last])
    users = [i for i, m in enumerate(forwarded) if m.get("role") == "user"]
    if not users:
        out["altered"] = ("words_changed", "no user message forwarded")
        return out
    j = users[-1]
    got = text_of(forwarded[j])
    match = j
    if got == wanted:
        if forwarded[j + 1:]:
            out["altered"] = ("noted", "after it: " + " | ".join(f"{m.get('role')}: {text_of(m)}" for m in forwarded[j + 1:]))
    elif got.startswith(wanted) or got.startswith(wanted.rstrip()):
        out["altered"] = ("noted", "appended: " + got[len(wanted.rstrip()):])
    else:
        same = [i for i in users if text_of(forwarded[i]) == wanted]
        if same:  # the user's message intact, a user-role note after it
            match = same[-1]
            out["altered"] = ("noted", "after it: " + " | ".join(f"{m.get('role')}: {text_of(m)}" for m in forwarded[match + 1:]))
        else:
            k = next((n for n, (a, b) in enumerate(zip(wanted, got)) if a != b), min(len(wanted), len(got)))
            out["altered"] = ("words_changed", f"at char {k} of {len(wanted)}: sent …{wanted[max(0, k - 40):k + 80]!r} "
                                               f"→ forwarded …{got[max(0, k - 40):k + 80]!r} ({len(got)} chars)")
    before, after = _shape(sent[:last]), _shape(forwarded[:match])
    if before != after:
        # noted: the same messages, each with the sent text intact at its start; else changed
        intact = len(before) == len(after) and all(r1 == r2 and t2.startswith(t1) for (r1, t1), (r2, t2) in zip(before, after))
        out["history_kind"] = "history_noted" if intact else "history_changed"
        k = next((n for n, (a, b) in enumerate(zip(before, after)) if a != b), min(len(before), len(after)))
        if k < len(before) and k < len(after):
            (r1, t1), (r2, t2) = before[k], after[k]
            c = next((n for n, (a, b) in enumerate(zip(t1, t2)) if a != b), min(len(t1), len(t2)))
            what = (f"{r1} → {r2}, at char {c} of {len(t1)}: …{t1[max(0, c - 40):c + 60]!r} → …{t2[max(0, c - 40):c + 160]!r} "
                    f"({len(t2)} chars)")
        else:
            what = f"{before[k][0] if k < len(before) else '(none)'} → {after[k][0] if k < len(after) else '(none)'}: " \
                   f"{(after[k][1] if k < len(after) else before[k][1])[:160]!r}"
        out["history"] = f"{len(before)} earlier messages sent, {len(after)} forwarded; first difference at #{k}: {what}"
    return out


# ---------------------------------------------------------------------------- running

@dataclass
class Outcome:
    set: str
    id: str
    turn: int
    status: int | str
    actions: list[str]
    seconds: float
    sent: str                     # the latest user message, as sent
    called: bool = False
    answer: str = ""
    authored: str | None = None
    altered: tuple[str, str] | None = None
    history: str | None = None
    history_kind: str | None = None   # history_noted (earlier texts intact, something appended) | history_changed
    late_system: bool = False

    def kinds(self) -> list[str]:
        out = []
        if not self.called:
            out.append("proxy_answered" if isinstance(self.status, int) and self.status < 300 else "rejected")
        if self.altered:
            out.append(self.altered[0])
        if self.authored:
            out.append("authored")
        if self.history:
            out += ["history_edited", self.history_kind or "history_changed"]
        if self.late_system:
            out.append("late_system")
        if not (isinstance(self.status, int) and 200 <= self.status < 300):
            out.append("non_2xx")
        return out


class Runner:
    def __init__(self, proxy_url: str, upstream_url: str, concurrency: int, timeout_s: float) -> None:
        self.proxy_url, self.upstream_url = proxy_url, upstream_url
        self.limit = asyncio.Semaphore(concurrency)
        self.timeout = httpx.Timeout(timeout_s, connect=10)
        self.client = httpx.AsyncClient(limits=httpx.Limits(max_connections=concurrency * 2))

    async def send(self, set_name: str, item_id: str, turn: int, messages: list[dict]) -> Outcome:
        key = f"{set_name}-{uuid.uuid4().hex[:16]}"
        body = {"model": "gpt-4o", "messages": messages}
        started = time.perf_counter()
        sent = text_of(next(m for m in reversed(messages) if m["role"] == "user"))
        try:
            r = await self.client.post(f"{self.proxy_url}/v1/chat/completions", json=body, timeout=self.timeout,
                                       headers={"authorization": "Bearer sk-bench", "x-bench-id": key})
            status: int | str = r.status_code
            actions = [a for a in r.headers.get("x-ctxwarden-actions", "").split(",") if a]
            try:
                data = r.json()
            except ValueError:
                data = {"raw": r.text[:300]}
        except httpx.TimeoutException:
            status, actions, data = "no answer", [], {}
        seconds = time.perf_counter() - started
        got = (await self.client.get(f"{self.upstream_url}/_take/{key}", timeout=30)).json()
        out = Outcome(set_name, item_id, turn, status, actions, seconds, sent, called=bool(got))
        choices = data.get("choices") if isinstance(data, dict) else None
        if choices and isinstance(choices[0], dict):
            out.answer = text_of(choices[0].get("message"))
        elif isinstance(data, dict) and isinstance(data.get("error"), dict):
            out.answer = f"error {data['error'].get('code')}: {data['error'].get('message')}"
        mark = data.get("ctxwarden") if isinstance(data, dict) else None
        if out.answer.startswith("[ctxwarden"):
            out.authored = "text starts with [ctxwarden"
        elif isinstance(mark, dict) and mark.get("author") == "proxy":
            out.authored = f"ctxwarden field: {json.dumps(mark)[:120]}"
        elif any(a in actions for a in PROXY_STOPS):
            out.authored = "action " + ",".join(a for a in actions if a in PROXY_STOPS)
        elif status == 200 and choices and out.answer != ANSWER:
            out.authored = "answer is not the upstream's" if got else "answered without the upstream"
        if got:
            cmp = compare(messages, got[0].get("messages") or [])
            out.altered, out.history, out.late_system = cmp["altered"], cmp["history"], cmp["late_system"]
            out.history_kind = cmp["history_kind"]
        return out

    async def item(self, set_name: str, item: Item) -> list[Outcome]:
        async with self.limit:
            if item.messages is not None:
                return [await self.send(set_name, item.id, 1, item.messages)]
            outcomes, history, turn = [], [], 0
            for t in item.turns or []:
                if t["role"] == "assistant":
                    content = t["content"] if t["content"] is not None else (outcomes[-1].answer if outcomes else "")
                    history.append({"role": "assistant", "content": content})
                    continue
                history.append({"role": t["role"], "content": t["content"]})
                if t["role"] != "user":
                    continue
                turn += 1
                outcome = await self.send(set_name, item.id, turn, copy.deepcopy(history))
                outcomes.append(outcome)
                if not (isinstance(outcome.status, int) and outcome.status < 300):
                    break  # a client stops a conversation its request failed in
            return outcomes

    async def run(self, set_name: str, items: list[Item], progress: bool) -> list[Outcome]:
        tasks = [asyncio.create_task(self.item(set_name, it)) for it in items]
        out: list[Outcome] = []
        for n, done in enumerate(asyncio.as_completed(tasks), 1):
            out += await done
            if progress and n % 250 == 0:
                print(f"    … {n}/{len(items)}", file=sys.stderr, flush=True)
        await self.client.aclose()
        return out


# ---------------------------------------------------------------------------- reporting

def short(text: str, n: int = 160) -> str:
    text = " ".join(str(text).split())
    return text if len(text) <= n else text[:n] + "…"


def report(set_name: str, split: str, items: int, outcomes: list[Outcome], wall: float, examples: int) -> dict:
    n = len(outcomes)
    by_kind: dict[str, list[Outcome]] = defaultdict(list)
    for o in outcomes:
        for k in o.kinds():
            by_kind[k].append(o)

    def line(label: str, count: int, extra: str = "") -> None:
        print(f"  {label:26} {count:6}  {100 * count / max(1, n):6.2f} %  {extra}")

    hijacked = len(by_kind["proxy_answered"]) + len(by_kind["rejected"])
    altered = len(by_kind["noted"]) + len(by_kind["words_changed"])
    statuses = Counter(str(o.status) for o in outcomes)
    actions = Counter(a for o in outcomes for a in o.actions)
    times = [o.seconds for o in outcomes]
    print(f"\n[{set_name} ({split}): {n} requests from {items} {'prompts' if n == items else 'prompts/conversations'}; "
          f"{wall:.0f} s, {n / max(wall, 1e-9):.1f} req/s, latency median {statistics.median(times) * 1000:.0f} ms, "
          f"max {max(times):.2f} s]")
    line("hijacked", hijacked, f"(proxy-answered {len(by_kind['proxy_answered'])}, rejected {len(by_kind['rejected'])})")
    line("altered (latest user msg)", altered, f"(noted {len(by_kind['noted'])}, words_changed {len(by_kind['words_changed'])})")
    line("proxy-authored answer", len(by_kind["authored"]))
    line("history edited", len(by_kind["history_edited"]),
         f"(noted {len(by_kind['history_noted'])}, changed {len(by_kind['history_changed'])})")
    line("late system message", len(by_kind["late_system"]))
    line("non-2xx / no answer", len(by_kind["non_2xx"]), " ".join(f"{s}:{c}" for s, c in sorted(statuses.items()) if s != "200"))
    print("  actions: " + (", ".join(f"{a} {c}" for a, c in actions.most_common()) or "(none)"))
    for kind in KINDS:
        for o in by_kind[kind][:examples]:
            detail = {"proxy_answered": o.answer, "rejected": o.answer, "authored": f"{o.authored}: {o.answer}",
                      "noted": o.altered[1] if o.altered else "", "words_changed": o.altered[1] if o.altered else "",
                      "history_noted": o.history or "", "history_changed": o.history or "", "late_system": "",
                      "non_2xx": o.answer}[kind]
            print(f"    {kind:14} {o.id} turn {o.turn} [{o.status}] actions={','.join(o.actions) or '-'}\n"
                  f"        sent: {short(o.sent)}\n        {short(detail, 300)}")
    return {"set": set_name, "split": split, "requests": n, "items": items, "hijacked": hijacked,
            "proxy_answered": len(by_kind["proxy_answered"]), "rejected": len(by_kind["rejected"]),
            "altered": altered, "noted": len(by_kind["noted"]), "words_changed": len(by_kind["words_changed"]),
            "authored": len(by_kind["authored"]), "history_edited": len(by_kind["history_edited"]),
            "history_noted": len(by_kind["history_noted"]), "history_changed": len(by_kind["history_changed"]),
            "late_system": len(by_kind["late_system"]), "non_2xx": len(by_kind["non_2xx"]),
            "statuses": dict(statuses), "actions": dict(actions), "seconds": round(wall, 1)}


# ---------------------------------------------------------------------------- servers

def deep_merge(base: dict, over: dict) -> dict:
    out = dict(base)
    for k, v in over.items():
        out[k] = deep_merge(out[k], v) if isinstance(v, dict) and isinstance(out.get(k), dict) else v
    return out


def start_upstream():
    port = free_port()
    proc = launch([sys.executable, str(HERE / "_no_harm_upstream.py"), "--port", str(port)], port, "/v1/models")
    return proc, proc.url


def start_server(upstream_url: str, config: dict):
    """`ctxwarden serve` (uvicorn, one worker): the default configuration, `config` merged over it."""
    store = tempfile.mkdtemp(prefix="ctxw-noharm-")
    merged = deep_merge({"upstream": {"base_url": f"{upstream_url}/v1", "api_key_env": None}, "storage": {"path": store}}, config)
    proc = start_replica(Path(store), merged, env={"MALLOC_ARENA_MAX": "2"}, log_level="error")
    return proc, proc.url


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sets", default=",".join(SETS))
    parser.add_argument("--limit", type=int, default=None, help="at most N prompts/conversations per set")
    parser.add_argument("--config", type=Path, default=None, help="a config file merged over the default")
    parser.add_argument("--concurrency", type=int, default=8)
    parser.add_argument("--examples", type=int, default=3, help="examples printed per failure kind")
    parser.add_argument("--system", default=None, help="a system prompt put before each prompt/conversation")
    parser.add_argument("--timeout", type=float, default=60, help="client timeout per request, s")
    parser.add_argument("--blind", action="store_true", help="the blind split (look at it once, at the end)")
    parser.add_argument("--out", type=Path, default=None, help="write the summary and every flagged request here (JSON)")
    args = parser.parse_args()
    split = "blind" if args.blind else "dev"
    config = yaml.safe_load(args.config.read_text()) or {} if args.config else {}
    names = [s.strip() for s in args.sets.split(",") if s.strip()]
    print(f"no_harm: split {split}, config {'default' if not config else str(args.config) + ' over the default'}, "
          f"concurrency {args.concurrency}, client timeout {args.timeout:g} s")
    upstream, upstream_url = start_upstream()
    summaries, flagged, total_start = [], [], time.perf_counter()
    try:
        for name in names:
            items = load_set(name, split, args.system)
            if args.limit is not None:
                items = items[:args.limit]
            server, url = start_server(upstream_url, config)
            try:
                started = time.perf_counter()
                runner = Runner(url, upstream_url, args.concurrency, args.timeout)
                outcomes = asyncio.run(runner.run(name, items, progress=True))
                wall = time.perf_counter() - started
            finally:
                server.stop()
            outcomes.sort(key=lambda o: (o.id, o.turn))
            summaries.append(report(name, split, len(items), outcomes, wall, args.examples))
            flagged += [{**o.__dict__, "kinds": o.kinds()} for o in outcomes if o.kinds()]
    finally:
        upstream.stop()
    print(f"\n[summary, {split}; {time.perf_counter() - total_start:.0f} s in all]")
    print(f"  {'set':16} {'requests':>8} {'hijacked':>9} {'altered':>8} {'noted':>6} {'words':>6} {'authored':>8} "
          f"{'history':>8} {'(noted':>7} {'changed)':>8} {'late sys':>8} {'non-2xx':>8}")
    for s in summaries:
        print(f"  {s['set']:16} {s['requests']:8} {s['hijacked']:9} {s['altered']:8} {s['noted']:6} {s['words_changed']:6} "
              f"{s['authored']:8} {s['history_edited']:8} {s['history_noted']:7} {s['history_changed']:8} "
              f"{s['late_system']:8} {s['non_2xx']:8}")
    if args.out:
        args.out.write_text(json.dumps({"summary": summaries, "flagged": flagged}, ensure_ascii=False, indent=1))
        print(f"  flagged requests written to {args.out}")


if __name__ == "__main__":
    main()
