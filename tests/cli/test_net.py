"""The networked runtime's commands: certs init, budget show / set / close, and their errors."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from dpfed.cli import main
from dpfed.cli.budget import _plan_of
from dpfed.privacy.ledger import PrivacyEvent
from dpfed.runtime.budget import BudgetLedger
from dpfed.runtime.certs import load_identity
from dpfed.runtime.jobfile import load_job


def test_certs_init_writes_a_ca_and_one_identity_per_party_and_the_leader(tmp_path, capsys):
    out = tmp_path / "certs"
    assert (
        main(
            [
                "certs",
                "init",
                "--out",
                str(out),
                "--parties",
                "label,bank",
                "--host",
                "bank=10.0.0.7",
            ]
        )
        == 0
    )
    for name in ("leader", "label", "bank"):
        identity = load_identity(out / f"{name}.pem", out / f"{name}.key", out / "ca.pem")
        assert identity.name == name
    assert "keep" in capsys.readouterr().out
    # a second run would overwrite: refused, exit 2, nothing changed
    before = (out / "ca.pem").read_bytes()
    assert main(["certs", "init", "--out", str(out), "--parties", "label,bank"]) == 2
    assert "exist" in capsys.readouterr().err
    assert (out / "ca.pem").read_bytes() == before


def test_certs_init_refuses_a_malformed_host(tmp_path, capsys):
    assert (
        main(["certs", "init", "--out", str(tmp_path / "c"), "--parties", "a,b", "--host", "bank"])
        == 2
    )
    assert "--host must be NAME=HOST. Found 'bank'" in capsys.readouterr().err
    assert not (tmp_path / "c").exists()


def test_budget_set_show_close(tmp_path, capsys):
    ledger_path = tmp_path / "ledger.sqlite"
    assert (
        main(
            [
                "budget",
                "set",
                "--ledger",
                str(ledger_path),
                "--dataset",
                "d",
                "--party",
                "bank",
                "--epsilon",
                "2",
                "--delta",
                "1e-5",
            ]
        )
        == 0
    )
    with BudgetLedger(ledger_path) as ledger:
        ledger.open_job("j1", "d", "bank", [5.0, 5.0])
        ledger.record("j1", [PrivacyEvent("bank", 1, "gaussian", 5.0, 1.0, 5.0, "scores")])
    capsys.readouterr()
    assert main(["budget", "show", "--ledger", str(ledger_path)]) == 0
    text = capsys.readouterr().out
    assert "bank" in text and "j1" in text and "open" in text
    assert (
        main(["budget", "close", "--ledger", str(ledger_path), "--job", "j1", "--party", "bank"])
        == 0
    )
    capsys.readouterr()
    assert main(["budget", "show", "--ledger", str(ledger_path), "--json"]) == 0
    summary = json.loads(capsys.readouterr().out)
    entry = summary["entries"][0]
    assert entry["dataset"] == "d" and entry["epsilon"] == 2.0
    assert entry["spent"] == entry["committed"] > 0
    assert [j["status"] for j in entry["jobs"]] == ["closed"]


def test_budget_abandon_withdraws_an_unused_job_and_closes_a_used_one(tmp_path, capsys):
    ledger_path = tmp_path / "ledger.sqlite"
    assert (
        main(
            [
                "budget",
                "set",
                "--ledger",
                str(ledger_path),
                "--dataset",
                "d",
                "--party",
                "bank",
                "--epsilon",
                "8",
                "--delta",
                "1e-5",
            ]
        )
        == 0
    )
    with BudgetLedger(ledger_path) as ledger:
        ledger.open_job("unused", "d", "bank", [5.0, 5.0])
        ledger.open_job("used", "d", "bank", [5.0, 5.0])
        ledger.record("used", [PrivacyEvent("bank", 1, "gaussian", 5.0, 1.0, 5.0, "scores")])
    capsys.readouterr()
    for job, says in [
        ("unused", "withdrawn: it released nothing"),
        ("used", "closed: its 1 recorded release(s) stay spent"),
    ]:
        assert (
            main(
                ["budget", "abandon", "--ledger", str(ledger_path), "--job", job, "--party", "bank"]
            )
            == 0
        )
        assert says in capsys.readouterr().out
    with BudgetLedger(ledger_path) as ledger:
        assert [(j["id"], j["status"]) for j in ledger.jobs()] == [("used", "closed")]
        assert [w["job"] for w in ledger.withdrawals()] == ["unused"]
        assert ledger.open_job("unused", "d", "bank", [5.0]).resumed is False  # runs again
    assert (
        main(
            ["budget", "abandon", "--ledger", str(ledger_path), "--job", "nope", "--party", "bank"]
        )
        == 2
    )
    assert "--job must name a job" in capsys.readouterr().err


def test_budget_show_of_a_missing_ledger_is_an_error(tmp_path, capsys):
    assert main(["budget", "show", "--ledger", str(tmp_path / "none.sqlite")]) == 2
    err = capsys.readouterr().err
    assert "does not exist" in err and "label holder whose rows are not protected" in err
    assert not (tmp_path / "none.sqlite").exists()


def test_run_with_a_bad_job_file_names_the_key(tmp_path, capsys):
    job = tmp_path / "job.toml"
    job.write_text('[job]\nid = "x"\nprotocol = "horizontal"\n')
    assert main(["run", "--config", str(job), "--out", str(tmp_path / "r.json")]) == 2
    assert "[job].protocol must be one of" in capsys.readouterr().err
    assert not (tmp_path / "r.json").exists()


def _budget_job(tmp_path, budget_line: str) -> Path:
    parties = "".join(
        f"""
