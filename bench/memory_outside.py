"""The memory policy's SELECT on an outside long-conversation benchmark, through the real server.

    python bench/memory_outside.py            # the whole conversation: 1,431 user turns, 665 sessions, 35 questions
    python bench/memory_outside.py --quick    # the first 120 sessions and the questions due by then
    python bench/memory_outside.py --errors   # also each question: what was injected, from which turn
    python bench/memory_outside.py --part dev # the figures of the dev questions only (tuning); --part heldout once
    python bench/memory_outside.py --context-weight 0   # memories ranked by their sentence alone (before: with their turn)

The data (bench/data/memory_outside/, README.md there) is CRI Benchmark's `persona-1-base`
(cri-benchmark 0.1.2, MIT): one user, Marcus, talking to an assistant over 289 days in 665
sessions, mostly chit-chat (cast-iron pans, hardware-store hours), with the facts about him said
once among it, some changed later (job, city, diet, relationship), and the turns that state them
labelled by message id. Nothing in it was written for ctxwarden.

The proxy (`ctxwarden serve` in a child, bench/_harness.py) sits in front of the fake upstream (a
child too). One tenant and one user for the conversation. Each user turn is sent in order as a
chat request in its session (x-ctxwarden-session: the benchmark's session id; the session's earlier
turns, the assistant's replies as the benchmark gives them, go before it), so the memory policy
writes what it extracts. The questions are sent as later requests, each in a session of its own,
and what the proxy injected is read from the request the fake upstream received (the `Relevant
context:` block at the start of the question); each injected line is traced to the memory that
has its text (GET /admin/memories, with history) and that memory to the user turn it came from
(its `message_hash`, the hash of that turn's text).

Questions, all from the benchmark's labels (the wording is a fixed template, the evidence is theirs):
  * `changes` (7): "What is my <query_topic>?" (current occupation, current location, ...);
    evidence: the change's `key_messages`. Asked just before the next change of the same topic
    starts (the point where this one is still the current state), else after the last session.
  * `conflicts` (8): "Tell me about my <topic>."; evidence: the two
    `introduced_at_messages` (the older statement and the one that replaced it). Asked at the end.
  * `query_relevance_pairs` (20) are sent too, verbatim ("What does Marcus do for work?"), but the
    benchmark labels them with fact phrases, not turns: only their empty share is printed.

Figures (micro-averaged over the turn-labelled questions):
  * precision: injected memories that come from one of the question's evidence turns / all
    memories injected for those questions (a memory is relevant when it comes from an evidence
    turn: its message_hash is that turn's, or the turn says its text again, which merges into it);
  * recall: evidence turns with a memory injected / evidence turns (end to end: a turn nothing was
    extracted from counts as missed); `recall | extracted` counts only evidence turns that some
    memory came from (what SELECT could have found);
  * by session (as LongMemEval also scores): a memory counts when it comes from any turn of a
    session holding an evidence turn; recall over those sessions;
  * nothing injected: the share of questions with no block;
  * extraction recall: of every labelled evidence turn (the questions' and `signal_examples`,
    matched by text), the share that at least one memory came from; beside it, how many of the
    benchmark's `noise_examples` turns (chit-chat with nothing lasting) became memories;
  * diagnostic: where the policy's own relevance (GET /admin/memories?q=, calibrated cosine
    without bonuses) ranks the best evidence memory among the user's live memories.
  * blocks on conversation turns: the share of the conversation's own requests (chit-chat mostly)
    that were forwarded with a memory block; a block on a turn it has no bearing on is harm.
Targets (issue 45): precision >= 0.80 and recall >= 0.80. Figures only; nothing here is timed.

Dev and held-out (issue 45: tune on one part, report the other once): the turn-labelled questions are
split by topic family, so no held-out topic was looked at while choosing thresholds:
  dev      work (current occupation, career satisfaction, remote work opinion), diet (both changes and
           the conflict), political engagement: 7 questions;
  heldout  place (both location changes, city preference), relationship and family (both relationship
           changes, the relationship conflict, family configuration), technology usage: 8 questions.

Memories are written during the run, so every one is younger than `recent_s` (1 h) and would get the
same `recent_bonus` (0 by default); the benchmark's own dates (days to months apart) cannot reach the server.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _harness import start_fake, start_proxy

from ctxwarden.policies.cache import stable_hash
from ctxwarden.proxy.registry import policy_names

DATA = Path(__file__).resolve().parent / "data" / "memory_outside"
ADMIN_KEY = "bench-memory-outside-admin"
TENANT, USER = "cri-persona-1-base", "marcus"
SYSTEM = "You are a helpful assistant."
HEADER = "Relevant context:"
QUICK_SESSIONS = 120
DEV_TOPICS = ("current occupation", "career satisfaction", "remote work opinion", "diet", "political engagement")


@dataclass
class Question:
    kind: str  # change | conflict | relevance
    text: str
    evidence: tuple[int, ...]  # message ids ((): the benchmark labels this one with phrases only)
    ask_before: int | None  # asked before this message id is sent; None: after the last session
    injected: list[str] = field(default_factory=list)  # the block's lines, as forwarded
    ranked: list[tuple[str, float]] = field(default_factory=list)  # live memories by relevance (admin ?q=)
    part: str = ""  # dev | heldout for the turn-labelled questions (module docstring)


def load(data: Path = DATA) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    messages = [json.loads(line) for line in (data / "conversations.jsonl").read_text(encoding="utf-8").splitlines()
                if line.strip()]
    truth = json.loads((data / "ground_truth.json").read_text(encoding="utf-8"))
    return messages, truth


def questions(truth: dict[str, Any]) -> list[Question]:
    out: list[Question] = []
    changes = truth["changes"]
    for i, change in enumerate(changes):
        later = [c for c in changes[i + 1:] if c["query_topic"] == change["query_topic"]]
        ask_before = min(later[0]["key_messages"]) if later else None
        out.append(Question("change", f"What is my {change['query_topic']}?", tuple(change["key_messages"]), ask_before,
                            part=part_of(change["query_topic"])))
    for conflict in truth["conflicts"]:
        out.append(Question("conflict", f"Tell me about my {conflict['topic']}.",
                            tuple(conflict["introduced_at_messages"]), None, part=part_of(conflict["topic"])))
    for pair in truth["query_relevance_pairs"]:
        out.append(Question("relevance", pair["query"], (), None))
    return out


def part_of(topic: str) -> str:
    return "dev" if topic in DEV_TOPICS else "heldout"


def signal_turns(messages: list[dict[str, Any]], truth: dict[str, Any], key: str = "signal_examples") -> set[int]:
    """The user turns `signal_examples` (or `noise_examples`) quote (cut at 200 characters: matched by the start)."""
    found = set()
    for example in truth[key]:
        head = example["text"][:150]
        found |= {m["message_id"] for m in messages if m["role"] == "user" and m["content"].startswith(head)}
    return found


def sessions_in_order(messages: list[dict[str, Any]]) -> list[list[dict[str, Any]]]:
    sessions: dict[str, list[dict[str, Any]]] = {}
    for m in sorted(messages, key=lambda m: m["message_id"]):
        sessions.setdefault(m["session_id"], []).append(m)
    return sorted(sessions.values(), key=lambda s: s[0]["message_id"])


def proxy_config(all_policies: bool, embedder: str | None = None, settings: dict[str, float | str | None] | None = None
                 ) -> dict[str, Any]:
    """The proxy's config: memory alone (or every policy), with `settings` (policies.memory keys; None: default)."""
    config: dict[str, Any] = {} if all_policies else {
        "policies": {name: {"enabled": name == "memory"} for name in policy_names()}}
    for key, value in (settings or {}).items():
        if value is not None:
            config.setdefault("policies", {}).setdefault("memory", {})[key] = value
    if embedder:  # the memory policy alone on another embedder (embeddings.per_policy)
        config["embeddings"] = {"per_policy": {"memory": {"provider": embedder}}}
    return config


