"""Shared fixtures: the data folder from DPFED_DATA and small synthetic problems."""

from __future__ import annotations

import contextlib
import ctypes
import fcntl
import itertools
import os
import signal
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
from sklearn.datasets import load_breast_cancer


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


class _LocalRay:
    """The machine's one local Ray for the tests (:func:`one_at_a_time`'s lock ``ray``: two
    would share two CPUs and Ray's worker ports). A pytest-xdist worker keeps it across
    consecutive tests that use :func:`local_ray` (a start costs seconds) and shuts it down,
    releasing the lock, before a test that does not (:func:`pytest_runtest_teardown`)."""

    def __init__(self) -> None:
        self.lock: contextlib.ExitStack | None = None
        self.started = False

    def hold(self) -> None:
        if self.lock is None:
            stack = contextlib.ExitStack()
            stack.enter_context(one_at_a_time("ray"))
            self.lock = stack

    def release(self) -> None:
        if self.started:
            import ray

            ray.shutdown()
            self.started = False
        if self.lock is not None:
            self.lock.close()
            self.lock = None


_LOCAL_RAY = _LocalRay()


@pytest.fixture
def local_ray():
    """A local Ray of two CPUs for one engine test (kept for the worker's next test if that
    one uses it too). A test that leaves a CPU taken (a live actor) gets its Ray shut down
    after it: a Ray kept with a leftover actor was seen to leave a later test's tasks
    unscheduled."""
    ray = pytest.importorskip("ray")
    _LOCAL_RAY.hold()
    if not ray.is_initialized():
        ray.init(address="local", num_cpus=2, include_dashboard=False, logging_level="ERROR")
        _LOCAL_RAY.started = True
    yield ray
    if _LOCAL_RAY.started and not _cpus_free(ray):
        ray.shutdown()
        _LOCAL_RAY.started = False


def _cpus_free(ray, seconds: float = 3.0) -> bool:
    """Whether both CPUs are free again within ``seconds`` (Ray frees a killed actor's CPU a
    moment after the kill)."""
    deadline = time.monotonic() + seconds
    while ray.available_resources().get("CPU", 0.0) < 2.0:
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True


_LIBC = ctypes.CDLL(None, use_errno=True)


def _os_interrupt_handler() -> int | None:
    """The address of SIGINT's handler as the kernel has it (1: ignored, 0: default). A C
    library can change it behind Python's back, where ``signal.getsignal`` does not see it;
    the processes a test starts inherit an ignored SIGINT."""
    action = (ctypes.c_char * 256)()  # struct sigaction, its handler first
    if _LIBC.sigaction(signal.SIGINT, None, action) != 0:
        return None
    return ctypes.c_void_p.from_buffer(action).value


def _interrupt_state() -> tuple[object, int | None, frozenset]:
    """How this process takes SIGINT: its Python handler, the kernel's, and whether the main
    thread blocks it."""
    return (
        signal.getsignal(signal.SIGINT),
        _os_interrupt_handler(),
        frozenset(signal.pthread_sigmask(signal.SIG_BLOCK, [])) & {signal.SIGINT},
    )


_INTERRUPT = _interrupt_state()
#: Tests after which this process no longer took SIGINT as it did at start (the state is then
#: restored, and the test is named at the end of the run).
INTERRUPT_CHANGED: list[str] = []


@pytest.hookimpl(trylast=True)
def pytest_runtest_teardown(item, nextitem):
    """After the fixtures' own teardown: give the local Ray up unless the next test uses it,
    and put SIGINT back as it was if the test (or a library it ran) changed how this process
    takes it: the processes later tests start inherit an ignored or blocked SIGINT, and a
    `dpfed` process that cannot be interrupted fails the Ctrl-C tests."""
    if nextitem is None or "local_ray" not in getattr(nextitem, "fixturenames", ()):
        _LOCAL_RAY.release()
    if _interrupt_state() != _INTERRUPT:
        INTERRUPT_CHANGED.append(item.nodeid)
        item.warn(
            pytest.PytestWarning(
                f"this test changed how the process takes SIGINT ({_interrupt_state()!r}); restored"
            )
        )
        signal.signal(signal.SIGINT, _INTERRUPT[0])  # installs Python's C handler again
        signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT} - _INTERRUPT[2])


