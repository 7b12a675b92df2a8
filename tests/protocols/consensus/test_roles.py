"""The consensus ADMM roles (paper 002): refusals, dual bookkeeping, convergence, noise,
checkpoints."""

import json

import numpy as np
import pytest
from scipy import stats

from dpfed._validation import DpfedInputError
from dpfed.core.local import LocalProblem, solve_local
from dpfed.core.losses import get_loss
from dpfed.engines.inprocess import InProcessEngine
from dpfed.privacy.gaussian import GaussianRelease
from dpfed.protocols.consensus import ConsensusClient, ConsensusServer, GlobalModel, LocalModel
from dpfed.runtime.checkpoint import load_checkpoint, save_checkpoint
from dpfed.runtime.messages import ProtocolError

LOSS = get_loss("logistic")
SERVER = "server"


def make_parts(sizes=(60, 90, 120, 150), d=6, seed=0):
    """Rows of norm <= 1, labels from a noisy linear rule, one part per client."""
    rng = np.random.default_rng(seed)
    w = rng.normal(size=d)
    parts = []
    for m in sizes:
        X = rng.normal(size=(m, d))
        X /= np.maximum(1.0, np.linalg.norm(X, axis=1))[:, None]
        y = np.where(3.0 * X @ w + 0.3 * rng.normal(size=m) > 0, 1.0, -1.0)
        parts.append((X, y))
    return parts


def make_roles(parts, *, lam=0.1, rho=0.1, rounds=10, sigma=None, seed=0, relaxation=1.0):
    n = len(parts)
    names = [f"client{i + 1}" for i in range(n)]
    clients = [
        ConsensusClient(
            names[i],
            X,
            y,
            server=SERVER,
            loss=LOSS,
            lam=lam,
            n_clients=n,
            rho=rho,
            release=None if sigma is None else GaussianRelease("model", 0.1, sigma),
            rng=np.random.default_rng([seed, i]),
            relaxation=relaxation,
        )
        for i, (X, y) in enumerate(parts)
    ]
    server = ConsensusServer(
        SERVER,
        names,
        n_features=parts[0][0].shape[1],
        rho=rho,
        max_rounds=rounds,
        relaxation=relaxation,
    )
    return server, clients


def deliver(clients, broadcasts):
    """Every client handles its global model; returns the uploads."""
    by_name = {c.name: c for c in clients}
    return [u for m in broadcasts for u in by_name[m.recipient].handle(m)]


def one_round(server, clients, broadcasts):
    """Deliver a broadcast, collect the uploads, return the server's next broadcast."""
    out = []
    for upload in deliver(clients, broadcasts):
        out += server.handle(upload)
    return out


def centralized(parts, lam):
    X = np.vstack([X for X, _ in parts])
    y = np.concatenate([y for _, y in parts])
    weights = np.concatenate([np.full(X.shape[0], 1.0 / X.shape[0]) for X, _ in parts])
    return solve_local(X, y, LOSS, LocalProblem(loss_weight=weights, l2=lam), tol=1e-13).x


def snapshot(role):
    arrays, meta = role.state_dict()
    return {k: np.array(v, copy=True) for k, v in arrays.items()}, json.loads(json.dumps(meta))


def assert_same_state(a, b):
    arrays_a, meta_a = a
    arrays_b, meta_b = b
    assert arrays_a.keys() == arrays_b.keys()
    for key in arrays_a:
        np.testing.assert_array_equal(arrays_a[key], arrays_b[key], err_msg=key)
    assert meta_a == meta_b


# -- refusals ---------------------------------------------------------------------------------


def test_client_refusals_raise_and_leave_the_state_unchanged():
    server, clients = make_roles(make_parts(), sigma=0.05, rounds=5)
    broadcasts = server.start()
    broadcasts = one_round(server, clients, broadcasts)  # round 1 done, broadcast of round 1
    client = clients[0]
    genuine = broadcasts[0]
    assert genuine.recipient == client.name and genuine.round == 1
    before = snapshot(client)
    d = client.n_features
    bad = [
        (GlobalModel("mallory", client.name, 1, genuine.model), "accepts the global model"),
        (GlobalModel("client2", client.name, 1, genuine.model), "accepts the global model"),
        (LocalModel(SERVER, client.name, 1, genuine.model), "accepts the global model"),
        (GlobalModel(SERVER, client.name, 0, genuine.model), "expected round 1"),
        (GlobalModel(SERVER, client.name, 2, genuine.model), "expected round 1"),
        (GlobalModel(SERVER, client.name, 1, genuine.model[:-1]), "finite"),
        (GlobalModel(SERVER, client.name, 1, np.zeros((1, d))), "finite"),
        (GlobalModel(SERVER, client.name, 1, np.full(d, np.nan)), "finite"),
        (GlobalModel(SERVER, client.name, 1, np.r_[genuine.model[:-1], np.inf]), "finite"),
    ]
    for message, match in bad:
        with pytest.raises(ProtocolError, match=match):
            client.handle(message)
        assert_same_state(snapshot(client), before)
    # the genuine message still goes through, and its replay is refused
    assert len(client.handle(genuine)) == 1
    after = snapshot(client)
    with pytest.raises(ProtocolError, match="expected round 2"):
        client.handle(genuine)
    assert_same_state(snapshot(client), after)


