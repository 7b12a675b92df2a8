"""The persistent per-(data set, party) privacy-budget ledger."""

from __future__ import annotations

import math
import multiprocessing as mp
import os
import sqlite3
import sys
import tempfile
import time
from collections import Counter
from datetime import datetime, timedelta
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dpfed._validation import DpfedInputError
from dpfed.privacy.accounting import Release, gaussian_releases_epsilon, releases_epsilon
from dpfed.privacy.ledger import PrivacyEvent
from dpfed.runtime.budget import (
    SCHEMA_VERSION,
    BudgetExceeded,
    BudgetLedger,
    LedgerConflict,
    Reservation,
    format_summary,
)

DELTA = 1e-5


def eps_rdp(zs):
    return gaussian_releases_epsilon(list(zs), DELTA, "rdp")


def event(round_, z, *, party="alice", label="model", c=1.0):
    return PrivacyEvent(party, round_, "gaussian", z, c, z * c, label)


@pytest.fixture
def ledger(tmp_path):
    with BudgetLedger(tmp_path / "budget.db", accountant="rdp") as led:
        yield led


# ------------------------------------------------------------------------------------------------
# accounting
# ------------------------------------------------------------------------------------------------


def test_accounting_equals_gaussian_releases_epsilon_with_the_default_pld(tmp_path):
    with BudgetLedger(tmp_path / "b.db") as led:
        assert led.accountant == "pld"
        led.set_budget("a9a", "alice", 20.0, DELTA)
        led.open_job("j1", "a9a", "alice", [1.5, 2.0, 2.0])
        led.record("j1", [event(0, 1.5), event(1, 2.0)])
        assert led.spent_epsilon("a9a", "alice") == gaussian_releases_epsilon([1.5, 2.0], DELTA)
        assert led.committed_epsilon("a9a", "alice") == gaussian_releases_epsilon(
            [1.5, 2.0, 2.0], DELTA
        )
        led.close_job("j1", "alice")
        assert led.committed_epsilon("a9a", "alice") == led.spent_epsilon("a9a", "alice")


def test_releases_of_all_jobs_compose_and_parties_and_datasets_are_separate(ledger):
    ledger.set_budget("a9a", "alice", 50.0, DELTA)
    ledger.set_budget("a9a", "bob", 50.0, DELTA)
    ledger.set_budget("w8a", "alice", 50.0, DELTA)
    ledger.open_job("j1", "a9a", "alice", [1.0, 3.0])
    ledger.record("j1", [event(0, 1.0), event(1, 3.0)])
    ledger.close_job("j1", "alice")
    ledger.open_job("j2", "a9a", "alice", [2.0])
    ledger.record("j2", [event(0, 2.0)])
    ledger.open_job("j2", "a9a", "bob", [5.0])
    ledger.record("j2", [event(0, 5.0, party="bob")])
    ledger.open_job("j3", "w8a", "alice", [0.5])
    assert ledger.spent_epsilon("a9a", "alice") == eps_rdp([1.0, 3.0, 2.0])
    assert ledger.spent_epsilon("a9a", "bob") == eps_rdp([5.0])
    assert ledger.spent_epsilon("w8a", "alice") == 0.0
    assert ledger.committed_epsilon("w8a", "alice") == eps_rdp([0.5])


def test_spent_needs_a_budget(ledger):
    with pytest.raises(DpfedInputError, match="no privacy budget is set for dataset 'x'"):
        ledger.spent_epsilon("x", "alice")
    assert ledger.budget("x", "alice") is None


# ------------------------------------------------------------------------------------------------
# opening jobs
# ------------------------------------------------------------------------------------------------


def test_a_plan_over_budget_is_refused_and_nothing_is_written(tmp_path):
    path = tmp_path / "b.db"
    with BudgetLedger(path, accountant="rdp") as led:
        led.set_budget("a9a", "alice", 2.0, DELTA)
        with pytest.raises(BudgetExceeded) as info:
            led.open_job("big", "a9a", "alice", [1.0] * 10)
        msg = str(info.value)
        for part in ("'a9a'", "'alice'", "'big'", f"{eps_rdp([1.0] * 10):.6g}", "budget epsilon 2"):
            assert part in msg
        assert "spent 0" in msg
        assert led.jobs() == []
    with BudgetLedger(path) as led:
        assert led.jobs() == []
        assert led.committed_epsilon("a9a", "alice") == 0.0


def test_a_refusal_names_what_is_already_spent_and_reserved(ledger):
    ledger.set_budget("d", "p", eps_rdp([2.0] * 5) * 1.01, DELTA)
    ledger.open_job("a", "d", "p", [2.0] * 3)
    ledger.record("a", [event(0, 2.0, party="p")])
    with pytest.raises(BudgetExceeded) as info:
        ledger.open_job("b", "d", "p", [2.0] * 3)
    spent, committed = eps_rdp([2.0]), eps_rdp([2.0] * 3)
    msg = str(info.value)
    assert f"spent {spent:.6g}" in msg
    assert f"reserved {committed - spent:.6g}" in msg
    assert f"to {eps_rdp([2.0] * 6):.6g}" in msg


