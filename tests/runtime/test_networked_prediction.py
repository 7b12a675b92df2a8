"""Prediction with a finished networked vertical job's model: ``dpfed predict``."""

from __future__ import annotations

import json
import os
import stat
import subprocess
from pathlib import Path

import numpy as np
import pytest

from dpfed.data import load_dataset, vertical_split
from dpfed.protocols.vertical.roles import predicted_scores

from .conftest import DPFED, allowing_exact
from .test_networked_vertical import BREAST_CANCER_3, BUDGET, SOUND, _inprocess, wait_for


def _train(job, timeout: float = 300.0) -> None:
    job.start_parties()
    done = job.run(timeout=timeout)
    assert done.returncode == 0, done.stderr
    assert job.wait_parties() == dict.fromkeys(job.names, 0)


def _serving(job) -> dict[str, int]:
    """How many times each party has logged that it serves the job."""
    logs = {name: job.folder / f"{name}.log" for name in job.names}
    return {
        name: log.read_text().count("serving job") if log.exists() else 0
        for name, log in logs.items()
    }


def _predict(job, data: str, out: Path, *extra: str, timeout: float = 120.0):
    before = _serving(job)
    job.start_parties()  # the parties of a finished job serve predictions
    # every party serves before the prediction starts: one still starting when the prediction
    # is refused would not hear that it is over, and would wait for its idle timeout
    assert wait_for(
        lambda: all(n > before[name] for name, n in _serving(job).items()), timeout=120
    ), {name: job.log(name) for name in job.names}
    done = subprocess.run(
        [*DPFED, "predict", "--config", str(job.config), "--data", data, "--out", str(out), *extra],
        capture_output=True,
        text=True,
        timeout=timeout,
        env=job.env(),
    )
    codes = job.wait_parties()
    return done, codes


def _reference_scores(reference, X, split) -> np.ndarray:
    """What the in-process model predicts: every party's clipped share, summed in order."""
    total = np.zeros(X.shape[0])
    for mech, block, (name, model) in zip(
        reference.mechanisms, vertical_split(X, split), reference.models.items(), strict=True
    ):
        total += predicted_scores(
            mech.prepare_block(block), model, reference.score_bounds.get(name)
        )
    return total


@pytest.mark.skipif(
    not os.environ.get("DPFED_REPRODUCE"),
    reason="a9a's test file over the network: set DPFED_REPRODUCE=1; CI scores breast cancer's",
)
def test_a9a_test_file_scored_over_the_network_equals_inprocess(netjob, tmp_path):
    data_dir = Path(os.environ.get("DPFED_DATA", "")).resolve()
    test_file = data_dir / "a9a" / "a9a.t"
    if not test_file.is_file():
        pytest.skip("a9a not found under $DPFED_DATA")
    split = (40, 43, 40)
    parties = [("label", "a9a", (0, 40)), ("bank", "a9a", (40, 83)), ("shop", "a9a", (83, 123))]
    params = {"mechanism": "sound", "epsilon": 1.0, "delta": 1e-5}
    # a9a's columns are one-hot: in each party's columns most test rows equal some training
    # row, yet they are other people's rows, scored without an opt-in
    job = netjob(
        parties, params=params, job={"evaluate": "none"}, budgets={"bank": BUDGET, "shop": BUDGET}
    )
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
    assert "exact_values" not in receipt
    assert "scores" not in receipt and "probability" not in receipt
    path = Path(receipt["path"])
    assert path == (job.workdir("label") / "predictions" / "a9a-test.json").resolve()
    import hashlib

    assert hashlib.sha256(path.read_bytes()).hexdigest() == receipt["sha256"]
    for other in ("bank", "shop"):
        assert not (job.workdir(other) / "predictions").exists()
    scores = json.loads(path.read_text())
    # the same job in one process, with the parties' own noise secrets
    reference = _inprocess("a9a", split, params, data_dir, rngs=job.secret_rngs())
    X_test = load_dataset("a9a", data_dir).X_test
    want = _reference_scores(reference, X_test, split)
    np.testing.assert_allclose(scores["scores"], want, rtol=0, atol=1e-12)
    np.testing.assert_allclose(
        scores["probability"], 1.0 / (1.0 + np.exp(-want)), rtol=0, atol=1e-12
    )
    # the passive parties' clip is really in force (a weighted job clips their scores)
    assert reference.score_bounds


def test_the_leader_as_named_recipient_gets_the_scores(netjob, tmp_path):
    job = netjob(
        BREAST_CANCER_3,
        params=SOUND | {"seed": 3},
        job={"simulation": True, "prediction_recipients": ["label", "leader"]},
    )
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
            [
                *DPFED,
                "predict",
                "--config",
                str(job.config),
                "--data",
                "breast_cancer:test",
                "--out",
                str(out),
                "--to",
                to,
            ],
            capture_output=True,
            text=True,
            timeout=60,
            env=job.env(),
        )
        assert done.returncode == 2, done.stderr
        assert "--to must name one of label" in done.stderr
        assert "[job].prediction_recipients" in done.stderr
    assert not out.exists()


