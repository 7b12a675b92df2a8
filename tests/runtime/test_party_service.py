"""A party as a long-running service: ``dpfed party --config party.toml`` serves several jobs
and predictions the leaders present, until SIGTERM."""

from __future__ import annotations

import json
import re
import signal
import subprocess
from pathlib import Path

import pytest

from dpfed._validation import DpfedInputError
from dpfed.runtime.budget import BudgetLedger
from dpfed.runtime.jobfile import load_job
from dpfed.runtime.service import (
    SERVICE_DATASET,
    PartyService,
    is_party_config,
    load_party_config,
)

from .conftest import DPFED, free_ports
from .test_networked_alignment import PARTIES as TABLE_PARTIES
from .test_networked_alignment import _write_new_rows, aligned_job
from .test_networked_vertical import BREAST_CANCER_3, wait_for

PARAMS = {
    "iterations": 4,
    "mechanism": "sound",
    "epsilon": 1.0,
    "delta": 1e-5,
    "rounds_above_rule": True,
}


def _party_file(folder, certs, name: str, address: str, extra: str = ""):
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "party.toml"
    path.write_text(
        f'name = "{name}"\naddress = "{address}"\n'
        f'certificate = "{certs / (name + ".pem")}"\nkey = "{certs / (name + ".key")}"\n'
        f'ca = "{certs / "ca.pem"}"\nworkdir = "{folder / "work"}"\n' + extra
    )
    return path


def _at_service(job, name: str, address: str) -> None:
    """Point party ``name`` of ``job``'s file at the service's address."""
    text = job.config.read_text()
    text = re.sub(rf'(name = "{name}"\naddress = )"[^"]*"', rf'\1"{address}"', text)
    job.config.write_text(text)


def _start_service(folder, config):
    log_path = folder / "service.log"
    with open(log_path, "ab") as log:
        proc = subprocess.Popen(
            [*DPFED, "party", "--config", str(config)], stdout=log, stderr=subprocess.STDOUT
        )
    return proc, log_path


