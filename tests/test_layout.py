"""Layout rules for the repository, checked from the source tree (and one installed wheel).

1. Import graph of proxy/ and policies/: no cycles; policies/ never imports the proxy; nobody
   imports the bare top-level names `proxy`, `policies`, `config`; import chains inside
   policies/ stay shallow.
2. Size: modules of at most 400 lines, functions of at most 60.
3. policies/: only the shared modules at the top; everything else in documented sub-packages.
4. pyproject.toml: the `packages` list matches the tree; the built-in policies' entry points load.
5. The repository stands alone: no tracked file points outside it or at a machine's home.
6. The wheel installs everything under `ctxwarden.` and works from a fresh virtualenv.

Every walker below takes a root directory (or plain data) so the `*_synthetic` tests can prove,
on small trees under tmp_path, that each rule catches what it is meant to catch.
"""

from __future__ import annotations

import ast
import configparser
import importlib
import itertools
import os
import re
import shutil
import subprocess
import sys
import sysconfig
import textwrap
import zipfile
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from importlib.metadata import EntryPoint, distribution, entry_points
from pathlib import Path

import pytest

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10: pytest brings tomli there
    import tomli as tomllib

ROOT = Path(__file__).resolve().parents[1]

TOP = "ctxwarden"
POLICIES = "ctxwarden.policies"
PROXY = "ctxwarden.proxy"
BARE_NAMES = frozenset({"proxy", "policies", "config"})  # the folders; only ever imported as ctxwarden.<name>
SHARED_POLICY_MODULES = frozenset({"__init__.py", "base.py", "errors.py", "messages.py", "cache.py", "budget.py", "state.py",
                                   "deadline.py"})
MAX_LEVELS = 4  # units (sub-packages, shared modules) in the longest import chain inside policies/
MAX_MODULE_LINES = 400
MAX_FUNCTION_LINES = 60
ENTRY_POINT_GROUP = "ctxwarden.policies"
BUILTIN_POLICIES = frozenset({"loops", "poisoning", "clash", "history", "archive", "tools", "memory"})
CONSOLE_SCRIPT = ("ctxwarden", "ctxwarden.proxy.cli:main")
# Joined from pieces so that this file, once tracked, does not match its own patterns.
MACHINE_PATHS = tuple(p.replace("|", "/") for p in ("..|shared", "|work|", "|root|", "|home|", "|Users|"))
SKIP_STANDALONE = ("bench/data/",)


# ============================================================================ shared helpers


def read_pyproject(root: Path = ROOT) -> dict:
    return tomllib.loads((root / "pyproject.toml").read_text(encoding="utf-8"))


def package_dirs(pyproject: Mapping) -> dict[str, str]:
    """{"ctxwarden.proxy": "proxy", ...} from [tool.setuptools.package-dir]."""
    return dict(pyproject["tool"]["setuptools"]["package-dir"])


def walk_py(directory: Path) -> Iterator[Path]:
    """Every .py file below `directory`, sorted, skipping caches and hidden folders."""
    for path in sorted(directory.rglob("*.py")):
        rel = path.relative_to(directory).parts
        if not any(part == "__pycache__" or part.startswith(".") for part in rel):
            yield path


def rel(path: Path, root: Path) -> str:
    return path.relative_to(root).as_posix()


def parse(path: Path) -> ast.Module:
    try:
        return ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    except SyntaxError as exc:
        raise AssertionError(f"{path}:{exc.lineno}: cannot parse: {exc.msg}") from exc


def git_files(root: Path, *, untracked: bool) -> list[str] | None:
    """Tracked files (plus untracked, not ignored ones) that exist in the work tree; None outside git."""
    args = ["git", "-C", str(root), "ls-files", "-z", "--cached"]
    if untracked:
        args += ["--others", "--exclude-standard"]
    try:
        out = subprocess.run(args, capture_output=True, check=True).stdout
    except (OSError, subprocess.CalledProcessError):
        return None
    names = sorted({name for name in out.decode("utf-8", "surrogateescape").split("\0") if name})
    return [name for name in names if (root / name).is_file()]


# ============================================================================ 1. import graph


@dataclass(frozen=True)
class Module:
    name: str  # e.g. ctxwarden.policies.clash.policy; a package is named by its __init__.py
    path: Path
    is_package: bool


@dataclass(frozen=True)
class Import:
    line: int
    level: int  # 0: absolute
    candidates: tuple[str, ...]  # absolute dotted names, most specific first ("X.n", "X" for `from X import n`)
    written: str  # the statement as written, for messages


def collect_modules(root: Path, dirs: Mapping[str, str]) -> dict[str, Module]:
    """Every module under the mapped folders, by its installed name (`dirs` as in package-dir)."""
    modules: dict[str, Module] = {}
    for package, folder in dirs.items():
        base = root / folder
        if not base.is_dir():
            continue
        for path in walk_py(base):
            parts = path.relative_to(base).with_suffix("").parts
            is_package = parts[-1] == "__init__"
            name = ".".join((package, *(parts[:-1] if is_package else parts)))
            modules[name] = Module(name, path, is_package)
    return modules


def resolve_relative(module: str, is_package: bool, level: int, target: str | None) -> str | None:
    """The absolute name `from <level dots><target> import …` means inside `module`; None if it escapes."""
    package = module if is_package else module.rpartition(".")[0]
    for _ in range(level - 1):
        if not package:
            return None
        package = package.rpartition(".")[0]
    if not package:
        return None
    return f"{package}.{target}" if target else package


def _dynamic_import(node: ast.Call) -> str | None:
    """`importlib.import_module("x.y")` / `import_module("x.y")` / `__import__("x.y")` with a literal name."""
    func = node.func
    name = func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else None
    if name not in ("import_module", "__import__") or not node.args:
        return None
    arg = node.args[0]
    if isinstance(arg, ast.Constant) and isinstance(arg.value, str) and arg.value and not arg.value.startswith("."):
        return arg.value
    return None


