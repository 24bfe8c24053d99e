"""Build the multi-step agent workload (tools.json, tasks.jsonl) from the BFCL package's own data.

Run once, offline, in a scratch environment (not the project's); the benchmark only reads the
two files this writes:

    python -m venv /tmp/bfcl && /tmp/bfcl/bin/pip install --no-deps bfcl-eval==2026.3.23
    /tmp/bfcl/bin/pip install mpmath          # the MathAPI backend imports it
    /tmp/bfcl/bin/python bench/data/bfcl_agent/build.py

What it takes from `bfcl_eval/data` (Apache-2.0, see LICENSE):
- tasks: `BFCL_v4_multi_turn_base.json` (questions) + `possible_answer/…` (the ground-truth calls
  of every user turn), kept when a task makes 3-8 calls. Each call is executed with BFCL's own
  backends (`eval_checker/multi_turn_eval/func_source_code`) on the task's `initial_config`, so
  the tool results an agent would have read are the real ones.
- the catalog: every multi-turn backend as one MCP-style server (`server__tool`), plus the
  namespaced functions of BFCL's single-turn categories (`module.function` → `module__function`;
  SGD services keep their `Service_1_Intent` names) drawn server by server, seeded, up to 500 tools.
- split: the tasks are shuffled once (seed 19) into `dev` (tune on it) and `heldout` (report it).
"""

from __future__ import annotations

import ast
import copy
import importlib
import inspect
import json
import random
import re
from collections import defaultdict
from pathlib import Path

from bfcl_eval.constants.executable_backend_config import (
    CLASS_FILE_PATH_MAPPING,
    MULTI_TURN_FUNC_DOC_FILE_MAPPING,
    STATELESS_CLASSES,
)

OUT = Path(__file__).resolve().parent
DATA = Path(importlib.import_module("bfcl_eval").__file__).parent / "data"
CATALOG_SIZE = 500
MAX_RESULT_CHARS = 800
SEED = 19
SINGLE_TURN = ("multiple", "live_multiple", "parallel_multiple", "live_parallel_multiple", "simple_python", "parallel",
               "live_simple", "live_parallel", "irrelevance", "live_irrelevance")
OPENAI_NAME = re.compile(r"^[A-Za-z0-9_-]{1,64}$")
SGD = re.compile(r"^([A-Z][A-Za-z]+_\d+)_")
TYPES = {"dict": "object", "float": "number", "tuple": "array", "list": "array", "any": None, "str": "string", "int": "integer"}


