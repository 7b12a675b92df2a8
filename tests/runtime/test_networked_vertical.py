"""A vertical job as real processes on loopback: same result as in-process, faults, budgets."""

from __future__ import annotations

import json
import os
import re
import shlex
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np
import pytest

from dpfed.data import load_dataset, vertical_split
from dpfed.protocols.vertical.driver import VerticalConfig, train_vertical
from dpfed.runtime.budget import BudgetLedger

from .conftest import DPFED, allowing_exact, interruptible

SOUND = {
    "iterations": 12,
    "mechanism": "sound",
    "epsilon": 1.0,
    "delta": 1e-5,
    "rounds_above_rule": True,
}
BUDGET = {"epsilon": 3.0, "delta": 1e-5}


def wait_for(predicate, timeout: float = 30.0, interval: float = 0.02) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(interval)
    return False


def follow(proc: subprocess.Popen, lines: list[str]) -> threading.Thread:
    """Collect ``proc``'s stderr lines into ``lines`` as they come."""

    def pump() -> None:
        for line in proc.stderr:
            lines.append(line)

    thread = threading.Thread(target=pump, daemon=True)
    thread.start()
    return thread


def _lead_until_round(job, k: int, timeout: float = 60.0) -> tuple[subprocess.Popen, list[str]]:
    """Start ``dpfed run`` and return once it has reported round ``k`` (failing after
    ``timeout`` seconds, a bound for a hung job, not a speed requirement)."""
    interruptible()
    leader = subprocess.Popen(job.run_args(), stderr=subprocess.PIPE, text=True, env=job.env())
    lines: list[str] = []
    follow(leader, lines)
    reached = wait_for(lambda: any(f"round {k}:" in line for line in lines), timeout=timeout)
    assert reached, "".join(lines)
    return leader, lines


BREAST_CANCER_3 = [
    ("label", "breast_cancer", (0, 10)),
    ("bank", "breast_cancer", (10, 20)),
    ("shop", "breast_cancer", (20, 30)),
]


def _inprocess(data: str, split, params: dict, data_dir=None, rngs=None):
    """The same job in one process; ``rngs``: the networked parties' secret generators."""
    dataset = load_dataset(data, data_dir)
    blocks = vertical_split(dataset.X_train, split)
    test_blocks = vertical_split(dataset.X_test, split)
    return train_vertical(
        blocks,
        dataset.y_train,
        VerticalConfig(**{k: v for k, v in params.items() if k != "rounds_above_rule"}),
        names=["label", "bank", "shop"],
        test_blocks=test_blocks,
        test_labels=dataset.y_test,
        rngs=rngs,
    )


def _models(job) -> dict[str, np.ndarray]:
    return {
        name: np.array(
            json.loads((job.folder / "work" / name / "job" / "model.json").read_text())["coef"]
        )
        for name in job.names
    }


def _assert_same(result: dict, reference, models: dict[str, np.ndarray], tol: float) -> None:
    assert len(result["history"]) == len(reference.history)
    for got, want in zip(result["history"], reference.history, strict=True):
        for key, value in want.items():
            if key == "seconds" or value is None:
                assert key == "seconds" or got[key] is None
                continue
            assert got[key] == pytest.approx(value, rel=tol, abs=tol), key
    for name, coef in reference.models.items():
        np.testing.assert_allclose(models[name], coef, rtol=tol, atol=tol)
    assert result["privacy"]["epsilon"] == pytest.approx(reference.privacy["epsilon"], rel=tol)


def _releases(job, name: str) -> list[tuple[int, str, float]]:
    with BudgetLedger(job.folder / "ledgers" / f"{name}.sqlite") as ledger:
        return sorted((r["round"], r["label"], r["noise_multiplier"]) for r in ledger.releases())


