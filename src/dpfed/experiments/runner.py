"""The shared runner of the reproductions (``dpfed reproduce ...``).

Every reproduction runs the same way, through one :class:`Reproduction`:

1. ``Reproduction(command, out_dir, progress=...)`` starts the clock, checks that matplotlib
   is present and that ``out_dir`` can be a folder (nothing is created yet, so a missing data
   set leaves no empty output folder behind);
2. the reproduction checks and loads its data (:func:`data_folder`, :func:`subsample_rows`)
   and picks its plan (quick or full);
3. :meth:`Reproduction.running` creates the output folder and shows a progress bar over the
   runs (:meth:`Reproduction.step`);
4. :meth:`Reproduction.emit` writes each figure and the JSON behind it, atomically, once the
   figure is drawn;
5. :meth:`Reproduction.finish` writes ``summary.md`` and ``summary.json`` last: they exist
   only for a complete run.

Helpers the reproductions share: :func:`stopwatch` (the ``seconds`` of a payload),
:func:`with_retries` (a run whose exact local solve fails is rerun with a shifted seed) and
:func:`without_runs`.
"""

from __future__ import annotations

import contextlib
import os
import sys
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from concurrent.futures import Executor, as_completed
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Generic, TypeVar

import numpy as np
from tqdm import tqdm

from dpfed._validation import DpfedInputError
from dpfed.core.local import LocalSolveError
from dpfed.data.dataset import ENV_VAR
from dpfed.experiments.output import ArtifactWriter, jsonable, open_output, output_folder
from dpfed.experiments.plotting import require_matplotlib

__all__ = [
    "ATTEMPTS",
    "RETRY_SEED_STEP",
    "SUMMARY_FILES",
    "Progress",
    "Reproduction",
    "RetriedRun",
    "data_folder",
    "stopwatch",
    "subsample",
    "subsample_rows",
    "with_retries",
    "without_runs",
]

T = TypeVar("T")
R = TypeVar("R")

#: The files :meth:`Reproduction.finish` writes, last, after every other file.
SUMMARY_FILES = ("summary.md", "summary.json")
#: Attempts of a run whose local solve fails (:func:`with_retries`), and the seed shift
#: between two attempts.
ATTEMPTS = 3
RETRY_SEED_STEP = 1000


def stopwatch() -> Callable[[], float]:
    """A clock started now: calling it returns the seconds since (``time.perf_counter``)."""
    started = time.perf_counter()
    return lambda: time.perf_counter() - started


class Progress:
    """A tqdm bar over all runs, only when asked for and standard error is a terminal.

    Parameters
    ----------
    total : int
        Runs to come.
    enabled : bool
        Show the bar (still only on a terminal).
    desc : str
        Text before the bar.
    """

    def __init__(self, total: int, enabled: bool, desc: str) -> None:
        self._bar = None
        if enabled and sys.stderr.isatty():
            self._bar = tqdm(total=total, desc=desc, unit="run")

    def step(self, description: str) -> None:
        """One run done; ``description`` says which."""
        if self._bar is not None:
            self._bar.set_postfix_str(description)
            self._bar.update(1)

    def close(self) -> None:
        if self._bar is not None:
            self._bar.close()


