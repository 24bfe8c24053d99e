"""Print the import graph between ctxwarden's packages as a mermaid `graph TD` block.

    python docs/package_graph.py            # the block to paste into docs/ARCHITECTURE.md
    python docs/package_graph.py --modules  # one node per module instead of per package
    python docs/package_graph.py --write    # replace the graph in docs/ARCHITECTURE.md (between its markers)
    python docs/package_graph.py --check    # exit 1 if policies/ imports proxy/ or modules import in a cycle

The source folders and the names they install under are read from pyproject.toml
(`[tool.setuptools.package-dir]`), so the graph follows the real layout. Every `import` and
`from … import` is read with `ast` (nothing is imported or executed). Imports at module level are
solid edges; imports inside a function (loaded lazily, on first use) are dashed; a package read
as data (`importlib.resources.files("ctxwarden.config")`) is a dashed edge labelled "reads". Each
node lists the modules directly in its folder (so `policies` is the shared modules: base, budget,
cache, errors, messages). `--check` looks for import cycles between modules, and for any import
from policies/ into proxy/.
"""

from __future__ import annotations

import argparse
import ast
import sys
from collections import defaultdict
from pathlib import Path

import tomllib

ROOT = Path(__file__).resolve().parent.parent
PREFIX = "ctxwarden"
DOC = Path(__file__).resolve().parent / "ARCHITECTURE.md"
START, END = "<!-- package-graph:start -->", "<!-- package-graph:end -->"


def package_dirs(root: Path) -> dict[str, Path]:
    """Installed package name → source folder, from pyproject.toml."""
    pyproject = tomllib.loads((root / "pyproject.toml").read_text(encoding="utf-8"))
    mapping = pyproject["tool"]["setuptools"]["package-dir"]
    return {name: root / folder for name, folder in mapping.items()}


def modules(root: Path) -> dict[str, tuple[Path, bool]]:
    """Module name → (file, is a package's __init__) for every .py file under the package folders."""
    found: dict[str, tuple[Path, bool]] = {}
    for top, folder in package_dirs(root).items():
        for path in sorted(folder.rglob("*.py")):
            rel = path.relative_to(folder).with_suffix("")
            parts = [p for p in rel.parts if p != "__init__"]
            found[".".join([top, *parts])] = (path, path.name == "__init__.py")
    return found


def resolve(node: ast.ImportFrom, current: str, is_package: bool) -> str:
    """The absolute module a `from … import` names (relative imports resolved against `current`)."""
    if not node.level:
        return node.module or ""
    base = current.split(".") if is_package else current.split(".")[:-1]
    base = base[: len(base) - (node.level - 1)]
    return ".".join(base + ([node.module] if node.module else []))


def imports(path: Path, name: str, is_package: bool, known: set[str]) -> list[tuple[str, bool | str]]:
    """(imported ctxwarden module, lazy or READS) for every import in one file."""
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    lazy_nodes = {
        id(inner)
        for outer in ast.walk(tree)
        if isinstance(outer, (ast.FunctionDef, ast.AsyncFunctionDef))
        for inner in ast.walk(outer)
    }
    out: list[tuple[str, bool | str]] = []
    for node in ast.walk(tree):
        lazy = id(node) in lazy_nodes
        if isinstance(node, ast.Call) and _reads_package(node) in known:
            out.append((_reads_package(node), READS))
            continue
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            module = resolve(node, name, is_package)
            # `from pkg import sub` imports the submodule `pkg.sub` when there is one.
            targets = [f"{module}.{a.name}" if f"{module}.{a.name}" in known else module for a in node.names]
        else:
            continue
        for target in targets:
            while target and target not in known:  # `import a.b.c` of an attribute path: its module
                target = target.rpartition(".")[0]
            if target.startswith(PREFIX + "."):
                out.append((target, lazy))
    return out


READS = "reads"  # the kind of an edge to a package read as data, not imported


def _reads_package(call: ast.Call) -> str | None:
    """"ctxwarden.config" for `importlib.resources.files("ctxwarden.config")`, else None."""
    func = call.func
    name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", None)
    if name == "files" and call.args and isinstance(call.args[0], ast.Constant) and isinstance(call.args[0].value, str):
        return call.args[0].value
    return None


def package_of(module: str, table: dict[str, tuple[Path, bool]]) -> str:
    return module if table[module][1] else module.rpartition(".")[0]


Edges = dict[tuple[str, str], "bool | str"]