def test_three_processes_match_inprocess_bit_for_bit(netjob):
    job = netjob(
        BREAST_CANCER_3,
        params=SOUND,
        budgets={"bank": BUDGET, "shop": BUDGET},
        job={"evaluate": "full"},
        party_args=allowing_exact(["bank", "shop"]),
    )
    job.start_parties()
    done = job.run()
    assert done.returncode == 0, done.stderr
    result = json.loads(job.out.read_text())
    reference = _inprocess("breast_cancer", (10, 10, 10), SOUND, rngs=job.secret_rngs())
    _assert_same(result, reference, _models(job), tol=0.0)
    assert result["preprocessing"]["scaling"] == "declared public bounds"
    assert job.wait_parties() == {"label": 0, "bank": 0, "shop": 0}
    # the ledgers hold exactly the releases of the in-process run, and nothing for the
    # (unprotected) label holder
    for name in ("bank", "shop"):
        want = sorted((e.round, e.label, e.noise_multiplier) for e in reference.ledger.events(name))
        assert _releases(job, name) == want
    assert not (job.folder / "ledgers" / "label.sqlite").exists()


def test_a9a_40_43_40_matches_inprocess(netjob):
    data_dir = Path(os.environ.get("DPFED_DATA", "")).resolve()
    if not (data_dir / "a9a" / "a9a.t").is_file():
        pytest.skip("a9a not found under $DPFED_DATA")
    parties = [("label", "a9a", (0, 40)), ("bank", "a9a", (40, 83)), ("shop", "a9a", (83, 123))]
    params = {"iterations": 20}
    job = netjob(parties, params=params)
    text = job.config.read_text().replace('data = "a9a"', f'data = "a9a"\ndata_dir = "{data_dir}"')
    job.config.write_text(text)
    job.start_parties()
    done = job.run(timeout=300)
    assert done.returncode == 0, done.stderr
    reference = _inprocess("a9a", (40, 43, 40), params, data_dir)
    _assert_same(json.loads(job.out.read_text()), reference, _models(job), tol=1e-12)


def test_killed_party_stops_the_job_and_resume_finishes_it(netjob):
    params = SOUND | {"iterations": 60}
    budgets = {"bank": BUDGET, "shop": BUDGET}
    job = netjob(
        BREAST_CANCER_3,
        params=params,
        budgets=budgets,
        job={"grace": 1.5, "evaluate": "full"},
        party_args=allowing_exact(budgets),
    )
    job.start_parties()
    leader, lines = _lead_until_round(job, 3)
    job.kill("bank")
    # the grace (1.5 s) plus polling and shutdown ends it, not the round timeout (60 s): the
    # leader names the party unreachable (a wait that outlived 60 s would raise here)
    code = leader.wait(timeout=60)
    text = "".join(lines)
    assert code == 1, text
    assert "bank" in text and "unreachable" in text and "--resume" in text
    assert job.procs["label"].poll() is None and job.procs["shop"].poll() is None

    job.start_party("bank")  # restarts from its checkpoint
    # the command the leader printed, run as printed (from another folder)
    (printed,) = re.findall(r"continue with `(dpfed run [^`]*)`", text)
    command = shlex.split(printed)
    assert command[:2] == ["dpfed", "run"] and "--out" in command and "--resume" in command
    done = subprocess.run(
        [*DPFED, *command[1:]],
        capture_output=True,
        text=True,
        timeout=120,
        env=job.env(),
        cwd=job.folder.parent,
    )
    assert done.returncode == 0, done.stderr
    result = json.loads(job.out.read_text())
    reference = _inprocess("breast_cancer", (10, 10, 10), params, rngs=job.secret_rngs())
    _assert_same(result, reference, _models(job), tol=0.0)
    for name in ("bank", "shop"):
        want = sorted((e.round, e.label, e.noise_multiplier) for e in reference.ledger.events(name))
        assert _releases(job, name) == want  # every release once: none lost, none invented