def test_a_job_needs_a_budget(ledger):
    with pytest.raises(BudgetExceeded, match="no privacy budget is set"):
        ledger.open_job("j", "a9a", "alice", [1.0])
    assert ledger.jobs() == []


def test_a_plan_that_exactly_fits_is_accepted(ledger):
    ledger.set_budget("d", "p", eps_rdp([2.0, 2.0]), DELTA)
    res = ledger.open_job("j", "d", "p", [2.0, 2.0])
    assert isinstance(res, Reservation)
    assert res.committed_epsilon == res.budget_epsilon
    with pytest.raises(BudgetExceeded):
        ledger.open_job("k", "d", "p", [100.0])


def test_resumed_open_returns_the_reservation_and_a_different_plan_is_refused(ledger):
    ledger.set_budget("d", "p", eps_rdp([2.0] * 3) * 1.01, DELTA)
    first = ledger.open_job("j", "d", "p", [2.0, 3.0, 2.0])
    assert not first.resumed and first.recorded == 0
    ledger.record("j", [event(0, 3.0, party="p")])
    again = ledger.open_job("j", "d", "p", [2.0, 2.0, 3.0])  # order does not matter
    assert again.resumed and again.recorded == 1
    assert again.plan == tuple(Release("gaussian", z) for z in (2.0, 3.0, 2.0))
    assert again.committed_epsilon == first.committed_epsilon
    assert ledger.committed_epsilon("d", "p") == eps_rdp([2.0, 3.0, 2.0])
    assert len(ledger.jobs()) == 1
    with pytest.raises(LedgerConflict, match="differs"):
        ledger.open_job("j", "d", "p", [2.0, 2.0])
    ledger.set_budget("e", "p", 10.0, DELTA)
    with pytest.raises(LedgerConflict, match=r"open on dataset 'd'\. Found dataset 'e'"):
        ledger.open_job("j", "e", "p", [2.0, 2.0, 3.0])
    ledger.close_job("j", "p")
    with pytest.raises(DpfedInputError, match="closed"):
        ledger.open_job("j", "d", "p", [2.0, 3.0, 2.0])


def test_the_same_job_id_is_separate_per_party(ledger):
    ledger.set_budget("d", "alice", 10.0, DELTA)
    ledger.set_budget("d", "bob", 10.0, DELTA)
    ledger.open_job("j", "d", "alice", [2.0])
    ledger.open_job("j", "d", "bob", [4.0])
    with pytest.raises(BudgetExceeded, match="not in the job's remaining plan"):
        ledger.record("j", [event(0, 2.0, party="bob")])
    assert ledger.record("j", [event(0, 4.0, party="bob")]) == 1
    with pytest.raises(DpfedInputError, match=r"exists for parties \['alice', 'bob'\]"):
        ledger.record("j", [event(0, 4.0, party="carol")])


def test_an_empty_plan_is_allowed_while_the_budget_is_not_exceeded(ledger):
    ledger.set_budget("d", "p", 1.0, DELTA)
    res = ledger.open_job("j", "d", "p", [])
    assert res.plan == () and res.committed_epsilon == 0.0
    assert ledger.record("j", []) == 0


# ------------------------------------------------------------------------------------------------
# recording
# ------------------------------------------------------------------------------------------------


def test_open_record_close_flow(ledger):
    ledger.set_budget("a9a", "alice", 30.0, DELTA)
    ledger.open_job("j1", "a9a", "alice", [2.0, 2.0, 4.0])
    before = datetime.now().astimezone() - timedelta(seconds=5)
    assert (
        ledger.record("j1", [event(1, 2.0, c=0.5), event(1, 4.0, label="scores")], digest="d1") == 2
    )
    assert ledger.record("j1", [event(2, 2.0)]) == 1
    (job,) = ledger.jobs()
    assert job["id"] == "j1" and job["status"] == "open"
    assert job["planned"] == 3 and job["recorded"] == 3 and job["closed_at"] is None
    rows = ledger.releases(job_id="j1")
    assert [(r["round"], r["label"]) for r in rows] == [(1, "model"), (1, "scores"), (2, "model")]
    first = rows[0]
    assert first == {
        "job": "j1",
        "dataset": "a9a",
        "party": "alice",
        "round": 1,
        "label": "model",
        "noise_multiplier": 2.0,
        "sigma": 1.0,
        "l2_sensitivity": 0.5,
        "mechanism": "gaussian",
        "digest": "d1",
        "recorded_at": first["recorded_at"],
    }
    assert rows[2]["digest"] is None
    stamp = datetime.fromisoformat(first["recorded_at"])
    assert stamp.utcoffset() == timedelta(0) and stamp >= before
    closed = ledger.close_job("j1", "alice")
    assert closed["status"] == "closed" and closed["closed_at"] is not None
    assert ledger.close_job("j1", "alice") == closed  # idempotent
    assert ledger.releases(dataset="a9a", party="alice") == rows
    assert ledger.releases(dataset="other") == []
    with pytest.raises(BudgetExceeded, match="closed"):
        ledger.record("j1", [event(3, 4.0)])
    assert len(ledger.releases()) == 3