def graph(root: Path, by_module: bool = False) -> Edges:
    """(importer, imported) → lazy (True only if every import along that edge is lazy) or READS."""
    table = modules(root)
    known = set(table)
    edges: Edges = {}
    for name, (path, is_package) in table.items():
        for target, kind in imports(path, name, is_package, known):
            src, dst = (name, target) if by_module else (package_of(name, table), package_of(target, table))
            if src == dst:
                continue
            previous = edges.get((src, dst), True)
            if kind == READS:
                edges[(src, dst)] = READS if previous in (True, READS) else previous
            else:
                edges[(src, dst)] = (previous is True or previous == READS) and kind
    return edges


def contents(root: Path) -> dict[str, list[str]]:
    """Package → the modules directly in its folder (subpackages excluded)."""
    table = modules(root)
    out: dict[str, list[str]] = defaultdict(list)
    for name, (_, is_package) in table.items():
        if is_package:
            out.setdefault(name, [])
        else:
            out[name.rpartition(".")[0]].append(name.rpartition(".")[2])
    return {k: sorted(v) for k, v in out.items()}


def short(name: str) -> str:
    return name.removeprefix(PREFIX + ".")


def node_id(name: str) -> str:
    return short(name).replace(".", "_")


def label(name: str, members: list[str] | None) -> str:
    if not members:
        return short(name)
    rows = [", ".join(members[i : i + 4]) for i in range(0, len(members), 4)]
    return f"<b>{short(name)}</b><br/>" + "<br/>".join(rows)


def mermaid(edges: Edges, packages: dict[str, list[str]] | None = None) -> str:
    nodes = sorted({n for edge in edges for n in edge} | set(packages or {}))
    lines = ["```mermaid", "graph TD"]
    for group in ("config", "proxy", "policies"):
        members = [n for n in nodes if short(n).split(".")[0] == group]
        if not members:
            continue
        lines.append(f"    subgraph {group}_group [{group}/]")
        lines += [f'        {node_id(n)}["{label(n, (packages or {}).get(n))}"]' for n in members]
        lines.append("    end")
    arrows = {False: "-->", True: "-.->", READS: "-. reads .->"}
    for (src, dst), kind in sorted(edges.items()):
        lines.append(f"    {node_id(src)} {arrows[kind]} {node_id(dst)}")
    lines.append("```")
    return "\n".join(lines)


def problems(packages: Edges, by_module: Edges) -> list[str]:
    """Imports from policies/ into proxy/ (package graph) and import cycles (module graph)."""
    edges = by_module
    found = [
        f"{short(src)} imports {short(dst)}: policies/ must never import proxy/"
        for src, dst in packages
        if short(src).startswith("policies") and short(dst).startswith("proxy")
    ]
    # A package read as data (`importlib.resources.files`, at call time) is not imported by its reader:
    # the dashboard reading its own static files is no cycle.
    edges = {edge: kind for edge, kind in edges.items() if kind != READS}
    succ: dict[str, set[str]] = defaultdict(set)
    for src, dst in edges:
        succ[src].add(dst)

    def reaches(start: str, goal: str) -> bool:
        seen, todo = set(), [start]
        while todo:
            node = todo.pop()
            if node == goal:
                return True
            if node not in seen:
                seen.add(node)
                todo += succ[node]
        return False

    found += [f"cycle: {short(src)} -> {short(dst)} -> … -> {short(src)}" for src, dst in sorted(edges) if reaches(dst, src)]
    return found


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--modules", action="store_true", help="one node per module")
    parser.add_argument("--check", action="store_true", help="only check the layering rules")
    parser.add_argument("--write", action="store_true", help=f"update the graph in {DOC.name}")
    args = parser.parse_args()
    if args.check:
        found = problems(graph(ROOT), graph(ROOT, by_module=True))
        for line in found:
            print(line, file=sys.stderr)
        print(f"{len(found)} problem(s): " + ("; ".join(found) if found else "no cycles, policies/ does not import proxy/"))
        return 1 if found else 0
    edges = graph(ROOT, by_module=args.modules)
    block = mermaid(edges, None if args.modules else contents(ROOT))
    if args.write:
        return write(DOC, block)
    print(block)
    return 0


def write(doc: Path, block: str) -> int:
    text = doc.read_text(encoding="utf-8")
    head, start, rest = text.partition(START)
    _, end, tail = rest.partition(END)
    if not (start and end):
        print(f"{doc}: no {START} … {END} markers", file=sys.stderr)
        return 1
    doc.write_text(f"{head}{START}\n{block}\n{END}{tail}", encoding="utf-8")
    print(f"{doc.name}: graph updated ({block.count(chr(10)) + 1} lines)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
