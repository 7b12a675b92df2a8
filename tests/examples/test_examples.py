"""Every script of ``examples/`` runs as a user runs it and prints what it promises.

Each script is run as ``python examples/NAME.py`` in a fresh process, from an empty folder and
without ``DPFED_DATA`` (the examples need neither the shared data sets nor the network). A new
script is picked up automatically: it must exit with status 0 and print something; the key
line of the known ones is checked too. Each runs in its own process group, which is checked to
be empty afterwards (a networked example must stop every party it started) and then killed.
"""

from __future__ import annotations

import ast
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
SCRIPTS = sorted(EXAMPLES.glob("*.py"))

#: Arguments that keep a script within a few seconds (one job and a refusal, not two jobs).
ARGS: dict[str, list[str]] = {"budget_across_jobs.py": ["--budget", "1.2"]}
#: A line (or part of one) each known script must print.
KEY_LINES: dict[str, str] = {
    "estimator_on_your_csv.py": "privacy_spent_: epsilon = 1 at delta = 1e-05",
    "networked_job.py": "privacy (sound, pld): epsilon = 1 at delta = 1e-05",
    "budget_across_jobs.py": "job-2: refused before its first round",
    "secure_sum.py": "noise in the released sum",
    "own_tables_by_id.py": "new rows by ID: accuracy",
}
TIMEOUT = 120.0
#: Examples whose behaviour CI checks elsewhere, run with DPFED_REPRODUCE=1, and where.
REPRODUCE_ONLY = {
    "budget_across_jobs.py": "jobs composing in one budget: CI checks it in "
    "tests/runtime/test_networked_vertical.py"
}


def needs_net(script: Path) -> bool:
    """A networked example says in its docstring that it needs the ``net`` extra."""
    return "``net`` extra" in (ast.get_docstring(ast.parse(script.read_text())) or "")


def group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    return True


def test_the_examples_are_found():
    assert {p.name for p in SCRIPTS} >= set(KEY_LINES)


@pytest.mark.networked  # every example is a process of its own
@pytest.mark.parametrize("script", SCRIPTS, ids=[p.name for p in SCRIPTS])
def test_example_runs(script: Path, tmp_path: Path, machine_lock) -> None:
    if script.name in REPRODUCE_ONLY and not os.environ.get("DPFED_REPRODUCE"):
        pytest.skip(f"{REPRODUCE_ONLY[script.name]}; set DPFED_REPRODUCE=1")
    if needs_net(script):
        pytest.importorskip("grpc", reason="the networked examples need dpfed[net]")
        # they look for free ports from the same first one (18050): one at a time, or two
        # could both find a port free and then both bind it
        with machine_lock("example-ports"):
            _run_example(script, tmp_path)
    else:
        _run_example(script, tmp_path)


def _run_example(script: Path, tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if k != "DPFED_DATA"}
    started = time.perf_counter()
    proc = subprocess.Popen(
        [sys.executable, str(script), *ARGS.get(script.name, [])],
        cwd=tmp_path,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        out, err = proc.communicate(timeout=TIMEOUT)
    finally:
        time.sleep(0.2)  # a child being reaped by init
        leftover = group_alive(proc.pid)
        if leftover or proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    seconds = time.perf_counter() - started
    assert proc.returncode == 0, f"exit status {proc.returncode}\n{out}\n{err}"
    assert not leftover, f"{script.name} left processes running"
    assert out.strip(), f"{script.name} printed nothing"
    key = KEY_LINES.get(script.name)
    assert key is None or key in out, out
    print(f"{script.name}: {seconds:.1f} s")


@pytest.mark.parametrize("script", SCRIPTS, ids=[p.name for p in SCRIPTS])
def test_example_has_a_docstring_a_main_guard_and_public_imports_only(script: Path) -> None:
    text = script.read_text()
    tree = ast.parse(text)
    assert ast.get_docstring(tree), f"{script.name} needs a module docstring"
    assert 'if __name__ == "__main__":' in text
    private = [
        f"{node.module}.{alias.name}"
        for node in ast.walk(tree)
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("dpfed")
        for alias in node.names
        if alias.name.startswith("_") or any(p.startswith("_") for p in node.module.split("."))
    ]
    private += [
        alias.name
        for node in ast.walk(tree)
        if isinstance(node, ast.Import)
        for alias in node.names
        if alias.name.startswith("dpfed") and any(p.startswith("_") for p in alias.name.split("."))
    ]
    assert private == []
