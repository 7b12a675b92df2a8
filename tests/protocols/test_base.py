"""A protocol that declares its in-process training gets ``dpfed train <name>`` and a
scikit-learn estimator generated from it: shown on the smallest such protocol, one-shot
averaging of the clients' ridge fits, registered by one line."""

from __future__ import annotations

import json
import pickle
from dataclasses import asdict, dataclass
from typing import Any, ClassVar

import numpy as np
import pytest
from sklearn.datasets import load_breast_cancer
from sklearn.utils.estimator_checks import check_estimator

from dpfed._validation import DpfedInputError
from dpfed.cli import main
from dpfed.estimators import ConsensusLogisticRegression, estimator_for
from dpfed.parameters import check_params, job_parameters, param
from dpfed.protocols.base import BaseProtocol, Training, get_training, trainings
from dpfed.protocols.consensus.driver import CONSENSUS_TRAINING
from dpfed.runtime.registry import PROTOCOL_REGISTRY


@dataclass(frozen=True)
class AveragingConfig:
    lam: float = param(1.0, help="ridge penalty of every client's fit", interval=(0, None))
    mechanism: str = param("none", help="privacy mechanism", choices=("none",))
    seed: int | None = param(None, help="seed (unused: no noise)", public=False)

    def validated(self) -> AveragingConfig:
        check_params(self)  # each field against its declaration
        return self

    def intercept_of(self, model: np.ndarray) -> tuple[np.ndarray, float]:
        return model, 0.0


@dataclass
class AveragingResult:
    model: np.ndarray
    history: list[dict[str, Any]]
    privacy: dict[str, Any]
    config: AveragingConfig

    def to_json(self) -> dict[str, Any]:
        return {
            "protocol": "averaging",
            "config": asdict(self.config),
            "model": self.model.tolist(),
            "history": self.history,
            "final": self.history[-1],
            "privacy": self.privacy,
        }


def train_averaging(parts, config, *, X_test=None, y_test=None, progress=False, engine=None):
    """Every client's ridge fit of its labels, averaged."""
    fits = []
    for X, y in parts:
        X = np.asarray(X.todense() if hasattr(X, "todense") else X)
        fits.append(np.linalg.solve(X.T @ X + config.lam * np.eye(X.shape[1]), X.T @ y))
    model = np.mean(fits, axis=0)
    entry: dict[str, Any] = {"iteration": 1}
    if X_test is not None:
        entry["test_accuracy"] = float(np.mean(np.sign(X_test @ model) == y_test))
    return AveragingResult(model, [entry], {"mechanism": "none"}, config)


class Averaging(BaseProtocol):
    """The networked half as small as the registry test's echo protocol."""

    name = "averaging"
    params: ClassVar[dict] = job_parameters(AveragingConfig)
    holds = "rows"
    dataless_role = None
    same_rows = False
    messages = ()
    report = None
    training = Training(
        config=AveragingConfig,
        train=train_averaging,
        summary="one-shot averaging of the clients' ridge fits",
        description="Clients fit their rows alone; the model is the average.",
        estimator="AveragingClassifier",
        defaults={"lam": 0.5},
    )

    def check_parties(self, parties):
        pass

    def private(self, params):
        return False

    def host(self, spec, name):
        raise NotImplementedError

    def result(self, spec, record):
        return {}


AVERAGING = Averaging()


@pytest.fixture
def registered(monkeypatch):
    monkeypatch.setitem(PROTOCOL_REGISTRY, "averaging", f"{__name__}:AVERAGING")


def test_the_registry_line_gives_the_training(registered):
    assert trainings() == {"consensus": CONSENSUS_TRAINING, "averaging": AVERAGING.training}
    assert get_training("averaging") is AVERAGING.training
    with pytest.raises(DpfedInputError, match=r"'secure_sum' has no in-process training.*"):
        get_training("secure_sum")
    with pytest.raises(DpfedInputError, match=r"must be one of"):
        get_training("nothing")


def test_the_command_is_generated(registered, tmp_path, capsys):
    with pytest.raises(SystemExit):
        main(["train", "--help"])
    assert "one-shot averaging of the clients' ridge fits" in capsys.readouterr().out
    with pytest.raises(SystemExit):
        main(["train", "averaging", "--help"])
    shown = " ".join(capsys.readouterr().out.split())
    assert "--clients" in shown and "ridge penalty of every client's fit (default 0.5)" in shown
    out = tmp_path / "r.json"
    code = main(
        ["train", "averaging", "--data", "breast_cancer", "--clients", "3", "--out", str(out)]
    )
    assert code == 0
    result = json.loads(out.read_text())
    assert result["protocol"] == "averaging" and result["config"]["lam"] == 0.5
    assert result["data"] == "breast_cancer" and "before_training" in result["preprocessing"]
    assert main(["train", "averaging", "--data", "breast_cancer", "--clients", "3", "--lam",
                 "-1", "--out", str(tmp_path / "bad.json")]) == 2  # fmt: skip
    error = capsys.readouterr().err
    assert "lam must be" in error and "Found -1.0" in error
    assert not (tmp_path / "bad.json").exists()


def test_the_estimator_is_generated_and_keeps_the_scikit_learn_contract(registered):
    Classifier = estimator_for("averaging")
    assert Classifier.__name__ == "AveragingClassifier"
    assert estimator_for("averaging") is Classifier
    assert Classifier().get_params() == {
        "n_clients": 10,
        "lam": 0.5,
        "mechanism": "none",
        "random_state": None,
    }
    assert "lam : float\n    Ridge penalty of every client's fit." in Classifier.__doc__
    check_estimator(Classifier(n_clients=2, random_state=0))
    X, y = load_breast_cancer(return_X_y=True)
    model = Classifier(n_clients=3, lam=0.1, random_state=1).fit(X, y)
    assert model.score(X, y) > 0.8
    again = pickle.loads(pickle.dumps(model))
    assert type(again) is Classifier
    np.testing.assert_array_equal(again.decision_function(X), model.decision_function(X))


def test_consensus_command_and_estimator_are_the_generated_ones():
    assert ConsensusLogisticRegression is estimator_for("consensus")
    params = ConsensusLogisticRegression().get_params()
    assert params["lam"] == 1e-5 and params["rho"] == 0.015 and "loss" not in params
    assert "seed" not in params and params["random_state"] is None


def test_every_protocol_of_the_package_implements_the_whole_interface():
    from dpfed.runtime.registry import get_protocol

    assert all(isinstance(get_protocol(name), BaseProtocol) for name in PROTOCOL_REGISTRY)