def rows(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def schema(node: object) -> object:
    """BFCL's parameter types → JSON Schema ('dict' → 'object', 'float' → 'number', …)."""
    if isinstance(node, list):
        return [schema(x) for x in node]
    if not isinstance(node, dict):
        return node
    out = {}
    for key, value in node.items():
        if key == "type" and isinstance(value, str):
            mapped = TYPES.get(value, value)
            if mapped:
                out[key] = mapped
        elif key == "properties" and isinstance(value, dict):
            out[key] = {k: schema(v) for k, v in value.items()}
        elif key != "optional":
            out[key] = schema(value)
    return out


def definition(name: str, fn: dict) -> dict:
    params = schema(fn.get("parameters") or {"type": "object", "properties": {}})
    return {"type": "function", "function": {"name": name, "description": fn.get("description", ""), "parameters": params}}


def server_tools() -> dict[str, dict[str, dict]]:
    """Each multi-turn backend class → its tools, named `<doc file stem>__<method>`."""
    out = {}
    for cls, doc in MULTI_TURN_FUNC_DOC_FILE_MAPPING.items():
        server = doc.removesuffix(".json")
        out[cls] = {fn["name"]: definition(f"{server}__{fn['name']}", fn) for fn in rows(DATA / "multi_turn_func_doc" / doc)}
    return out


def namespace(name: str) -> tuple[str, str] | None:
    """(server, MCP-style name) of a namespaced single-turn function, None for a bare one."""
    if "." in name:
        server = name.split(".")[0]
        return server, name.replace(".", "__")
    m = SGD.match(name)
    return (m.group(1), name) if m else None


def distractors(taken: set[str]) -> list[dict]:
    by_server: dict[str, dict[str, dict]] = defaultdict(dict)
    for category in SINGLE_TURN:
        for row in rows(DATA / f"BFCL_v4_{category}.json"):
            for fn in row.get("function") or []:
                ns = namespace(fn.get("name", ""))
                if ns and OPENAI_NAME.match(ns[1]) and ns[1] not in taken:
                    by_server[ns[0].lower()].setdefault(ns[1], definition(ns[1], fn))
    servers = sorted(by_server)
    random.Random(SEED).shuffle(servers)
    out = []
    for server in servers:
        if len(taken) + len(out) >= CATALOG_SIZE:
            break
        out += list(by_server[server].values())
    return out[: CATALOG_SIZE - len(taken)]


def parse_call(text: str, methods: dict[str, object]) -> tuple[str, dict]:
    """'mv(source="a", destination="b")' or 'sort("a")' → ("mv", {...}); positional args by signature."""
    call = ast.parse(text.strip(), mode="eval").body
    name = call.func.id
    params = list(inspect.signature(methods[name]).parameters)
    args = {params[i]: ast.literal_eval(a) for i, a in enumerate(call.args)}
    args.update({k.arg: ast.literal_eval(k.value) for k in call.keywords})
    return name, args


def run_task(question: dict, truth: dict, servers: dict[str, dict[str, dict]]) -> dict:
    instances, methods, owner = {}, {}, {}
    for cls in question["involved_classes"]:
        module = importlib.import_module(CLASS_FILE_PATH_MAPPING[cls])
        inst = getattr(module, cls)()
        if cls not in STATELESS_CLASSES:
            inst._load_scenario(copy.deepcopy(question["initial_config"].get(cls, {})), long_context=False)
        instances[cls] = inst
        for name, method in inspect.getmembers(inst, predicate=inspect.ismethod):
            if not name.startswith("_") and name in servers[cls]:
                methods[name], owner[name] = method, cls
    turns = []
    for messages, calls in zip(question["question"], truth["ground_truth"]):
        user = "\n".join(m["content"] for m in messages if m.get("role") == "user")
        steps = []
        for text in calls:
            name, args = parse_call(text, methods)
            try:
                result = methods[name](**copy.deepcopy(args))
            except Exception as exc:  # BFCL records errors as results too
                result = {"error": f"{type(exc).__name__}: {exc}"}
            result = result if isinstance(result, str) else json.dumps(result, default=str)
            tool = servers[owner[name]][name]["function"]["name"]
            steps.append({"tool": tool, "arguments": args, "result": result[:MAX_RESULT_CHARS]})
        turns.append({"user": user, "calls": steps})
    return {"id": question["id"], "servers": [servers[c][next(iter(servers[c]))]["function"]["name"].split("__")[0]
                                              for c in question["involved_classes"]], "turns": turns}


def main() -> None:
    servers = server_tools()
    catalog = [d for tools in servers.values() for d in tools.values()]
    catalog += distractors({d["function"]["name"] for d in catalog})
    questions = rows(DATA / "BFCL_v4_multi_turn_base.json")
    truths = {t["id"]: t for t in rows(DATA / "possible_answer" / "BFCL_v4_multi_turn_base.json")}
    tasks = [run_task(q, truths[q["id"]], servers) for q in questions]
    tasks = [t for t in tasks if 3 <= sum(len(turn["calls"]) for turn in t["turns"]) <= 8]
    order = list(range(len(tasks)))
    random.Random(SEED).shuffle(order)
    for rank, i in enumerate(order):
        tasks[i]["split"] = "dev" if rank < len(tasks) // 2 else "heldout"
    (OUT / "tools.json").write_text(json.dumps(catalog, ensure_ascii=False, indent=0) + "\n")
    with (OUT / "tasks.jsonl").open("w") as f:
        for task in tasks:
            f.write(json.dumps(task, ensure_ascii=False) + "\n")
    print(f"{len(catalog)} tools from {len({d['function']['name'].split('__')[0] for d in catalog})} name prefixes; "
          f"{len(tasks)} tasks ({sum(t['split'] == 'dev' for t in tasks)} dev)")


if __name__ == "__main__":
    main()
