"""The secure vertical mode over the network: two party processes exchanging CKKS
ciphertexts, each keeping its key pair and recording its releases in its ledger."""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np
import pytest

from dpfed.data import load_dataset
from dpfed.protocols.vertical_secure import SecureSetup, train_secure_vertical
from dpfed.protocols.vertical_secure.setup import NO_FALLBACK, WEIGHTED_BOUND
from dpfed.runtime.budget import BudgetLedger

from .test_networked_prediction import _predict
from .test_networked_vertical import _lead_until_round

pytest.importorskip("tenseal")

SPLIT = (("label", (0, 15)), ("bank", (15, 30)))
BUDGET = {"epsilon": 3.0, "delta": 1e-5}


def _reference(job, rounds: int):
    """The same job in one process, with the parties' own noise generators and the products
    in the clear."""
    data = load_dataset("breast_cancer")
    blocks = [data.X_train[:, a:b] for _, (a, b) in SPLIT]
    setup = SecureSetup(blocks[0].shape[0], (15, 15), 1.0, 1e-5, protect="all", rounds=rounds)
    local = train_secure_vertical(
        blocks, data.y_train, setup, backend="plain", rngs=job.secret_rngs()
    )
    return data, setup, local


def _models(job) -> list[np.ndarray]:
    return [
        np.asarray(json.loads((job.workdir(n) / "model.json").read_text())["coef"])
        for n, _ in SPLIT
    ]


def _check_test_predictions(job, scores: np.ndarray) -> None:
    """``dpfed predict`` on breast cancer's test rows writes ``scores`` (to CKKS's rounding)
    for the label holder."""
    predicted, codes = _predict(job, "breast_cancer:test", job.folder / "receipt.json")
    assert predicted.returncode == 0, predicted.stderr + job.log("label") + job.log("bank")
    assert codes == {"label": 0, "bank": 0}
    receipt = json.loads((job.folder / "receipt.json").read_text())
    written = json.loads(Path(receipt["path"]).read_text())
    np.testing.assert_allclose(written["scores"], scores, atol=1e-3)


PARAMS = {"secure": True, "epsilon": 1.0, "delta": 1e-5, "protect_label_holder": True}


@pytest.mark.slow
def test_a_secure_job_over_the_network_survives_a_killed_party_and_scores_new_rows(netjob):
    """One job does it all (each secure job costs seconds of CKKS work): a passive party
    killed after round 1 of 3 comes back, replays its journal and resends its kept
    ciphertexts; the model is the in-process run's with the parties' own noise, every
    release is in the ledgers once; then the parties score new rows and refuse training
    rows."""
    rounds = 3
    job = netjob(
        [(name, "breast_cancer", span) for name, span in SPLIT],
        job_id="secure",
        params=PARAMS | {"iterations": rounds},
        budgets={name: BUDGET for name, _ in SPLIT},
        job={"grace": 120.0},
    )
    job.start_parties()
    leader, lines = _lead_until_round(job, 1)
    job.kill("bank")
    job.start_party("bank")  # restores its snapshot, replays its journal, resends its outbox
    assert leader.wait(timeout=240) == 0, "".join(lines) + job.log("label") + job.log("bank")
    assert "restored at round" in job.log("bank")
    assert job.wait_parties(timeout=60) == {"label": 0, "bank": 0}
    result = json.loads(job.out.read_text())
    assert result["protocol"] == "vertical-secure"
    assert result["privacy"]["epsilon"] <= 1.0 + 1e-9
    assert result["privacy"]["recorded"] == {"label": rounds + 1, "bank": rounds + 1}
    assert result["costs"]["bytes_per_round"] > 1e6  # ciphertexts, not numbers
    for name, _ in SPLIT:  # every release once (none lost, none invented); the job closed
        with BudgetLedger(job.folder / "ledgers" / f"{name}.sqlite") as ledger:
            (entry,) = ledger.jobs()
            released = sorted(r["round"] for r in ledger.releases(job_id="secure"))
        assert (entry["status"], entry["recorded"]) == ("closed", rounds + 1)
        assert released == list(range(rounds + 1))
    # the same job in one process, products in the clear: CKKS's rounding apart, the same
    data, setup, local = _reference(job, rounds)
    coef = _models(job)
    np.testing.assert_allclose(coef[0][:-1], local.blocks[0], atol=1e-4)
    np.testing.assert_allclose(coef[0][-1] * setup.intercept_scale, local.intercept, atol=1e-4)
    np.testing.assert_allclose(coef[1], local.blocks[1], atol=1e-4)
    for name, _ in SPLIT:  # each part of the model says what it is not bounded by
        model = json.loads((job.workdir(name) / "model.json").read_text())
        assert model["guarantee"] == NO_FALLBACK
    scores = local.decision_function([data.X_test[:, a:b] for _, (a, b) in SPLIT])
    expected = np.mean(np.where(scores > 0, 1, -1) == np.where(data.y_test > 0, 1, -1))
    assert result["final"]["test_accuracy"] == pytest.approx(expected, abs=0.01)
    # the finished parties score new rows with their blocks; training rows are refused
    _check_test_predictions(job, scores)
    refused, _ = _predict(job, "breast_cancer:train", job.folder / "refused.json")
    assert refused.returncode != 0 and "training rows" in refused.stderr
    # the key pair stays with its owner, owner-only; the ciphertexts it kept for replays
    # (the restarted party's resends above) are removed once the job has finished
    for name, _ in SPLIT:
        assert (job.workdir(name) / "ckks.key").stat().st_mode & 0o077 == 0
        assert not (job.workdir(name) / "outbox").exists()


