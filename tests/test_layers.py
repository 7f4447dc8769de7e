"""The package's dependencies run one way: core -> serving -> estimators -> CLI / plotting.

Two checks. At run time, in a fresh interpreter, importing a core module leaves scikit-learn,
the estimators, the model files and export out of ``sys.modules``. Statically, an import graph
built with ``ast`` over every module (imports inside functions included, ``from x import y`` of
a submodule counted as importing that submodule, ``if TYPE_CHECKING:`` blocks left out) has no
cycle and no edge against the layer order of ``docs/design.md``.
"""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

import tabsparse

PACKAGE_DIR = Path(tabsparse.__file__).resolve().parent

#: The layers in order: a module may import from its own layer and the layers before it.
LAYERS = ("core", "serving", "estimators", "top")
#: The first component after ``tabsparse.`` of the modules of each layer (a prefix match, so
#: ``io`` covers ``tabsparse.io``, the package ``tabsparse.io.*`` and ``tabsparse.io_format``).
LAYER_PREFIXES = {
    "core": (
        "averaging",
        "compiling",
        "data",
        "distributed",
        "explain",
        "importance",
        "losses",
        "nn",
        "optim",
        "pretraining",
        "progress",
        "sparsemax",
        "streaming",
        "training",
    ),
    "serving": ("io", "export"),
    "estimators": ("estimators", "_compat"),
    "top": ("cli", "plotting", "__main__"),
}
#: scikit-learn counts as a module of the serving layer: the core must not import it.
EXTERNAL = {"sklearn": "serving"}


def layer_of(module: str) -> str | None:
    """The layer of a module of the package (None for a module no layer claims)."""
    if module in EXTERNAL:
        return EXTERNAL[module]
    if module == "tabsparse":
        return "root"  # imports nothing at run time (lazy): anyone may import it
    first = module.split(".")[1]
    for layer, prefixes in LAYER_PREFIXES.items():
        if any(first.startswith(prefix) for prefix in prefixes):
            return layer
    return None


def rank(layer: str) -> int:
    return -1 if layer == "root" else LAYERS.index(layer)


# --------------------------------------------------------------------------------------------
# The static import graph
# --------------------------------------------------------------------------------------------


def module_names(package_dir: Path) -> dict[str, Path]:
    """Every module of the package at ``package_dir`` by dotted name."""
    names = {}
    for path in sorted(package_dir.rglob("*.py")):
        parts = path.relative_to(package_dir.parent).with_suffix("").parts
        if parts[-1] == "__init__":
            parts = parts[:-1]
        names[".".join(parts)] = path
    return names


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _runtime_nodes(tree: ast.AST) -> list[ast.AST]:
    """The nodes of ``tree`` outside ``if TYPE_CHECKING:`` bodies."""
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


