"""The library's layering: no import cycle, imports inside functions included, the folders as the
levels, and the import-linter layers contract of pyproject.toml kept."""

import importlib.util
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]


def _import_graph():
    spec = importlib.util.spec_from_file_location("import_graph", REPO / "scripts/import_graph.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_no_cycle_and_the_folders_are_the_levels():
    """The package's folders are its layers: core at the bottom, the entry point on top."""
    graph = _import_graph()
    edges = graph.graph()
    assert [c for c in graph.components(edges) if len(c) > 1] == []
    assert graph.levels(edges) == {"core": 0, "tools": 1, "training": 2, "study": 3, "book": 4,
                                   "cli": 5}


def test_the_graph_sees_an_import_inside_a_function(tmp_path):
    """The measure counts what the contract counts: a lazy import is an import."""
    package = tmp_path / "dupbert"
    package.mkdir()
    (package / "low.py").write_text("def f():\n    from .high import g\n    return g\n")
    (package / "high.py").write_text("from .low import f\n")
    graph = _import_graph()
    graph.PACKAGE[0] = package
    try:
        edges = graph.graph()
    finally:
        graph.PACKAGE[0] = REPO / "dupbert"
    assert edges == {"low": {"high"}, "high": {"low"}}
    assert [sorted(c) for c in graph.components(edges) if len(c) > 1] == [["high", "low"]]


def test_the_layers_contract_is_kept():
    lint = shutil.which("lint-imports", path=str(Path(sys.executable).parent))
    if lint is None:
        pytest.fail("lint-imports is not installed: pip install -e '.[test]'")
    done = subprocess.run([lint, "--config", str(REPO / "pyproject.toml")], cwd=REPO,
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout[-3000:]
    assert "1 kept, 0 broken" in done.stdout


def test_every_public_name_of_the_package_resolves():
    """dupbert's lazy names (``dupbert.<name>``) point at the module that defines them now."""
    import dupbert

    for name in dupbert.__all__:
        assert getattr(dupbert, name) is not None, name


def test_dir_lists_the_public_api_and_not_the_helpers():
    """``dir(dupbert)`` (tab completion) shows every public name, lazy ones included, and not the
    package's own imports."""
    import dupbert

    listed = dir(dupbert)
    assert set(dupbert.__all__) <= set(listed)
    assert {"load_mlm", "reconstruction_accuracy", "duplicate_layers", "lens", "lens_html",
            "sweep", "probe_models"} <= set(listed)
    assert "import_module" not in listed
    assert listed == sorted(listed)
    namespace = {}
    exec("from dupbert import *", namespace)
    assert set(dupbert.__all__) <= set(namespace)


def test_every_exported_name_stays_the_same_object_whatever_is_imported():
    """No submodule shadows a function of the same name in the package's namespace: each name of
    ``dupbert.__all__`` taken twice, and again after importing every submodule, is one object."""
    import importlib
    import pkgutil

    import dupbert

    first = {name: getattr(dupbert, name) for name in dupbert.__all__}
    again = {name: getattr(dupbert, name) for name in dupbert.__all__}
    for module in pkgutil.walk_packages(dupbert.__path__, "dupbert."):
        importlib.import_module(module.name)
    after = {name: getattr(dupbert, name) for name in dupbert.__all__}
    moved = [name for name in first if not (first[name] is again[name] is after[name])]
    assert not moved, f"names that changed under the caller: {moved}"
    assert callable(dupbert.finetune) and callable(dupbert.lens)
    assert dupbert.lens is importlib.import_module("dupbert.tools.lens").lens


def _function_bodies():
    """``(file, function, lines)`` of every function of the package, its body measured as
    ``scripts/import_graph.py`` measures it (signature and docstring not counted)."""
    import ast

    graph = _import_graph()
    for path in sorted((REPO / "dupbert").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                yield path.relative_to(REPO), node.name, graph.body_lines(node)


def test_modules_functions_and_the_readme_stay_small():
    """No module over 800 lines, no function body over 80 (docstring not counted), a README of at
    most 170 lines."""
    long_modules = {str(p.relative_to(REPO)): n for p in (REPO / "dupbert").rglob("*.py")
                    if (n := len(p.read_text(encoding="utf-8").splitlines())) > 800}
    assert not long_modules
    long_functions = [(str(f), name, n) for f, name, n in _function_bodies() if n > 80]
    assert not long_functions
    assert len((REPO / "README.md").read_text(encoding="utf-8").splitlines()) <= 170
    assert max(n for _, _, n in _function_bodies()) > 40  # the measure sees real bodies