class Run:
    def __init__(self, proxy_url: str, upstream_url: str) -> None:
        self.client = httpx.Client(base_url=proxy_url, timeout=120)
        self.upstream = httpx.Client(base_url=upstream_url, timeout=60)
        self.requests = 0

    def send(self, messages: list[dict[str, str]], session: str) -> str:
        """One chat request; returns the last user message as the upstream received it."""
        self.upstream.post("/_reset")
        response = self.client.post("/v1/chat/completions", json={
            "model": "gpt-4o", "user": USER, "messages": [{"role": "system", "content": SYSTEM}, *messages]},
            headers={"authorization": "Bearer sk-bench", "x-ctxwarden-session": session,
                     "x-ctxwarden-tenant": TENANT})
        self.requests += 1
        if response.status_code != 200:
            raise SystemExit(f"request {self.requests} ({session}): {response.status_code} {response.text[:300]}")
        received = [r["body"] for r in self.upstream.get("/_received").json() if r["path"].endswith("/chat/completions")]
        if not received:
            raise SystemExit(f"request {self.requests}: the proxy answered without the upstream")
        content = received[-1]["messages"][-1].get("content")
        return content if isinstance(content, str) else " ".join(p.get("text", "") for p in content or [])

    def memories(self, query: str | None = None) -> list[dict[str, Any]]:
        params = {"user": USER, "q": query} if query else {"user": USER, "history": "true"}
        return self.client.get("/admin/memories", params=params, headers={
            "authorization": f"Bearer {ADMIN_KEY}", "x-ctxwarden-tenant": TENANT}).json()["data"]


