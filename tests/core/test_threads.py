"""BLAS threads of the training loops."""

from __future__ import annotations

import pytest
from threadpoolctl import threadpool_info

from dpfed._validation import DpfedInputError
from dpfed.core.threads import BLAS_THREADS_VARIABLE, blas_thread_limit, vector_work
from dpfed.protocols.consensus.driver import train_consensus
from dpfed.protocols.decentralized.driver import train_decentralized
from dpfed.protocols.vertical.driver import train_vertical
from dpfed.runtime.party import run_party


def _blas_threads() -> list[int]:
    return [p["num_threads"] for p in threadpool_info() if p["user_api"] == "blas"]


def test_the_limit_is_one_thread_unless_the_variable_says_otherwise(monkeypatch):
    monkeypatch.delenv(BLAS_THREADS_VARIABLE, raising=False)
    assert blas_thread_limit() == 1
    monkeypatch.setenv(BLAS_THREADS_VARIABLE, "3")
    assert blas_thread_limit() == 3


@pytest.mark.parametrize("value", ["0", "-1", "two", "1.5"])
def test_a_bad_variable_is_refused_by_name(monkeypatch, value):
    monkeypatch.setenv(BLAS_THREADS_VARIABLE, value)
    with pytest.raises(DpfedInputError, match=f"{BLAS_THREADS_VARIABLE} must be a positive"):
        blas_thread_limit()


def test_a_training_loop_runs_with_the_limit_and_restores_it(monkeypatch):
    monkeypatch.delenv(BLAS_THREADS_VARIABLE, raising=False)
    before = _blas_threads()

    @vector_work
    def loop(x: int) -> tuple[int, list[int]]:
        return x + 1, _blas_threads()

    value, inside = loop(1)
    assert value == 2
    assert all(n == 1 for n in inside)
    assert _blas_threads() == before


def test_the_protocols_training_loops_are_limited():
    for func in (train_vertical, train_consensus, train_decentralized, run_party):
        assert func.__wrapped__  # functools.wraps of vector_work
