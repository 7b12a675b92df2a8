"""Prediction with a finished networked vertical job's model: ``dpfed predict``."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import numpy as np
import pytest

from dpfed.data import load_dataset, vertical_split
from dpfed.protocols.vertical.roles import predicted_scores

from .conftest import DPFED
from .test_networked_vertical import BREAST_CANCER_3, BUDGET, SOUND, _inprocess


def _train(job, timeout: float = 300.0) -> None:
    job.start_parties()
    done = job.run(timeout=timeout)
    assert done.returncode == 0, done.stderr
    assert job.wait_parties() == dict.fromkeys(job.names, 0)


def _predict(job, data: str, out: Path, *extra: str, timeout: float = 120.0):
    job.start_parties()  # the parties of a finished job serve predictions
    done = subprocess.run(
        [*DPFED, "predict", "--config", str(job.config), "--data", data, "--out", str(out),
         *extra],
        capture_output=True, text=True, timeout=timeout, env=job.env(),
    )
    codes = job.wait_parties()
    return done, codes


def _reference_scores(reference, X, split) -> np.ndarray:
    """What the in-process model predicts: every party's clipped share, summed in order."""
    total = np.zeros(X.shape[0])
    for mech, block, (name, model) in zip(
        reference.mechanisms, vertical_split(X, split), reference.models.items(), strict=True
    ):
        total += predicted_scores(mech.prepare_block(block), model,
                                  reference.score_bounds.get(name))
    return total


def test_a9a_test_file_scored_over_the_network_equals_inprocess(netjob, tmp_path):
    data_dir = Path(os.environ.get("DPFED_DATA", "")).resolve()
    test_file = data_dir / "a9a" / "a9a.t"
    if not test_file.is_file():
        pytest.skip("a9a not found under $DPFED_DATA")
    split = (40, 43, 40)
    parties = [("label", "a9a", (0, 40)), ("bank", "a9a", (40, 83)), ("shop", "a9a", (83, 123))]
    params = {"mechanism": "sound", "epsilon": 1.0, "delta": 1e-5}
    job = netjob(parties, params=params, job={"evaluate": "none"},
                 budgets={"bank": BUDGET, "shop": BUDGET})
    text = job.config.read_text().replace('data = "a9a"', f'data = "a9a"\ndata_dir = "{data_dir}"')
    job.config.write_text(text)
    _train(job)
    out = tmp_path / "receipt.json"
    done, codes = _predict(job, str(test_file), out, "--id", "a9a-test")
    assert done.returncode == 0, done.stderr + job.log("label")
    assert codes == dict.fromkeys(job.names, 0)
    receipt = json.loads(out.read_text())
    # the leader learns where the scores are, never the scores
    assert receipt["recipient"] == "label" and receipt["n_rows"] == 16281
    assert "scores" not in receipt and "probability" not in receipt
    path = Path(receipt["path"])
    assert path == (job.workdir("label") / "predictions" / "a9a-test.json").resolve()
    import hashlib

    assert hashlib.sha256(path.read_bytes()).hexdigest() == receipt["sha256"]
    for other in ("bank", "shop"):
        assert not (job.workdir(other) / "predictions").exists()
    scores = json.loads(path.read_text())
    # the same job in one process, with the parties' own noise secrets
    reference = _inprocess("a9a", split, params, data_dir,
                           rngs=job.secret_rngs())
    X_test = load_dataset("a9a", data_dir).X_test
    want = _reference_scores(reference, X_test, split)
    np.testing.assert_allclose(scores["scores"], want, rtol=0, atol=1e-12)
    np.testing.assert_allclose(scores["probability"], 1.0 / (1.0 + np.exp(-want)),
                               rtol=0, atol=1e-12)
    # the passive parties' clip is really in force (a weighted job clips their scores)
    assert reference.score_bounds


def test_the_leader_as_named_recipient_gets_the_scores(netjob, tmp_path):
    job = netjob(BREAST_CANCER_3, params=SOUND | {"seed": 3},
                 job={"simulation": True, "prediction_recipients": ["label", "leader"]})
    _train(job, timeout=120)
    out = tmp_path / "scores.json"
    done, codes = _predict(job, "breast_cancer:test", out, "--to", "leader")
    assert done.returncode == 0, done.stderr
    assert codes == dict.fromkeys(job.names, 0)
    got = json.loads(out.read_text())
    assert got["recipient"] == "leader"
    reference = _inprocess("breast_cancer", (10, 10, 10), SOUND | {"seed": 3})
    X_test = load_dataset("breast_cancer").X_test
    want = _reference_scores(reference, X_test, (10, 10, 10))
    assert got["n_rows"] == X_test.shape[0]
    np.testing.assert_allclose(got["scores"], want, rtol=0, atol=1e-12)
    for name in job.names:
        assert not (job.workdir(name) / "predictions").exists()


def test_prediction_before_the_job_finished_is_refused(netjob, tmp_path):
    job = netjob(BREAST_CANCER_3, params={"iterations": 3})
    out = tmp_path / "receipt.json"
    done, _ = _predict(job, "breast_cancer:test", out)
    assert done.returncode == 2, done.stderr
    assert "has not finished job" in done.stderr
    assert not out.exists()


def test_rows_a_party_cannot_read_are_refused_naming_them(netjob, tmp_path):
    job = netjob(BREAST_CANCER_3, params={"iterations": 2})
    _train(job, timeout=120)
    out = tmp_path / "receipt.json"
    done, codes = _predict(job, "breast_cancer:valid", out)
    assert done.returncode == 2, done.stderr
    assert "breast_cancer:test or breast_cancer:train" in done.stderr
    assert not out.exists()
    assert codes == dict.fromkeys(job.names, 0)


def test_scores_go_only_to_a_recipient_the_job_file_lists(netjob, tmp_path):
    """By default only the label holder may receive them: a leader asking for them itself is
    refused before any party is contacted (and every party would refuse to send its share)."""
    job = netjob(BREAST_CANCER_3, params={"iterations": 2})
    out = tmp_path / "scores.json"
    for to in ("leader", "bank"):
        done = subprocess.run(
            [*DPFED, "predict", "--config", str(job.config), "--data", "breast_cancer:test",
             "--out", str(out), "--to", to],
            capture_output=True, text=True, timeout=60, env=job.env(),
        )
        assert done.returncode == 2, done.stderr
        assert "--to must name one of label" in done.stderr
        assert "[job].prediction_recipients" in done.stderr
    assert not out.exists()