def test_server_refusals_raise_and_leave_the_state_unchanged():
    server, clients = make_roles(make_parts(), sigma=0.05, rounds=5)
    uploads = deliver(clients, server.start())
    assert server.handle(uploads[0]) == []
    before = snapshot(server)
    model = uploads[1].model
    d = server.n_features
    bad = [
        (LocalModel("mallory", SERVER, 1, model), "accepts local models"),
        (GlobalModel("client2", SERVER, 1, model), "accepts local models"),
        (LocalModel("client2", SERVER, 2, model), "expected local models of round 1"),
        (LocalModel("client2", SERVER, 0, model), "expected local models of round 1"),
        (uploads[0], "already holds"),  # duplicate
        (LocalModel("client1", SERVER, 1, model), "already holds"),
        (LocalModel("client2", SERVER, 1, model[:-1]), "finite"),
        (LocalModel("client2", SERVER, 1, np.append(model, 0.0)), "finite"),
        (LocalModel("client2", SERVER, 1, np.full(d, np.nan)), "finite"),
        (LocalModel("client2", SERVER, 1, np.full(d, -np.inf)), "finite"),
    ]
    for message, match in bad:
        with pytest.raises(ProtocolError, match=match):
            server.handle(message)
        assert_same_state(snapshot(server), before)
    # the genuine uploads complete the round
    out = []
    for upload in uploads[1:]:
        out += server.handle(upload)
    assert server.round == 1 and len(out) == len(clients)


def test_finished_roles_refuse_everything():
    server, clients = make_roles(make_parts(), rounds=2)
    broadcasts = server.start()
    uploads = None
    for _ in range(2):
        uploads = deliver(clients, broadcasts)
        broadcasts = [m for u in uploads for m in server.handle(u)]
    assert server.finished and all(m.finished for m in broadcasts)
    assert deliver(clients, broadcasts) == []  # the final dual update, no reply
    assert all(c.finished for c in clients)
    with pytest.raises(ProtocolError, match="expected"):
        server.handle(uploads[0])
    with pytest.raises(ProtocolError, match="expected"):
        clients[0].handle(broadcasts[0])
    with pytest.raises(ProtocolError, match="expected"):
        clients[0].handle(GlobalModel(SERVER, clients[0].name, 3, broadcasts[0].model))


def test_server_needs_distinct_clients():
    from dpfed._validation import DpfedInputError

    with pytest.raises(DpfedInputError, match="distinct"):
        ConsensusServer(SERVER, ["a", "a"], n_features=3, rho=1.0, max_rounds=2)
    with pytest.raises(DpfedInputError, match="distinct"):
        ConsensusServer(SERVER, [], n_features=3, rho=1.0, max_rounds=2)


def test_zero_rounds_finish_at_once():
    server, clients = make_roles(make_parts(), rounds=0)
    broadcasts = server.start()
    assert server.finished and all(m.finished and m.round == 0 for m in broadcasts)
    assert deliver(clients, broadcasts) == []
    np.testing.assert_array_equal(server.model, 0.0)


# -- the algorithm ----------------------------------------------------------------------------


@pytest.mark.parametrize("relaxation", [1.0, 1.7])
def test_client_duals_equal_the_servers_copy_bit_for_bit(relaxation):
    server, clients = make_roles(
        make_parts(), sigma=0.05, rounds=8, lam=0.1, rho=0.3, relaxation=relaxation
    )
    broadcasts = server.start()
    for k in range(1, 9):
        # each client updates its dual on receipt of the global model of round k - 1
        uploads = deliver(clients, broadcasts)
        for c in clients:
            assert np.array_equal(c.gamma, server.gammas[c.name]), (k, c.name)
        broadcasts = [m for u in uploads for m in server.handle(u)]
        assert server.round == k and len(server.history) == k
    assert server.finished and all(m.finished for m in broadcasts)
    assert deliver(clients, broadcasts) == []  # the last dual update
    assert all(c.finished for c in clients)
    for c in clients:
        assert np.array_equal(c.gamma, server.gammas[c.name])
        assert not np.allclose(c.gamma, 0.0)


