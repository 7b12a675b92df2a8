"""The tutorials' commands, run as the site shows them.

Every line ``$ dpfed ...`` of a ``console`` block in ``docs/tutorials/*.md`` runs here, in a
fresh folder per tutorial, in the order of the page; each must exit with status 0. So a
tutorial cannot show a command that does not work. CI runs them with ``--iterations`` capped
at :data:`CI_ITERATIONS` (every option, data set and output as written, fewer rounds: the
decentralized page's 100 rounds on Adult alone took half a minute); ``DPFED_REPRODUCE=1``
runs them exactly as written.
"""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

DOCS = Path(__file__).parents[2] / "docs"
TUTORIALS = sorted((DOCS / "tutorials").glob("*.md"))
BLOCK = re.compile(r"```console\n(.*?)```", re.S)
#: Named data sets the tutorials read from DPFED_DATA (breast_cancer ships with scikit-learn).
NEEDS = {
    "a9a": "a9a/a9a",
    "adult": "adult/adult.data",
    "wine-red": "wine_quality/winequality-red.csv",
}


def commands(page: Path) -> list[str]:
    """The ``$ `` lines of the page's console blocks, in order."""
    return [
        line[2:].strip()
        for block in BLOCK.findall(page.read_text())
        for line in block.splitlines()
        if line.startswith("$ ")
    ]


#: The most rounds a tutorial's command runs in CI (unless DPFED_REPRODUCE is set).
CI_ITERATIONS = 10


def capped(argv: list[str]) -> list[str]:
    """``argv`` with its ``--iterations`` value at most :data:`CI_ITERATIONS`."""
    out = list(argv)
    for i, arg in enumerate(out[:-1]):
        if arg == "--iterations":
            out[i + 1] = str(min(int(out[i + 1]), CI_ITERATIONS))
    return out


#: Tutorials whose commands start several processes at once: an example script runs them,
#: and is run by tests/examples/test_examples.py.
RUN_BY_EXAMPLE = {"own-tables": "examples/own_tables_by_id.py"}


def test_every_tutorial_shows_commands():
    assert {p.stem for p in TUTORIALS} == {
        "vertical",
        "consensus",
        "decentralized",
        "secure-sum",
        "own-tables",
    }
    for page in TUTORIALS:
        if page.stem in RUN_BY_EXAMPLE:
            script = RUN_BY_EXAMPLE[page.stem]
            assert f"`{script}`" in page.read_text(), page.name
            assert (DOCS.parent / script).is_file()
        else:
            assert commands(page), page.name


@pytest.mark.networked  # every command is a process of its own
@pytest.mark.parametrize("page", TUTORIALS, ids=[p.stem for p in TUTORIALS])
def test_a_tutorials_commands_run_as_written(page, tmp_path):
    # resolved here: the commands run in tmp_path, and CI may give a path relative to the checkout
    data = Path(os.environ.get("DPFED_DATA") or DOCS.parent / ".." / "shared" / "data").resolve()
    if page.stem in RUN_BY_EXAMPLE:
        pytest.skip(f"run by {RUN_BY_EXAMPLE[page.stem]} (tests/examples)")
    lines = commands(page)
    for name, rel in NEEDS.items():
        if any(f"--data {name}" in c for c in lines) and not (data / rel).is_file():
            pytest.skip(f"needs {rel} under DPFED_DATA")
    env = os.environ | {"DPFED_DATA": str(data)}
    for line in lines:
        argv = shlex.split(line)
        assert argv[0] == "dpfed", line
        if not os.environ.get("DPFED_REPRODUCE"):
            argv = capped(argv)
        done = subprocess.run(
            [sys.executable, "-m", "dpfed.cli", *argv[1:]],
            cwd=tmp_path,
            env=env,
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert done.returncode == 0, f"{line}\n{done.stdout}\n{done.stderr}"


def test_ci_caps_only_the_rounds():
    argv = ["dpfed", "train", "decentralized", "--iterations", "100", "--seed", "0"]
    assert capped(argv) == ["dpfed", "train", "decentralized", "--iterations", "10", "--seed", "0"]
    assert capped(["dpfed", "privacy", "epsilon", "--steps", "20"])[-1] == "20"
