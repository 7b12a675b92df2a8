"""Fixtures of the reproduction tests: the Adult folder and a quiet ``dpfed reproduce`` run."""

from __future__ import annotations

import contextlib
import io
import json
import os
from collections.abc import Callable
from pathlib import Path

import pytest

from dpfed._validation import DpfedInputError
from dpfed.cli import main


@pytest.fixture(scope="session")
def adult_dir() -> Path:
    """The folder holding ``adult/adult.data`` and ``adult/adult.test``; skips without it."""
    value = os.environ.get("DPFED_DATA", "")
    base = Path(value) if value else None
    if base is None or not all(
        (base / "adult" / f).is_file() for f in ("adult.data", "adult.test")
    ):
        pytest.skip(
            "UCI Adult not found under $DPFED_DATA (set DPFED_DATA to a folder holding "
            "adult/adult.data and adult/adult.test)"
        )
    return base


@pytest.fixture(scope="session")
def reproduce() -> Callable[..., dict]:
    """Runs ``dpfed reproduce COMMAND --out OUT --data-dir BASE --quick --quiet`` and returns
    the summary it prints (asserting exit status 0)."""

    def run(command: str, out: Path, base: Path) -> dict:
        buffer = io.StringIO()
        with contextlib.redirect_stdout(buffer):
            code = main(
                [
                    "reproduce",
                    command,
                    "--out",
                    str(out),
                    "--data-dir",
                    str(base),
                    "--quick",
                    "--quiet",
                ]
            )
        assert code == 0
        return json.loads(buffer.getvalue())

    return run


@pytest.fixture
def check_missing_data(tmp_path, monkeypatch) -> Callable[..., None]:
    """Checks that a reproduction refuses a missing data folder (no ``DPFED_DATA``, or an empty
    folder: the error names ``first_file``, a pattern) before creating its ``out_dir``, and
    that ``dpfed reproduce COMMAND`` exits with status 2."""

    def check(run: Callable[..., dict], command: str, first_file: str) -> None:
        out = tmp_path / "out"
        monkeypatch.delenv("DPFED_DATA", raising=False)
        with pytest.raises(DpfedInputError, match="DPFED_DATA"):
            run(out, quick=True)
        empty = tmp_path / "empty"
        empty.mkdir()
        with pytest.raises(DpfedInputError, match=first_file):
            run(out, data_dir=empty, quick=True)
        assert not out.exists()
        code = main(
            [
                "reproduce",
                command,
                "--out",
                str(out),
                "--data-dir",
                str(empty),
                "--quick",
                "--quiet",
            ]
        )
        assert code == 2

    return check


def _without_timings(value):
    """``value`` without its wall-clock entries (``seconds``, at every level) and the output
    folder (``out_dir``): what may differ between two runs of the same reproduction."""
    if isinstance(value, dict):
        return {k: _without_timings(v) for k, v in value.items() if k not in ("seconds", "out_dir")}
    if isinstance(value, list):
        return [_without_timings(v) for v in value]
    return value


@pytest.fixture
def without_timings() -> Callable[..., object]:
    """:func:`_without_timings`, to compare a reproduction run two ways."""
    return _without_timings