def test_every_round_matches_the_update_equations():
    """w^k = mean(w~) - sum(gamma)/(n rho); gamma_i^k = gamma_i^{k-1} - rho (w~_i - w^k); the
    client's exact update is the minimiser of its local problem from public inputs."""
    parts = make_parts()
    lam, rho = 0.1, 0.3
    server, clients = make_roles(parts, sigma=0.05, rounds=6, lam=lam, rho=rho)
    n = len(clients)
    gammas = [np.zeros(6) for _ in clients]
    w = np.zeros(6)
    broadcasts = server.start()
    for _ in range(6):
        uploads = deliver(clients, broadcasts)
        for c, up, g in zip(clients, uploads, gammas, strict=True):
            problem = LocalProblem(
                loss_weight=1.0 / c.n_samples, l2=lam / n, linear=-g, prox=rho, center=w
            )
            np.testing.assert_allclose(c.exact, solve_local(c.X, c.y, LOSS, problem).x, atol=1e-9)
            np.testing.assert_array_equal(up.model, c.released)
        w_new = sum(u.model for u in uploads) / n - sum(gammas) / (n * rho)
        gammas = [g - rho * (u.model - w_new) for g, u in zip(gammas, uploads, strict=True)]
        w = w_new
        broadcasts = [m for u in uploads for m in server.handle(u)]
        np.testing.assert_allclose(server.model, w, rtol=0, atol=1e-14)
        for c, g in zip(clients, gammas, strict=True):
            np.testing.assert_allclose(server.gammas[c.name], g, rtol=0, atol=1e-14)
    record = server.history[-1]
    primal = np.sqrt(sum(np.sum((c.released - w) ** 2) for c in clients))
    assert record.primal_residual == pytest.approx(primal, rel=1e-12)


def test_without_noise_the_global_model_reaches_the_centralized_minimiser():
    parts = make_parts()
    lam = 0.1
    server, clients = make_roles(parts, lam=lam, rho=0.1, rounds=80)
    InProcessEngine().run({SERVER: server} | {c.name: c for c in clients}, server.start())
    reference = centralized(parts, lam)
    np.testing.assert_allclose(server.model, reference, rtol=0, atol=1e-6)
    for c in clients:  # local models agree with the global one
        np.testing.assert_allclose(c.exact, reference, rtol=0, atol=1e-6)
        assert c.events == []
    assert len(server.history) == 80
    assert server.history[-1].primal_residual < 1e-6
    assert server.history[-1].dual_residual < 1e-6
    assert server.history[-1].finished and not server.history[-2].finished


def rounds_to(parts, reference, *, relaxation, lam, rho, rounds, tol):
    """First round whose global model is within ``tol`` of ``reference`` (None: never)."""
    server, clients = make_roles(parts, lam=lam, rho=rho, rounds=rounds, relaxation=relaxation)
    InProcessEngine().run({SERVER: server} | {c.name: c for c in clients}, server.start())
    return next(
        (r.round for r in server.history if np.linalg.norm(r.model - reference) < tol), None
    )


def test_over_relaxation_reaches_the_minimiser_in_fewer_rounds():
    parts = make_parts()
    lam, rho = 0.01, 0.05
    reference = centralized(parts, lam)
    plain = rounds_to(parts, reference, relaxation=1.0, lam=lam, rho=rho, rounds=300, tol=1e-3)
    fast = rounds_to(parts, reference, relaxation=1.7, lam=lam, rho=rho, rounds=300, tol=1e-3)
    assert plain is not None and fast is not None
    assert fast < 0.75 * plain, (plain, fast)


def test_relaxation_outside_zero_two_is_refused():
    for alpha in (0.0, 2.0, -1.0, float("nan")):
        with pytest.raises(DpfedInputError, match="relaxation"):
            make_roles(make_parts(), relaxation=alpha)