class Reproduction:
    """One run of a reproduction: its clock, output folder, progress bar and summary.

    Parameters
    ----------
    command : str
        The ``dpfed reproduce`` subcommand (``"consensus"``, ...), named by the progress bar.
    out_dir : str or os.PathLike
        Output folder, checked now and created by :meth:`running`.
    progress : bool, default False
        Show a progress bar over the runs when standard error is a terminal.
    plots : bool, default True
        The reproduction draws figures: matplotlib must be present.
    executor : concurrent.futures.Executor, optional
        Runs the independent runs of :meth:`map` (e.g. a
        :class:`dpfed.engines.tasks.RayExecutor` over a cluster); default: one after another
        in this process. Each run is seeded on its own, so the results are the same.

    Raises
    ------
    DpfedInputError
        If matplotlib is missing (with the command that installs it) or ``out_dir`` exists
        and is not a folder.
    """

    def __init__(
        self,
        command: str,
        out_dir: str | os.PathLike[str],
        *,
        progress: bool = False,
        plots: bool = True,
        executor: Executor | None = None,
    ) -> None:
        self.elapsed = stopwatch()
        self.executor = executor
        if plots:
            require_matplotlib()
        self.command = command
        self.out = output_folder(out_dir)
        self.show_progress = progress
        self._writer: ArtifactWriter | None = None
        self._bar: Progress | None = None

    @property
    def writer(self) -> ArtifactWriter:
        """The writer into the output folder (once :meth:`running` has created it)."""
        if self._writer is None:
            raise RuntimeError("the output folder is created by Reproduction.running().")
        return self._writer

    @contextlib.contextmanager
    def running(self, total: int) -> Iterator[Reproduction]:
        """Create the output folder and show a progress bar over ``total`` runs until the
        block ends."""
        if self._writer is None:
            self._writer = open_output(self.out)
        self._bar = Progress(total, self.show_progress, f"reproduce {self.command}")
        try:
            yield self
        finally:
            self._bar.close()
            self._bar = None

    def step(self, description: str) -> None:
        """One run done (a step of the progress bar, if one is shown)."""
        if self._bar is not None:
            self._bar.step(description)

    def map(
        self, fn: Callable[[T], R], items: Sequence[T], *, describe: Callable[[T], str]
    ) -> list[R]:
        """``[fn(item) for item in items]``, a step of the progress bar per run.

        With an executor the runs go to it at once and the bar steps as each finishes (``fn``
        must then be picklable: a module-level function, or a :func:`functools.partial` of
        one); without, they run here one after another. The results are in ``items``' order.
        """
        if self.executor is None:
            out = []
            for item in items:
                out.append(fn(item))
                self.step(describe(item))
            return out
        futures = {self.executor.submit(fn, item): k for k, item in enumerate(items)}
        results: dict[int, R] = {}
        try:
            for future in as_completed(futures):
                k = futures[future]
                results[k] = future.result()
                self.step(describe(items[k]))
        except BaseException:
            for future in futures:
                future.cancel()
            raise
        return [results[k] for k in range(len(items))]

    def emit(
        self,
        stem: str,
        payload: Mapping[str, Any],
        render: Callable[[], bytes],
        *,
        names: Sequence[str] = ("png", "json"),
    ) -> dict:
        """Draw a figure, then write ``stem.json`` and ``stem.png`` (each atomically).

        Parameters
        ----------
        stem : str
            File name without its extension.
        payload : mapping
            The content of the JSON file.
        render : callable
            Returns the figure's PNG bytes; called before anything is written, so a figure
            that fails to draw leaves neither file.
        names : sequence of str, default ("png", "json")
            The file names the payload records, as its last keys (``"png"`` ->
            ``"stem.png"``).

        Returns
        -------
        dict
            The payload as written (before :func:`~dpfed.experiments.output.jsonable`).
        """
        payload = {**payload, **{ext: f"{stem}.{ext}" for ext in names}}
        png = render()
        self.writer.write_json(f"{stem}.json", payload)
        self.writer.write_bytes(f"{stem}.png", png)
        return payload

    def finish(self, summary: Mapping[str, Any], markdown: Callable[[dict], str]) -> dict:
        """Complete and write the summary: ``summary.md``, then ``summary.json``.

        Parameters
        ----------
        summary : mapping
            The summary without ``out_dir``, ``files`` and ``seconds``.
        markdown : callable
            Renders the completed summary as ``summary.md``.

        Returns
        -------
        dict
            The completed summary, JSON-safe: first ``out_dir``, the folder's absolute path;
            last ``files``, every file written, the two summary files last, and ``seconds``,
            the wall time of the reproduction.
        """
        writer = self.writer
        full = {
            "out_dir": str(writer.out_dir.resolve()),
            **summary,
            "files": [*writer.files, *SUMMARY_FILES],
            "seconds": self.elapsed(),
        }
        writer.write_text("summary.md", markdown(full))
        writer.write_json("summary.json", full)
        return jsonable(full)


def data_folder(
    data_dir: str | os.PathLike[str] | None, *, command: str, reads: str, holding: str
) -> Path:
    """The folder of a reproduction's data: ``data_dir``, else the ``DPFED_DATA`` variable.

    Parameters
    ----------
    data_dir : str or os.PathLike or None
        The folder given (``--data-dir``), or ``None``.
    command : str
        The reproduction, for the messages.
    reads : str
        What it reads, for the messages (``"UCI Adult"``).
    holding : str
        What the folder should hold, for the messages (``"adult/adult.data and ..."``).

    Returns
    -------
    Path
        The folder, absolute.

    Raises
    ------
    DpfedInputError
        If no folder is given or it is not an existing folder.
    """
    if data_dir is not None:
        base, origin = Path(data_dir).expanduser(), "--data-dir (data_dir)"
    else:
        env = os.environ.get(ENV_VAR, "").strip()
        if not env:
            raise DpfedInputError(
                f"the {command} reproduction reads {reads} from a data folder, but none was "
                f"given. Pass --data-dir DIR (data_dir=...) or set the {ENV_VAR} environment "
                f"variable to a folder holding {holding}."
            )
        base, origin = Path(env).expanduser(), f"the {ENV_VAR} environment variable"
    if not base.is_dir():
        raise DpfedInputError(
            f"{origin} points at {str(base)!r}, which is not an existing folder. Expected a "
            f"folder holding {holding}."
        )
    return base.resolve()


