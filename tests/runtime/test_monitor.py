"""The live job page: what it serves, and a networked job watched in headless Chromium."""

from __future__ import annotations

import json
import math
import re
import shutil
import subprocess
import time
import urllib.error
import urllib.request

import pytest

from dpfed._validation import DpfedInputError
from dpfed.runtime.jobfile import load_job
from dpfed.runtime.monitor import JobView, MonitorServer, checkpoint_view, parse_address

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
PARTIES = [
    ("label", "breast_cancer", (0, 10)),
    ("bank", "breast_cancer", (10, 20)),
    ("shop", "breast_cancer", (20, 30)),
]
SOUND = {
    "iterations": 12,
    "mechanism": "sound",
    "epsilon": 1.0,
    "delta": 1e-5,
    "rounds_above_rule": True,
}
BUDGET = {"epsilon": 3.0, "delta": 1e-5}


def _get(url: str) -> tuple[int, str, bytes]:
    try:
        with urllib.request.urlopen(url, timeout=5) as reply:
            return reply.status, reply.headers["Content-Type"], reply.read()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.headers["Content-Type"], exc.read()


def test_addresses():
    assert parse_address("8765") == ("127.0.0.1", 8765)
    assert parse_address("0.0.0.0:80") == ("0.0.0.0", 80)
    assert parse_address("[::1]:9000") == ("::1", 9000)
    for bad in ("", "host:", "host:http", "70000"):
        with pytest.raises(DpfedInputError, match=r"\[HOST:\]PORT"):
            parse_address(bad)


def test_the_server_serves_the_page_and_the_view_as_json(netjob):
    job = netjob(PARTIES, params=SOUND, budgets=dict.fromkeys(["bank", "shop"], BUDGET))
    view = JobView(load_job(job.config))
    view.on_history(
        [
            {
                "iteration": 1,
                "seconds": 0.1,
                "train_objective": math.inf,
                "test_log_loss": 0.5,
                "epsilon": 0.2,
                "private": [1, 2],
            }
        ]
    )
    view.on_party("bank", "serving", {"round": 1, "finished": False, "epsilon": 0.2})
    view.on_party("nobody", "serving")  # not a party of the job: ignored
    page = MonitorServer(view.snapshot, "127.0.0.1:0").start()
    try:
        assert page.url.startswith("http://127.0.0.1:")
        code, kind, body = _get(page.url)
        assert code == 200 and kind.startswith("text/html") and b"status.json" in body
        code, kind, body = _get(page.url + "status.json")
        status = json.loads(body)
        assert code == 200 and kind == "application/json"
        assert status["job"] == "job" and status["state"] == "opening"
        assert status["rounds_planned"] == 12
        # only the drawn figures, and no infinity (JSON has none)
        assert status["history"] == [
            {
                "iteration": 1,
                "seconds": 0.1,
                "train_objective": None,
                "test_log_loss": 0.5,
                "epsilon": 0.2,
            }
        ]
        assert status["parties"]["bank"] == {
            "address": load_job(job.config).party("bank").address,
            "status": "serving",
            "round": 1,
            "finished": False,
            "epsilon": 0.2,
            "budget": 3.0,
        }
        assert set(status["parties"]) == {"label", "bank", "shop"}
        assert _get(page.url + "secrets")[0] == 404
    finally:
        page.stop()


@pytest.mark.networked
def test_a_port_in_use_is_a_clear_error():
    first = MonitorServer(dict, "127.0.0.1:0").start()
    try:
        port = first.url.rsplit(":", 1)[1].strip("/")
        with pytest.raises(DpfedInputError, match=f"cannot listen on 127.0.0.1:{port}"):
            MonitorServer(dict, f"127.0.0.1:{port}")
    finally:
        first.stop()


def test_a_missing_checkpoint_says_where_it_looked(netjob, tmp_path):
    job = netjob(PARTIES, params=SOUND)
    with pytest.raises(DpfedInputError, match=r"no leader checkpoint at .*leader\.npz"):
        checkpoint_view(load_job(job.config), tmp_path)


def _chromium(*args: str, profile) -> str:
    flags = [
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-quic",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        f"--user-data-dir={profile}",
        "--virtual-time-budget=4000",
    ]
    done = subprocess.run(
        [CHROMIUM, *flags, *args], capture_output=True, text=True, timeout=120, check=True
    )
    return done.stdout


def _shown(dom: str, testid: str) -> str:
    found = re.search(rf'data-testid="{testid}"[^>]*>([^<]*)<', dom)
    assert found, dom[:2000]
    return found.group(1)