def imports_in(tree: ast.AST, module: str | None = None, is_package: bool = False) -> list[Import]:
    """Every import in the file: top level, inside functions, under TYPE_CHECKING, try/except, and
    literal importlib calls. Relative imports resolve against `module` (skipped when it is None)."""
    found: list[Import] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                found.append(Import(node.lineno, 0, (alias.name,), f"import {alias.name}"))
        elif isinstance(node, ast.ImportFrom):
            written = f"from {'.' * node.level}{node.module or ''} import {', '.join(a.name for a in node.names)}"
            if node.level:
                if module is None:
                    continue
                base = resolve_relative(module, is_package, node.level, node.module)
                if base is None:
                    found.append(Import(node.lineno, node.level, (), written))
                    continue
            else:
                base = node.module or ""
            for alias in node.names:
                candidates = (base,) if alias.name == "*" else (f"{base}.{alias.name}", base)
                found.append(Import(node.lineno, node.level, candidates, written))
        elif isinstance(node, ast.Call):
            name = _dynamic_import(node)
            if name:
                found.append(Import(node.lineno, 0, (name,), f"import_module({name!r})"))
    return sorted(found, key=lambda i: i.line)


def ancestors(name: str) -> list[str]:
    parts = name.split(".")
    return [".".join(parts[:i]) for i in range(len(parts) - 1, 0, -1)]


def resolve_target(imp: Import, modules: Mapping[str, Module]) -> str | None:
    """The module an import runs: a submodule if `from pkg import sub` names one, else the module
    or package (its __init__) named; a missing submodule falls back to its nearest known package."""
    for candidate in imp.candidates:
        if candidate in modules:
            return candidate
    if imp.candidates:
        for prefix in ancestors(imp.candidates[-1]):
            if prefix in modules:
                return prefix
    return None


Graph = dict[str, dict[str, int]]  # module → {imported module: first line of the import}


def import_graph(modules: Mapping[str, Module]) -> Graph:
    """Edges between our own modules. A module importing one of its own packages (its parent's
    __init__, or a grandparent's) adds no edge: that package is already mid-import when the module
    runs, so it is not a cycle. A package __init__ re-exporting its submodules keeps its edges
    (package → submodule)."""
    graph: Graph = {name: {} for name in modules}
    for name, module in modules.items():
        own = set(ancestors(name))
        for imp in imports_in(parse(module.path), name, module.is_package):
            target = resolve_target(imp, modules)
            if target is None or target == name or target in own:
                continue
            graph[name].setdefault(target, imp.line)
    return graph


def find_cycles(graph: Graph) -> list[list[str]]:
    """One shortest cycle ([a, b, …, a]) per strongly connected component with more than one module."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    components: list[list[str]] = []

    def strongconnect(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph.get(v, {})):
            if w not in graph:
                continue
            if w not in index:
                strongconnect(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            components.append(component)

    for v in sorted(graph):
        if v not in index:
            strongconnect(v)

    cycles = []
    for component in components:
        if len(component) < 2:
            continue
        members = set(component)
        start = min(component)
        previous: dict[str, str] = {}
        frontier = [start]
        while frontier and start not in previous:
            following = []
            for v in frontier:
                for w in sorted(graph[v]):
                    if w in members and w not in previous:
                        previous[w] = v
                        following.append(w)
            frontier = following
        path = [start]
        v = previous[start]
        while v != start:
            path.append(v)
            v = previous[v]
        path.append(start)
        cycles.append(path[::-1])
    return sorted(cycles)


def in_package(name: str, package: str) -> bool:
    return name == package or name.startswith(package + ".")


def longest_chain(graph: Graph, package: str) -> list[str]:
    """The longest path (in modules) through imports that stay inside `package`. Import cycles
    are the cycle rule's business: an edge back into the current path is not followed."""
    best: dict[str, list[str]] = {}

    def chain_from(v: str, path: set[str]) -> list[str]:
        if v in best:
            return best[v]
        longest = [v]
        for w in sorted(graph[v]):
            if in_package(w, package) and w in graph and w not in path:
                candidate = [v, *chain_from(w, path | {v})]
                if len(candidate) > len(longest):
                    longest = candidate
        best[v] = longest
        return longest

    chains = [chain_from(v, set()) for v in sorted(graph) if in_package(v, package)]
    return max(chains, key=len, default=[])


def describe_chain(chain: list[str], graph: Graph, modules: Mapping[str, Module], root: Path) -> str:
    """a (a.py:12) -> b (b.py:3) -> c: each import located in the module that makes it."""
    steps = []
    for here, there in itertools.pairwise(chain):
        steps.append(f"{here} ({rel(modules[here].path, root)}:{graph[here][there]})")
    steps.append(chain[-1])
    return " -> ".join(steps)


def imports_of_proxy(modules: Mapping[str, Module], root: Path, package: str = POLICIES) -> list[str]:
    """Imports of ctxwarden.proxy (or bare `proxy`) made by modules of `package`."""
    found = []
    for name, module in sorted(modules.items()):
        if not in_package(name, package):
            continue
        for imp in imports_in(parse(module.path), name, module.is_package):
            hits = [c for c in imp.candidates if in_package(c, PROXY) or (imp.level == 0 and c.split(".")[0] == "proxy")]
            if hits:
                found.append(f"{rel(module.path, root)}:{imp.line}: {imp.written}  (imports {hits[-1]})")
    return sorted(set(found))


def bare_imports(root: Path, files: Iterable[str]) -> list[str]:
    """Absolute imports whose first name is one of the bare folder names (proxy, policies, config)."""
    found = []
    for name in files:
        if not name.endswith(".py"):
            continue
        for imp in imports_in(parse(root / name)):
            if imp.level == 0 and imp.candidates and imp.candidates[-1].split(".")[0] in BARE_NAMES:
                found.append(f"{name}:{imp.line}: {imp.written}")
    return sorted(set(found))


def python_files(root: Path) -> list[str]:
    """The repository's Python files: tracked and new (not ignored) ones, or a walk outside git."""
    names = git_files(root, untracked=True)
    if names is None:
        skip = {".venv", "venv", "build", "dist", "node_modules"}
        names = [rel(p, root) for p in walk_py(root) if not skip & set(p.relative_to(root).parts)]
    return [name for name in names if name.endswith(".py")]


