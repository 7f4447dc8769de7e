"""The layout of benchmarks/ (issue 47, "benchmarks as a product").

Statically, with ``ast``: the import graph of the benchmark modules (``benchmarks/*.py``; an
import inside a function counts as much as one at the top of a module, ``if TYPE_CHECKING:``
blocks are left out, and only imports of other benchmark modules are edges) has no cycle; no
benchmark file is longer than :data:`MAX_LINES`; and every name another file takes from
``bench_quality`` (which was the whole quality benchmark before it was split into
``quality_tasks``, ``quality_fits``, ``quality_store`` and ``quality_report``) is still there.
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
BENCHMARKS = ROOT / "benchmarks"
MAX_LINES = 600
#: Files still over :data:`MAX_LINES`, being shrunk by other changes. Only these may be longer;
#: take a file out of here once it fits (nothing else may join it).
PENDING: set[str] = set()


def benchmark_modules() -> dict[str, Path]:
    """Every module of benchmarks/ by the name the scripts import it as (benchmarks/ is on
    ``sys.path``, so ``bench_quality.py`` is ``import bench_quality``)."""
    return {path.stem: path for path in sorted(BENCHMARKS.glob("*.py"))}


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _runtime_nodes(tree: ast.AST) -> list[ast.AST]:
    """The nodes of ``tree`` outside ``if TYPE_CHECKING:`` bodies (at any depth: inside
    functions, classes, ``try`` and other ``if`` blocks too)."""
    found: list[ast.AST] = []
    todo = [tree]
    while todo:
        node = todo.pop()
        found.append(node)
        if isinstance(node, ast.If) and _is_type_checking(node.test):
            todo.extend(node.orelse)
            continue
        todo.extend(ast.iter_child_nodes(node))
    return found


def imports_of(path: Path, modules: dict[str, Path]) -> set[str]:
    """The benchmark modules that the file at ``path`` imports at run time, anywhere in it."""
    found: set[str] = set()
    for node in _runtime_nodes(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            names = [alias.name.split(".")[0] for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and not node.level and node.module:
            names = [node.module.split(".")[0]]
        else:
            continue
        found.update(name for name in names if name in modules)
    found.discard(path.stem)
    return found


def import_graph() -> dict[str, set[str]]:
    modules = benchmark_modules()
    return {name: imports_of(path, modules) for name, path in modules.items()}


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One cycle of ``graph`` as the list of its modules (the first repeated at the end), or
    None."""
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    path: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        path.append(node)
        for nxt in sorted(graph.get(node, ())):
            if state.get(nxt) == 1:
                return [*path[path.index(nxt) :], nxt]
            if nxt not in state:
                cycle = visit(nxt)
                if cycle:
                    return cycle
        path.pop()
        state[node] = 2
        return None

    for node in sorted(graph):
        if node not in state:
            cycle = visit(node)
            if cycle:
                return cycle
    return None


def test_the_cycle_finder_sees_a_function_level_import(tmp_path: Path) -> None:
    (tmp_path / "a.py").write_text("import b\n")
    (tmp_path / "b.py").write_text("def f():\n    from c import g\n")
    (tmp_path / "c.py").write_text(
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    import a\n"
        "def g():\n    import a.sub\n"
    )
    modules = {p.stem: p for p in tmp_path.glob("*.py")}
    graph = {name: imports_of(path, modules) for name, path in modules.items()}
    assert graph == {"a": {"b"}, "b": {"c"}, "c": {"a"}}
    assert find_cycle(graph) == ["a", "b", "c", "a"]
    (tmp_path / "c.py").write_text("import typing\nif typing.TYPE_CHECKING:\n    import a\n")
    graph = {name: imports_of(path, modules) for name, path in modules.items()}
    assert find_cycle(graph) is None


def test_no_import_cycle_among_the_benchmarks() -> None:
    graph = import_graph()
    assert {"bench_quality", "bench_paired", "quality_best"} <= graph.keys()
    assert "quality_best" in graph["bench_quality"]  # the graph sees these edges at all
    cycle = find_cycle(graph)
    assert cycle is None, "import cycle: " + " -> ".join(cycle or [])


def test_no_benchmark_file_is_over_600_lines() -> None:
    lengths = {
        path.name: len(path.read_text().splitlines()) for path in benchmark_modules().values()
    }
    too_long = {name: n for name, n in lengths.items() if n > MAX_LINES and name not in PENDING}
    assert not too_long, f"over {MAX_LINES} lines: {too_long}"


def _bench_quality_names(path: Path) -> set[str]:
    """The names the file at ``path`` takes from ``bench_quality``: ``from bench_quality import
    x``, and ``bq.x`` where ``bq`` is bound by ``import bench_quality as bq`` or
    ``bq = pytest.importorskip("bench_quality")``."""
    tree = ast.parse(path.read_text(), str(path))
    names: set[str] = set()
    aliases: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module == "bench_quality" and not node.level:
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.Import):
            aliases.update(
                alias.asname or alias.name for alias in node.names if alias.name == "bench_quality"
            )
        elif (
            isinstance(node, ast.Assign)
            and isinstance(node.value, ast.Call)
            and isinstance(node.value.func, ast.Attribute)
            and node.value.func.attr == "importorskip"
            and node.value.args
            and isinstance(node.value.args[0], ast.Constant)
            and node.value.args[0].value == "bench_quality"
        ):
            aliases.update(t.id for t in node.targets if isinstance(t, ast.Name))
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.Attribute)
            and isinstance(node.value, ast.Name)
            and node.value.id in aliases
        ):
            names.add(node.attr)
    return names


def test_bench_quality_keeps_the_names_the_others_take_from_it() -> None:
    pytest.importorskip("pandas")
    files = [p for p in BENCHMARKS.glob("*.py") if p.name != "bench_quality.py"]
    files += sorted((ROOT / "tests").glob("test_*.py"))
    wanted = {name: p.name for p in files for name in _bench_quality_names(p)}
    assert {"TASK_BY_NAME", "load_split", "resolved_tabsparse_params"} <= wanted.keys()
    sys.path.insert(0, str(BENCHMARKS))  # as the other benchmark tests do
    import bench_quality

    missing = {name: f for name, f in wanted.items() if not hasattr(bench_quality, name)}
    assert not missing, f"no longer in bench_quality: {missing}"
