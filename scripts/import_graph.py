"""The import graph of the dupbert package, imports inside functions included: cycles, levels,
and lines of code and of docstrings per module.

    python scripts/import_graph.py            # a table, the cycles and the levels
    python scripts/import_graph.py --json     # the same as JSON

Each folder (``core``, ``tools``, ``training``, ``study``, ``book``) is one node, as in the import
contract; imports inside a folder are not edges. A cycle is a strongly
connected component of more than one module; a module's level is 0 for a module that imports no
other dupbert module, else 1 + the highest level it imports (modules of one cycle share a level).
Exits 1 when there is a cycle.
"""

from __future__ import annotations

import argparse
import ast
import json
import sys
from pathlib import Path

PACKAGE = [Path(__file__).resolve().parents[1] / "dupbert"]  # --root changes it


def package() -> Path:
    return PACKAGE[0]


def imports(path: Path, depth: int = 0) -> set[str]:
    """The top-level dupbert modules and subpackages ``path`` imports, anywhere in the file;
    ``depth`` 1 for a module of a subpackage (its ``from ..x`` imports reach the top level)."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom):
            if node.level == depth + 1 and node.module:
                found.add(node.module.split(".")[0])
            elif node.level == depth + 1:
                found.update(alias.name for alias in node.names)
            elif node.level == 0 and node.module and node.module.split(".")[0] == "dupbert":
                parts = node.module.split(".")
                found.update([parts[1]] if len(parts) > 1 else [a.name for a in node.names])
        elif isinstance(node, ast.Import):
            found.update(a.name.split(".")[1] for a in node.names
                         if a.name.startswith("dupbert.") and "." in a.name)
    return found


def units() -> dict[str, list[Path]]:
    """Each top-level module (its file) and subpackage (its files) of the package, by name."""
    found = {p.stem: [p] for p in package().glob("*.py") if p.stem != "__init__"}
    found.update({d.name: sorted(d.glob("*.py")) for d in package().iterdir()
                  if d.is_dir() and (d / "__init__.py").is_file()})
    return found


def graph() -> dict[str, set[str]]:
    modules = units()
    return {name: set().union(*(imports(p, depth=int(p.parent != package())) for p in paths))
            & set(modules) - {name} for name, paths in sorted(modules.items())}


def components(edges: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components (Tarjan), leaves first."""
    index, low, stack, on, out, counter = {}, {}, [], set(), [], [0]

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in edges[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on.discard(w)
                component.append(w)
                if w == v:
                    break
            out.append(sorted(component))

    sys.setrecursionlimit(10000)
    for v in edges:
        if v not in index:
            visit(v)
    return out


def levels(edges: dict[str, set[str]]) -> dict[str, int]:
    level: dict[str, int] = {}
    for component in components(edges):  # leaves first: every import is levelled already
        below = [level[w] for v in component for w in edges[v] if w not in component]
        for v in component:
            level[v] = 1 + max(below) if below else 0
    return level


def line_counts(path: Path) -> tuple[int, int]:
    """(code lines, docstring lines): non-blank, non-comment lines outside docstrings, and the
    lines of module, class and function docstrings."""
    source = path.read_text(encoding="utf-8")
    tree = ast.parse(source)
    doc_lines = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            body = node.body
            if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant) \
                    and isinstance(body[0].value.value, str):
                doc_lines.update(range(body[0].lineno, body[0].end_lineno + 1))
    code = sum(1 for n, line in enumerate(source.splitlines(), 1)
               if line.strip() and not line.strip().startswith("#") and n not in doc_lines)
    return code, len(doc_lines)


def body_lines(node: ast.FunctionDef | ast.AsyncFunctionDef) -> int:
    """A function's body in lines: from its first statement after the docstring to its end (the
    signature and the docstring not counted)."""
    first = node.body[0]
    docstring = (isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant)
                 and isinstance(first.value.value, str))
    start = node.body[1].lineno if docstring and len(node.body) > 1 else first.lineno
    return node.end_lineno - start + 1


def longest_function(path: Path) -> tuple[str, int]:
    """The function of ``path`` with the longest body (:func:`body_lines`)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    best = ("", 0)
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            size = body_lines(node)
            if size > best[1]:
                best = (node.name, size)
    return best


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--root", type=Path, help="a checkout to measure (default: this one)")
    args = parser.parse_args(argv)
    if args.root:
        PACKAGE[0] = args.root / "dupbert"
    edges = graph()
    cycles = [c for c in components(edges) if len(c) > 1]
    level = levels(edges)
    rows = []
    for name in sorted(edges, key=lambda n: (level[n], n)):
        paths = units()[name]
        code, docs = map(sum, zip(*(line_counts(p) for p in paths)))
        function, size = max((longest_function(p) for p in paths), key=lambda found: found[1])
        rows.append(dict(module=name, level=level[name], code_lines=code, docstring_lines=docs,
                         longest_function=f"{function} ({size})", imports=sorted(edges[name])))
    report = dict(modules=len(edges), levels=1 + max(level.values()), cycles=cycles, rows=rows,
                  code_lines=sum(r["code_lines"] for r in rows),
                  docstring_lines=sum(r["docstring_lines"] for r in rows))
    if args.json:
        print(json.dumps(report, indent=1))
    else:
        for r in rows:
            print(f"{r['level']:>2}  {r['module']:<14} {r['code_lines']:>5} code {r['docstring_lines']:>5} doc"
                  f"  longest {r['longest_function']:<36} -> {', '.join(r['imports'])}")
        print(f"{report['modules']} modules, {report['levels']} levels, {report['code_lines']} code "
              f"lines, {report['docstring_lines']} docstring lines; "
              f"{len(cycles)} cycle(s): {cycles}")
    return 1 if cycles else 0


if __name__ == "__main__":
    raise SystemExit(main())
