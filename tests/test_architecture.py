"""The package's shape: no import cycle, no module reaching into another's private names, and
the layers of docs/design.md (checked by import-linter, configured in pyproject.toml)."""

from __future__ import annotations

import ast
import shutil
import subprocess
import sys
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
