"""Shared fixtures: the data folder from DPFED_DATA and small synthetic problems."""

from __future__ import annotations

import contextlib
import fcntl
import itertools
import os
import tempfile
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest


def data_dir() -> Path | None:
    value = os.environ.get("DPFED_DATA")
    return Path(value) if value else None


@pytest.fixture(scope="session")
def a9a():
    """a9a split 66|57 (train and test blocks); skips when the files are absent."""
    base = data_dir()
    if (
        base is None
        or not (base / "a9a" / "a9a").is_file()
        or not (base / "a9a" / "a9a.t").is_file()
    ):
        pytest.skip(
            "a9a not found under $DPFED_DATA (set DPFED_DATA to a folder holding "
            "a9a/a9a and a9a/a9a.t, e.g. the LIBSVM binary data sets)"
        )
    from dpfed.data import load_dataset, vertical_split

    ds = load_dataset("a9a", base)
    return {
        "blocks": vertical_split(ds.X_train, [66, 57]),
        "y": ds.y_train,
        "test_blocks": vertical_split(ds.X_test, [66, 57]),
        "y_test": ds.y_test,
    }


def make_vertical_problem(n=300, split=(4, 3, 2), seed=0, sparse=False):
    """A logistic problem with informative features in every block."""
    rng = np.random.default_rng(seed)
    d = sum(split)
    X = rng.normal(size=(n, d))
    w = rng.normal(size=d)
    y = np.where(X @ w + 0.5 * rng.normal(size=n) > 0, 1.0, -1.0)
    edges = np.cumsum([0, *split])
    blocks = [X[:, a:b] for a, b in itertools.pairwise(edges)]
    if sparse:
        import scipy.sparse as sp

        blocks = [sp.csr_matrix(b) for b in blocks]
    return blocks, y


@pytest.fixture
def vertical_problem():
    return make_vertical_problem()


def make_vertical_problem_with_test(n=300, split=(4, 3), seed=0, n_test=100):
    """Like :func:`make_vertical_problem`, plus ``n_test`` held-out rows of the same model:
    ``(blocks, y, test_blocks, y_test)``."""
    blocks, y = make_vertical_problem(n=n + n_test, split=split, seed=seed)
    return ([b[:n] for b in blocks], y[:n], [b[n:] for b in blocks], y[n:])


@contextlib.contextmanager
def one_at_a_time(name: str) -> Iterator[None]:
    """Hold the machine-wide lock ``name`` (a ``flock`` on a file in the temporary folder):
    of the tests that take it, one runs at a time, whichever pytest-xdist worker or test run
    it belongs to. For what cannot be shared: a local Ray, the examples' fixed ports."""
    path = Path(tempfile.gettempdir()) / f"dpfed-tests-{name}.lock"
    with path.open("a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # the lock goes with the process if it dies
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


@pytest.fixture
def machine_lock():
    """:func:`one_at_a_time`, for a test to hold while it uses what cannot be shared."""
    return one_at_a_time


@pytest.fixture
def local_ray():
    """A local Ray of two CPUs for one engine test, shut down after it: a Ray kept for the
    whole session was seen to leave a later test's tasks unscheduled. One such Ray at a time
    on the machine (:func:`one_at_a_time`): two would share two CPUs and Ray's worker ports."""
    ray = pytest.importorskip("ray")
    with one_at_a_time("ray"):
        started = not ray.is_initialized()
        if started:
            ray.init(address="local", num_cpus=2, include_dashboard=False,
                     logging_level="ERROR")
        yield ray
        if started:
            ray.shutdown()


#: Fixtures that start processes (parties, Ray) and serve on sockets: their tests are
#: ``networked``; other such tests carry the mark themselves.
NETWORKED_FIXTURES = ("netjob", "local_ray")


def pytest_collection_modifyitems(config, items):
    """Tests using :data:`NETWORKED_FIXTURES` are marked ``networked`` (``-m "not networked"``
    leaves them out)."""
    for item in items:
        if any(name in getattr(item, "fixturenames", ()) for name in NETWORKED_FIXTURES):
            item.add_marker(pytest.mark.networked)
