"""The package builds a wheel carrying its version, its data files, and a changelog entry."""

from __future__ import annotations

import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

import dpfed

ROOT = Path(__file__).parents[1]


def test_the_changelog_has_a_section_for_this_version():
    changelog = (ROOT / "CHANGELOG.md").read_text()
    assert f"\n## {dpfed.__version__}\n" in changelog


@pytest.mark.networked  # pip in a process of its own
def test_the_wheel_carries_the_version_and_the_data_files(tmp_path):
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            str(ROOT),
            "--no-deps",
            "--quiet",
            "--wheel-dir",
            str(tmp_path),
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    (wheel,) = tmp_path.glob("dpfed-*.whl")
    assert wheel.name.startswith(f"dpfed-{dpfed.__version__}-")
    with zipfile.ZipFile(wheel) as archive:
        names = set(archive.namelist())
        (metadata,) = [n for n in names if n.endswith(".dist-info/METADATA")]
        text = archive.read(metadata).decode()
    assert f"\nVersion: {dpfed.__version__}\n" in text
    assert "dpfed/runtime/monitor_page.html" in names
    assert "dpfed/experiments/templates/vertical.md" in names
    assert "Provides-Extra: ray" in text and "Provides-Extra: docs" in text