def test_replaying_a_release_is_a_no_op(ledger):
    ledger.set_budget("d", "alice", 30.0, DELTA)
    ledger.open_job("j", "d", "alice", [2.0, 2.0, 2.0])
    batch = [event(0, 2.0), event(0, 2.0, label="scores")]
    assert ledger.record("j", batch, digest="abc") == 2
    assert ledger.record("j", batch, digest="abc") == 0
    assert ledger.record("j", batch) == 0  # no digest given: not compared
    assert ledger.record("j", [event(0, 2.0), event(0, 2.0)]) == 0  # a duplicate within a call
    assert ledger.record("j", [*batch, event(1, 2.0)]) == 1
    assert len(ledger.releases()) == 3
    assert ledger.spent_epsilon("d", "alice") == eps_rdp([2.0] * 3)


def test_a_conflicting_record_is_refused_and_the_call_writes_nothing(ledger):
    ledger.set_budget("d", "alice", 30.0, DELTA)
    ledger.open_job("j", "d", "alice", [2.0, 2.0, 3.0])
    ledger.record("j", [event(0, 2.0)], digest="abc")
    conflicts = [
        ([event(0, 2.0, c=2.0)], None),  # same multiplier, other sigma and sensitivity
        ([event(0, 3.0)], None),  # other multiplier
        ([event(0, 2.0)], "xyz"),  # other digest
        ([event(1, 2.0), event(1, 3.0)], None),  # same key twice in one call, different values
    ]
    for events, digest in conflicts:
        with pytest.raises(LedgerConflict, match="already recorded"):
            ledger.record("j", events, digest=digest)
    with pytest.raises(LedgerConflict):
        ledger.record("j", [event(5, 2.0), event(0, 3.0)])  # a new one, then a conflict
    assert [(r["round"], r["label"]) for r in ledger.releases()] == [(0, "model")]


def test_a_release_not_in_the_plan_is_refused(ledger):
    ledger.set_budget("d", "alice", 30.0, DELTA)
    ledger.open_job("j", "d", "alice", [2.0, 2.0])
    with pytest.raises(BudgetExceeded, match="never reserved"):
        ledger.record("j", [event(0, 1.9999999)])
    assert ledger.record("j", [event(0, 2.0), event(1, 2.0)]) == 2
    with pytest.raises(BudgetExceeded, match=r"remaining plan \(nothing\)"):
        ledger.record("j", [event(2, 2.0)])  # the plan is used up
    assert len(ledger.releases()) == 2


def test_events_are_validated(ledger):
    ledger.set_budget("d", "alice", 30.0, DELTA)
    ledger.open_job("j", "d", "alice", [2.0, 2.0])
    with pytest.raises(DpfedInputError, match="opened for party 'bob'"):
        ledger.record("j", [event(0, 2.0, party="bob")])
    with pytest.raises(DpfedInputError, match="one party"):
        ledger.record("j", [event(0, 2.0), event(1, 2.0, party="bob")])
    with pytest.raises(DpfedInputError, match=r"opened for party 'alice'\. Found 'nope'"):
        ledger.record("nope", [event(0, 2.0)])
    laplace = PrivacyEvent("alice", 0, "laplace", 2.0, 1.0, 2.0, "model")
    with pytest.raises(DpfedInputError, match="'gaussian'"):
        ledger.record("j", [laplace])
    with pytest.raises(DpfedInputError, match="sequence of PrivacyEvent"):
        ledger.record("j", event(0, 2.0))
    with pytest.raises(DpfedInputError, match=r"events\[0\] must be a PrivacyEvent"):
        ledger.record("j", [event(0, 2.0).to_dict()])
    with pytest.raises(DpfedInputError, match="digest"):
        ledger.record("j", [event(0, 2.0)], digest="")
    assert ledger.releases() == []


# ------------------------------------------------------------------------------------------------
# closing and budgets
# ------------------------------------------------------------------------------------------------