# ---------------------------------------------------------------- rule 1 on the real tree


@pytest.fixture(scope="module")
def real_modules() -> dict[str, Module]:
    dirs = package_dirs(read_pyproject())
    return collect_modules(ROOT, dirs)


@pytest.fixture(scope="module")
def real_graph(real_modules) -> Graph:
    return import_graph(real_modules)


def test_no_import_cycles(real_modules, real_graph):
    cycles = find_cycles(real_graph)
    assert not cycles, "import cycles (each import shown at file:line):\n" + "\n".join(
        describe_chain(cycle, real_graph, real_modules, ROOT) for cycle in cycles)


def test_policies_never_import_the_proxy(real_modules):
    found = imports_of_proxy(real_modules, ROOT)
    assert not found, "policies/ must not import ctxwarden.proxy (hand it Services instead):\n" + "\n".join(found)


def test_nothing_imports_bare_folder_names():
    found = bare_imports(ROOT, python_files(ROOT))
    assert not found, "import through ctxwarden.<name>, never the bare folder name:\n" + "\n".join(found)


def unit_of(module: str, modules: Mapping[str, Module], package: str = POLICIES) -> str:
    """The layer a module belongs to: its sub-package (policies.text.statements), or itself when it
    is one of the shared modules at the top of `package` (policies.base)."""
    if modules[module].is_package:
        return module
    parent = module.rsplit(".", 1)[0]
    return module if parent == package else parent


def unit_graph(graph: Graph, modules: Mapping[str, Module], package: str = POLICIES) -> Graph:
    """Imports between units inside `package`; a package's __init__ re-exporting its own
    submodules is not an edge (it only names the policy the package holds)."""
    units: Graph = {}
    for v, edges in graph.items():
        if not in_package(v, package) or v == package:
            continue
        here = unit_of(v, modules, package)
        units.setdefault(here, {})
        for w, line in edges.items():
            if in_package(w, package) and w != package and w in modules:
                there = unit_of(w, modules, package)
                if there != here and not in_package(there, here):
                    units[here].setdefault(there, line)
                    units.setdefault(there, {})
    return units


def test_policies_import_levels_are_few(real_modules, real_graph):
    units = unit_graph(real_graph, real_modules)
    chain = longest_chain(units, POLICIES)
    modules_chain = longest_chain(real_graph, POLICIES)
    report = (f"longest import chain between policies/ packages and shared modules: {len(chain)} levels:\n"
              f"  {' -> '.join(chain)}\n"
              f"(the longest chain of single modules is {len(modules_chain)}: {' -> '.join(modules_chain)})")
    print(report)
    assert len(chain) <= MAX_LEVELS, f"{report}\nat most {MAX_LEVELS} levels, please"


def test_unit_graph_synthetic():
    modules = {name: Module(name, Path(name), is_package)
               for name, is_package in (("ctxwarden.policies", True), ("ctxwarden.policies.base", False),
                                        ("ctxwarden.policies.text", True), ("ctxwarden.policies.text.a", False),
                                        ("ctxwarden.policies.text.b", False), ("ctxwarden.policies.clash", True),
                                        ("ctxwarden.policies.clash.policy", False))}
    graph: Graph = {
        "ctxwarden.policies.clash": {"ctxwarden.policies.clash.policy": 1},  # the facade: no edge
        "ctxwarden.policies.clash.policy": {"ctxwarden.policies.text.a": 2, "ctxwarden.policies.base": 3},
        "ctxwarden.policies.text.a": {"ctxwarden.policies.text.b": 1},  # inside one unit: no edge
        "ctxwarden.policies.text.b": {"ctxwarden.policies.base": 1},
        "ctxwarden.policies.base": {},
        "ctxwarden.policies.text": {},
        "ctxwarden.policies": {},
    }
    units = unit_graph(graph, modules)
    assert units["ctxwarden.policies.clash"] == {"ctxwarden.policies.text": 2, "ctxwarden.policies.base": 3}
    assert units["ctxwarden.policies.text"] == {"ctxwarden.policies.base": 1}
    assert longest_chain(units, POLICIES) == ["ctxwarden.policies.clash", "ctxwarden.policies.text",
                                              "ctxwarden.policies.base"]


# ---------------------------------------------------------------- rule 1 proven on synthetic trees


def write_tree(root: Path, files: Mapping[str, str]) -> Path:
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text).lstrip("\n"), encoding="utf-8")
    return root


SYNTHETIC_DIRS = {"ctxwarden.policies": "policies", "ctxwarden.proxy": "proxy"}


def test_relative_imports_resolve_synthetic():
    assert resolve_relative("ctxwarden.policies.clash.policy", False, 1, "detect") == "ctxwarden.policies.clash.detect"
    assert resolve_relative("ctxwarden.policies.clash.policy", False, 2, "text.claims") == "ctxwarden.policies.text.claims"
    assert resolve_relative("ctxwarden.policies.clash", True, 1, "policy") == "ctxwarden.policies.clash.policy"
    assert resolve_relative("ctxwarden.policies.clash", True, 2, None) == "ctxwarden.policies"
    assert resolve_relative("ctxwarden.proxy.streaming.relay", False, 3, "proxy") == "ctxwarden.proxy"
    assert resolve_relative("ctxwarden.proxy", True, 3, None) is None