@pytest.mark.slow
@pytest.mark.parametrize(
    "keeps_model",
    [
        pytest.param(
            False,
            marks=pytest.mark.skipif(
                not os.environ.get("DPFED_REPRODUCE"),
                reason="only the passive rows protected: set DPFED_REPRODUCE=1; CI runs the "
                "other mode here and this mode's messages, replay and weight in "
                "test_vertical_secure_roles",
            ),
        ),
        True,
    ],
    ids=["passive", "parties"],
)
def test_a_label_holder_with_a_model_of_its_own_weighs_the_passive_scores_against_it(
    netjob, keeps_model
):
    """The label holder's block is its own model and the passive party's shares are clipped
    and weighed by the statistics the passive party released under the label holder's key
    (its round T + 1 release, in its ledger); predictions use the same weight. With only the
    passive rows protected the passive party is told the weight; with the labels protected
    too (``label_holder_keeps_model``) the weight stays with the label holder, which weighs
    the shares it receives, reports no test figures of its exact model and is the only
    recipient."""
    rounds = 2
    params = {"secure": True, "epsilon": 8.0, "delta": 1e-5, "iterations": rounds}
    budgets = {"bank": {"epsilon": 9.0, "delta": 1e-5}}
    if keeps_model:  # the label holder's data protected too: it may hold a budget
        params |= {"protect_label_holder": True, "label_holder_keeps_model": True}
        budgets["label"] = {"epsilon": 9.0, "delta": 1e-5}
    job = netjob(
        [(name, "breast_cancer", span) for name, span in SPLIT],
        job_id="weighed",
        params=params,
        budgets=budgets,
    )
    job.start_parties()
    completed = job.run(timeout=240)
    assert completed.returncode == 0, completed.stderr + job.log("label") + job.log("bank")
    assert job.wait_parties(timeout=60) == {"label": 0, "bank": 0}
    result = json.loads(job.out.read_text())
    privacy = result["privacy"]
    assert privacy["epsilon"] <= 8.0 + 1e-9 and privacy["releases"] == rounds + 2
    assert privacy["recorded"] == {"label": rounds + 1 if keeps_model else 0, "bank": rounds + 2}
    with BudgetLedger(job.folder / "ledgers" / "bank.sqlite") as ledger:
        released = sorted(r["round"] for r in ledger.releases(job_id="weighed"))
    assert released == list(range(rounds + 2))
    data = load_dataset("breast_cancer")
    blocks = [data.X_train[:, a:b] for _, (a, b) in SPLIT]
    setup = SecureSetup(
        blocks[0].shape[0],
        (15, 15),
        8.0,
        1e-5,
        protect="parties" if keeps_model else "passive",
        rounds=rounds,
    )
    local = train_secure_vertical(
        blocks, data.y_train, setup, backend="plain", rngs=job.secret_rngs()
    )
    assert local.weighting is not None  # its weight depends on the parties' fresh secrets
    coef = _models(job)
    np.testing.assert_allclose(coef[0][:-1], local.blocks[0], atol=1e-6)  # its own model
    np.testing.assert_allclose(coef[1], local.blocks[1], atol=1e-4)
    models = {name: json.loads((job.workdir(name) / "model.json").read_text()) for name, _ in SPLIT}
    if keeps_model:  # the weight, a function of the label holder's data, reaches no one else
        assert privacy["passive_weighting"] == "kept" and "weight" not in models["bank"]
        weight = models["label"]["passive_weight"]
        assert models["label"]["guarantee"] == WEIGHTED_BOUND
        assert result["final"].get("test_log_loss") is None  # its exact model: kept
    else:
        weight = privacy["passive_weighting"]["weight"]
        assert models["bank"]["weight"] == weight
        assert models["bank"]["score_clip"] == 2.0
        assert models["bank"]["guarantee"] == WEIGHTED_BOUND
        assert result["final"]["test_log_loss"] > 0  # the weighed model's test figures
    assert weight == pytest.approx(local.weighting.beta, abs=1e-3)
    scores = local.decision_function([data.X_test[:, a:b] for _, (a, b) in SPLIT])
    _check_test_predictions(job, scores)


