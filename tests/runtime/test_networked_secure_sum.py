"""The DCA secure sum as real processes: compute nodes and clients over mutual TLS."""

from __future__ import annotations

import json
import os

import numpy as np
import pytest

from dpfed.dca import secure_sum

PARAMS = {"mechanism": "gaussian", "noise_std": 0.5, "seed": 7, "tolerated": 2,
          "fractional_bits": 24}


def _job(netjob, tmp_path, n_clients: int, n_nodes: int, dim: int, params: dict,
         budgets: dict | None = None):
    """A secure-sum job; a ``seed`` in ``params`` makes it a declared simulation."""
    values = np.random.default_rng(3).normal(scale=4.0, size=(n_clients, dim))
    np.save(tmp_path / "values.npy", values)
    data = str(tmp_path / "values.npy")
    parties = [(f"compute{k}", data, None) for k in range(n_nodes)]
    parties += [(f"client{i}", data, (i, i + 1)) for i in range(n_clients)]
    job = netjob(parties, params={"dim": dim, **params}, protocol="secure_sum",
                 job={"evaluate": "none", "simulation": "seed" in params}, budgets=budgets)
    return job, values


def _run(job, timeout: float) -> dict:
    job.start_parties()
    done = job.run(timeout=timeout)
    assert done.returncode == 0, done.stderr + "".join(job.log(n) for n in job.names)
    assert job.wait_parties(timeout=60) == dict.fromkeys(job.names, 0)
    return json.loads(job.out.read_text())


def _check_equal(result: dict, values: np.ndarray, n_nodes: int, params: dict) -> None:
    reference = secure_sum(values, noise_std=params["noise_std"], rng=params["seed"],
                           compute_nodes=n_nodes, tolerated=params["tolerated"],
                           fractional_bits=params["fractional_bits"])
    assert result["sum_encoded"] == [int(v) for v in reference.total_encoded]
    np.testing.assert_array_equal(np.array(result["sum"]), reference.total)
    assert result["included"] == [f"client{i}" for i in range(values.shape[0])]
    # the noise is really there: the noisy sum is not the plain one
    assert not np.allclose(result["sum"], values.sum(axis=0), atol=1e-3)


def test_small_secure_sum_matches_inprocess(netjob, tmp_path):
    job, values = _job(netjob, tmp_path, n_clients=4, n_nodes=2, dim=6, params=PARAMS)
    result = _run(job, timeout=120)
    _check_equal(result, values, 2, PARAMS)
    assert result["privacy"]["notes"][0].startswith("no privacy: noise is shared")
    assert result["privacy_guarantee"].startswith("none")
    # a compute node's own sum is a uniformly random mask, not the data
    node_sum = np.array(json.loads((job.folder / "work" / "compute0" / "job" / "model.json")
                                   .read_text())["coef"], dtype=np.uint64)
    assert not np.array_equal(node_sum, np.array(result["sum_encoded"], dtype=np.uint64))


@pytest.mark.slow
@pytest.mark.skipif(not os.environ.get("DPFED_SLOW"),
                    reason="24 processes take about a minute on 2 cores; set DPFED_SLOW=1")
def test_three_compute_nodes_and_twenty_clients_match_inprocess(netjob, tmp_path):
    job, values = _job(netjob, tmp_path, n_clients=20, n_nodes=3, dim=50, params=PARAMS)
    result = _run(job, timeout=300)
    _check_equal(result, values, 3, PARAMS)


def test_calibrated_secure_sum_reports_its_epsilon(netjob, tmp_path):
    params = {"mechanism": "gaussian", "epsilon": 1.0, "delta": 1e-5, "l2_sensitivity": 1.0,
              "tolerated": 1}
    budgets = {f"client{i}": {"epsilon": 1.5, "delta": 1e-5} for i in range(3)}
    job, values = _job(netjob, tmp_path, n_clients=3, n_nodes=2, dim=3, params=params,
                       budgets=budgets)
    result = _run(job, timeout=120)
    from dpfed.dca.calibration import calibrate_dca
    from dpfed.runtime.budget import BudgetLedger

    cal = calibrate_dca(1.0, 1e-5, 1.0, 3, 1)
    assert result["privacy"]["epsilon"] == 1.0
    assert result["privacy"]["client_std"] == pytest.approx(cal.client_std)
    # each client's noise comes from its own secret: the sum is that of the encoded
    # value + noise of every client, which only the clients themselves could compute
    from dpfed.dca.fixedpoint import encode
    from dpfed.privacy.noise_source import secret_generator

    total = np.zeros(3, dtype=np.uint64)
    for i in range(3):
        secret = (job.workdir(f"client{i}") / "dca-client.key").read_bytes()
        noise = cal.client_std * secret_generator(secret, "dca noise").standard_normal(3)
        total += encode((values[i] + noise).reshape(1, -1), 3)[0]
    assert result["sum_encoded"] == [int(v) for v in total]
    assert "privacy_guarantee" not in result
    # each client's ledger holds its one release, at the calibrated multiplier
    for i in range(3):
        dataset = f"{job.folder / 'values.npy'}:{i}-{i + 1}"
        with BudgetLedger(job.folder / "ledgers" / f"client{i}.sqlite") as ledger:
            releases = ledger.releases(dataset=dataset, party=f"client{i}")
            spent = ledger.spent_epsilon(dataset, f"client{i}")
        assert len(releases) == 1
        assert spent == pytest.approx(1.0, rel=1e-2)