def _norm(text: str) -> str:
    return " ".join(text.split()).lower()


def block_lines(forwarded: str) -> list[str]:
    if not forwarded.startswith(HEADER + "\n"):
        return []
    block = forwarded.split("\n\n", 1)[0]
    return [line[2:] for line in block.splitlines()[1:] if line.startswith("- ")]


def run(sessions_limit: int | None = None, all_policies: bool = False, errors: bool = False,
        out: Any = print, embedder: str | None = None, settings: dict[str, float | str | None] | None = None,
        part: str = "all") -> dict[str, Any]:
    messages, truth = load()
    sessions = sessions_in_order(messages)
    if sessions_limit is not None:
        sessions = sessions[:sessions_limit]
    last_sent = max(m["message_id"] for s in sessions for m in s)
    qs = questions(truth)
    # a question is asked only once the conversation has reached it: all its evidence sent
    due = [q for q in qs if not q.evidence or max(q.evidence) <= last_sent]

    os.environ["CTXWARDEN_ADMIN_KEY"] = ADMIN_KEY
    fake, upstream_url = start_fake()
    proxy, proxy_url = start_proxy(upstream_url, proxy_config(all_policies, embedder, settings))
    started = time.monotonic()
    try:
        r = Run(proxy_url, upstream_url)
        pending = sorted((q for q in due if q.ask_before is not None and q.ask_before <= last_sent),
                         key=lambda q: q.ask_before or 0)
        asked = turn_blocks = 0

        def ask(q: Question) -> None:
            nonlocal asked
            asked += 1
            q.injected = block_lines(r.send([{"role": "user", "content": q.text}], f"question-{asked}"))

        for session in sessions:
            history: list[dict[str, str]] = []
            for m in session:
                while pending and pending[0].ask_before is not None and pending[0].ask_before <= m["message_id"]:
                    ask(pending.pop(0))
                if m["role"] == "user":
                    forwarded = r.send([*history, {"role": "user", "content": m["content"]}], session[0]["session_id"])
                    turn_blocks += bool(block_lines(forwarded))
                history.append({"role": m["role"], "content": m["content"]})
        for q in due:
            if q.ask_before is None or q.ask_before > last_sent:
                ask(q)
        memories = r.memories()
        for q in due:  # the policy's own relevance (calibrated cosine, no bonuses) over the live memories
            if q.evidence:
                q.ranked = [(m["id"], m["score"]) for m in r.memories(q.text)]
        elapsed = time.monotonic() - started
    finally:
        proxy.stop()
        fake.stop()

    figures: dict[str, Any] = {}
    for i, name in enumerate(("all", "dev", "heldout") if part == "all" else (part,)):
        figures[name] = score(messages, truth, sessions, due, memories, r.requests, elapsed, errors and i == 0, out,
                              name, turn_blocks)
    return figures[part]


