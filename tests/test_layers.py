"""The library's layering: no import cycle, imports inside functions included, at most
7 levels, and the import-linter layers contract of pyproject.toml kept."""

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


def test_no_cycle_and_at_most_seven_levels():
    graph = _import_graph()
    edges = graph.graph()
    assert [c for c in graph.components(edges) if len(c) > 1] == []
    levels = graph.levels(edges)
    assert max(levels.values()) + 1 <= 7
    assert levels["cli"] == max(levels.values())  # the entry point is the top
    assert {m for m, level in levels.items() if level == 0} >= {"errors", "metrics"}


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
    for module in pkgutil.iter_modules(dupbert.__path__):
        importlib.import_module(f"dupbert.{module.name}")
    after = {name: getattr(dupbert, name) for name in dupbert.__all__}
    moved = [name for name in first if not (first[name] is again[name] is after[name])]
    assert not moved, f"names that changed under the caller: {moved}"
    assert callable(dupbert.finetune) and callable(dupbert.lens)