def test_closing_returns_the_unspent_reservation(ledger):
    ledger.set_budget("d", "p", (eps_rdp([2.0] * 6) + eps_rdp([2.0] * 7)) / 2, DELTA)
    ledger.open_job("a", "d", "p", [2.0] * 6)
    with pytest.raises(BudgetExceeded):
        ledger.open_job("b", "d", "p", [2.0] * 4)
    ledger.record("a", [event(r, 2.0, party="p") for r in range(2)])
    with pytest.raises(BudgetExceeded):
        ledger.open_job("b", "d", "p", [2.0] * 4)
    ledger.close_job("a", "p")
    assert ledger.committed_epsilon("d", "p") == eps_rdp([2.0] * 2)
    res = ledger.open_job("b", "d", "p", [2.0] * 4)
    assert res.committed_epsilon == eps_rdp([2.0] * 6)
    with pytest.raises(DpfedInputError, match=r"job of party 'p'\. Found 'zzz'"):
        ledger.close_job("zzz", "p")


def test_lowering_a_budget_below_the_spending_refuses_every_new_job(ledger):
    ledger.set_budget("d", "p", 10.0, DELTA)
    ledger.open_job("a", "d", "p", [2.0, 2.0])
    ledger.record("a", [event(0, 2.0, party="p")])
    ledger.set_budget("d", "p", 0.5, DELTA)
    assert ledger.budget("d", "p") == (0.5, DELTA)
    for plan in ([50.0], []):
        with pytest.raises(BudgetExceeded):
            ledger.open_job("b", "d", "p", plan)
    assert ledger.record("a", [event(1, 2.0, party="p")]) == 1  # an open reservation stands
    history = ledger.budget_history("d", "p")
    assert [h["epsilon"] for h in history] == [10.0, 0.5]
    assert all(datetime.fromisoformat(h["changed_at"]).utcoffset() == timedelta(0) for h in history)
    entry = ledger.summary()["entries"][0]
    assert entry["remaining"] < 0


@pytest.mark.parametrize(
    ("args", "match"),
    [
        (("", "p", 1.0, 0.1), "dataset must be a non-empty string"),
        (("d", None, 1.0, 0.1), "party must be a non-empty string"),
        (("d", "p", -1.0, 0.1), "epsilon must be a finite number > 0. Found -1.0"),
        (("d", "p", math.inf, 0.1), "epsilon must be a finite number"),
        (("d", "p", 1.0, 1.0), r"delta must be in the open interval \(0, 1\)"),
        (("d", "p", 1.0, 0.0), r"delta must be in the open interval \(0, 1\)"),
    ],
)
def test_set_budget_is_validated(ledger, args, match):
    with pytest.raises(DpfedInputError, match=match):
        ledger.set_budget(*args)
    assert ledger.summary()["entries"] == []


@pytest.mark.parametrize(
    ("args", "match"),
    [
        (("", "d", "p", [1.0]), "job_id must be a non-empty string"),
        ((3, "d", "p", [1.0]), "job_id must be a non-empty string"),
        (("j", "", "p", [1.0]), "dataset must be a non-empty string"),
        (("j", "d", "", [1.0]), "party must be a non-empty string"),
        (("j", "d", "p", [1.0, math.nan]), r"plan\[1\] must be a finite number > 0"),
        (("j", "d", "p", [0.0]), r"plan\[0\] must be a finite number > 0"),
        (("j", "d", "p", [-2.0]), r"plan\[0\] must be a finite number > 0"),
        (("j", "d", "p", "1.0"), "plan must be a sequence of noise multipliers"),
        (("j", "d", "p", 1.0), "plan must be a sequence of noise multipliers"),
    ],
)
def test_open_job_is_validated(ledger, args, match):
    ledger.set_budget("d", "p", 10.0, DELTA)
    with pytest.raises(DpfedInputError, match=match):
        ledger.open_job(*args)
    assert ledger.jobs() == []


# ------------------------------------------------------------------------------------------------
# the file
# ------------------------------------------------------------------------------------------------


def test_everything_persists_across_reopening(tmp_path):
    path = tmp_path / "new" / "folder" / "budget.db"  # the folder is created
    z = 7.0 / 3.0 + 1e-13  # not a short decimal: the REAL round trip must be exact
    with BudgetLedger(path, accountant="rdp") as led:
        led.set_budget("a9a", "alice", 10.0 / 3.0, 1e-6)
        led.open_job("j", "a9a", "alice", [z, z])
        led.record("j", [PrivacyEvent("alice", 0, "gaussian", z, 0.1, z * 0.1, "m")], digest="h")
        before = (led.summary(), led.releases(), led.jobs())
    with BudgetLedger(path) as led:
        assert led.accountant == "rdp"
        assert led.budget("a9a", "alice") == (10.0 / 3.0, 1e-6)
        assert (led.summary(), led.releases(), led.jobs()) == before
        assert led.releases()[0]["noise_multiplier"] == z
        assert led.releases()[0]["sigma"] == z * 0.1
        assert led.open_job("j", "a9a", "alice", [z, z]).resumed
        assert (
            led.record(
                "j", [PrivacyEvent("alice", 0, "gaussian", z, 0.1, z * 0.1, "m")], digest="h"
            )
            == 0
        )