def score(messages: list[dict[str, Any]], truth: dict[str, Any], sessions: list[list[dict[str, Any]]],
          due: list[Question], memories: list[dict[str, Any]], requests: int, elapsed: float, errors: bool,
          out: Any, part: str = "all", turn_blocks: int = 0) -> dict[str, Any]:
    sent_ids = {m["message_id"] for s in sessions for m in s}
    turn_of_hash: dict[str, set[int]] = {}
    for m in messages:
        if m["role"] == "user" and m["message_id"] in sent_ids:
            turn_of_hash.setdefault(stable_hash(m["content"]), set()).add(m["message_id"])
    by_text = {" ".join(mem["text"].split()): mem for mem in memories}
    # a memory comes from the turn it was written from (its message_hash) and from every turn that said
    # it again (the same sentence merges into the same memory, which keeps the first turn's hash)
    said = [(m["message_id"], _norm(m["content"])) for m in messages if m["role"] == "user" and m["message_id"] in sent_ids]
    source_turns: dict[str, set[int]] = {
        mem["id"]: turn_of_hash.get(mem.get("message_hash") or "", set()) | {i for i, t in said if _norm(mem["text"]) in t}
        for mem in memories}
    extracted_turns = set().union(*source_turns.values()) if source_turns else set()

    session_of = {m["message_id"]: m["session_id"] for m in messages}
    labelled = [q for q in due if q.evidence and part in ("all", q.part)]
    injected = relevant = evidence_total = evidence_found = evidence_extracted = found_extracted = 0
    unknown = session_relevant = sessions_total = sessions_found = 0
    best_ranks: list[int] = []  # per question: the rank of its best evidence memory by the policy's relevance
    for q in labelled:
        evidence = set(q.evidence)
        evidence_sessions = {session_of[i] for i in evidence}
        hit_turns: set[int] = set()
        hit_sessions: set[str] = set()
        for line in q.injected:
            mem = by_text.get(" ".join(line.split()))
            turns = source_turns.get(mem["id"], set()) if mem else set()
            unknown += mem is None
            injected += 1
            relevant += bool(turns & evidence)
            hit_turns |= turns & evidence
            in_sessions = {session_of[i] for i in turns} & evidence_sessions
            session_relevant += bool(in_sessions)
            hit_sessions |= in_sessions
        evidence_total += len(evidence)
        evidence_found += len(hit_turns)
        evidence_extracted += len(evidence & extracted_turns)
        found_extracted += len(hit_turns & extracted_turns)
        sessions_total += len(evidence_sessions)
        sessions_found += len(hit_sessions)
        evidence_ids = {mid for mid, turns in source_turns.items() if turns & evidence}
        ranks = [i + 1 for i, (mid, _) in enumerate(q.ranked) if mid in evidence_ids]
        if ranks:
            best_ranks.append(ranks[0])
        if errors:
            out(f"  [{q.kind}] {q.text}  evidence {sorted(evidence)} (extracted from {sorted(evidence & extracted_turns)})")
            for line in q.injected:
                mem = by_text.get(" ".join(line.split()))
                turns = sorted(source_turns.get(mem["id"], set())) if mem else "?"
                out(f"      {'+' if mem and set(turns) & evidence else '-'} {line[:110]!r} <- {turns}")
            if not q.injected:
                out("      (nothing injected)")
            texts = {mem["id"]: mem["text"] for mem in memories}
            for i, (mid, score) in enumerate(q.ranked):
                if mid in evidence_ids:
                    out(f"      evidence memory ranked {i + 1}/{len(q.ranked)} (relevance {score:.2f}): {texts[mid][:100]!r}")
            if q.ranked:
                out(f"      top relevance {q.ranked[0][1]:.2f}")

    relevance = [q for q in due if not q.evidence]
    all_evidence = {i for q in labelled for i in q.evidence} | (signal_turns(messages, truth) & sent_ids)
    noise = signal_turns(messages, truth, "noise_examples") & sent_ids
    user_turns = sum(m["role"] == "user" for s in sessions for m in s)
    figures = {
        "precision": relevant / injected if injected else float("nan"),
        "recall": evidence_found / evidence_total if evidence_total else float("nan"),
        "recall_given_extracted": found_extracted / evidence_extracted if evidence_extracted else float("nan"),
        "session_precision": session_relevant / injected if injected else float("nan"),
        "session_recall": sessions_found / sessions_total if sessions_total else float("nan"),
        "nothing_injected": sum(not q.injected for q in labelled) / len(labelled) if labelled else float("nan"),
        "relevance_nothing_injected": sum(not q.injected for q in relevance) / len(relevance) if relevance else float("nan"),
        "extraction_recall": len(all_evidence & extracted_turns) / len(all_evidence) if all_evidence else float("nan"),
        "questions": len(labelled), "relevance_questions": len(relevance), "injected": injected,
        "relevant": relevant, "evidence_turns": evidence_total, "evidence_found": evidence_found,
        "evidence_extracted": evidence_extracted, "memories": len(memories),
        "live_memories": sum(not m.get("superseded_by") for m in memories), "user_turns": user_turns,
        "sessions": len(sessions), "requests": requests, "unmatched_lines": unknown,
        "evidence_in_top5": sum(r <= 5 for r in best_ranks), "evidence_ranked": len(best_ranks),
        "median_best_rank": sorted(best_ranks)[len(best_ranks) // 2] if best_ranks else None,
        "turn_blocks": turn_blocks / max(user_turns, 1), "part": part,
        "noise_turns": len(noise), "noise_written": len(noise & extracted_turns),
        "labelled_evidence": len(all_evidence), "labelled_extracted": len(all_evidence & extracted_turns),
    }
    f = figures
    out(f"CRI persona-1-base through the real server: {f['sessions']} sessions, {f['user_turns']} user turns, "
        f"{f['requests']} requests in {elapsed:.0f} s; {f['memories']} memories written ({f['live_memories']} live)")
    out(f"SELECT on {f['questions']} turn-labelled questions ({part}): {f['injected']} memories injected, "
        f"{f['relevant']} from an evidence turn")
    out(f"  precision           {f['precision']:.2f}   target >= 0.80")
    out(f"  recall              {f['recall']:.2f}   ({f['evidence_found']}/{f['evidence_turns']} evidence turns)   "
        f"target >= 0.80")
    out(f"  recall | extracted  {f['recall_given_extracted']:.2f}   (of {f['evidence_extracted']} evidence turns a memory "
        f"came from)")
    out(f"  by session          precision {f['session_precision']:.2f}, recall {f['session_recall']:.2f}   (a memory "
        f"from any turn of an evidence turn's session counts)")
    out(f"  the policy's relevance ranks an evidence memory in the top 5 for {f['evidence_in_top5']} of "
        f"{f['questions']} questions (median best rank {f['median_best_rank']} of {f['live_memories']} live; "
        f"{f['questions'] - f['evidence_ranked']} have no live evidence memory)")
    out(f"  nothing injected    {f['nothing_injected']:.2f}   (phrase-labelled questions: "
        f"{f['relevance_nothing_injected']:.2f} of {f['relevance_questions']})")
    out(f"blocks on conversation turns {f['turn_blocks']:.2f}   ({turn_blocks}/{f['user_turns']} of the conversation's "
        f"own requests forwarded with a memory block)")
    out(f"extraction recall     {f['extraction_recall']:.2f}   ({f['labelled_extracted']}/{f['labelled_evidence']} labelled "
        f"evidence turns gave a memory)")
    out(f"  chit-chat written as memories: {f['noise_written']}/{f['noise_turns']} of the benchmark's labelled noise "
        f"turns; {f['memories'] / max(f['user_turns'], 1):.2f} memories per user turn")
    if unknown:
        out(f"  ({unknown} injected lines matched no stored memory's text)")
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help=f"the first {QUICK_SESSIONS} sessions only")
    parser.add_argument("--sessions", type=int, default=None, help="the first N sessions only")
    parser.add_argument("--all-policies", action="store_true", help="every policy as configured by default, not memory alone")
    parser.add_argument("--errors", action="store_true", help="print each question's injected memories and their turns")
    parser.add_argument("--embedder", default=None, help="the memory policy's embedder (embeddings.per_policy.memory), "
                        "e.g. minilm; default: the proxy's")
    parser.add_argument("--min-score", type=float, default=None, help="policies.memory.min_score (default: the policy's)")
    parser.add_argument("--min-distinct", type=float, default=None,
                        help="policies.memory.min_distinct (default: the policy's; -10 turns the gate off)")
    parser.add_argument("--confirm-with", default=None,
                        help="policies.memory.confirm_with (default: the policy's; none: chosen memories not read again)")
    parser.add_argument("--min-background-z", type=float, default=None,
                        help="policies.memory.min_background_z (default: the policy's; -10 turns the gate off)")
    parser.add_argument("--context-weight", type=float, default=None,
                        help="policies.memory.context_weight (default: the policy's; 0: a memory's sentence alone)")
    parser.add_argument("--part", choices=("all", "dev", "heldout"), default="all",
                        help="which turn-labelled questions to score (module docstring); all: all, then each part")
    args = parser.parse_args()
    settings = {"min_score": args.min_score, "min_distinct": args.min_distinct,
                "min_background_z": args.min_background_z, "context_weight": args.context_weight,
                "confirm_with": args.confirm_with}
    run(QUICK_SESSIONS if args.quick else args.sessions, args.all_policies, args.errors, embedder=args.embedder,
        settings=settings, part=args.part)


if __name__ == "__main__":
    main()
