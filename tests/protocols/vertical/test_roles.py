import numpy as np
import pytest
from sklearn.linear_model import LogisticRegression

from dpfed.core import get_loss, get_regularizer
from dpfed.engines.inprocess import InProcessEngine
from dpfed.protocols.vertical import Broadcast, LabelHolder, NoPrivacy, PassiveParty, Scores
from dpfed.protocols.vertical.driver import VerticalConfig, train_vertical
from dpfed.protocols.vertical.mechanisms import UNBOUNDED_INTERCEPT_SCALING
from dpfed.protocols.vertical.roles import ProtocolError

from ...conftest import make_vertical_problem


def _roles(blocks, y, rounds=5):
    rngs = [np.random.default_rng(i) for i in range(len(blocks))]
    common = dict(regularizer=get_regularizer("l2"), reg_weight=1.0, mechanism=NoPrivacy())
    holder = LabelHolder(
        "label",
        blocks[0],
        y,
        parties=["bank"],
        loss=get_loss("logistic"),
        rho=0.25,
        max_rounds=rounds,
        rng=rngs[0],
        **common,
    )
    bank = PassiveParty("bank", blocks[1], label_holder="label", rng=rngs[1], **common)
    return holder, bank


def test_only_per_sample_scores_go_up_and_residual_and_dual_come_down():
    blocks, y = make_vertical_problem(split=(3, 2))
    holder, bank = _roles(blocks, y)
    sent = []

    InProcessEngine(tap=sent.append).run({"label": holder, "bank": bank}, holder.start())
    n = blocks[0].shape[0]
    assert {type(m) for m in sent} == {Broadcast, Scores}
    for m in sent:
        assert all(a.shape == (n,) for a in m.arrays().values())
    assert sum(isinstance(m, Scores) for m in sent) == 5


def test_messages_out_of_turn_are_refused():
    blocks, y = make_vertical_problem(split=(3, 2))
    holder, bank = _roles(blocks, y)
    start = holder.start()[0]
    reply = bank.handle(start)[0]
    with pytest.raises(ProtocolError, match="expected round"):
        bank.handle(start)  # replay of round 0
    with pytest.raises(ProtocolError, match="accepts scores from"):
        holder.handle(Scores("mallory", "label", 1, reply.scores))
    with pytest.raises(ProtocolError, match="finite"):
        holder.handle(Scores("bank", "label", 1, np.full_like(reply.scores, np.nan)))
    with pytest.raises(ProtocolError, match="finite"):
        holder.handle(Scores("bank", "label", 1, reply.scores[:-1]))
    with pytest.raises(ProtocolError, match="expected scores of round 1"):
        holder.handle(Scores("bank", "label", 2, reply.scores))
    with pytest.raises(ProtocolError, match="broadcasts from label"):
        bank.handle(Broadcast("bank", "bank", 1, reply.scores, reply.scores, 1.0))
    assert holder.handle(reply)  # the genuine message still goes through


@pytest.mark.parametrize("fit_intercept", [False, True])
def test_admm_sharing_reaches_the_centralised_optimum(fit_intercept):
    blocks, y = make_vertical_problem(n=400, split=(4, 3, 2))
    lam = 1e-2
    res = train_vertical(
        blocks, y, VerticalConfig(lam=lam, iterations=300, fit_intercept=fit_intercept)
    )
    # the label holder's rows as it trains on them (unbounded: the constant column s = 4)
    column = np.full((len(y), 1), UNBOUNDED_INTERCEPT_SCALING)
    holder = np.hstack([blocks[0], column]) if fit_intercept else blocks[0]
    X = np.hstack([holder, *blocks[1:]])
    ref = LogisticRegression(
        C=1 / (lam * len(y)), fit_intercept=False, tol=1e-12, max_iter=10000
    ).fit(X, y)
    w = ref.coef_.ravel()
    ref_obj = np.mean(np.logaddexp(0, -y * (X @ w))) + lam * 0.5 * w @ w
    assert res.final["train_objective"] <= ref_obj + 1e-6
    assert np.allclose(np.concatenate(list(res.models.values())), w, atol=1e-3)
    coefs, intercept = res.coefficients()
    expected = (w[blocks[0].shape[1]] * UNBOUNDED_INTERCEPT_SCALING) if fit_intercept else 0.0
    assert intercept == pytest.approx(expected, abs=1e-4)
    assert coefs["label"].shape == (blocks[0].shape[1],)


@pytest.mark.parametrize(
    "mechanism",
    [
        dict(),
        dict(mechanism="sound", epsilon=4.0, delta=1e-5),
        dict(mechanism="sound", epsilon=4.0, delta=1e-5, passive_weighting=False),
        dict(mechanism="paper", noise_sigma=0.5, delta=1e-5),
    ],
)
def test_a_seeded_run_is_bit_identical(mechanism):
    blocks, y = make_vertical_problem(split=(3, 3, 2))
    cfg = VerticalConfig(iterations=6, seed=7, lam=1e-2, **mechanism)
    a, b = train_vertical(blocks, y, cfg), train_vertical(blocks, y, cfg)
    for name in a.models:
        assert np.array_equal(a.models[name], b.models[name])
    assert [h["train_objective"] for h in a.history] == [h["train_objective"] for h in b.history]
    if mechanism:
        c = train_vertical(blocks, y, VerticalConfig(**{**cfg.__dict__, "seed": 8}))
        # another seed draws other noise: other models, or (weighted to 0 on this tiny
        # problem) other released statistics
        assert not np.array_equal(a.models["party1"], c.models["party1"]) or (
            a.weighting != c.weighting
        )


def test_sparse_and_dense_blocks_give_the_same_model():
    blocks, y = make_vertical_problem(split=(3, 2))
    sparse, _ = make_vertical_problem(split=(3, 2), sparse=True)
    cfg = VerticalConfig(iterations=10, lam=1e-2)
    a, b = train_vertical(blocks, y, cfg), train_vertical(sparse, y, cfg)
    assert np.allclose(a.models["party1"], b.models["party1"], atol=1e-10)


def test_wide_block_uses_the_n_by_n_form_and_converges():
    rng = np.random.default_rng(0)
    blocks = [rng.normal(size=(40, 60)), rng.normal(size=(40, 80))]
    y = np.where(blocks[0][:, 0] + blocks[1][:, 0] > 0, 1.0, -1.0)
    res = train_vertical(blocks, y, VerticalConfig(iterations=40, lam=1e-2))
    assert res.final["train_objective"] < 0.3