def imports_of(
    module: str, path: Path, modules: dict[str, Path], exports: dict[str, str]
) -> set[str]:
    """The modules of the package (and external modules of :data:`EXTERNAL`) that ``module``
    imports at run time, at any depth of its code.

    ``exports`` maps the names the top-level package re-exports lazily to their modules, so that
    ``from tabsparse import TabNetClassifier`` counts as importing the estimators.
    """
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]

    def resolve(name: str) -> str | None:
        """The longest prefix of ``name`` that is a module of the package, or external."""
        top = name.split(".")[0]
        if top in EXTERNAL:
            return top
        parts = name.split(".")
        for end in range(len(parts), 0, -1):
            candidate = ".".join(parts[:end])
            if candidate in modules:
                return candidate
        return None

    found: set[str | None] = set()
    for node in _runtime_nodes(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found.update(resolve(alias.name) for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")
                anchor = anchor[: len(anchor) - node.level + 1]
                base = ".".join([*anchor, base] if base else anchor)
            for alias in node.names:
                if f"{base}.{alias.name}" in modules:  # a submodule
                    found.add(f"{base}.{alias.name}")
                elif base == "tabsparse" and alias.name in exports:  # a lazy re-export
                    found.add(resolve(exports[alias.name]))
                else:
                    found.add(resolve(base))
        elif (  # importlib.import_module("tabsparse.x") with a literal name
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute | ast.Name)
            and getattr(node.func, "attr", getattr(node.func, "id", None)) == "import_module"
            and node.args
            and isinstance(node.args[0], ast.Constant)
            and isinstance(node.args[0].value, str)
        ):
            found.add(resolve(node.args[0].value))
    found.discard(None)
    found.discard(module)
    return {name for name in found if name is not None}


def import_graph(package_dir: Path, exports: dict[str, str]) -> dict[str, set[str]]:
    modules = module_names(package_dir)
    return {name: imports_of(name, path, modules, exports) for name, path in modules.items()}


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components with more than one module (Tarjan), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for succ in sorted(graph.get(node, ())):
            if succ not in graph:
                continue
            if succ not in index:
                visit(succ)
                low[node] = min(low[node], low[succ])
            elif succ in on_stack:
                low[node] = min(low[node], index[succ])
        if low[node] == index[node]:
            component = []
            while True:
                top = stack.pop()
                on_stack.discard(top)
                component.append(top)
                if top == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def layer_problems(graph: dict[str, set[str]]) -> list[str]:
    """Edges against the layer order, and modules no layer claims, one line each."""
    problems = []
    for module in sorted(graph):
        own = layer_of(module)
        if own is None:
            problems.append(f"{module}: in no layer (add it to LAYER_PREFIXES)")
            continue
        for target in sorted(graph[module]):
            theirs = layer_of(target)
            if theirs is not None and rank(theirs) > rank(own):
                problems.append(f"{module} ({own}) -> {target} ({theirs})")
    return problems


def cycle_problems(graph: dict[str, set[str]]) -> list[str]:
    """Each cycle as its modules and the edges inside it."""
    lines = []
    for component in cycles(graph):
        members = set(component)
        edges = [f"{a} -> {b}" for a in component for b in sorted(graph[a] & members)]
        lines.append(f"cycle among {', '.join(component)}: {'; '.join(edges)}")
    return lines


# --------------------------------------------------------------------------------------------
# The checker catches what it should (a small package written for the test)
# --------------------------------------------------------------------------------------------


def write_package(root: Path, files: dict[str, str]) -> Path:
    for name, text in files.items():
        path = root / "tabsparse" / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return root / "tabsparse"


def test_the_checker_finds_violations_and_cycles(tmp_path: Path) -> None:
    package = write_package(
        tmp_path,
        {
            "__init__.py": "from typing import TYPE_CHECKING\n"
            "if TYPE_CHECKING:\n    from tabsparse.estimators import Model\n",
            "sparsemax.py": "def f():\n    from tabsparse.estimators import Model\n",
            "losses.py": "from . import sparsemax\nimport sklearn.utils\n",
            "nn/__init__.py": "from tabsparse.nn import encoder\n",
            "nn/encoder.py": "from tabsparse.nn import Thing\nfrom tabsparse import Model\n",
            "io.py": "import importlib\nimportlib.import_module('tabsparse.estimators')\n",
            "estimators/__init__.py": "from tabsparse.io import load\n",
            "cli.py": "from tabsparse.estimators import Model\nfrom tabsparse.nn import encoder\n",
            "extra.py": "",
        },
    )
    graph = import_graph(package, exports={"Model": "tabsparse.estimators"})
    assert graph["tabsparse"] == set()  # the TYPE_CHECKING import is not a run-time one
    assert graph["tabsparse.losses"] == {"tabsparse.sparsemax", "sklearn"}
    assert graph["tabsparse.nn.encoder"] == {"tabsparse.nn", "tabsparse.estimators"}
    assert layer_problems(graph) == [
        "tabsparse.extra: in no layer (add it to LAYER_PREFIXES)",
        "tabsparse.io (serving) -> tabsparse.estimators (estimators)",
        "tabsparse.losses (core) -> sklearn (serving)",
        "tabsparse.nn.encoder (core) -> tabsparse.estimators (estimators)",
        "tabsparse.sparsemax (core) -> tabsparse.estimators (estimators)",
    ]
    assert cycle_problems(graph) == [
        "cycle among tabsparse.estimators, tabsparse.io: "
        "tabsparse.estimators -> tabsparse.io; tabsparse.io -> tabsparse.estimators",
        "cycle among tabsparse.nn, tabsparse.nn.encoder: "
        "tabsparse.nn -> tabsparse.nn.encoder; tabsparse.nn.encoder -> tabsparse.nn",
    ]


# --------------------------------------------------------------------------------------------
# The package itself
# --------------------------------------------------------------------------------------------


def test_import_graph_has_no_cycle_and_runs_one_way() -> None:
    graph = import_graph(PACKAGE_DIR, tabsparse._EXPORTS)
    problems = cycle_problems(graph) + layer_problems(graph)
    assert not problems, "\n" + "\n".join(problems)


FORBIDDEN_IN_CORE = ("sklearn", "tabsparse.estimators", "tabsparse.io", "tabsparse.export")


@pytest.mark.parametrize(
    "module",
    [
        "tabsparse.sparsemax",
        "tabsparse.nn",
        "tabsparse.training",
        "tabsparse.data",
        "tabsparse.losses",
    ],
)
def test_core_modules_import_no_sklearn_estimators_or_serving(module: str) -> None:
    forbidden = FORBIDDEN_IN_CORE if module == "tabsparse.data" else (*FORBIDDEN_IN_CORE, "pandas")
    code = (
        f"import sys, {module}\n"
        f"prefixes = {forbidden!r}\n"
        "print(sorted({p for m in sys.modules for p in prefixes\n"
        "              if m == p or m.startswith(p + '.') or m.startswith(p + '_')}))\n"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=300, check=False
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "[]", f"importing {module} imports {proc.stdout.strip()}"


def test_import_tabsparse_imports_no_torch_or_sklearn() -> None:
    code = (
        "import sys, tabsparse\nprint(sorted(m for m in ('torch', 'sklearn') if m in sys.modules))"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=300, check=False
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "[]"


def test_lazy_package_names() -> None:
    # fresh interpreter: the submodule tabsparse.sparsemax imported first must not shadow the
    # function of the same name, and every public name resolves to its defining module's object
    code = (
        "import tabsparse.sparsemax\n"
        "import importlib, tabsparse\n"
        "from tabsparse import sparsemax\n"
        "assert sparsemax is importlib.import_module('tabsparse.sparsemax').sparsemax\n"
        "assert tabsparse.sparsemax is sparsemax\n"
        "for name in tabsparse.__all__:\n"
        "    assert getattr(tabsparse, name) is not None, name\n"
        "assert tabsparse.TabNetClassifier is tabsparse.estimators.TabNetClassifier\n"
        "assert dir(tabsparse) == sorted(tabsparse.__all__)\n"
        "try:\n"
        "    tabsparse.nope\n"
        "except AttributeError as exc:\n"
        "    print(exc)\n"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=300, check=False
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "module 'tabsparse' has no attribute 'nope'"
