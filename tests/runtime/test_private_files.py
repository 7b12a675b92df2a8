"""Work folders, journals, snapshots, ledgers and secrets are readable by their owner only."""

from __future__ import annotations

import os
import stat

import numpy as np
import pytest

from dpfed.runtime.budget import BudgetLedger
from dpfed.runtime.checkpoint import save_checkpoint
from dpfed.runtime.journal import Journal
from dpfed.runtime.private_files import load_or_create_secret, private_file, private_folder


def _mode(path) -> int:
    return stat.S_IMODE(os.stat(path).st_mode)


@pytest.fixture(autouse=True)
def _permissive_umask():
    """The tests run under a umask that would make files world-readable."""
    old = os.umask(0o022)
    yield
    os.umask(old)


def test_folders_are_0700_and_existing_parents_keep_their_mode(tmp_path):
    (tmp_path / "shared").mkdir(mode=0o755)
    folder = private_folder(tmp_path / "shared" / "work" / "bank")
    assert _mode(folder) == 0o700 and _mode(folder.parent) == 0o700
    assert _mode(tmp_path / "shared") == 0o755
    loose = tmp_path / "loose"
    loose.mkdir(mode=0o755)
    private_folder(loose)
    assert _mode(loose) == 0o700
    kept = tmp_path / "kept"
    kept.mkdir(mode=0o755)
    private_folder(kept, narrow_existing=False)
    assert _mode(kept) == 0o755


def test_files_are_0600_and_existing_files_are_narrowed(tmp_path):
    assert _mode(private_file(tmp_path / "new")) == 0o600
    old = tmp_path / "old"
    old.write_text("x")
    os.chmod(old, 0o644)
    private_file(old)
    assert _mode(old) == 0o600 and old.read_text() == "x"


def test_a_secret_is_created_once_owner_only_and_read_back(tmp_path):
    made = []

    def make() -> bytes:
        made.append(1)
        return b"s" * 32

    first = load_or_create_secret(tmp_path / "job", "noise.key", make)
    again = load_or_create_secret(tmp_path / "job", "noise.key", make)
    assert first == again == b"s" * 32 and len(made) == 1
    assert _mode(tmp_path / "job" / "noise.key") == 0o600
    assert _mode(tmp_path / "job") == 0o700
    assert not [p for p in (tmp_path / "job").iterdir() if p.name.startswith(".")]


def test_journal_checkpoint_and_ledger_are_owner_only(tmp_path):
    journal = Journal(tmp_path / "work" / "job" / "journal.bin")
    journal.append(b"M", 1, b"payload")
    journal.close()
    assert _mode(tmp_path / "work" / "job" / "journal.bin") == 0o600
    assert _mode(tmp_path / "work" / "job") == 0o700
    save_checkpoint(tmp_path / "checkpoint" / "job" / "leader.npz", {"a": np.zeros(2)}, {})
    assert _mode(tmp_path / "checkpoint" / "job" / "leader.npz") == 0o600
    assert _mode(tmp_path / "checkpoint" / "job") == 0o700
    with BudgetLedger(tmp_path / "ledgers" / "bank.sqlite") as ledger:
        ledger.set_budget("d", "bank", 1.0, 1e-5)
    assert _mode(tmp_path / "ledgers" / "bank.sqlite") == 0o600
    for extra in (tmp_path / "ledgers").iterdir():
        assert _mode(extra) == 0o600, extra.name