THREE = (("label", (0, 10)), ("bank", (10, 20)), ("shop", (20, 30)))


@pytest.mark.slow
def test_three_parties_fold_their_scores_over_the_network_through_a_restart(netjob):
    """A label holder and two passive parties: the third party holds no key and folds its
    scores into the powers of the other two blocks; killed after round 1 of 2 it comes back,
    replays its journal and resends the folds it kept. The model is the in-process run's
    with the parties' own noise, and every party records one release a round."""
    rounds = 2
    params = {
        "secure": True,
        "epsilon": 2.0,
        "delta": 1e-5,
        "protect_label_holder": True,
        "iterations": rounds,
    }
    job = netjob(
        [(name, "breast_cancer", span) for name, span in THREE],
        job_id="three",
        params=params,
        budgets={name: BUDGET for name, _ in THREE},
        job={"grace": 120.0},
    )
    job.start_parties()
    leader, lines = _lead_until_round(job, 1, timeout=300)  # keys and contexts of 118 MB first
    job.kill("shop")
    job.start_party("shop")
    logs = "".join(lines) + "".join(job.log(n) for n, _ in THREE)
    assert leader.wait(timeout=300) == 0, logs
    assert job.wait_parties(timeout=60) == {"label": 0, "bank": 0, "shop": 0}
    assert "restored at round" in job.log("shop")
    result = json.loads(job.out.read_text())
    assert result["privacy"]["recorded"] == {name: rounds + 1 for name, _ in THREE}
    assert not (job.workdir("shop") / "ckks.key").exists()  # only the key holders hold keys
    data = load_dataset("breast_cancer")
    blocks = [data.X_train[:, a:b] for _, (a, b) in THREE]
    setup = SecureSetup(blocks[0].shape[0], (10, 10, 10), 2.0, 1e-5, protect="all", rounds=rounds)
    local = train_secure_vertical(
        blocks, data.y_train, setup, backend="plain", rngs=job.secret_rngs()
    )
    coef = [
        np.asarray(json.loads((job.workdir(n) / "model.json").read_text())["coef"])
        for n, _ in THREE
    ]
    np.testing.assert_allclose(coef[0][:-1], local.blocks[0], atol=1e-4)
    for got, expected in zip(coef[1:], local.blocks[1:], strict=True):
        np.testing.assert_allclose(got, expected, atol=1e-4)
    scores = local.decision_function([data.X_test[:, a:b] for _, (a, b) in THREE])
    expected = np.mean(np.where(scores > 0, 1, -1) == np.where(data.y_test > 0, 1, -1))
    assert result["final"]["test_accuracy"] == pytest.approx(expected, abs=0.01)