def test_cycle_finder_synthetic(tmp_path):
    write_tree(tmp_path, {
        "policies/__init__.py": "from .base import Base\n",
        "policies/base.py": "X = 1\n",
        "policies/alpha/__init__.py": '"""Alpha."""\nfrom .a import A\n',   # package → submodule: an edge
        "policies/alpha/a.py": """
            from . import A          # its own package: no edge, so no cycle through the __init__
            from .. import base      # a grandparent package's submodule: an edge to base
            from .b import B
            A = 1
            """,
        "policies/alpha/b.py": """
            from typing import TYPE_CHECKING
            if TYPE_CHECKING:
                from .c import C     # counted although it never runs
            B = 1
            """,
        "policies/alpha/c.py": """
            def late():
                from ctxwarden.policies.alpha.a import A   # counted although it runs late
                return A
            """,
    })
    modules = collect_modules(tmp_path, SYNTHETIC_DIRS)
    graph = import_graph(modules)
    assert graph["ctxwarden.policies.alpha"] == {"ctxwarden.policies.alpha.a": 2}
    assert "ctxwarden.policies.alpha" not in graph["ctxwarden.policies.alpha.a"]
    assert graph["ctxwarden.policies.alpha.a"] == {"ctxwarden.policies.base": 2, "ctxwarden.policies.alpha.b": 3}
    cycles = find_cycles(graph)
    assert cycles == [["ctxwarden.policies.alpha.a", "ctxwarden.policies.alpha.b",
                       "ctxwarden.policies.alpha.c", "ctxwarden.policies.alpha.a"]]
    text = describe_chain(cycles[0], graph, modules, tmp_path)
    assert "policies/alpha/a.py:3" in text and "policies/alpha/b.py:3" in text and "policies/alpha/c.py:2" in text

    (tmp_path / "policies/alpha/c.py").write_text("C = 1\n")
    graph = import_graph(collect_modules(tmp_path, SYNTHETIC_DIRS))
    assert find_cycles(graph) == []
    assert longest_chain(graph, POLICIES) == ["ctxwarden.policies.alpha", "ctxwarden.policies.alpha.a",
                                              "ctxwarden.policies.alpha.b", "ctxwarden.policies.alpha.c"]


def test_longest_chain_stays_inside_the_package_synthetic():
    graph: Graph = {
        "ctxwarden.policies.a": {"ctxwarden.policies.b": 1, "ctxwarden.proxy.x": 2},
        "ctxwarden.policies.b": {"ctxwarden.policies.a": 1},  # a cycle: not followed back
        "ctxwarden.proxy.x": {"ctxwarden.proxy.y": 1},
        "ctxwarden.proxy.y": {},
    }
    assert longest_chain(graph, POLICIES) in (["ctxwarden.policies.a", "ctxwarden.policies.b"],
                                              ["ctxwarden.policies.b", "ctxwarden.policies.a"])
    assert len(longest_chain(graph, PROXY)) == 2


def test_policies_importing_proxy_are_found_synthetic(tmp_path):
    write_tree(tmp_path, {
        "policies/__init__.py": "",
        "policies/ok.py": "from .base import X\nimport proxyish\n",
        "policies/sub/__init__.py": '"""Sub."""\n',
        "policies/sub/mod.py": """
            from ...proxy import config
            import proxy.app
            def f():
                from ctxwarden.proxy.config import Settings
            """,
        "policies/sub/lazy.py": "import importlib\nM = importlib.import_module('ctxwarden.proxy.app')\n",
        "proxy/__init__.py": "",
        "proxy/app.py": "from ctxwarden.policies import base\n",
    })
    found = imports_of_proxy(collect_modules(tmp_path, SYNTHETIC_DIRS), tmp_path)
    assert [f.split(": ")[0] for f in found] == [
        "policies/sub/lazy.py:2", "policies/sub/mod.py:1", "policies/sub/mod.py:2", "policies/sub/mod.py:4"]


def test_bare_imports_are_found_synthetic(tmp_path):
    write_tree(tmp_path, {
        "bench/run.py": "import config\nimport configparser\nfrom ctxwarden.config import x\n",
        "tests/test_x.py": "from policies.base import BasePolicy\nfrom .config import y\n",
        "proxy/a.py": "def f():\n    import proxy.cli\n    __import__('policies')\n",
    })
    found = bare_imports(tmp_path, ["bench/run.py", "tests/test_x.py", "proxy/a.py"])
    assert [f.split(": ")[0] for f in found] == ["bench/run.py:1", "proxy/a.py:2", "proxy/a.py:3", "tests/test_x.py:1"]


# ============================================================================ 2. size


@dataclass(frozen=True)
class Function:
    qualname: str
    lineno: int
    lines: int


def functions_in(tree: ast.AST) -> list[Function]:
    """Every def (methods and nested ones too), measured from `def` to its last line; decorators excluded."""
    found: list[Function] = []

    def visit(node: ast.AST, prefix: str) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)):
                qualname = prefix + child.name
                found.append(Function(qualname, child.lineno, child.end_lineno - child.lineno + 1))
                visit(child, qualname + ".<locals>.")
            elif isinstance(child, ast.ClassDef):
                visit(child, prefix + child.name + ".")
            else:
                visit(child, prefix)

    visit(tree, "")
    return found


def oversized(root: Path, folders: Iterable[str], max_module: int = MAX_MODULE_LINES,
              max_function: int = MAX_FUNCTION_LINES) -> tuple[list[str], list[str]]:
    """(modules over max_module lines, functions over max_function lines) as path:name:lines."""
    modules, functions = [], []
    for folder in folders:
        for path in walk_py(root / folder):
            name = rel(path, root)
            text = path.read_text(encoding="utf-8")
            count = len(text.splitlines())
            if count > max_module:
                modules.append(f"{name}:{count} lines")
            for fn in functions_in(parse(path)):
                if fn.lines > max_function:
                    functions.append(f"{name}:{fn.qualname}:{fn.lines} lines (def at line {fn.lineno})")
    return modules, functions


SIZE_FOLDERS = ("proxy", "policies")


def test_modules_are_at_most_400_lines():
    modules, _ = oversized(ROOT, SIZE_FOLDERS)
    assert not modules, f"modules over {MAX_MODULE_LINES} lines:\n" + "\n".join(modules)


def test_functions_are_at_most_60_lines():
    _, functions = oversized(ROOT, SIZE_FOLDERS)
    assert not functions, f"functions over {MAX_FUNCTION_LINES} lines:\n" + "\n".join(functions)


