"""The package's shape: no import cycle, no module reaching into another's private names,
the layers of docs/design.md (checked by import-linter, configured in pyproject.toml), and
no class or function too big to read."""

from __future__ import annotations

import ast
import io
import shutil
import subprocess
import sys
import tokenize
from pathlib import Path

import networkx as nx
import pytest

import dpfed

SRC = Path(dpfed.__file__).parent


def _module(path: Path) -> str:
    parts = path.relative_to(SRC.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def test_no_import_cycle_function_level_imports_included():
    """No cycle among the imports that run (a function's included); a collaborator may name
    the facade it serves for the type checker only (``if TYPE_CHECKING:``), which never runs."""
    grimp = pytest.importorskip("grimp")
    graph = grimp.build_graph("dpfed", exclude_type_checking_imports=True)
    imports = nx.DiGraph()
    for module in graph.modules:
        for imported in graph.find_modules_directly_imported_by(module):
            imports.add_edge(module, imported)
    cycles = [sorted(c) for c in nx.strongly_connected_components(imports) if len(c) > 1]
    assert cycles == []


def test_no_module_imports_another_modules_private_names():
    found = []
    for path in sorted(SRC.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("dpfed"):
                found += [
                    f"{_module(path)} imports {node.module}.{alias.name}"
                    for alias in node.names
                    if alias.name.startswith("_") and not alias.name.startswith("__")
                ]
    assert found == []


@pytest.mark.networked
def test_the_layer_contract_holds():
    lint = shutil.which("lint-imports", path=str(Path(sys.executable).parent))
    if lint is None:
        pytest.skip("import-linter is not installed (pip install '.[test]')")
    root = Path(__file__).resolve().parents[1]  # the project, whose pyproject.toml holds it
    done = subprocess.run(
        [lint, "--config", str(root / "pyproject.toml")], cwd=root, capture_output=True, text=True
    )
    assert done.returncode == 0, done.stdout[-3000:]


def test_dp_accounting_is_imported_by_the_accountants_module_only():
    """Every privacy figure goes through the registry of dpfed.privacy.accountants: no other
    module imports dp-accounting, directly or lazily."""
    found = []
    for path in sorted(SRC.rglob("*.py")):
        if path == SRC / "privacy" / "accountants.py":
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            names = []
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                names = [node.module or ""]
            elif isinstance(node, ast.Constant) and isinstance(node.value, str):
                names = [node.value] if node.value.startswith("dp_accounting.") else []
            found += [
                f"{path.relative_to(SRC)}: {n}"
                for n in names
                if n == "dp_accounting" or n.startswith("dp_accounting.")
            ]
    assert found == []


def _code_lines(lines: list[str], node: ast.AST) -> int:
    """Lines of ``node`` that hold code: docstrings, comments and blank lines left out."""
    docs: set[int] = set()
    for n in ast.walk(node):
        if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef) and n.body:
            first = n.body[0]
            if (
                isinstance(first, ast.Expr)
                and isinstance(first.value, ast.Constant)
                and isinstance(first.value.value, str)
            ):
                docs.update(range(first.lineno, first.end_lineno + 1))
    text = "\n".join(lines[node.lineno - 1 : node.end_lineno]) + "\n"
    skip = {tokenize.COMMENT, tokenize.NL, tokenize.NEWLINE, tokenize.INDENT, tokenize.DEDENT}
    code: set[int] = set()
    for tok in tokenize.generate_tokens(io.StringIO(text).readline):
        if tok.type not in skip and tok.type != tokenize.ENDMARKER:
            code.update(range(tok.start[0] + node.lineno - 1, tok.end[0] + node.lineno))
    return len(code - docs)


def test_no_class_over_400_lines_of_code_and_no_function_over_100():
    """Rooms of a readable size: a facade with named collaborators where one grew."""
    found = []
    for path in sorted(SRC.rglob("*.py")):
        text = path.read_text()
        lines = text.splitlines()
        for node in ast.walk(ast.parse(text)):
            limit = 400 if isinstance(node, ast.ClassDef) else 100
            if isinstance(node, ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
                size = _code_lines(lines, node)
                if size > limit:
                    found.append(f"{path.relative_to(SRC)}: {node.name} {size} > {limit}")
    assert found == []