def test_the_accountant_is_fixed_per_file(tmp_path):
    path = tmp_path / "b.db"
    BudgetLedger(path, accountant="rdp").close()
    with pytest.raises(DpfedInputError, match=r"created with \('rdp'\)\. Found 'pld'"):
        BudgetLedger(path, accountant="pld")
    with pytest.raises(DpfedInputError, match="accountant must be one of"):
        BudgetLedger(tmp_path / "c.db", accountant="moments")
    assert not (tmp_path / "c.db").exists()
    with BudgetLedger(path, accountant="rdp") as led:
        assert led.accountant == "rdp"


def test_a_file_that_is_not_a_ledger_is_refused(tmp_path):
    text = tmp_path / "notes.txt"
    text.write_text("this is not a database, just some text that is long enough " * 20)
    with pytest.raises(DpfedInputError, match=r"notes\.txt"):
        BudgetLedger(text)
    assert text.read_text().startswith("this is not a database")
    other = tmp_path / "other.db"
    with sqlite3.connect(other) as conn:
        conn.execute("CREATE TABLE things (x)")
    with pytest.raises(DpfedInputError, match=r"other\.db.*meta table"):
        BudgetLedger(other)
    foreign = tmp_path / "foreign.db"
    with sqlite3.connect(foreign) as conn:
        conn.execute("CREATE TABLE meta (key TEXT, value TEXT)")
    with pytest.raises(DpfedInputError, match=r"foreign\.db.*format None"):
        BudgetLedger(foreign)
    with pytest.raises(DpfedInputError, match="not a folder"):
        BudgetLedger(tmp_path)


def test_another_schema_version_is_refused(tmp_path):
    path = tmp_path / "b.db"
    BudgetLedger(path).close()
    conn = sqlite3.connect(path)
    with conn:
        conn.execute("UPDATE meta SET value = '99' WHERE key = 'schema_version'")
    conn.close()
    with pytest.raises(
        DpfedInputError, match=rf"schema version 99.*schema version {SCHEMA_VERSION}\."
    ):
        BudgetLedger(path)


# The layout of a schema-1 file: plan entries without a mechanism (Gaussian plans only).
_V1_PLAN_ENTRIES = """CREATE TABLE plan_entries (
    job_id TEXT NOT NULL, party TEXT NOT NULL, idx INTEGER NOT NULL,
    noise_multiplier REAL NOT NULL CHECK (noise_multiplier > 0),
    PRIMARY KEY (job_id, party, idx),
    FOREIGN KEY (job_id, party) REFERENCES jobs (job_id, party))"""


def _downgrade_to_v1(path):
    conn = sqlite3.connect(path)
    conn.execute("PRAGMA foreign_keys = OFF")
    conn.execute("PRAGMA legacy_alter_table = ON")  # keep the releases' reference by name
    with conn:
        conn.execute("ALTER TABLE plan_entries RENAME TO plan_v2")
        conn.execute(_V1_PLAN_ENTRIES)
        conn.execute(
            "INSERT INTO plan_entries SELECT job_id, party, idx, noise_multiplier FROM plan_v2"
        )
        conn.execute("DROP TABLE plan_v2")
        conn.execute("ALTER TABLE releases DROP COLUMN coordinates")
        conn.execute("ALTER TABLE jobs DROP COLUMN rows")
        conn.execute("DROP TABLE withdrawals")
        conn.execute("UPDATE meta SET value = '1' WHERE key = 'schema_version'")
    conn.close()


def _downgrade_to_v3(path):
    conn = sqlite3.connect(path)
    with conn:
        conn.execute("ALTER TABLE jobs DROP COLUMN rows")
        conn.execute("UPDATE meta SET value = '3' WHERE key = 'schema_version'")
    conn.close()


def _downgrade_to_v2(path):
    conn = sqlite3.connect(path)
    with conn:
        conn.execute("ALTER TABLE jobs DROP COLUMN rows")
        conn.execute("ALTER TABLE plan_entries DROP COLUMN coordinates")
        conn.execute("ALTER TABLE releases DROP COLUMN coordinates")
        conn.execute("DROP TABLE withdrawals")
        conn.execute("UPDATE meta SET value = '2' WHERE key = 'schema_version'")
    conn.close()