def test_size_limits_synthetic(tmp_path):
    body60 = "".join(f"    x{i} = {i}\n" for i in range(59))  # def line + 59 = 60 lines
    write_tree(tmp_path, {
        "policies/fine.py": "@decorator\n@another\ndef fine():\n" + body60,
        "policies/long_fn.py": "class K:\n    def helper(self):\n        def inner():\n" + "".join(
            f"            y{i} = {i}\n" for i in range(60)) + "        return inner\n",
        "policies/big.py": "".join(f"v{i} = {i}\n" for i in range(401)),
        "policies/edge.py": "".join(f"v{i} = {i}\n" for i in range(400)),
    })
    modules, functions = oversized(tmp_path, ["policies"])
    assert modules == ["policies/big.py:401 lines"]
    # helper: its def (line 2), inner's def (3), 60 body lines (4-63), `return inner` (64) = 63 lines
    assert functions == ["policies/long_fn.py:K.helper:63 lines (def at line 2)",
                         "policies/long_fn.py:K.helper.<locals>.inner:61 lines (def at line 3)"]


# ============================================================================ 3. policies/ layout


def policies_layout_problems(policies: Path, shared: frozenset[str] = SHARED_POLICY_MODULES) -> list[str]:
    problems = []
    for path in sorted(policies.glob("*.py")):
        if path.name not in shared:
            problems.append(f"{rel(path, policies.parent)}: a loose module; only {', '.join(sorted(shared))} live at the top of "
                            f"{policies.name}/, the rest in a sub-package")
    for folder in sorted(p for p in policies.rglob("*") if p.is_dir()):
        name = rel(folder, policies.parent)
        if any(part == "__pycache__" or part.startswith(".") for part in folder.relative_to(policies).parts):
            continue
        if not any(walk_py(folder)):
            continue
        init = folder / "__init__.py"
        if not init.is_file():
            problems.append(f"{name}/: holds Python modules but has no __init__.py")
        elif not (ast.get_docstring(parse(init)) or "").strip():
            problems.append(f"{name}/__init__.py: no docstring saying what the sub-package is for")
    return problems


def test_policies_has_only_shared_modules_and_documented_subpackages():
    problems = policies_layout_problems(ROOT / "policies")
    assert not problems, "policies/ layout:\n" + "\n".join(problems)


def test_policies_layout_synthetic(tmp_path):
    write_tree(tmp_path, {
        "policies/__init__.py": '"""Policies."""\n',
        "policies/base.py": "",
        "policies/helpers.py": "",
        "policies/good/__init__.py": '"""Good: documented."""\nfrom .x import X\n',
        "policies/good/x.py": "X = 1\n",
        "policies/good/deeper/__init__.py": "# a comment is not a docstring\n",
        "policies/good/deeper/y.py": "",
        "policies/loose_dir/z.py": "",
        "policies/data/notes.txt": "no Python here",
    })
    problems = policies_layout_problems(tmp_path / "policies")
    assert [p.split(":")[0] for p in problems] == [
        "policies/helpers.py", "policies/good/deeper/__init__.py", "policies/loose_dir/"]


# ============================================================================ 4. pyproject: packages and entry points


def expected_packages(root: Path, dirs: Mapping[str, str]) -> set[str]:
    """Every folder with an __init__.py under the mapped folders, by installed dotted name."""
    found = set()
    for package, folder in dirs.items():
        base = root / folder
        for init in walk_py(base) if base.is_dir() else ():
            if init.name == "__init__.py":
                parts = init.parent.relative_to(base).parts
                found.add(".".join((package, *parts)))
    return found


def package_list_problems(listed: list[str], expected: set[str]) -> list[str]:
    problems = [f"listed twice: {name}" for name in sorted({n for n in listed if listed.count(n) > 1})]
    problems += [f"missing from packages (has an __init__.py): {name}" for name in sorted(expected - set(listed))]
    problems += [f"listed but no such package folder: {name}" for name in sorted(set(listed) - expected)]
    return problems


def test_pyproject_packages_match_the_tree():
    pyproject = read_pyproject()
    listed = list(pyproject["tool"]["setuptools"]["packages"])
    problems = package_list_problems(listed, expected_packages(ROOT, package_dirs(pyproject)))
    assert not problems, "pyproject.toml [tool.setuptools] packages:\n" + "\n".join(problems)


def test_pyproject_package_dirs_cover_the_three_folders():
    assert package_dirs(read_pyproject()) == {"ctxwarden.proxy": "proxy", "ctxwarden.policies": "policies",
                                              "ctxwarden.config": "config"}


def test_package_list_synthetic(tmp_path):
    write_tree(tmp_path, {
        "proxy/__init__.py": "", "proxy/streaming/__init__.py": "", "proxy/streaming/__pycache__/x.py": "",
        "policies/__init__.py": "", "policies/new/__init__.py": "", "policies/nopkg/x.py": "",
        "config/__init__.py": "",
    })
    expected = expected_packages(tmp_path, {"ctxwarden.proxy": "proxy", "ctxwarden.policies": "policies",
                                            "ctxwarden.config": "config"})
    assert expected == {"ctxwarden.proxy", "ctxwarden.proxy.streaming", "ctxwarden.policies",
                        "ctxwarden.policies.new", "ctxwarden.config"}
    listed = ["ctxwarden.proxy", "ctxwarden.proxy", "ctxwarden.proxy.streaming", "ctxwarden.policies",
              "ctxwarden.config", "ctxwarden.policies.gone"]
    assert package_list_problems(listed, expected) == [
        "listed twice: ctxwarden.proxy",
        "missing from packages (has an __init__.py): ctxwarden.policies.new",
        "listed but no such package folder: ctxwarden.policies.gone"]


def entry_point_problems(eps: Iterable[EntryPoint]) -> list[str]:
    """Each entry point must load to a BasePolicy subclass whose `name` is the entry point's name."""
    from ctxwarden.policies.base import BasePolicy

    problems = []
    for ep in eps:
        where = f"{ep.name} = {ep.value}"
        try:
            obj = ep.load()
        except Exception as exc:  # noqa: BLE001 — any failure to load is the finding
            problems.append(f"{where}: does not load: {type(exc).__name__}: {exc}")
            continue
        if not (isinstance(obj, type) and issubclass(obj, BasePolicy)):
            problems.append(f"{where}: {obj!r} is not a subclass of ctxwarden.policies.base.BasePolicy")
        elif obj.name != ep.name:
            problems.append(f"{where}: {obj.__qualname__}.name is {obj.name!r}, not {ep.name!r}")
    return problems