#: A private job, quick to train.
PRIVATE = SOUND | {"iterations": 4}


def test_training_rows_are_refused_by_every_party_and_new_rows_are_scored(netjob, tmp_path):
    """Scores of training rows would hand the recipient every party's exact training scores,
    which training released only with noise: refused, for the training part and for a copy of
    the training rows under another name, whoever the recipient."""
    job = netjob(
        BREAST_CANCER_3,
        params=PRIVATE,
        budgets={"bank": BUDGET, "shop": BUDGET},
        job={"prediction_recipients": ["label", "leader"]},
    )
    _train(job, timeout=120)
    data = load_dataset("breast_cancer")
    n_train = data.X_train.shape[0]
    out = tmp_path / "receipt.json"
    done, codes = _predict(job, "breast_cancer:train", out)
    assert done.returncode == 2, done.stderr
    assert (
        "party 'label' refused the prediction: rows 'breast_cancer:train' are its training rows"
    ) in done.stderr
    assert f"training rows ({n_train} rows" in done.stderr
    assert "[job].predict_training_rows = true" in done.stderr
    assert codes == dict.fromkeys(job.names, 0)
    assert not out.exists() and not (job.workdir("label") / "predictions").exists()
    # a copy of the training rows under another name, to the leader
    copy = tmp_path / "customers.npy"
    np.save(copy, data.X_train)
    done, _ = _predict(job, str(copy), out, "--to", "leader")
    assert done.returncode == 2, done.stderr
    assert f"rows {str(copy)!r} are its training rows ({n_train} rows" in done.stderr
    assert not out.exists()
    # new rows are scored, and the recipient's scores stay owner-only under umask 000
    old = os.umask(0)
    try:
        done, codes = _predict(job, "breast_cancer:test", out, "--id", "new")
    finally:
        os.umask(old)
    assert done.returncode == 0, done.stderr
    assert codes == dict.fromkeys(job.names, 0)
    assert "WARNING" not in done.stdout
    assert "exact_values" not in json.loads(out.read_text())
    folder = job.workdir("label") / "predictions"
    assert stat.S_IMODE(folder.stat().st_mode) == 0o700
    assert stat.S_IMODE((folder / "new.json").stat().st_mode) == 0o600
    scores = json.loads((folder / "new.json").read_text())
    assert "exact_values" not in scores and len(scores["scores"]) == data.X_test.shape[0]


def test_opted_in_training_rows_need_each_budgeted_partys_own_permission(netjob, tmp_path):
    """``[job].predict_training_rows = true`` asks for exact training scores; a party with a
    budget still refuses unless its own command line allows exact disclosure, and the scores
    are flagged as exact in the recipient's file, the receipt and the command's output."""
    job = netjob(
        BREAST_CANCER_3,
        params=PRIVATE,
        budgets={"bank": BUDGET, "shop": BUDGET},
        job={"predict_training_rows": True},
    )
    _train(job, timeout=120)
    out = tmp_path / "receipt.json"
    done, codes = _predict(job, "breast_cancer:train", out)
    assert done.returncode == 2, done.stderr
    assert "party 'bank' refused the prediction" in done.stderr
    assert "has a privacy budget on 'breast_cancer:10-20'" in done.stderr
    assert "dpfed party --allow-exact-disclosure" in done.stderr
    assert codes == dict.fromkeys(job.names, 0)
    assert not out.exists() and not (job.workdir("label") / "predictions").exists()
    job.party_args = allowing_exact(["bank", "shop"])
    done, codes = _predict(job, "breast_cancer:train", out, "--id", "train")
    assert done.returncode == 0, done.stderr
    assert codes == dict.fromkeys(job.names, 0)
    assert "WARNING: exact values (scores, probability)" in done.stdout
    assert "[job].predict_training_rows = true" in done.stdout
    X_train = load_dataset("breast_cancer").X_train
    n_train = X_train.shape[0]
    receipt = json.loads(out.read_text())
    assert next(iter(receipt)) == "exact_values"
    assert receipt["exact_values"]["training_rows"] == dict.fromkeys(job.names, n_train)
    scores = json.loads(Path(receipt["path"]).read_text())
    assert next(iter(scores)) == "exact_values"
    assert scores["exact_values"]["training_rows"] == dict.fromkeys(job.names, n_train)
    assert all(
        f"EXACT scores of {n_train} of its training rows" in job.log(name)
        for name in ("bank", "shop")
    )
    # what the recipient got: the exact scores of the training rows
    reference = _inprocess("breast_cancer", (10, 10, 10), PRIVATE, rngs=job.secret_rngs())
    want = _reference_scores(reference, X_train, (10, 10, 10))
    np.testing.assert_allclose(scores["scores"], want, rtol=0, atol=1e-12)