def test_a_schema_1_file_is_upgraded_and_keeps_its_spending(tmp_path):
    path = tmp_path / "b.db"
    with BudgetLedger(path, accountant="rdp") as led:
        led.set_budget("d", "p", 10.0, DELTA)
        led.open_job("j", "d", "p", [2.0, 2.0])
        led.record("j", [event(0, 2.0, party="p")])
        before = led.summary()["entries"][0]
    _downgrade_to_v1(path)
    with BudgetLedger(path) as led:
        after = led.summary()
        again = led.open_job("j", "d", "p", [2.0, 2.0])  # the open job resumes
        led.record("j", [event(1, 2.0, party="p")])
        assert led.spent_epsilon("d", "p") == pytest.approx(eps_rdp([2.0, 2.0]))
    assert after["schema_version"] == SCHEMA_VERSION == 4
    entry = after["entries"][0]
    assert (entry["spent"], entry["committed"]) == (before["spent"], before["committed"])
    assert again.resumed and again.plan == (Release("gaussian", 2.0),) * 2
    conn = sqlite3.connect(path)
    assert conn.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone() == ("4",)
    conn.close()


def test_a_schema_2_file_gains_grid_coordinates_and_charges_them_from_then_on(tmp_path):
    path = tmp_path / "b.db"
    with BudgetLedger(path, accountant="pld") as led:
        led.set_budget("d", "p", 10.0, DELTA)
        led.open_job("old", "d", "p", [2.0, 2.0])
        led.record("old", [event(t, 2.0, party="p") for t in range(2)])
        led.close_job("old", "p")
        before = led.spent_epsilon("d", "p")
    _downgrade_to_v2(path)
    grid = [Release("gaussian", 2.0, 10**6)] * 2
    with BudgetLedger(path) as led:
        assert led.spent_epsilon("d", "p") == before  # old releases: no coupling to charge
        res = led.open_job("new", "d", "p", grid)
        assert res.plan == tuple(grid)
        with pytest.raises(BudgetExceeded, match="never reserved"):  # coordinates must match
            led.record("new", [event(0, 2.0, party="p")])
        led.record(
            "new",
            [
                PrivacyEvent("p", t, "gaussian", 2.0, 1.0, 2.0, "scores", coordinates=10**6)
                for t in range(2)
            ],
        )
        spent = led.spent_epsilon("d", "p")
    plain = [Release("gaussian", 2.0)] * 2
    assert spent == pytest.approx(releases_epsilon(plain + grid, DELTA, "pld"))
    assert spent > releases_epsilon(plain * 2, DELTA, "pld")


def pure_event(round_, z, *, party="p", label="model"):
    return PrivacyEvent(party, round_, "l2_laplace", z, 1.0, z, label)


def test_pure_and_gaussian_releases_compose_in_one_budget(ledger):
    gauss, pure = [4.0] * 5, [Release("l2_laplace", 20.0)] * 10
    both = [*gauss, *pure]
    expected = releases_epsilon(both, DELTA, ledger.accountant)
    assert expected > max(
        releases_epsilon(gauss, DELTA, ledger.accountant),
        releases_epsilon(pure, DELTA, ledger.accountant),
    )
    ledger.set_budget("d", "p", expected * 1.001, DELTA)
    ledger.open_job("g", "d", "p", gauss)
    ledger.record("g", [event(t, 4.0, party="p") for t in range(5)])
    ledger.close_job("g", "p")
    res = ledger.open_job("dvp", "d", "p", [("l2_laplace", 20.0)] * 10)
    assert res.committed_epsilon == pytest.approx(expected)
    with pytest.raises(BudgetExceeded, match=r"l2_laplace release.*noise multiplier 4\.0"):
        ledger.record("dvp", [pure_event(0, 4.0)])  # a pure release that was never planned
    with pytest.raises(BudgetExceeded, match="its gaussian release"):
        ledger.record("dvp", [event(0, 20.0, party="p")])  # right multiplier, wrong mechanism
    assert ledger.record("dvp", [pure_event(t, 20.0) for t in range(10)]) == 10
    ledger.close_job("dvp", "p")
    entry = ledger.summary()["entries"][0]
    assert entry["spent"] == pytest.approx(expected)
    assert entry["released"] == {"gaussian": 5, "l2_laplace": 10}
    assert "5 gaussian + 10 l2_laplace" in format_summary(ledger.summary())
    with pytest.raises(BudgetExceeded, match="over the budget"):
        ledger.open_job("more", "d", "p", [("l2_laplace", 20.0)])


def test_a_plan_with_an_unknown_mechanism_is_refused(ledger):
    ledger.set_budget("d", "p", 1.0, DELTA)
    with pytest.raises(DpfedInputError, match="mechanism must be one of"):
        ledger.open_job("j", "d", "p", [("laplace_l1", 2.0)])
    assert ledger.jobs() == []


def test_a_closed_ledger_refuses_use(tmp_path):
    led = BudgetLedger(tmp_path / "b.db")
    led.close()
    led.close()
    with pytest.raises(DpfedInputError, match="is closed"):
        led.budget("d", "p")


# ------------------------------------------------------------------------------------------------
# the summary
# ------------------------------------------------------------------------------------------------


