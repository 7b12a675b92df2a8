"""Independent work items as Ray tasks behind the standard ``concurrent.futures`` interface.

:class:`RayExecutor` is a :class:`concurrent.futures.Executor`: code written for a process
pool (the secure sum's client ranges, a reproduction's or an audit's grid of settings) runs on
a Ray cluster unchanged. A task whose worker process dies (killed, out of memory, its node
lost) is run again, up to ``max_retries`` times; an exception the task itself raises is not
retried and reaches the caller as it was raised. Every task also reports the worker that ran
it (node, process, peak resident memory), kept in :attr:`RayExecutor.usage`.
"""

from __future__ import annotations

import contextlib
import os
import threading
from collections.abc import Callable
from concurrent.futures import Executor, Future, InvalidStateError
from typing import Any

from dpfed._validation import check_int
from dpfed.engines.memory import peak_rss_bytes
from dpfed.engines.ray_engine import ensure_ray

__all__ = ["RayExecutor"]


def _call(fn: Callable[..., Any], *args: Any, **kwargs: Any) -> tuple[Any, dict[str, Any]]:
    """Run ``fn`` in a Ray worker; return its value and the worker's usage (Ray has resolved
    the references among ``fn`` and ``args`` to their values)."""
    import ray

    from dpfed.core.threads import limit_blas_threads

    with limit_blas_threads():
        value = fn(*args, **kwargs)
    return value, {
        "node": ray.get_runtime_context().get_node_id()[:12],
        "pid": os.getpid(),
        "peak_rss_bytes": peak_rss_bytes(),
    }


class RayExecutor(Executor):
    """Submit callables as Ray tasks (see the module docstring).

    Parameters
    ----------
    address : str, optional
        A Ray cluster to join (default: start a local Ray, or use the one initialised).
    max_retries : int, default 3
        Runs of a task again after its worker process died.
    num_cpus : int, optional
        CPUs of a local Ray this executor starts (default: the machine's).
    """

    def __init__(
        self, address: str | None = None, *, max_retries: int = 3, num_cpus: int | None = None
    ) -> None:
        self._ray = ensure_ray(address, num_cpus=num_cpus)
        retries = check_int("max_retries", max_retries, minimum=0)
        self._remote = self._ray.remote(_call).options(max_retries=retries, retry_exceptions=False)
        self.usage: list[dict[str, Any]] = []
        self._lock = threading.Lock()
        # every object sent once: id -> (the object, kept alive so the id stays its, its ref)
        self._stored: dict[int, tuple[Any, Any]] = {}
        # the tasks not yet settled, and the thread that settles them as Ray finishes them
        self._pending: dict[Any, Future[Any]] = {}
        self._watcher: threading.Thread | None = None

    @property
    def workers(self) -> int:
        """The cluster's CPUs: how many tasks run at once."""
        return max(1, int(self._ray.cluster_resources().get("CPU", 1)))

    def submit(self, fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> Future[Any]:
        outer: Future[Any] = Future()
        ref = self._remote.remote(
            self._stored_ref(fn), *(self._stored_ref(a) for a in args), **kwargs
        )
        with self._lock:
            self._pending[ref] = outer
            if self._watcher is None:
                self._watcher = threading.Thread(
                    target=self._watch, name="ray-results", daemon=True
                )
                self._watcher.start()
        return outer

    def _watch(self) -> None:
        """Settle each pending task's future as Ray finishes it (``ray.wait``), until none is
        pending. (A reference's own ``future()`` was seen to never resolve on a loaded
        machine, hanging the caller.)"""
        while True:
            with self._lock:
                refs = list(self._pending)
                if not refs:
                    self._watcher = None
                    return
            ready, _ = self._ray.wait(refs, num_returns=1, timeout=0.5)
            for ref in ready:
                with self._lock:
                    outer = self._pending.pop(ref)
                self._settle(ref, outer)

    def _settle(self, ref: Any, outer: Future[Any]) -> None:
        """Give ``outer`` the task's value, or its own exception unwrapped (nothing if the
        caller cancelled it)."""
        try:
            value, usage = self._ray.get(ref)
        except BaseException as exc:  # the task's own exception, unwrapped
            cause = getattr(exc, "cause", None)
            with contextlib.suppress(InvalidStateError):
                outer.set_exception(cause if isinstance(cause, BaseException) else exc)
            return
        with self._lock:
            self.usage.append(usage)
        with contextlib.suppress(InvalidStateError):  # cancelled by the caller meanwhile
            outer.set_result(value)

    def _stored_ref(self, value: Any) -> Any:
        """``value`` itself if it is a plain scalar, else its reference in the object store,
        put there once however many tasks take it (a reproduction's data, a partial)."""
        if value is None or isinstance(value, (bool, int, float, str, bytes)):
            return value
        key = id(value)
        with self._lock:
            if key not in self._stored:
                self._stored[key] = (value, self._ray.put(value))
            return self._stored[key][1]

    def shutdown(self, wait: bool = True, *, cancel_futures: bool = False) -> None:
        """Forget the objects sent (Ray stays up for the next executor or engine)."""
        with self._lock:
            self._stored.clear()
