"""BLAS threads for vector-sized work.

A round of these protocols is a handful of matrix-vector products and small solves: work too
small to split across BLAS threads. With the BLAS default of one thread per core, a machine
whose cores are busy makes every such call wait for threads it cannot schedule (an ADMM
iteration was measured 12x slower with two CPU-bound processes running). The library's
training loops therefore run with one BLAS thread (``threadpoolctl``, a scikit-learn
dependency), which also makes a seeded run's floating-point figures independent of the
machine's core count.

``DPFED_BLAS_THREADS`` (a positive integer) overrides the limit, for a user whose data are
large and dense enough for threaded BLAS to pay.
"""

from __future__ import annotations

import functools
import os
from collections.abc import Callable
from typing import Any, TypeVar

from threadpoolctl import threadpool_limits

from dpfed._validation import DpfedInputError

F = TypeVar("F", bound=Callable[..., Any])

#: Environment variable overriding the BLAS thread limit of the training loops.
BLAS_THREADS_VARIABLE = "DPFED_BLAS_THREADS"


def blas_thread_limit() -> int:
    """The BLAS threads of the training loops: ``DPFED_BLAS_THREADS`` or 1.

    Raises
    ------
    DpfedInputError
        If the variable is set to anything but a positive integer.
    """
    value = os.environ.get(BLAS_THREADS_VARIABLE, "").strip()
    if not value:
        return 1
    if not value.isdigit() or int(value) < 1:
        raise DpfedInputError(
            f"{BLAS_THREADS_VARIABLE} must be a positive integer. Found {value!r}."
        )
    return int(value)


def limit_blas_threads() -> Any:
    """A context running its body with :func:`blas_thread_limit` BLAS threads."""
    return threadpool_limits(limits=blas_thread_limit(), user_api="blas")


def vector_work(func: F) -> F:
    """Decorate a training loop to run with :func:`limit_blas_threads`."""

    @functools.wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        with limit_blas_threads():
            return func(*args, **kwargs)

    return wrapper  # type: ignore[return-value]
