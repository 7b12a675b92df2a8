"""The secure vertical protocol on an engine: the networked parties' roles, delivered in
process or by Ray actors, against the in-process simulation with the same noise."""

from __future__ import annotations

import numpy as np
import pytest

from dpfed._validation import DpfedInputError
from dpfed.protocols.vertical.evaluation import RoundReport
from dpfed.protocols.vertical_secure import SecureSetup, train_secure_vertical
from dpfed.protocols.vertical_secure.on_engine import LEADER, NAMES, RoundSink
from dpfed.runtime.messages import ProtocolError

from ...conftest import make_vertical_problem_with_test


def _problem():
    blocks, y, _, _ = make_vertical_problem_with_test(n=400, split=(4, 3))
    return blocks, y


def _same_run(engine_result, plain, rounds):
    for a, b in zip(engine_result.blocks, plain.blocks, strict=True):
        np.testing.assert_allclose(a, b, atol=2e-3)
    assert engine_result.intercept == pytest.approx(plain.intercept, abs=2e-3)
    if plain.weighting is None:
        assert engine_result.weighting is None
    else:
        assert engine_result.weighting.beta == pytest.approx(plain.weighting.beta, abs=2e-3)
    assert engine_result.privacy()["epsilon"] == plain.privacy()["epsilon"]
    costs = engine_result.cost_summary()
    assert costs["bytes_per_round"] > 0 and costs["setup_bytes"] > 0
    assert [c.block for c in engine_result.costs] == [0, 1]


def test_the_roles_on_the_in_process_engine_run_the_simulations_job():
    """The in-process engine delivers the networked roles' messages (Ray's run, in the CLI's
    test, tests/cli/test_train.py, is checked against the same simulation)."""
    pytest.importorskip("tenseal")
    blocks, y = _problem()
    setup = SecureSetup(400, (4, 3), 2.0, 1e-5, rounds=2, protect="passive")
    seen = []
    ran = train_secure_vertical(
        blocks,
        y,
        setup,
        seed=5,
        engine="inprocess",
        progress=lambda t, cost: seen.append((t, cost)),
    )
    plain = train_secure_vertical(blocks, y, setup, seed=5, backend="plain")
    _same_run(ran, plain, setup.rounds)
    assert seen == [(0, None), (1, None)]
    assert ran.engine is None  # in process: nothing to report


@pytest.mark.parametrize("protect", ["passive"])
def test_three_parties_roles_fold_their_scores_in_turn_as_the_simulation_does(protect):
    """Three parties' roles on the in-process engine: each block's powers pass through the
    third party (a fold) before the evaluator, every party's noise is drawn as in the
    simulation, and one weight covers both passive parties' scores ("all", unweighted, runs
    over the network in tests/runtime/test_networked_secure_vertical.py)."""
    pytest.importorskip("tenseal")
    # 5,000 rows: one ciphertext of N = 16384's 8,192 slots, where two-party contexts (4,096
    # slots) would need two, so the parties must count the key holder's slots
    blocks, y, _, _ = make_vertical_problem_with_test(n=5000, split=(3, 2, 2))
    setup = SecureSetup(5000, (3, 2, 2), 2.0, 1e-5, rounds=2, degree=7, protect=protect)
    ran = train_secure_vertical(blocks, y, setup, seed=3, engine="inprocess")
    plain = train_secure_vertical(blocks, y, setup, seed=3, backend="plain")
    for a, b in zip(ran.blocks, plain.blocks, strict=True):
        np.testing.assert_allclose(a, b, atol=2e-3)
    assert ran.intercept == pytest.approx(plain.intercept, abs=2e-3)
    assert (ran.weighting is None) == (protect == "all")
    if ran.weighting is not None:
        assert ran.weighting.beta == pytest.approx(plain.weighting.beta, abs=2e-3)
    assert [c.block for c in ran.costs] == [0, 1, 2]
    assert all(c.bytes_sent > 0 for c in ran.costs)  # the third party's folds are sent on


def test_an_engine_runs_ckks_only():
    blocks, y = _problem()
    setup = SecureSetup(400, (4, 3), 2.0, 1e-5, rounds=1)
    with pytest.raises(DpfedInputError, match="plaintext simulation runs in process only"):
        train_secure_vertical(blocks, y, setup, seed=5, backend="plain", engine="inprocess")


def test_the_leaders_stand_in_takes_round_reports_of_the_label_holder_only():
    sink = RoundSink()
    report = RoundReport(NAMES[0], LEADER, 1, None, None, None, None, 0.0, None, None, False)
    assert sink.handle(report) == [] and sink.rounds == [1] and not sink.finished
    arrays, meta = sink.state_dict()
    again = RoundSink()
    again.load_state_dict(arrays, meta)
    assert again.rounds == [1]
    stray = RoundReport(NAMES[1], LEADER, 1, None, None, None, None, 0.0, None, None, True)
    with pytest.raises(ProtocolError, match="label holder's round reports"):
        sink.handle(stray)