def pyproject_policies(pyproject: Mapping | None = None) -> dict[str, str]:
    pyproject = pyproject or read_pyproject()
    return dict(pyproject["project"]["entry-points"][ENTRY_POINT_GROUP])


def test_builtin_policy_entry_points_load_to_named_policies():
    declared = pyproject_policies()
    assert set(declared) == BUILTIN_POLICIES, f"pyproject.toml registers {sorted(declared)}"
    installed = {ep.name: ep for ep in entry_points(group=ENTRY_POINT_GROUP)}
    missing = sorted(set(declared) - set(installed))
    assert not missing, f"not installed (re-run `pip install -e .`): {missing}"
    problems = entry_point_problems(installed[name] for name in sorted(declared))
    assert not problems, "entry points in the ctxwarden.policies group:\n" + "\n".join(problems)


def test_installed_metadata_matches_pyproject():
    """The registry reads installed metadata; a stale install would run other policies than pyproject names."""
    installed = {ep.name: ep.value for ep in distribution("ctxwarden").entry_points if ep.group == ENTRY_POINT_GROUP}
    assert installed == pyproject_policies(), (
        f"installed ctxwarden entry points {installed} differ from pyproject.toml; re-run `pip install -e .`")


def test_entry_point_checks_synthetic(tmp_path, monkeypatch):
    write_tree(tmp_path, {"layout_synthetic_policies.py": """
        from ctxwarden.policies.base import BasePolicy

        class Good(BasePolicy):
            name = "good"

        class Misnamed(BasePolicy):
            name = "other"

        class NotAPolicy:
            name = "plain"
        """})
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, "layout_synthetic_policies", raising=False)
    module = "layout_synthetic_policies"
    eps = [EntryPoint(name, f"{module}:{attr}", ENTRY_POINT_GROUP) for name, attr in
           [("good", "Good"), ("misnamed", "Misnamed"), ("plain", "NotAPolicy"), ("gone", "Gone")]]
    eps.append(EntryPoint("nomodule", "layout_no_such_module:X", ENTRY_POINT_GROUP))
    problems = entry_point_problems(eps)
    monkeypatch.delitem(sys.modules, module, raising=False)
    assert [p.split(" = ")[0] for p in problems] == ["misnamed", "plain", "gone", "nomodule"]
    assert "Misnamed.name is 'other', not 'misnamed'" in problems[0]
    assert "not a subclass" in problems[1] and "does not load: AttributeError" in problems[2]


# ============================================================================ 5. the repository stands alone


def machine_paths(root: Path, files: Iterable[str], patterns: Iterable[str] = MACHINE_PATHS,
                  skip: Iterable[str] = SKIP_STANDALONE) -> list[str]:
    """Lines of text files that point outside the repository or at a machine's home (path:line)."""
    patterns, skip = tuple(patterns), tuple(skip)
    found = []
    for name in files:
        if name.startswith(skip):
            continue
        data = (root / name).read_bytes()
        if b"\0" in data[:8192]:
            continue  # binary
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError:
            continue  # binary
        for number, line in enumerate(text.splitlines(), 1):
            hits = [p for p in patterns if p in line]
            if hits:
                found.append(f"{name}:{number}: {', '.join(hits)}: {line.strip()[:140]}")
    return found


def test_repository_stands_alone():
    files = git_files(ROOT, untracked=False)
    if files is None:
        pytest.skip("not a git checkout: `git ls-files` is unavailable, so there is no list of tracked files")
    found = machine_paths(ROOT, files)
    assert not found, ("tracked files point outside the repository or at a machine's home "
                       f"({', '.join(MACHINE_PATHS)}):\n" + "\n".join(found))


def test_machine_paths_synthetic(tmp_path):
    shared, work, root_home, home = MACHINE_PATHS[:4]
    write_tree(tmp_path, {
        "README.md": f"fine\nsee {shared}/DESIGN.md\n",
        "bench/run.py": f'DATA = "{work}data"\nOK = "relative/path"\n',
        "bench/data/rows.jsonl": f'{{"path": "{work}x"}}\n',
        "docs/note.txt": f"cd {home}me && ls {root_home}.cache\n",
    })
    (tmp_path / "blob.bin").write_bytes(b"\0\1" + work.encode())
    (tmp_path / "latin1.txt").write_bytes(b"\xff\xfe" + root_home.encode())
    names = ["README.md", "bench/run.py", "bench/data/rows.jsonl", "docs/note.txt", "blob.bin", "latin1.txt"]
    found = machine_paths(tmp_path, names)
    assert [f.split(": ")[0] for f in found] == ["README.md:2", "bench/run.py:1", "docs/note.txt:1"]
    assert f"{home}, {root_home}" in found[2] or f"{root_home}, {home}" in found[2]


# ============================================================================ 6. the wheel, installed