def pytest_terminal_summary(terminalreporter):
    """Name the tests that changed how the process takes SIGINT."""
    for nodeid in INTERRUPT_CHANGED:
        terminalreporter.write_line(f"SIGINT handling changed by {nodeid} (restored)")


#: Columns per party: the label holder, a bank and a shop.
PARTY_TABLE_COLUMNS = {"label": range(0, 4), "bank": range(4, 9), "shop": range(9, 14)}


def write_party_tables(
    folder: Path, *, n_test: int = 120, seed: int = 0, per_party: bool = False
) -> dict[str, set[str]]:
    """Three parties' CSVs from breast cancer: string IDs, each table shuffled, each party
    missing about 10 % of the shared customers and holding 20 of its own; the label holder
    also has a categorical column of raw strings. Returns each party's training IDs.

    Files are ``<name>.train.csv``, ``<name>.test.csv`` and ``<name>.schema.toml`` in
    ``folder``, or with ``per_party`` in ``folder/<name>/``."""
    data = load_breast_cancer()
    X, y = data.data, data.target  # 1: benign
    rng = np.random.default_rng(seed)
    ids = np.array([f"C{v:07d}" for v in rng.choice(10**7, size=X.shape[0], replace=False)])
    test = np.zeros(X.shape[0], dtype=bool)
    test[rng.choice(X.shape[0], size=n_test, replace=False)] = True
    held = {}
    for name, cols in PARTY_TABLE_COLUMNS.items():
        keep = rng.random(X.shape[0]) > 0.1
        extra = [f"X{name}{k:04d}" for k in range(20)]
        for part, mask in (("train", ~test & keep), ("test", test)):
            rows = np.flatnonzero(mask)
            rng.shuffle(rows)
            header = ["customer_id", *(f"f{c}" for c in cols)]
            if name == "label":
                header += ["size", "diagnosis"]
            lines = [",".join(header)]
            for r in rows:
                values = [ids[r], *(f"{X[r, c]:.6g}" for c in cols)]
                if name == "label":
                    values += [
                        "large" if X[r, 0] > 15 else "small",
                        "benign" if y[r] == 1 else "malignant",
                    ]
                lines.append(",".join(values))
            if part == "train":
                for e in extra:  # customers nobody else has
                    values = [e, *("0" for _ in cols)]
                    if name == "label":
                        values += ["small", "benign"]
                    lines.append(",".join(values))
                held[name] = {*ids[rows], *extra}
            own = folder / name if per_party else folder
            own.mkdir(parents=True, exist_ok=True)
            (own / f"{name}.{part}.csv").write_text("\n".join(lines) + "\n")
        upper = np.ceil(X[:, list(cols)].max(axis=0) * 1.5)
        schema = ['label = "diagnosis"\npositive = "benign"\n' if name == "label" else ""]
        schema += [
            f"[columns.f{c}]\nbounds = [0, {u:g}]\n" for c, u in zip(cols, upper, strict=True)
        ]
        if name == "label":
            schema.append('[columns.size]\ncategories = ["small", "large"]\n')
        (folder / name if per_party else folder).joinpath(f"{name}.schema.toml").write_text(
            "\n".join(schema)
        )
    return held


@pytest.fixture
def party_tables():
    """:func:`write_party_tables`: three parties' own CSV tables and schemas from breast
    cancer, written to a folder."""
    return write_party_tables


#: Fixtures that start processes (parties, Ray) and serve on sockets: their tests are
#: ``networked``; other such tests carry the mark themselves.
NETWORKED_FIXTURES = ("netjob", "local_ray")


def pytest_collection_modifyitems(config, items):
    """Tests using :data:`NETWORKED_FIXTURES` are marked ``networked`` (``-m "not networked"``
    leaves them out)."""
    for item in items:
        if any(name in getattr(item, "fixturenames", ()) for name in NETWORKED_FIXTURES):
            item.add_marker(pytest.mark.networked)