def test_one_service_per_party_serves_two_jobs_and_a_prediction_until_sigterm(
    netjob, tmp_path, job_certs
):
    names = ("label", "bank")
    ports = free_ports(len(names))
    addresses = {n: f"127.0.0.1:{p}" for n, p in zip(names, ports, strict=True)}
    services, logs = {}, {}
    try:
        for name in names:
            folder = tmp_path / f"{name}-service"
            config = _party_file(
                folder,
                job_certs,
                name,
                addresses[name],
                "budget = { epsilon = 5.0, delta = 1e-5 }\n" if name == "bank" else "",
            )
            services[name], logs[name] = _start_service(folder, config)
        for name in names:
            assert wait_for(
                lambda n=name: f"serving party {n}" in logs[n].read_text(), timeout=60
            ), logs[name].read_text()
        jobs = []
        for job_id in ("first", "second"):
            job = netjob(
                BREAST_CANCER_3[:2],
                job_id=job_id,
                sub=job_id,
                params=PARAMS,
                job={"evaluate": "none"},
            )
            for name in names:
                _at_service(job, name, addresses[name])
            done = job.run(timeout=300)  # no party process is started for the job
            assert done.returncode == 0, done.stderr + "".join(logs[n].read_text() for n in names)
            jobs.append(job)
        assert all(proc.poll() is None for proc in services.values())  # still up
        # a prediction with the first job's model, from the same two processes
        out = tmp_path / "predicted.json"
        done = subprocess.run(
            [
                *DPFED,
                "predict",
                "--config",
                str(jobs[0].config),
                "--data",
                "breast_cancer:test",
                "--out",
                str(out),
            ],
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert done.returncode == 0, done.stderr + logs["bank"].read_text()
        assert all(proc.poll() is None for proc in services.values())
        scores = list(
            (tmp_path / "label-service" / "work" / "first" / "predictions").glob("*.json")
        )
        assert len(scores) == 1  # the recipient, the label holder's service, holds them
        # each service kept each presented job file, owner-only; bank spent its one budget
        for name in names:
            for job_id in ("first", "second"):
                kept = tmp_path / f"{name}-service" / "work" / job_id / "job.toml"
                assert kept.stat().st_mode & 0o777 == 0o600
                assert load_job(kept).id == job_id
        with BudgetLedger(tmp_path / "bank-service" / "work" / "ledger.sqlite") as ledger:
            spent = ledger.spent_epsilon(SERVICE_DATASET, "bank")
        assert 1.0 < spent <= 5.0
        assert (
            json.loads((tmp_path / "first" / "result.json").read_text())["protocol"] == "vertical"
        )
    finally:
        codes = {}
        for name, proc in services.items():
            proc.send_signal(signal.SIGTERM)
            codes[name] = proc.wait(timeout=60)
    for name in names:
        text = logs[name].read_text()
        assert codes[name] == 0, text
        assert "stopped after serving 3 job(s) and predictions" in text


def test_the_service_refuses_a_job_that_names_it_elsewhere_or_outside_its_policy(
    tmp_path, job_certs, netjob
):
    job = netjob(BREAST_CANCER_3[:2], params=PARAMS)
    config = load_party_config(
        _party_file(
            tmp_path / "svc", job_certs, "bank", "127.0.0.1:1", 'protocols = ["consensus"]\n'
        )
    )
    service = PartyService(config)
    text = job.config.read_text()
    with pytest.raises(DpfedInputError, match="consensus"):
        service.job_spec("job", text)
    service.config = load_party_config(
        _party_file(tmp_path / "svc2", job_certs, "bank", "127.0.0.1:1")
    )
    with pytest.raises(DpfedInputError, match=r"this service serves bank at 127\.0\.0\.1:1"):
        service.job_spec("job", text)
    _at_service(job, "bank", "127.0.0.1:1")
    spec = service.job_spec("job", job.config.read_text())
    bank = spec.party("bank")
    # the service's own settings, not the leader's
    assert bank.workdir == tmp_path / "svc2" / "work" and bank.dataset == SERVICE_DATASET
    assert bank.certificate == job_certs / "bank.pem" and spec.ca == job_certs / "ca.pem"
    # a data_dir the leader's file names is not where the service reads its data
    moved = job.config.read_text().replace(
        f'data = "breast_cancer"\ncertificate = "{job_certs / "bank.pem"}"',
        f'data = "breast_cancer"\ndata_dir = "/tmp"\ncertificate = "{job_certs / "bank.pem"}"',
    )
    assert 'data_dir = "/tmp"' in moved
    assert service.job_spec("job", moved).party("bank").data_dir is None
    assert spec.digest == load_job(job.config).digest  # the shared settings unchanged
    with pytest.raises(DpfedInputError, match="not 'other'"):
        service.job_spec("other", job.config.read_text())
    # a data file outside data_dir is refused
    moved = job.config.read_text().replace(
        f'data = "breast_cancer"\ncertificate = "{job_certs / "bank.pem"}"',
        f'data = "/etc/passwd.npy"\ncertificate = "{job_certs / "bank.pem"}"',
    )
    service.config = load_party_config(
        _party_file(
            tmp_path / "svc3", job_certs, "bank", "127.0.0.1:1", f'data_dir = "{tmp_path}"\n'
        )
    )
    with pytest.raises(DpfedInputError, match="outside this service's data_dir"):
        service.job_spec("job", moved)


def test_party_files_are_told_from_job_files_and_checked(tmp_path, job_certs, netjob):
    job = netjob(BREAST_CANCER_3[:2], params=PARAMS)
    good = _party_file(tmp_path / "a", job_certs, "bank", "127.0.0.1:1")
    assert is_party_config(good) and not is_party_config(job.config)
    bad = _party_file(tmp_path / "b", job_certs, "bank", "127.0.0.1:1", "colour = 1\n")
    with pytest.raises(DpfedInputError, match="unknown keys"):
        load_party_config(bad)
    bad = _party_file(
        tmp_path / "c",
        job_certs,
        "bank",
        "127.0.0.1:1",
        "budget = { epsilon = -1.0, delta = 1e-5 }\n",
    )
    with pytest.raises(DpfedInputError, match="epsilon > 0"):
        load_party_config(bad)
    done = subprocess.run(
        [*DPFED, "party", "--config", str(job.config)], capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 2 and "--name says which" in done.stderr
    done = subprocess.run(
        [*DPFED, "party", "--config", str(good), "--name", "bank"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2 and "is a party file" in done.stderr


def test_a_budget_per_data_set_labels_the_ledger_by_the_data_not_the_span(
    tmp_path, job_certs, netjob
):
    job = netjob(BREAST_CANCER_3[:2], params=PARAMS)
    _at_service(job, "bank", "127.0.0.1:1")
    config = load_party_config(
        _party_file(
            tmp_path / "svc",
            job_certs,
            "bank",
            "127.0.0.1:1",
            "budget = { breast_cancer = { epsilon = 2.0, delta = 1e-5 } }\n",
        )
    )
    service = PartyService(config)
    bank = service.job_spec("job", job.config.read_text()).party("bank")
    assert bank.dataset == "breast_cancer"  # the job file's "breast_cancer:10-20" is not used
    assert (bank.budget.epsilon, bank.budget.delta) == (2.0, 1e-5)
    service.config = load_party_config(
        _party_file(
            tmp_path / "svc2",
            job_certs,
            "bank",
            "127.0.0.1:1",
            "budget = { a9a = { epsilon = 2.0, delta = 1e-5 } }\n",
        )
    )
    with pytest.raises(DpfedInputError, match=r"budgets for \['a9a'\] only"):
        service.job_spec("job", job.config.read_text())


def test_job_ids_that_would_leave_the_work_folder_are_refused():
    from dpfed.runtime.jobfile import check_job_id

    assert check_job_id("a9a-1.2") == "a9a-1.2"
    for bad in ("..", ".", "a/b", "", 7):
        with pytest.raises(DpfedInputError, match=r"job id|\[job\]\.id"):
            check_job_id(bad)


def test_a_recipients_policy_refuses_prediction_shares_to_anyone_else(tmp_path, job_certs):
    import grpc

    from dpfed.runtime import wire
    from dpfed.runtime.control import PredictRequest, StatusRequest
    from dpfed.runtime.transport import Refused

    config = load_party_config(
        _party_file(tmp_path / "svc", job_certs, "bank", "127.0.0.1:1", 'recipients = ["label"]\n')
    )
    assert config.recipients == ("label",)
    service = PartyService(config)

    def request(to: str) -> bytes:
        return wire.encode(
            PredictRequest("leader", "bank", 0, request="r1", data="breast_cancer:test", to=to),
            job="job",
            seq=0,
        )

    service._check_recipient(request("label"))  # allowed
    with pytest.raises(Refused, match=r"to \['label'\] only") as refused:
        service._check_recipient(request("leader"))
    assert refused.value.code == grpc.StatusCode.FAILED_PRECONDITION
    # other requests pass the policy untouched
    service._check_recipient(wire.encode(StatusRequest("leader", "bank", 0), job="job", seq=0))


@pytest.mark.slow
def test_services_align_and_train_a_job_on_their_own_tables_read_in_their_data_dir(
    netjob, tmp_path, job_certs, party_tables
):
    """The leader's job file names each table relative to a data_dir of its own; each service
    reads it in its own data_dir and serves both the alignment job and the job."""
    pytest.importorskip("private_set_intersection.python")
    job, _ = aligned_job(
        netjob, tmp_path, params='mechanism = "sound"\nepsilon = 1.0\ndelta = 1e-5'
    )
    own = tmp_path / "own-tables"  # where the services keep them, not the leader's folder
    held = party_tables(own, per_party=True)
    shared = held["label"] & held["bank"] & held["shop"]
    spec = load_job(job.config)
    services, logs = {}, {}
    try:
        for p in spec.parties:
            folder = tmp_path / f"{p.name}-service"
            budget = (
                ""
                if p.name == "label"  # the sound mechanism protects the others
                else "budget = { epsilon = 3.0, delta = 1e-5 }\n"
            )
            config = _party_file(
                folder, job_certs, p.name, p.address, f'data_dir = "{own / p.name}"\n' + budget
            )
            services[p.name], logs[p.name] = _start_service(folder, config)
        for name in TABLE_PARTIES:
            assert wait_for(
                lambda n=name: f"serving party {n}" in logs[n].read_text(), timeout=60
            ), logs[name].read_text()
        done = job.run(timeout=300)
        assert done.returncode == 0, done.stderr + "".join(
            logs[n].read_text() for n in TABLE_PARTIES
        )
        result = json.loads(job.out.read_text())
        assert result["data"]["alignment"]["parts"]["train"]["rows"] == len(shared)
        kept = tmp_path / "bank-service" / "work" / "tables" / "alignment.json"
        assert set(json.loads(kept.read_text())["parts"]["train"]["ids"]) == shared
        # each budgeted party's ledger records which rows its spending is on
        digest = result["data"]["alignment"]["parts"]["train"]["digest"]
        for name in ("bank", "shop"):
            with BudgetLedger(tmp_path / f"{name}-service" / "work" / "ledger.sqlite") as led:
                (opened,) = led.jobs()
            assert (opened["id"], opened["rows"]) == ("tables", digest)
        # the services, still up, score each one's own new.csv by ID
        new_ids = _write_new_rows(own, drop_at_shop=5, unknown_at_label=0)
        scored = subprocess.run(
            [
                *DPFED,
                "predict",
                "--config",
                str(job.config),
                "--data",
                "new.csv",
                "--out",
                str(tmp_path / "receipt.json"),
            ],
            capture_output=True,
            text=True,
            timeout=120,
            env=job.env(),
        )
        assert scored.returncode == 0, scored.stderr + "".join(
            logs[n].read_text() for n in TABLE_PARTIES
        )
        written = json.loads(
            Path(json.loads((tmp_path / "receipt.json").read_text())["path"]).read_text()
        )
        assert written["ids"] == [i for i in new_ids["label"] if i in set(new_ids["shop"])]
        assert written["not_scored"]["missing_at"] == {"bank": 0, "shop": 5}
    finally:
        for proc in services.values():
            proc.send_signal(signal.SIGTERM)
            proc.wait(timeout=60)
    # a table outside the service's data_dir is refused
    service = PartyService(
        load_party_config(
            _party_file(
                tmp_path / "svc",
                job_certs,
                "bank",
                spec.party("bank").address,
                f'data_dir = "{own}"\n',
            )
        )
    )
    text = job.config.read_text().replace('data = "bank.train.csv"', 'data = "../x.csv"')
    with pytest.raises(DpfedInputError, match="outside this service's data_dir"):
        service.job_spec("tables.psi", text)