@pytest.mark.skipif(CHROMIUM is None, reason="needs Debian's chromium (apt-get install chromium)")
def test_a_networked_job_watched_in_headless_chromium(netjob, tmp_path):
    job = netjob(PARTIES, params=SOUND, budgets=dict.fromkeys(["bank", "shop"], BUDGET))
    job.start_parties()
    leader = subprocess.Popen(
        job.run_args("--monitor", "127.0.0.1:0", "--monitor-keep", "120"),
        stderr=subprocess.PIPE,
        text=True,
        env=job.env(),
    )
    try:
        url = None
        for line in leader.stderr:
            found = re.search(r"job page: (http://\S+)", line)
            if found:
                url = found.group(1)
                break
        assert url is not None
        deadline = time.monotonic() + 120
        while not job.out.exists() and time.monotonic() < deadline:
            assert leader.poll() is None, "dpfed run ended without a result"
            time.sleep(0.1)
        result = json.loads(job.out.read_text())
        dom = _chromium("--dump-dom", url, profile=tmp_path / "profile1")
        assert _shown(dom, "state") == "finished"
        assert int(_shown(dom, "rounds")) == len(result["history"]) == SOUND["iterations"]
        epsilon = float(_shown(dom, "epsilon"))
        assert epsilon == pytest.approx(result["privacy"]["epsilon"], rel=1e-5)
        for name in ("label", "bank", "shop"):
            assert re.search(rf'data-party="{name}"><td>{name}</td><td>finished</td>', dom), name
        shot = tmp_path / "page.png"
        _chromium(
            "--window-size=1200,900", f"--screenshot={shot}", url, profile=tmp_path / "profile2"
        )
        from matplotlib.image import imread

        pixels = imread(shot)
        assert pixels.shape[0] == 900 and pixels.shape[1] == 1200
        assert pixels[..., :3].std() > 0.05  # not blank: text, charts and colours
    finally:
        leader.kill()
        leader.wait(timeout=10)
    assert job.wait_parties() == dict.fromkeys(job.names, 0)


@pytest.mark.skipif(CHROMIUM is None, reason="needs Debian's chromium (apt-get install chromium)")
def test_dpfed_monitor_shows_a_finished_job_from_its_checkpoint(netjob, tmp_path):
    job = netjob(
        PARTIES, params=SOUND | {"iterations": 4}, budgets=dict.fromkeys(["bank", "shop"], BUDGET)
    )
    job.start_parties()
    done = subprocess.run(
        job.run_args(), capture_output=True, text=True, env=job.env(), timeout=120
    )
    assert done.returncode == 0, done.stderr
    result = json.loads(job.out.read_text())
    from .conftest import DPFED

    page = subprocess.Popen(
        [*DPFED, "monitor", "--config", str(job.config), "--address", "127.0.0.1:0"],
        stdout=subprocess.PIPE,
        text=True,
        env=job.env(),
    )
    try:
        url = re.search(r"job page: (http://\S+)", page.stdout.readline()).group(1)
        dom = _chromium("--dump-dom", url, profile=tmp_path / "profile")
        assert _shown(dom, "state") == "finished"
        assert int(_shown(dom, "rounds")) == len(result["history"]) == 4
        assert float(_shown(dom, "epsilon")) == pytest.approx(
            result["history"][-1]["epsilon"], rel=1e-5
        )
    finally:
        page.terminate()
        page.wait(timeout=10)


def test_the_page_follows_the_job_as_it_runs(netjob):
    """Poll the leader's status.json while a job runs: opening, then running with rounds and
    spending growing, then finished with the result's figures."""
    import threading

    from dpfed.runtime.leader import Leader

    job = netjob(
        PARTIES, params=SOUND | {"iterations": 30}, budgets=dict.fromkeys(["bank", "shop"], BUDGET)
    )
    job.start_parties()
    leader = Leader(load_job(job.config), progress=False, monitor="127.0.0.1:0", monitor_keep=1.0)
    seen: list[dict] = []
    stop = threading.Event()

    def watch() -> None:
        while not stop.is_set():
            if leader.monitor_url is not None:
                try:
                    seen.append(json.loads(_get(leader.monitor_url + "status.json")[2]))
                except (OSError, ValueError):
                    pass
            time.sleep(0.02)

    watcher = threading.Thread(target=watch, daemon=True)
    watcher.start()
    try:
        result = leader.run(job.out)
    finally:
        stop.set()
        watcher.join(timeout=10)
    assert job.wait_parties() == dict.fromkeys(job.names, 0)
    states = [s["state"] for s in seen]
    assert states[0] in ("opening", "running") and states[-1] == "finished"
    assert "running" in states
    rounds = [len(s["history"]) for s in seen]
    assert rounds == sorted(rounds) and rounds[-1] == 30
    assert any(0 < r < 30 for r in rounds)  # seen part-way
    last = seen[-1]
    assert last["privacy"]["epsilon"] == result["privacy"]["epsilon"]
    assert [h["epsilon"] for h in last["history"]] == [h["epsilon"] for h in result["history"]]
    for name in ("bank", "shop"):
        assert last["parties"][name]["epsilon"] == pytest.approx(
            result["privacy"]["per_party"][name]["epsilon"]
        )
        assert last["parties"][name]["status"] == "finished"
        assert last["parties"][name]["round"] == 30


def test_the_page_warns_when_the_test_loss_keeps_rising():
    from dpfed.runtime.monitor import RISING_ROUNDS, rising_loss_warning

    def history(losses):
        return [{"iteration": t, "test_log_loss": v} for t, v in enumerate(losses, start=1)]

    assert RISING_ROUNDS == 3
    assert rising_loss_warning(history([0.5, 0.4, 0.36, 0.37, 0.38])) is None  # 2 rises
    warning = rising_loss_warning(history([0.5, 0.36, 0.37, 0.38, 0.41]))
    assert warning is not None and "risen in each of the last 3 rounds" in warning
    assert "0.36 at round 2 to 0.41" in warning
    assert rising_loss_warning(history([0.36, 0.37, 0.38, 0.41, 0.40])) is None  # fell again
    assert rising_loss_warning(history([None, None, None, None])) is None  # no test rows