def wheel_problems(names: Iterable[str], entry_points_txt: str | None, policies: Mapping[str, str],
                   expected_files: Iterable[str] = ()) -> list[str]:
    """What is wrong with a wheel's file list and its entry_points.txt."""
    names = list(names)
    problems = []
    dist_infos = sorted({n.split("/")[0] for n in names if n.split("/")[0].endswith(".dist-info")})
    if len(dist_infos) != 1 or not dist_infos[0].startswith(f"{TOP}-"):
        problems.append(f"expected one {TOP}-*.dist-info folder, found {dist_infos}")
    for name in names:
        top = name.split("/")[0]
        if top in BARE_NAMES:
            problems.append(f"{name}: a top-level {top}/ in the wheel (would install a bare `{top}` package)")
        elif top != TOP and top not in dist_infos:
            problems.append(f"{name}: outside {TOP}/ and the dist-info folder")
    for name in sorted({f"{TOP}/config/ctxwarden.yaml", *expected_files} - set(names)):
        problems.append(f"{name}: missing from the wheel")
    if entry_points_txt is None:
        return problems + ["no entry_points.txt in the dist-info folder"]
    parser = configparser.ConfigParser(delimiters=("=",), interpolation=None)
    parser.optionxform = str  # keep names' case
    parser.read_string(entry_points_txt)
    scripts = dict(parser["console_scripts"]) if parser.has_section("console_scripts") else {}
    if scripts.get(CONSOLE_SCRIPT[0]) != CONSOLE_SCRIPT[1]:
        problems.append(f"console_scripts: want {CONSOLE_SCRIPT[0]} = {CONSOLE_SCRIPT[1]}, found {scripts}")
    registered = dict(parser[ENTRY_POINT_GROUP]) if parser.has_section(ENTRY_POINT_GROUP) else {}
    if registered != dict(policies):
        problems.append(f"[{ENTRY_POINT_GROUP}]: want {dict(policies)}, found {registered}")
    return problems


def test_wheel_problems_synthetic():
    policies = {"loops": "ctxwarden.policies.loops:LoopsPolicy"}
    good_eps = "[console_scripts]\nctxwarden = ctxwarden.proxy.cli:main\n\n[ctxwarden.policies]\n" \
               "loops = ctxwarden.policies.loops:LoopsPolicy\n"
    good = ["ctxwarden/config/ctxwarden.yaml", "ctxwarden/proxy/cli.py", "ctxwarden-0.1.0.dist-info/RECORD"]
    assert wheel_problems(good, good_eps, policies, ["ctxwarden/proxy/cli.py"]) == []
    bad = ["proxy/cli.py", "policies/base.py", "config/ctxwarden.yaml", "tests/test_x.py",
           "ctxwarden-0.1.0.dist-info/RECORD"]
    bad_eps = "[console_scripts]\nctxwarden = proxy.cli:main\n"
    problems = wheel_problems(bad, bad_eps, policies, ["ctxwarden/proxy/cli.py"])
    assert [p.split(":")[0] for p in problems] == [
        "proxy/cli.py", "policies/base.py", "config/ctxwarden.yaml", "tests/test_x.py",
        "ctxwarden/config/ctxwarden.yaml", "ctxwarden/proxy/cli.py", "console_scripts", f"[{ENTRY_POINT_GROUP}]"]
    assert wheel_problems(good, None, policies)[-1] == "no entry_points.txt in the dist-info folder"


# Output of a build that could not get setuptools/wheel from the package index.
INDEX_UNREACHABLE = re.compile(
    r"Could not find a version that satisfies the requirement|No matching distribution found|"
    r"Failed to establish a new connection|NewConnectionError|Temporary failure in name resolution|"
    r"Name or service not known|Network is unreachable|Max retries exceeded|ConnectTimeout|ReadTimeout|"
    r"CERTIFICATE_VERIFY_FAILED|ProxyError", re.IGNORECASE)