def subsample(n: int, limit: int | None, rng: np.random.Generator) -> np.ndarray | None:
    """Sorted indices of ``limit`` of ``n`` rows drawn without replacement, or ``None`` when
    every row is kept (``limit`` is ``None`` or at least ``n``)."""
    if limit is None or n <= limit:
        return None
    return np.sort(rng.choice(n, size=limit, replace=False))


def subsample_rows(
    X: Any,
    y: np.ndarray,
    X_test: Any,
    y_test: np.ndarray,
    *,
    max_train_rows: int | None,
    max_test_rows: int | None,
    seed: int,
) -> tuple[Any, np.ndarray, Any, np.ndarray, str | None]:
    """Training and test rows subsampled for a quick run (:func:`subsample`).

    Parameters
    ----------
    X, y, X_test, y_test : array or sparse matrix
        The rows (dense or sparse) and labels.
    max_train_rows, max_test_rows : int or None
        Rows to keep (``None``: all).
    seed : int
        Seed of one ``numpy.random.default_rng``, drawing the training rows, then the test
        rows.

    Returns
    -------
    X, y, X_test, y_test
        The rows kept, in their order.
    step : str or None
        The preprocessing step for the data's description, ``None`` if nothing was dropped.
    """
    rng = np.random.default_rng(seed)
    rows = subsample(X.shape[0], max_train_rows, rng)
    test_rows = subsample(X_test.shape[0], max_test_rows, rng)
    if rows is None and test_rows is None:
        return X, y, X_test, y_test, None
    if rows is not None:
        X, y = X[rows], y[rows]
    if test_rows is not None:
        X_test, y_test = X_test[test_rows], y_test[test_rows]
    step = (
        f"rows subsampled to {X.shape[0]} train / {X_test.shape[0]} test "
        f"(default_rng({seed}), quick mode)"
    )
    return X, y, X_test, y_test, step


@dataclass
class RetriedRun(Generic[T]):
    """The outcome of :func:`with_retries`."""

    #: The result, ``None`` if every attempt failed.
    result: T | None
    #: The seed of the successful attempt.
    seed_used: int | None
    #: The failed attempts: ``seed``, ``error`` and ``seconds`` of each.
    attempts: list[dict] = field(default_factory=list)
    #: Seconds of the successful attempt (0 if none succeeded).
    seconds: float = 0.0

    @property
    def error(self) -> str | None:
        """The last failure's message, if every attempt failed."""
        return self.attempts[-1]["error"] if self.result is None and self.attempts else None


def with_retries(run: Callable[[int], T], seed: int, *, retry: bool = True) -> RetriedRun[T]:
    """``run(seed)``, rerun with the seed shifted by :data:`RETRY_SEED_STEP` while it raises
    :class:`~dpfed.core.local.LocalSolveError` (at most :data:`ATTEMPTS` times in all).

    A private run must release the exact minimiser of its local problem (objective
    perturbation); a Newton solve that misses its tolerance is refused by the runtime, and the
    run is repeated with fresh noise instead of aborting the reproduction.

    Parameters
    ----------
    run : callable
        Trains with the seed it is given.
    seed : int
        The first attempt's seed.
    retry : bool, default True
        ``False``: one attempt only (a run without randomness fails the same way again).

    Returns
    -------
    RetriedRun
    """
    attempts: list[dict] = []
    for k in range(ATTEMPTS if retry else 1):
        s = seed + RETRY_SEED_STEP * k
        elapsed = stopwatch()
        try:
            result = run(s)
        except LocalSolveError as exc:
            attempts.append({"seed": s, "error": str(exc), "seconds": elapsed()})
            continue
        return RetriedRun(result, s, attempts, elapsed())
    return RetriedRun(None, None, attempts, 0.0)


def without_runs(payload: Mapping[str, Any]) -> dict:
    """A figure's payload without its per-run details (``runs``), for the summary."""
    return {k: v for k, v in payload.items() if k != "runs"}