[[party]]
name = "{name}"
address = "127.0.0.1:{port}"
data = "breast_cancer"
columns = [{a}, {b}]
certificate = "c.pem"
key = "c.key"
{budget_line if name == "bank" else ""}
"""
        for port, (name, a, b) in enumerate([("label", 0, 15), ("bank", 15, 30)], start=1)
    )
    path = tmp_path / "job.toml"
    path.write_text(
        """[job]
id = "j"
protocol = "vertical"
[params]
mechanism = "sound"
epsilon = 1.0
delta = 1e-5
[tls]
ca = "ca.pem"
[leader]
address = "127.0.0.1:9"
certificate = "l.pem"
key = "l.key"
"""
        + parties
    )
    return path


def test_budget_check_says_whether_a_job_fits_and_the_largest_epsilon_that_would(tmp_path, capsys):
    config = _budget_job(tmp_path, "budget = { epsilon = 4.0, delta = 1e-5 }")
    assert main(["budget", "check", "--config", str(config), "--json"]) == 0
    label, bank = json.loads(capsys.readouterr().out)
    assert label["status"] == "nothing to account"  # an unprotected label holder
    assert bank["status"] == "fits" and bank["budget_from"].startswith("the job file")
    assert bank["total"] <= 1.0 and bank["largest_epsilon"] == 4.0
    assert not (tmp_path / "work").exists()  # a check writes nothing of the parties'
    # a ledger with an open job committing epsilon 3: 'remaining' is 1, yet composition lets
    # a job of epsilon above 1 fit; the check finds the largest
    spec = load_job(config)
    ledger_path = spec.party("bank").ledger
    ledger_path.parent.mkdir(parents=True)
    with BudgetLedger(ledger_path) as ledger:
        ledger.set_budget(spec.party("bank").dataset, "bank", 4.0, 1e-5)
        ledger.open_job("earlier", spec.party("bank").dataset, "bank", _plan_of(spec, "bank", 3.0))
        remaining = ledger.summary()["entries"][0]["remaining"]
    assert remaining == pytest.approx(1.0, abs=0.01)
    assert main(["budget", "check", "--config", str(config), "--name", "bank"]) == 0
    text = capsys.readouterr().out
    assert "the job fits" in text
    largest = float(text.split("fits now: ")[1].split()[0])
    assert 1.1 < largest < 4.0  # more than 'remaining': releases compose
    # a job that would not fit exits 1 and says so
    config.write_text(config.read_text().replace("epsilon = 1.0", "epsilon = 3.5"))
    assert main(["budget", "check", "--config", str(config), "--name", "bank"]) == 1
    assert "does NOT fit" in capsys.readouterr().out
    assert main(["budget", "show", "--ledger", str(ledger_path)]) == 0
    assert "dpfed budget check" in capsys.readouterr().out  # 'remaining' explained