def test_two_jobs_against_one_budget_exactly_one_runs(netjob, tmp_path):
    params = SOUND | {"iterations": 8}
    # one job at epsilon 1 fits a budget of 1.2; two compose to about 1.45
    budget = {"epsilon": 1.2, "delta": 1e-5}
    jobs = [
        netjob(
            BREAST_CANCER_3,
            job_id=f"job{k}",
            params=params,
            sub=f"j{k}",
            shared=tmp_path,
            budgets={"bank": budget, "shop": budget},
        )
        for k in range(2)
    ]
    for job in jobs:
        job.start_parties()
    leaders = [
        subprocess.Popen(
            j.run_args(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=j.env()
        )
        for j in jobs
    ]
    outcomes = [(p.wait(timeout=120), p.communicate()[1]) for p in leaders]
    codes = sorted(code for code, _ in outcomes)
    assert codes == [0, 2], outcomes
    refused = next(err for code, err in outcomes if code == 2)
    assert "budget" in refused.lower()
    with BudgetLedger(tmp_path / "ledgers" / "bank.sqlite") as ledger:
        jobs_seen = {j["id"]: j for j in ledger.jobs()}
        spent = ledger.spent_epsilon("breast_cancer:10-20", "bank")
    ran = [j for j in jobs_seen.values() if j["recorded"] > 0]
    assert len(ran) == 1 and all(j["status"] == "closed" for j in jobs_seen.values())
    assert spent <= 1.0 + 1e-9
    for job in jobs:
        job.wait_parties()


@pytest.mark.skipif(
    not os.environ.get("DPFED_REPRODUCE"),
    reason="a restart within the grace: "
    "set DPFED_REPRODUCE=1; CI runs the secure job's, the same path",
)
def test_party_back_within_grace_continues_the_round(netjob):
    params = SOUND | {"iterations": 60}
    budgets = {"bank": BUDGET, "shop": BUDGET}
    job = netjob(
        BREAST_CANCER_3,
        params=params,
        budgets=budgets,
        job={"grace": 60.0, "evaluate": "full"},
        party_args=allowing_exact(budgets),
    )
    job.start_parties()
    leader, lines = _lead_until_round(job, 3)
    job.kill("bank")
    job.start_party("bank")
    assert leader.wait(timeout=120) == 0, "".join(lines)
    result = json.loads(job.out.read_text())
    reference = _inprocess("breast_cancer", (10, 10, 10), params, rngs=job.secret_rngs())
    _assert_same(result, reference, _models(job), tol=0.0)
    assert "restored at round" in job.log("bank")


def test_killed_leader_resumes(netjob):
    params = {
        "iterations": 30,
        "mechanism": "sound",
        "epsilon": 4.0,
        "delta": 1e-5,
        "seed": 2,
        "rounds_above_rule": True,
    }
    job = netjob(BREAST_CANCER_3, params=params, job={"simulation": True, "evaluate": "full"})
    job.start_parties()
    leader, _ = _lead_until_round(job, 3)
    leader.kill()
    leader.wait(timeout=10)
    assert all(p.poll() is None for p in job.procs.values())  # the parties wait
    fresh = job.run()
    assert fresh.returncode == 2 and "--resume" in fresh.stderr  # no silent restart
    done = job.run("--resume")
    assert done.returncode == 0, done.stderr
    reference = _inprocess("breast_cancer", (10, 10, 10), params)
    result = json.loads(job.out.read_text())
    _assert_same(result, reference, _models(job), tol=0.0)
    assert job.wait_parties() == {"label": 0, "bank": 0, "shop": 0}
    # a simulation says, at the top and in every party's log, that it protects nothing
    assert list(result)[1] == "privacy_guarantee"
    assert result["privacy_guarantee"].startswith("none: noise is shared")
    assert result["privacy"]["notes"][0].startswith("no privacy: noise is shared")
    assert all("SIMULATION, seed 2" in job.log(name) for name in job.names)
    # the result file lost after the job finished: the parties have stopped, and --resume
    # writes it again from the leader's checkpoint; a fresh run says so
    written = job.out.read_bytes()
    job.out.unlink()
    fresh = job.run()
    assert fresh.returncode == 2 and "add --resume to write its result again" in fresh.stderr
    again = job.run("--resume")
    assert again.returncode == 0, again.stderr
    assert "its result, kept in the checkpoint, is written again" in again.stderr
    assert job.out.read_bytes() == written


def test_a_party_never_started_is_named_at_once_and_ends_the_job_unresumable(netjob):
    """The leader says within 5 s whom it waits for; a party never reached ends the job with
    its own status (4, not the resumable 1) and the command that starts it."""
    job = netjob(BREAST_CANCER_3, params={"iterations": 3}, job={"round_timeout": 6.0})
    for name in ("label", "bank"):  # shop never starts
        job.start_party(name)
    # both serve before the leader starts: on a loaded machine one still starting would be the
    # party the leader names first
    assert wait_for(
        lambda: all("serving job" in job.log(n) for n in ("label", "bank")), timeout=120
    ), job.log("label") + job.log("bank")
    interruptible()
    leader = subprocess.Popen(job.run_args(), stderr=subprocess.PIPE, text=True, env=job.env())
    _, text = leader.communicate(timeout=120)
    assert leader.returncode == 4, text
    # the leader's own clock, from the start of its opening (a loaded machine may take seconds
    # to start the process and import its modules before that)
    waited = [
        int(m) for m in re.findall(r"waiting for shop at \S+ \(not serving yet, (\d+) s\)", text)
    ]
    assert waited and waited[0] < 5, text
    assert "shop" in text and "never reached within 6 s" in text and "--name shop" in text
    assert "--resume" not in text  # the open's deadline, not twice the round timeout
    assert not job.out.exists()
    assert job.wait_parties() == {"label": 1, "bank": 1}  # told to abort, nothing kept
    for name in ("label", "bank"):
        assert "aborted before it began" in job.log(name) and "nothing ran" in job.log(name)


def test_ctrl_c_on_the_leader_says_how_to_continue_and_that_command_finishes_the_job(netjob):
    params = SOUND | {"iterations": 40}
    job = netjob(
        BREAST_CANCER_3,
        params=params,
        job={"evaluate": "full"},
        budgets={"bank": BUDGET, "shop": BUDGET},
        party_args=allowing_exact(["bank", "shop"]),
    )
    job.start_parties()
    leader, lines = _lead_until_round(job, 2)
    leader.send_signal(signal.SIGINT)
    assert leader.wait(timeout=30) == 130
    time.sleep(0.2)
    text = "".join(lines)
    assert "interrupted; no result was written" in text and "keep their state" in text, text
    assert not job.out.exists()
    (printed,) = re.findall(r"continue with `(dpfed run [^`]*)`", text)
    done = subprocess.run(
        [*DPFED, *shlex.split(printed)[1:]],
        capture_output=True,
        text=True,
        timeout=120,
        env=job.env(),
        cwd=job.folder.parent,
    )
    assert done.returncode == 0, done.stderr
    result = json.loads(job.out.read_text())
    assert len(result["history"]) == 40


def _rss_mb(pid: int) -> float:
    with open(f"/proc/{pid}/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    raise AssertionError("no VmRSS")


@pytest.mark.skipif(
    not os.environ.get("DPFED_REPRODUCE"),
    reason="a flood of idle connections: set DPFED_REPRODUCE=1 (a robustness drill)",
)
@pytest.mark.skipif(not Path("/proc/self/status").exists(), reason="reads /proc")
def test_a_flood_of_idle_connections_holds_no_memory_and_the_job_still_runs(netjob):
    """2,000 TCP connections that never start their TLS handshake: the party drops them after
    its handshake timeout, holds at most its connection limit at once, stays within 50 MB of
    its idle memory, and the job then runs to the end."""
    import resource
    import socket

    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < 2200:
        if hard != resource.RLIM_INFINITY and hard < 2200:
            pytest.skip(f"needs 2,200 open files; the limit is {hard}")
        resource.setrlimit(resource.RLIMIT_NOFILE, (2200, hard))
    job = netjob(BREAST_CANCER_3, params={"iterations": 3})
    job.start_parties()
    address = job.config.read_text().split('name = "bank"')[1].split('"')[1]
    host, port = address.rsplit(":", 1)
    bank = job.procs["bank"].pid
    # the party is serving: its idle memory
    assert wait_for(lambda: "serving job" in job.log("bank"), timeout=30)
    time.sleep(0.5)
    idle = _rss_mb(bank)
    flood = []
    try:
        for _ in range(2000):
            s = socket.socket()
            s.settimeout(5)
            try:
                s.connect((host, int(port)))
            except OSError:
                s.close()
                continue
            flood.append(s)
        time.sleep(1.0)
        during = _rss_mb(bank)
        time.sleep(4.0)  # past the handshake timeout
        after = _rss_mb(bank)
        dropped = 0
        for s in flood:  # the party closed them: end of stream
            s.setblocking(False)
            try:
                dropped += s.recv(1) == b""
            except (BlockingIOError, ConnectionResetError):
                dropped += not isinstance(sys.exc_info()[1], BlockingIOError)
        done = job.run()
        assert done.returncode == 0, done.stderr
    finally:
        for s in flood:
            s.close()
    assert len(flood) >= 500  # the flood did reach the party
    assert dropped >= 0.9 * len(flood), (dropped, len(flood))
    assert during - idle < 50 and after - idle < 50, (idle, during, after)
    assert len(json.loads(job.out.read_text())["history"]) == 3


def test_ctrl_c_on_a_party_says_its_state_is_kept(netjob):
    job = netjob(BREAST_CANCER_3, params={"iterations": 3})
    proc = job.start_party("bank")
    assert wait_for(lambda: "serving job" in job.log("bank"), timeout=30)
    proc.send_signal(signal.SIGINT)
    assert proc.wait(timeout=30) == 130
    assert "bank interrupted; what it has handled is kept in" in job.log("bank")


def test_a_job_whose_party_was_never_reached_reruns_with_budgets_once_it_is_up(netjob):
    """The documented recovery: every party has a budget, shop is not started; the leader
    names it and ends the job; the others withdraw their reservations (nothing was released),
    so once all three serve, the same command runs the same job."""
    budgets = dict.fromkeys(("label", "bank", "shop"), BUDGET)
    params = {
        "mechanism": "sound",
        "epsilon": 1.0,
        "delta": 1e-5,
        "protect_label_holder": True,
    }  # the rule's rounds; every party releases
    job = netjob(BREAST_CANCER_3, params=params, budgets=budgets, job={"round_timeout": 6.0})

    def serving(times: int, names) -> bool:
        return all(job.log(n).count("serving job") >= times for n in names)

    for name in ("label", "bank"):
        job.start_party(name)
    # both serve before the leader starts: on a loaded machine one still starting would be the
    # party the leader names first, within the job's 6 s
    assert wait_for(lambda: serving(1, ("label", "bank")), timeout=120)
    first = job.run()
    assert first.returncode == 4, first.stderr
    assert "--name shop" in first.stderr
    assert job.wait_parties() == {"label": 1, "bank": 1}
    assert "budget reservation is withdrawn and the job can run again" in job.log("bank")
    job.start_parties()
    assert wait_for(lambda: serving(2, ("label", "bank")) and serving(1, ("shop",)), timeout=120)
    again = job.run()
    assert again.returncode == 0, again.stderr + "".join(job.log(n) for n in job.names)
    assert job.wait_parties() == dict.fromkeys(job.names, 0)
    result = json.loads(job.out.read_text())
    assert result["privacy"]["epsilon"] <= 1.0
