"""A live agent loop through the real server: prompt-cache stability, tokens forwarded, facts kept.

    python bench/agent_loop.py [--api chat|responses|messages] [--runs 3] [--steps 70] [--seed 11] [--window 128000]
    python bench/agent_loop.py --workload livemcp [--min-result-tokens 300] --window 32000   # real calls and results

The proxy runs as its own process (`ctxwarden serve`, default policies) in front of a scripted
model on 127.0.0.1. Each run is one agent task: at every step the model calls a tool and the
client (this script) answers with a tool result of 300-4,000 tokens: JSON records, a log, a code
file or prose (bench/agent_workload.py), 30 of them holding one planted fact each. The client
resends its whole raw history every step, as agents do. After the last step, one question per
planted fact; the model answers from what it was forwarded, and when the fact is not there it
calls `context_recall` with the question as its query (the proxy answers that call itself).

`--workload livemcp` replays real agent steps instead (bench/livemcp_workload.py): LiveMCPBench's
trajectories of Claude Sonnet 4 on 95 tasks through an MCP agent, with the real calls, what the agent
said, and the real tool results (catalog matches, web pages, search results, API JSON, errors; median
~200 tokens, up to ~6,800); the tasks one after another in one session, each opened by its question and
closed by the agent's real answer. 30 facts a run are planted as one sentence inside real results
(fewer when the step drawn closes a task). `--min-result-tokens 300` keeps only the steps whose result
is 300 tokens or more, the size range of the synthetic workload and of issue 45's figures.

`--api`: the client speaks chat completions (default), the Responses API (`POST /v1/responses`:
instructions, message / function_call / function_call_output items) or Anthropic's Messages API
(`POST /v1/messages`: system, tool_use / tool_result blocks; the proxy forwards natively, its
`upstream.anthropic.base_url` pointing at the scripted model). The conversation is the same; the
scripted model answers each API in its own shape and reads what it received with the proxy's parsers
(bench/_api_wire.py), so its decisions and the token counts are the same on every API.

Printed per run and overall:
- prefix-stable rate: steps whose forwarded request starts with the previous step's forwarded
  request (tools and messages; Responses: instructions, tools, input items; Messages: system,
  tools, turns), i.e. what a provider's prompt cache could reuse;
- compaction events (requests that rewrote history), and the steps each one bought (until the next);
- forwarded / raw tokens over the last 10 steps;
- planted facts retained: in the forwarded text, or through the recall tool (actually called);
- requests over the model's window (forwarded tokens > window, or refused with 400).
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import threading
import time
from pathlib import Path
from typing import Any

import httpx
import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _api_wire import APIS, HEADERS, PATH, answer_body, conversation, extends, read_answer, request_body  # noqa: E402
from _harness import start_proxy  # noqa: E402
from agent_workload import Fact, SyntheticWorkload  # noqa: E402
from livemcp_workload import LiveMCPWorkload  # noqa: E402
from livemcp_workload import load as load_livemcp  # noqa: E402

from ctxwarden.policies.messages import content_text  # noqa: E402
from ctxwarden.policies.text.tokens import TiktokenCounter  # noqa: E402
from ctxwarden.proxy.local_server import free_port  # noqa: E402

MODEL = "agent-bench-model"


class ScriptedModel:
    """The LLM: calls the tool the client planned, or answers a question from its context.

    It answers all three APIs: what it received is read in chat form (`conversation`), decided on
    once, and answered in the API's shape. `received` holds the bodies as they arrived."""

    def __init__(self) -> None:
        self.next_call: dict[str, Any] | None = None  # set by the client before each step
        self.question: Fact | None = None
        self.received: list[dict[str, Any]] = []
        self.recalled = False

    def route(self, api: str) -> Any:
        async def handle(request: Request) -> JSONResponse:
            body = await request.json()
            self.received.append(body)
            return JSONResponse(answer_body(api, self.decide(conversation(api, body)), MODEL))
        return handle

    def decide(self, body: dict[str, Any]) -> dict[str, Any]:
        if self.question is not None:
            return self._answer(body, self.question)
        call = self.next_call or {"id": "call_status", "name": "fetch_doc", "arguments": {"topic": "status"}, "say": ""}
        if "final" in call:  # the task is done: a text answer
            return {"role": "assistant", "content": call["final"]}
        tool_call = {"id": call["id"], "type": "function",
                     "function": {"name": call["name"], "arguments": json.dumps(call["arguments"])}}
        return {"role": "assistant", "content": call["say"], "tool_calls": [tool_call]}

    def _answer(self, body: dict[str, Any], fact: Fact) -> dict[str, Any]:
        messages = body["messages"]
        last = messages[-1]
        if last.get("role") == "tool":  # the proxy answered our context_recall call
            found = fact.answer in content_text(last)
            self.recalled = True
            return {"role": "assistant", "content": f"ANSWER: {fact.answer if found else 'unknown'}"}
        context = "\n".join(content_text(m) for m in messages[:-1])
        if fact.answer in context:
            return {"role": "assistant", "content": f"ANSWER: {fact.answer}"}
        names = {(t.get("function") or {}).get("name") for t in body.get("tools") or []}
        if "context_recall" in names:
            call = {"id": "call_recall", "type": "function",
                    "function": {"name": "context_recall", "arguments": json.dumps({"query": fact.question})}}
            return {"role": "assistant", "content": None, "tool_calls": [call]}
        return {"role": "assistant", "content": "ANSWER: unknown"}