def test_gaussian_release_noise_has_mean_zero_and_variance_sigma_squared():
    """released - exact over 25 independent clients x 40 rounds x 5 coordinates, against the
    exact minimiser recomputed from public inputs; the chi-square check fails for a sigma
    10 % off."""
    parts = make_parts(sizes=(60,) * 5, d=5, seed=3)
    sigma, lam, rho, rounds = 0.07, 0.1, 0.5, 40
    noise = []
    for rep in range(5):
        server, clients = make_roles(parts, lam=lam, rho=rho, rounds=rounds, sigma=sigma, seed=rep)
        n = len(clients)
        gammas = {c.name: np.zeros(5) for c in clients}
        broadcasts = server.start()
        for k in range(rounds):
            w = broadcasts[0].model
            uploads = deliver(clients, broadcasts)
            for c, up in zip(clients, uploads, strict=True):
                problem = LocalProblem(
                    loss_weight=1.0 / c.n_samples,
                    l2=lam / n,
                    linear=-gammas[c.name],
                    prox=rho,
                    center=w,
                )
                exact = solve_local(c.X, c.y, LOSS, problem).x
                noise.append(up.model - exact)
                event = c.events[-1]
                assert event.round == k + 1 and event.sigma == sigma
            broadcasts = [m for u in uploads for m in server.handle(u)]
            gammas = {c: g.copy() for c, g in server.gammas.items()}
        assert all(len(c.events) == rounds for c in clients)
    e = np.concatenate(noise)
    N = e.size
    assert N == 5 * 5 * rounds * 5
    # mean: each coordinate-average is N(0, sigma^2 / N)
    assert abs(e.mean()) < 4.0 * sigma / np.sqrt(N)

    # variance: sum e^2 / s^2 ~ chi2(N); a two-sided test at 1e-4
    def p_value(s):
        q = float(np.sum(e**2)) / s**2
        return 2.0 * min(stats.chi2.cdf(q, N), stats.chi2.sf(q, N))

    assert p_value(sigma) > 1e-4
    assert p_value(1.1 * sigma) < 1e-4 and p_value(0.9 * sigma) < 1e-4
    # and the standardised noise is normal
    assert stats.kstest(e / sigma, "norm").pvalue > 1e-4
    # the draws are independent across coordinates and rounds (no repeated vectors)
    assert np.unique(e).size == N


@pytest.mark.parametrize("relaxation", [1.0, 1.7])
def test_state_dict_round_trip_mid_run_continues_bit_for_bit(tmp_path, relaxation):
    parts = make_parts()
    rounds, cut = 10, 4
    reference_server, reference_clients = make_roles(
        parts, sigma=0.05, rounds=rounds, seed=7, relaxation=relaxation
    )
    InProcessEngine().run(
        {SERVER: reference_server} | {c.name: c for c in reference_clients},
        reference_server.start(),
    )

    server, clients = make_roles(parts, sigma=0.05, rounds=rounds, seed=7, relaxation=relaxation)
    broadcasts = server.start()
    for _ in range(cut):
        broadcasts = one_round(server, clients, broadcasts)
    # half a round more: two uploads already at the server (its inbox is saved too)
    uploads = deliver(clients, broadcasts)
    pending = [m for u in uploads[:2] for m in server.handle(u)]
    assert pending == [] and len(server.inbox) == 2
    for role in [server, *clients]:
        save_checkpoint(tmp_path / f"{role.name}.npz", *role.state_dict())

    # fresh roles with other generators: everything must come from the checkpoints
    server2, clients2 = make_roles(parts, sigma=0.05, rounds=rounds, seed=99, relaxation=relaxation)
    for role in [server2, *clients2]:
        role.load_state_dict(*load_checkpoint(tmp_path / f"{role.name}.npz"))
    assert_same_state(snapshot(server2), snapshot(server))
    for a, b in zip(clients, clients2, strict=True):
        assert_same_state(snapshot(b), snapshot(a))
    InProcessEngine().run({SERVER: server2} | {c.name: c for c in clients2}, uploads[2:])

    assert server2.finished and server2.round == rounds
    assert np.array_equal(server2.model, reference_server.model)
    assert len(server2.history) == rounds
    for r1, r2 in zip(reference_server.history, server2.history, strict=True):
        assert np.array_equal(r1.model, r2.model)
        assert (r1.round, r1.primal_residual, r1.dual_residual, r1.finished) == (
            r2.round,
            r2.primal_residual,
            r2.dual_residual,
            r2.finished,
        )
    for a, b in zip(reference_clients, clients2, strict=True):
        assert np.array_equal(a.released, b.released)
        assert np.array_equal(a.gamma, b.gamma)
        assert np.array_equal(a.center, b.center)
        assert a.events == b.events


def test_seeded_runs_are_reproducible_and_seeds_matter():
    parts = make_parts()

    def run(seed):
        server, clients = make_roles(parts, sigma=0.05, rounds=5, seed=seed)
        InProcessEngine().run({SERVER: server} | {c.name: c for c in clients}, server.start())
        return server.model

    assert np.array_equal(run(1), run(1))
    assert not np.array_equal(run(1), run(2))