def test_summary_and_format_summary(ledger):
    ledger.set_budget("a9a", "alice", 9.0, DELTA)
    ledger.open_job("job-1", "a9a", "alice", [2.0, 2.0])
    ledger.record("job-1", [event(0, 2.0)])
    ledger.close_job("job-1", "alice")
    ledger.open_job("job-2", "a9a", "alice", [3.0])
    summary = ledger.summary()
    (entry,) = summary["entries"]
    spent, committed = eps_rdp([2.0]), eps_rdp([2.0, 3.0])
    assert entry["spent"] == spent and entry["committed"] == committed
    assert entry["remaining"] == 9.0 - committed
    assert entry["accountant"] == "rdp" and entry["delta"] == DELTA
    assert [j["id"] for j in entry["jobs"]] == ["job-1", "job-2"]
    text = format_summary(summary)
    for number in (9.0, spent, committed - spent, 9.0 - committed):
        assert f"{number:.6g}" in text
    for word in ("budget", "spent", "reserved", "remaining", "job-1", "job-2", "closed", "open"):
        assert word in text
    assert "1/2" in text and "0/1" in text
    assert "No budgets" in format_summary(summary | {"entries": []})
    with pytest.raises(DpfedInputError, match="summary must be"):
        format_summary({"nope": 1})


# ------------------------------------------------------------------------------------------------
# a model of the accounting (hypothesis)
# ------------------------------------------------------------------------------------------------

_plans = st.lists(st.lists(st.sampled_from([1.0, 2.0, 4.0]), max_size=4), min_size=1, max_size=5)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(plans=_plans, budget=st.floats(0.5, 20.0), data=st.data())
def test_the_ledger_follows_the_accounting_rule(plans, budget, data):
    with (
        tempfile.TemporaryDirectory() as folder,
        BudgetLedger(Path(folder) / "b.db", accountant="rdp") as led,
    ):
        led.set_budget("d", "p", budget, DELTA)
        recorded: list[float] = []
        open_rest: dict[str, list[float]] = {}
        for k, plan in enumerate(plans):
            job = f"j{k}"
            committed = recorded + [z for rest in open_rest.values() for z in rest]
            fits = eps_rdp(committed + plan) <= budget
            if not fits:
                with pytest.raises(BudgetExceeded):
                    led.open_job(job, "d", "p", plan)
                continue
            led.open_job(job, "d", "p", plan)
            used = data.draw(st.integers(0, len(plan)), label=f"recorded of {job}")
            led.record(job, [event(r, z, party="p") for r, z in enumerate(plan[:used])])
            recorded += plan[:used]
            open_rest[job] = plan[used:]
            if data.draw(st.booleans(), label=f"close {job}"):
                led.close_job(job, "p")
                del open_rest[job]
            assert led.committed_epsilon("d", "p") <= budget
        committed = recorded + [z for rest in open_rest.values() for z in rest]
        assert led.spent_epsilon("d", "p") == eps_rdp(recorded)
        assert led.committed_epsilon("d", "p") == eps_rdp(committed)
        assert Counter(r["noise_multiplier"] for r in led.releases()) == Counter(recorded)


# ------------------------------------------------------------------------------------------------
# several processes
# ------------------------------------------------------------------------------------------------


@pytest.fixture
def spawn(monkeypatch):
    """A 'spawn' context whose children can import this module (it holds their targets)."""
    root = Path(__file__).resolve().parents[__name__.count(".")]
    monkeypatch.syspath_prepend(str(root))
    return mp.get_context("spawn")


def _record_then_die(path: str, job_id: str, events: list[dict]) -> None:
    led = BudgetLedger(path)
    led.record(job_id, [PrivacyEvent.from_dict(e) for e in events], digest="crash")
    os._exit(17)  # no close, no cleanup: as if the process were killed


def test_a_record_survives_the_process_dying_right_after(tmp_path, spawn):
    path = tmp_path / "b.db"
    with BudgetLedger(path, accountant="rdp") as led:
        led.set_budget("d", "alice", 10.0, DELTA)
        led.open_job("j", "d", "alice", [2.0, 2.0])
    events = [event(0, 2.0).to_dict(), event(1, 2.0).to_dict()]
    proc = spawn.Process(target=_record_then_die, args=(str(path), "j", events))
    proc.start()
    proc.join(60)
    assert proc.exitcode == 17
    with BudgetLedger(path) as led:
        rows = led.releases()
        assert [(r["round"], r["digest"]) for r in rows] == [(0, "crash"), (1, "crash")]
        assert led.spent_epsilon("d", "alice") == eps_rdp([2.0, 2.0])
        assert led.record("j", [event(0, 2.0)], digest="crash") == 0


def _race(path: str, worker: int, trials: int, plan: list[float], barrier, results) -> None:
    with BudgetLedger(path) as led:
        for i in range(trials):
            barrier.wait(20)
            try:
                led.open_job(f"w{worker}-{i}", f"d{i}", "alice", plan)
            except BudgetExceeded:
                results.put((i, worker, False))
            except BaseException as err:  # reported to the parent, which fails
                results.put((i, worker, repr(err)))
                barrier.abort()
                raise
            else:
                results.put((i, worker, True))