def serve_model(model: ScriptedModel) -> str:
    app = Starlette(routes=[
        *(Route(PATH[api], model.route(api), methods=["POST"]) for api in APIS),
        Route("/v1/models", lambda r: JSONResponse({"object": "list", "data": []})),
    ])
    port = free_port()
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="error"))
    threading.Thread(target=server.run, daemon=True).start()
    for _ in range(100):
        if server.started:
            break
        time.sleep(0.05)
    return f"http://127.0.0.1:{port}"


def proxy_config(api: str, upstream: str, window: int) -> dict[str, Any]:
    """Default policies, as a new user gets them; the model's window known; Messages go natively to the model."""
    config: dict[str, Any] = {"models": {MODEL: {"context_window": window}}}
    if api == "messages":
        config["upstream"] = {"anthropic": {"base_url": f"{upstream}/v1", "api_key_env": None}}
    return config


def run_once(proxy: str, model: ScriptedModel, rng: random.Random, steps: int, counter: TiktokenCounter,
             window: int, run: int, api: str = "chat", workload: Any = None) -> dict[str, Any]:
    workload = workload or SyntheticWorkload()
    client = httpx.Client(base_url=proxy, timeout=120, headers={"x-ctxwarden-session": f"bench-run-{run}", **HEADERS[api]})
    fact_steps = set(rng.sample(range(2, steps), 30))
    facts: list[Fact] = []
    first_user, plan = workload.session(rng, run, facts)
    history: list[dict[str, Any]] = [{"role": "system", "content": workload.system}, {"role": "user", "content": first_user}]
    tools = workload.tools
    firsts: list[dict[str, Any]] = []  # the first forwarded request of each step
    raw_tokens: list[int] = []
    refused = events = 0
    event_steps: list[int] = []
    newest = newest_verbatim = 0  # steps answering a tool call: was that result forwarded as the client sent it?
    for step in range(steps):
        planned = next(plan)
        model.next_call = planned.call
        before = len(model.received)
        response = client.post(PATH[api], json=request_body(api, {"model": MODEL, "messages": history, "tools": tools}))
        raw_tokens.append(counter.count_messages(history, MODEL) + counter.count_tools(tools, MODEL))
        if response.status_code != 200:
            refused += 1
            continue
        if "history.compaction" in response.headers.get("x-ctxwarden-actions", ""):
            events += 1
            event_steps.append(step)
        if len(model.received) == before:
            raise SystemExit(f"step {step}: the proxy answered without the model: {response.headers.get('x-ctxwarden-actions')} {response.text[:300]}")
        firsts.append(model.received[before])
        if history[-1].get("role") == "tool":
            newest += 1
            forwarded_last = conversation(api, model.received[before])["messages"][-1]
            newest_verbatim += content_text(forwarded_last) == history[-1]["content"]
        answer, _ = read_answer(api, response.json())
        history.append(answer)
        if planned.result is None:  # a text answer; the next task's question follows
            history.append({"role": "user", "content": planned.user})
            continue
        fact, text = planned.result(rng, step in fact_steps)
        history.append({"role": "tool", "tool_call_id": answer["tool_calls"][0]["id"], "content": text})
        if fact:
            facts.append(fact)
    result = _score(client, model, history, facts, firsts, raw_tokens, counter, window, refused, events, api, tools)
    result["bought"] = [b - a for a, b in zip(event_steps, event_steps[1:])]  # steps each event bought
    result["newest"], result["newest_verbatim"] = newest, newest_verbatim
    return result