def clean_env(**extra: str) -> dict[str, str]:
    """This environment minus PYTHON* variables (no PYTHONPATH leaking the work tree), no user site."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTHON") and k != "__PYVENV_LAUNCHER__"}
    env["PYTHONNOUSERSITE"] = "1"
    env.update(extra)
    return env


def run(args: list[str], *, timeout: float = 180, **kwargs) -> subprocess.CompletedProcess:
    return subprocess.run([str(a) for a in args], check=False, capture_output=True, text=True, timeout=timeout, **kwargs)


def copy_source(root: Path, dest: Path) -> Path:
    """The work tree's tracked and new (not ignored) files, copied to `dest`.

    The wheel is built from this copy rather than from the root itself: setuptools writes build/
    and *.egg-info into the folder it builds, and reuses build/lib from an earlier run (so a module
    deleted from the tree would still ship); others edit the tree while the tests run."""
    names = git_files(root, untracked=True)
    if names is None:
        shutil.copytree(root, dest, ignore=shutil.ignore_patterns(
            ".git", ".venv", "venv", "build", "dist", "*.egg-info", "__pycache__", ".*_cache"))
        return dest
    for name in names:
        target = dest / name
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(root / name, target)
    return dest


def dependency_path(dest: Path) -> Path:
    """A folder of symlinks to this environment's installed distributions, minus ctxwarden itself.

    The fresh venv needs ctxwarden's dependencies (pydantic, numpy, …) but must not see this
    environment's ctxwarden. Pointing PYTHONPATH at this environment's site-packages would be
    mostly harmless for the editable install (.pth files, and so the editable finder, are only
    run for site directories, never for PYTHONPATH entries), but it would still put this
    environment's ctxwarden-*.dist-info (entry points, version) ahead of the wheel's, and a
    regular (non-editable) install of ctxwarden, or an old one with top-level proxy/ or policies/,
    would be imported instead of the wheel. So link every entry except those."""
    dest.mkdir(parents=True, exist_ok=True)
    site_dirs = dict.fromkeys(Path(p) for p in (sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"]))
    for site_dir in site_dirs:
        if not site_dir.is_dir():
            continue
        for entry in sorted(site_dir.iterdir()):
            lower = entry.name.lower()
            stem = lower.removesuffix(".py")
            if (lower.startswith((TOP, "__editable__")) or lower.endswith(".pth") or stem in BARE_NAMES
                    or lower == "__pycache__" or (dest / entry.name).exists()):
                continue
            os.symlink(entry, dest / entry.name, target_is_directory=entry.is_dir())
    return dest


def scripts_dir(venv_dir: Path) -> Path:
    return venv_dir / ("Scripts" if os.name == "nt" else "bin")


def executable(venv_dir: Path, name: str) -> Path:
    found = shutil.which(name, path=str(scripts_dir(venv_dir)))
    assert found, f"{name} is not in {scripts_dir(venv_dir)}: {sorted(p.name for p in scripts_dir(venv_dir).iterdir())}"
    return Path(found)


def pip_supports_python_option() -> bool:
    import pip

    major, minor = (int(x) for x in pip.__version__.split(".")[:2])
    return (major, minor) >= (22, 3)


def build_wheel(src: Path, wheel_dir: Path) -> Path:
    """`pip wheel --no-deps` with build isolation; skips when the build requirements are out of reach."""
    build = run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--disable-pip-version-check",
                 "-w", wheel_dir, src], timeout=600, env=clean_env())
    output = build.stdout + build.stderr
    unreachable = INDEX_UNREACHABLE.search(output)
    if build.returncode != 0 and unreachable:
        pytest.skip(f"cannot build the wheel: pip could not get the build requirements from the index "
                    f"({unreachable.group(0)})")
    assert build.returncode == 0, f"pip wheel failed:\n{output[-4000:]}"
    wheels = sorted(wheel_dir.glob("ctxwarden-*.whl"))
    assert len(wheels) == 1, f"expected one ctxwarden wheel in {wheel_dir}: {os.listdir(wheel_dir)}"
    return wheels[0]


def install_in_fresh_venv(wheel: Path, venv_dir: Path) -> Path:
    """A new venv (no system site packages) holding only the wheel; returns its python."""
    with_pip = not pip_supports_python_option()  # else this pip installs into it: faster than ensurepip
    made = run([sys.executable, "-m", "venv", *([] if with_pip else ["--without-pip"]), venv_dir], env=clean_env())
    assert made.returncode == 0, made.stderr
    assert "include-system-site-packages = false" in (venv_dir / "pyvenv.cfg").read_text()
    python = executable(venv_dir, "python")
    installer = [python, "-m", "pip"] if with_pip else [sys.executable, "-m", "pip", "--python", python]
    installed = run([*installer, "install", "--no-deps", "--no-index", "--disable-pip-version-check", wheel],
                    env=clean_env())
    assert installed.returncode == 0, f"pip install of {wheel.name} failed:\n{installed.stdout}{installed.stderr}"
    return python


def test_wheel_installs_everything_as_ctxwarden(tmp_path):
    src = copy_source(ROOT, tmp_path / "src")
    wheel = build_wheel(src, tmp_path / "wheel")

    # --- the file list
    with zipfile.ZipFile(wheel) as zf:
        names = zf.namelist()
        eps_names = [n for n in names if n.count("/") == 1 and n.endswith(".dist-info/entry_points.txt")]
        eps_txt = zf.read(eps_names[0]).decode() if eps_names else None
    pyproject = read_pyproject(src)
    shipped = [f"{package.replace('.', '/')}/{rel(path, src / folder)}"
               for package, folder in package_dirs(pyproject).items() for path in walk_py(src / folder)]
    tops = sorted({n.split("/")[0] for n in names})
    summary = f"{wheel.name}: {len(names)} files; top-level entries {tops}"
    print(summary)
    assert set(pyproject_policies(pyproject)) == BUILTIN_POLICIES
    problems = wheel_problems(names, eps_txt, pyproject_policies(pyproject), shipped)
    assert not problems, f"{summary}\n" + "\n".join(problems)

    # --- installed into a fresh venv, run from an empty folder (so neither the repository nor its
    # proxy/ policies/ config/ are on sys.path), with only the dependencies on PYTHONPATH
    venv_dir = tmp_path / "venv"
    python = install_in_fresh_venv(wheel, venv_dir)
    cwd = tmp_path / "elsewhere"
    cwd.mkdir()
    env = clean_env(PYTHONPATH=str(dependency_path(tmp_path / "deps")))

    imported = run([python, "-c", "import ctxwarden.proxy, ctxwarden.policies, ctxwarden.config"], cwd=cwd, env=env)
    assert imported.returncode == 0, f"the installed wheel does not import:\n{imported.stderr[-3000:]}"

    for bare in sorted(BARE_NAMES):
        attempt = run([python, "-c", f"import {bare}"], cwd=cwd, env=env)
        assert attempt.returncode != 0 and "ModuleNotFoundError" in attempt.stderr, (
            f"`import {bare}` works in the fresh venv (it must not exist there): {attempt.stdout}{attempt.stderr}")

    where = run([python, "-c", "import ctxwarden.proxy; print(ctxwarden.proxy.__file__)"], cwd=cwd, env=env)
    assert where.returncode == 0, where.stderr
    module_file = Path(where.stdout.strip()).resolve()
    assert module_file.is_relative_to(venv_dir.resolve()) and not module_file.is_relative_to(ROOT), (
        f"ctxwarden.proxy came from {module_file}, not from the fresh venv {venv_dir}")

    check_file = cwd / "small.yaml"
    check_file.write_text("budget:\n  warn: 0.6\npolicies:\n  history:\n    keep_recent: 4\n")
    checked = run([executable(venv_dir, "ctxwarden"), "check-config", check_file], cwd=cwd, env=env)
    assert checked.returncode == 0, f"ctxwarden check-config failed:\n{checked.stdout}{checked.stderr}"
    assert "OK" in checked.stdout and all(name in checked.stdout for name in BUILTIN_POLICIES), checked.stdout


def test_every_error_class_has_the_one_root():
    """Callers catch ctxwarden's own errors with one except clause."""
    from ctxwarden.policies.errors import CtxwardenError

    found = []
    for path in [*walk_py(ROOT / "policies"), *walk_py(ROOT / "proxy")]:
        for node in ast.walk(parse(path)):
            if isinstance(node, ast.ClassDef) and any(
                    isinstance(b, ast.Name) and (b.id.endswith(("Error", "Exception")) or b.id == "CtxwardenError")
                    for b in node.bases):
                found.append((path, node.name))
    assert len(found) >= 6
    loose = []
    for path, name in found:
        module = "ctxwarden." + ".".join(path.relative_to(ROOT).with_suffix("").parts)
        cls = getattr(importlib.import_module(module), name)
        if not issubclass(cls, CtxwardenError):
            loose.append(f"{rel(path, ROOT)}:{name}")
    assert not loose, "error classes outside CtxwardenError: " + ", ".join(loose)