def test_two_processes_cannot_both_take_the_last_of_a_budget(tmp_path, spawn):
    start = time.monotonic()
    path = tmp_path / "b.db"
    plan = [2.0] * 4
    trials = 5
    # each plan fits alone, two do not
    budget = (eps_rdp(plan) + eps_rdp(plan + plan)) / 2
    with BudgetLedger(path, accountant="rdp") as led:
        for i in range(trials):
            led.set_budget(f"d{i}", "alice", budget, DELTA)
    barrier = spawn.Barrier(2)
    results = spawn.Queue()
    procs = [
        spawn.Process(target=_race, args=(str(path), w, trials, plan, barrier, results))
        for w in range(2)
    ]
    for p in procs:
        p.start()
    try:
        got = [results.get(timeout=30) for _ in range(2 * trials)]
    finally:
        for p in procs:
            p.join(30)
            if p.is_alive():  # pragma: no cover - only if a worker hangs
                p.terminate()
    assert [p.exitcode for p in procs] == [0, 0]
    for i in range(trials):
        wins = [ok for j, _, ok in got if j == i]
        assert sorted(wins) == [False, True], f"trial {i}: {got}"
    with BudgetLedger(path) as led:
        for i in range(trials):
            assert len(led.jobs(dataset=f"d{i}")) == 1
            assert led.committed_epsilon(f"d{i}", "alice") == eps_rdp(plan) <= budget
    print(f"concurrency test took {time.monotonic() - start:.2f} s", file=sys.stderr)


def test_a_jobs_epsilon_counts_its_own_releases_only(ledger):
    ledger.set_budget("d", "p", 50.0, DELTA)
    ledger.open_job("a", "d", "p", [2.0] * 3)
    ledger.record("a", [event(r, 2.0, party="p") for r in range(3)])
    ledger.close_job("a", "p")
    ledger.open_job("b", "d", "p", [3.0] * 4)
    assert ledger.spent_epsilon("d", "p", job_id="b") == 0.0
    ledger.record("b", [event(r, 3.0, party="p") for r in range(2)])
    assert ledger.spent_epsilon("d", "p", job_id="b") == eps_rdp([3.0] * 2)
    assert ledger.spent_epsilon("d", "p", job_id="a") == eps_rdp([2.0] * 3)
    assert ledger.spent_epsilon("d", "p") == eps_rdp([2.0] * 3 + [3.0] * 2)


def test_a_job_that_released_nothing_is_withdrawn_and_its_id_runs_again(ledger):
    ledger.set_budget("d", "p", 10.0, DELTA)
    ledger.open_job("j", "d", "p", [2.0] * 3)
    assert ledger.committed_epsilon("d", "p") > 0
    job = ledger.withdraw_job("j", "p", reason="shop was never reached")
    assert job["status"] == "withdrawn" and job["planned"] == 3
    assert ledger.committed_epsilon("d", "p") == 0.0
    assert ledger.jobs() == []
    (record,) = ledger.withdrawals()
    assert (record["job"], record["party"], record["dataset"], record["planned"]) == (
        "j",
        "p",
        "d",
        3,
    )
    assert record["reason"] == "shop was never reached"
    again = ledger.open_job("j", "d", "p", [2.0] * 3)  # the same id, as the rerun asks
    assert not again.resumed
    ledger.record("j", [event(0, 2.0, party="p")])
    with pytest.raises(DpfedInputError, match=r"1 recorded release.*close it instead"):
        ledger.withdraw_job("j", "p")
    with pytest.raises(DpfedInputError, match="job_id must name a job"):
        ledger.withdraw_job("nope", "p")


def test_a_schema_3_file_gains_the_rows_digest_and_a_resumed_job_must_read_the_same_rows(tmp_path):
    path = tmp_path / "b.db"
    with BudgetLedger(path, accountant="pld") as led:
        led.set_budget("d", "p", 10.0, DELTA)
        led.open_job("old", "d", "p", [2.0])
    _downgrade_to_v3(path)
    with BudgetLedger(path) as led:
        assert led.summary()["schema_version"] == SCHEMA_VERSION
        assert led.jobs()[0]["rows"] is None  # a job on column ranges has none
        led.open_job("old", "d", "p", [2.0])  # resumes
        led.open_job("aligned", "d", "p", [2.0], rows="ab" * 32)
        assert led.jobs()[1]["rows"] == "ab" * 32
        with pytest.raises(LedgerConflict, match="must read the same rows"):
            led.open_job("aligned", "d", "p", [2.0], rows="cd" * 32)
        assert "abababababababab" in format_summary(led.summary())