def _score(client: httpx.Client, model: ScriptedModel, history: list, facts: list[Fact], firsts: list,
           raw_tokens: list[int], counter: TiktokenCounter, window: int, refused: int, events: int,
           api: str = "chat", tools: list | None = None) -> dict[str, Any]:
    stable = sum(1 for a, b in zip(firsts, firsts[1:]) if extends(api, a, b))
    # Forwarded tokens counted on the chat form of what the model received, so every API counts alike.
    chats = [conversation(api, b) for b in firsts]
    forwarded = [counter.count_messages(c["messages"], MODEL) + counter.count_tools(c.get("tools"), MODEL) for c in chats]
    over = sum(1 for t in forwarded if t > window) + refused
    in_text = recalled = 0
    for fact in facts:
        model.question, model.recalled = fact, False
        response = client.post(PATH[api], json=request_body(api, {"model": MODEL, "messages": history + [
            {"role": "user", "content": fact.question}], "tools": tools}))
        ok = response.status_code == 200 and fact.answer in (read_answer(api, response.json())[0].get("content") or "")
        in_text += ok and not model.recalled
        recalled += ok and model.recalled
    model.question = None
    last = slice(-10, None)
    return {"stable": stable, "pairs": max(1, len(firsts) - 1), "events": events,
            "ratio": sum(forwarded[last]) / max(1, sum(raw_tokens[last])), "facts": len(facts),
            "in_text": in_text, "recalled": recalled, "over": over, "raw_last": raw_tokens[-1], "fwd_last": forwarded[-1]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--steps", type=int, default=70)
    parser.add_argument("--seed", type=int, default=11)
    parser.add_argument("--window", type=int, default=128_000)
    parser.add_argument("--api", choices=APIS, default="chat", help="the API the agent speaks")
    parser.add_argument("--workload", choices=["synthetic", "livemcp"], default="synthetic",
                        help="synthetic: results of 300-4,000 tokens made here; livemcp: LiveMCPBench's real calls and results")
    parser.add_argument("--min-result-tokens", type=int, default=0,
                        help="livemcp: keep only the steps whose real result is at least this many tokens")
    args = parser.parse_args()
    model = ScriptedModel()
    upstream = serve_model(model)
    # Default policies, as a new user gets them (the loop guard stops repetition only, never a long task).
    proxy, url = start_proxy(upstream, proxy_config(args.api, upstream, args.window))
    counter = TiktokenCounter()
    workload = SyntheticWorkload() if args.workload == "synthetic" else \
        LiveMCPWorkload(load_livemcp(args.min_result_tokens, lambda text: counter.count_text(text, MODEL)))
    results = []
    try:
        for run in range(args.runs):
            r = run_once(url, model, random.Random(args.seed + run), args.steps, counter, args.window, run, args.api, workload)
            results.append(r)
            print(f"run {run}: prefix-stable {r['stable']}/{r['pairs']} = {r['stable'] / r['pairs']:.3f}; "
                  f"compaction events {r['events']}; forwarded/raw (last 10 steps) {r['ratio']:.3f} "
                  f"(last step {r['fwd_last']:,} of {r['raw_last']:,} tokens); facts retained "
                  f"{r['in_text'] + r['recalled']}/{r['facts']} ({r['in_text']} in text, {r['recalled']} by recall); "
                  f"requests over the window {r['over']}; newest result verbatim {r['newest_verbatim']}/{r['newest']}; "
                  f"steps each event bought {r['bought']}", flush=True)
    finally:
        proxy.stop()
    stable = sum(r["stable"] for r in results) / sum(r["pairs"] for r in results)
    kept = sum(r["in_text"] + r["recalled"] for r in results) / max(1, sum(r["facts"] for r in results))
    ratio = sum(r["ratio"] for r in results) / len(results)
    print(f"\nALL ({args.api}, {args.workload}{f' ≥ {args.min_result_tokens} tokens' if args.min_result_tokens else ''}) {len(results)} runs × {args.steps} steps (window {args.window:,}): prefix-stable {stable:.3f} (target ≥ 0.90); "
          f"forwarded/raw last 10 steps {ratio:.3f} (≤ 0.35); facts retained {kept:.1%} (≥ 95%); "
          f"requests over the window {sum(r['over'] for r in results)} (0); "
          f"newest result verbatim {sum(r['newest_verbatim'] for r in results)}/{sum(r['newest'] for r in results)}; "
          f"compaction events per run {sum(r['events'] for r in results) / len(results):.1f}")


if __name__ == "__main__":
    main()
