"""The Python package has no import circles: module-level imports between xgrammar2's modules
(outside `if TYPE_CHECKING:` blocks; imports inside functions are deferred and excluded) form
a graph without cycles. docs/architecture.md describes the layering."""

import ast
from pathlib import Path
from typing import Dict, List, Set

PKG = Path(__file__).resolve().parents[2] / "engine" / "xgrammar2"


def _module_name(path: Path) -> str:
    rel = path.relative_to(PKG.parent).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _is_type_checking(node: ast.If) -> bool:
    t = node.test
    return (isinstance(t, ast.Name) and t.id == "TYPE_CHECKING") or (
        isinstance(t, ast.Attribute) and t.attr == "TYPE_CHECKING")


def _top_level_imports(tree: ast.Module, module: str, is_pkg: bool) -> Set[str]:
    out: Set[str] = set()
    package = module if is_pkg else module.rpartition(".")[0]

    def visit(stmts):
        for node in stmts:
            if isinstance(node, ast.If) and _is_type_checking(node):
                visit(node.orelse)
                continue
            if isinstance(node, (ast.If, ast.Try)):
                visit(node.body)
                visit(getattr(node, "orelse", []))
                for h in getattr(node, "handlers", []):
                    visit(h.body)
                visit(getattr(node, "finalbody", []))
            elif isinstance(node, ast.Import):
                out.update(a.name for a in node.names if a.name.startswith("xgrammar2"))
            elif isinstance(node, ast.ImportFrom):
                if node.level:
                    base = package.split(".")
                    base = base[: len(base) - (node.level - 1)]
                    target = ".".join(base + ([node.module] if node.module else []))
                else:
                    target = node.module or ""
                if not target.startswith("xgrammar2"):
                    continue
                out.add(target)
                for a in node.names:  # `from . import x` may name a submodule
                    out.add(f"{target}.{a.name}")

    visit(tree.body)
    return out


def import_graph() -> Dict[str, Set[str]]:
    files = {_module_name(p): p for p in PKG.rglob("*.py") if "__pycache__" not in p.parts}
    graph: Dict[str, Set[str]] = {}
    for mod, path in files.items():
        tree = ast.parse(path.read_text(encoding="utf-8"))
        deps = _top_level_imports(tree, mod, path.name == "__init__.py")
        graph[mod] = {d for d in deps if d in files and d != mod}
    return graph


def find_cycles(graph: Dict[str, Set[str]]) -> List[List[str]]:
    """Strongly connected components with more than one module (Tarjan)."""
    index: Dict[str, int] = {}
    low: Dict[str, int] = {}
    stack: List[str] = []
    on: Set[str] = set()
    out: List[List[str]] = []
    counter = [0]

    def strong(v: str) -> None:
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                strong(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in sorted(graph):
        if v not in index:
            strong(v)
    return out


def _without_package_inits(graph: Dict[str, Set[str]]) -> Dict[str, Set[str]]:
    # A package's __init__ re-exports its submodules, and a submodule importing a sibling
    # through the package (`from . import x`) runs the __init__ first: that edge is Python's
    # package mechanism, not a design circle, so edges INTO package __init__s from their own
    # submodules are dropped.
    pkgs = {m for m in graph if (PKG.parent / m.replace(".", "/") / "__init__.py").exists()}
    return {m: {d for d in deps if not (d in pkgs and m.startswith(d + "."))} for m, deps in graph.items()}


def test_no_import_circles():
    cycles = find_cycles(_without_package_inits(import_graph()))
    assert cycles == [], f"import circles: {cycles}"


def test_the_checker_finds_a_circle():
    assert find_cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert find_cycles({"a": {"b"}, "b": set()}) == []


def _all_imports(tree: ast.Module, module: str, is_pkg: bool) -> Set[str]:
    """Every import of the module, deferred ones inside functions included."""
    out: Set[str] = set()
    package = module if is_pkg else module.rpartition(".")[0]
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[: len(base) - (node.level - 1)]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            out.add(target)
            out.update(f"{target}.{a.name}" for a in node.names)
    return out


def test_front_ends_have_no_circles_even_through_deferred_imports():
    # structural_tag/ and json_schema/ are pure front ends (format -> grammar text): within
    # them no two modules import each other, not even inside functions.
    files = {_module_name(p): p for p in PKG.rglob("*.py") if "__pycache__" not in p.parts}
    front = {m: p for m, p in files.items()
             if m.startswith(("xgrammar2.structural_tag", "xgrammar2.json_schema"))}
    graph = {m: {d for d in _all_imports(ast.parse(p.read_text(encoding="utf-8")), m,
                                         p.name == "__init__.py") if d in front and d != m}
             for m, p in front.items()}
    assert find_cycles(_without_package_inits(graph)) == []
