"""An aligned vertical job over the network: the parties' own tables, aligned by private set
intersection in an alignment job the leader runs first, then trained on the agreed rows."""

from __future__ import annotations

import json
import stat

import pytest

from dpfed.cli.main import main
from dpfed.runtime.jobfile import load_job

PARTIES = ("label", "bank", "shop")


def aligned_job(netjob, tmp_path, *, params: str, extra_job: str = ""):
    """A NetJob whose job file names each party's own tables (``party_tables``)."""
    pytest.importorskip("private_set_intersection.python")
    job = netjob([(n, "unused", (0, 1)) for n in PARTIES], job_id="tables")
    spec = load_job(job.config)
    data = tmp_path / "tables"
    certs = spec.ca.parent
    lines = ["[job]", 'id = "tables"', 'protocol = "vertical"', 'align = "psi"',
             "round_timeout = 60.0", "grace = 2.0", "idle_timeout = 120.0", extra_job,
             "[params]", params, "[tls]", f'ca = "{spec.ca}"', "[leader]",
             f'address = "{spec.leader.address}"', f'certificate = "{certs / "leader.pem"}"',
             f'key = "{certs / "leader.key"}"']
    for p in spec.parties:
        lines += ["[[party]]", f'name = "{p.name}"', f'address = "{p.address}"',
                  f'certificate = "{certs / (p.name + ".pem")}"',
                  f'key = "{certs / (p.name + ".key")}"', f'data_dir = "{data}"',
                  f'data = "{p.name}.train.csv"', f'test = "{p.name}.test.csv"',
                  'id_column = "customer_id"', f'schema = "{p.name}.schema.toml"',
                  f'ledger = "{tmp_path / "ledgers" / (p.name + ".sqlite")}"']
    job.config.write_text("\n".join(lines) + "\n")
    return job, data


@pytest.mark.slow
def test_an_aligned_job_runs_over_the_network_like_in_process_and_the_leader_sees_no_id(
        netjob, tmp_path, party_tables):
    job, data = aligned_job(netjob, tmp_path, params='mechanism = "none"\niterations = 30')
    data.mkdir()
    held = party_tables(data)
    shared = held["label"] & held["bank"] & held["shop"]
    job.start_parties()
    done = job.run(timeout=240)
    assert done.returncode == 0, done.stderr + "".join(job.log(n) for n in PARTIES)
    assert f"aligned {len(shared)} rows shared by every party" in done.stdout
    result = json.loads(job.out.read_text())
    alignment = result["data"]["alignment"]
    assert alignment["parts"]["train"]["rows"] == len(shared)
    assert result["parties"][0]["n_features"] == 6  # 4 numeric and a one-hot of two
    # each party served the alignment job, then the job, and exited
    assert job.wait_parties(timeout=60) == dict.fromkeys(PARTIES, 0)
    # the same model as the job in one process (its rows in another order: the sums over
    # rows differ in rounding only)
    inproc = tmp_path / "inprocess.json"
    assert main(["train", "vertical", "--config", str(job.config), "--out", str(inproc),
                 "--quiet"]) == 0
    local = json.loads(inproc.read_text())
    assert local["data"]["alignment"]["joined_rows"] == len(shared)
    assert result["final"]["test_accuracy"] == pytest.approx(
        local["final"]["test_accuracy"], abs=1e-9)
    assert result["final"]["train_objective"] == pytest.approx(
        local["final"]["train_objective"], rel=1e-9)
    assert result["final"]["test_accuracy"] > 0.88
    # no customer ID in anything the leader wrote or printed
    ids = held["label"] | held["bank"] | held["shop"]
    leader_files = [job.out, *(p for p in (job.folder / "checkpoint").rglob("*") if p.is_file())]
    texts = [done.stdout, done.stderr] + [p.read_bytes().decode("latin-1") for p in leader_files]
    assert not [i for i in ids if any(i in t for t in texts)]
    # every party keeps what it agreed, owner-only, and the same digest as the leader's
    for name in PARTIES:
        path = job.folder / "work" / name / "tables" / "alignment.json"
        assert stat.S_IMODE(path.stat().st_mode) == 0o600
        kept = json.loads(path.read_text())
        assert kept["parts"]["train"]["digest"] == alignment["parts"]["train"]["digest"]
        assert set(kept["parts"]["train"]["ids"]) == shared


@pytest.mark.slow
def test_too_few_shared_rows_end_the_alignment_with_the_reason(netjob, tmp_path, party_tables):
    job, data = aligned_job(netjob, tmp_path, params='mechanism = "none"\niterations = 30',
                             extra_job="min_rows = 100000")
    data.mkdir()
    party_tables(data)
    job.start_parties()
    done = job.run(timeout=240)
    assert done.returncode != 0
    assert "fewer than [job].min_rows = 100000" in done.stderr
    assert not job.out.exists()
