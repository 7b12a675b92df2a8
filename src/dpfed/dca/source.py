r"""The clients' vectors as consecutive blocks, without ever needing all of them in memory.

:func:`dpfed.dca.secure_sum.secure_sum` accepts the :math:`N \times D` matrix of client
vectors in three forms:

* a numpy array of shape (N, D) (row :math:`i` is client :math:`i`'s :math:`z_i`);
* a *block callable* ``f(start, stop) -> array of shape (stop - start, D)`` giving clients
  ``start .. stop - 1`` (with ``n_clients`` and ``dim`` given); it is called once per block,
  in any order, possibly in other processes (then it must be picklable);
* an iterable of arrays of shape (b, D) with :math:`\sum b = N` (with ``n_clients`` given),
  consumed once, in order.

:class:`ClientSource` hides the difference: :meth:`ClientSource.blocks` yields
``(first_client, block)`` pairs of at most ``block_size`` rows over a range of clients.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from typing import Any

import numpy as np

from dpfed._validation import DpfedInputError, check_int

__all__ = ["BlockCallable", "ClientSource"]

#: ``f(start, stop)`` returning the vectors of clients ``start .. stop - 1``, shape
#: (stop - start, D).
BlockCallable = Callable[[int, int], np.ndarray]


def _as_block(block: Any, rows: int | None, dim: int | None, where: str) -> np.ndarray:
    try:
        arr = np.asarray(block, dtype=np.float64)
    except (TypeError, ValueError):
        raise DpfedInputError(f"{where} must be a numeric array. Found {type(block)!r}.") from None
    if (
        arr.ndim != 2
        or (rows is not None and arr.shape[0] != rows)
        or (dim is not None and arr.shape[1] != dim)
    ):
        want = f"({rows if rows is not None else 'b'}, {dim if dim is not None else 'D'})"
        raise DpfedInputError(f"{where} must have shape {want}. Found shape {arr.shape}.")
    return arr


class ClientSource:
    """Uniform access to the client vectors (see the module docstring).

    Parameters
    ----------
    values : numpy.ndarray, block callable or iterable of arrays
        The client vectors.
    n_clients : int, optional
        :math:`N`; required for callables and iterables, checked for arrays.
    dim : int, optional
        :math:`D`; required for callables, checked otherwise.

    Attributes
    ----------
    n_clients : int
    dim : int
    kind : {"array", "callable", "iterable"}
    """

    def __init__(
        self,
        values: np.ndarray | BlockCallable | Iterable[np.ndarray],
        n_clients: int | None = None,
        dim: int | None = None,
    ) -> None:
        self._array: np.ndarray | None = None
        self._callable: BlockCallable | None = None
        self._iterator: Iterator[np.ndarray] | None = None
        self._pending: np.ndarray | None = None
        self._first = 0  # global index of the first row held (a part of an array source)
        if isinstance(values, np.ndarray) or (
            isinstance(values, list | tuple) and values and np.ndim(values[0]) == 1
        ):
            arr = np.asarray(values)
            if arr.ndim != 2 or arr.shape[0] < 1 or arr.shape[1] < 1:
                raise DpfedInputError(
                    f"values must be an (N, D) array with N, D >= 1. Found shape {arr.shape}."
                )
            if not (np.issubdtype(arr.dtype, np.floating) or np.issubdtype(arr.dtype, np.integer)):
                raise DpfedInputError(f"values must be numeric. Found dtype {arr.dtype}.")
            for name, given, actual in (
                ("n_clients", n_clients, arr.shape[0]),
                ("dim", dim, arr.shape[1]),
            ):
                if given is not None and check_int(name, given) != actual:
                    raise DpfedInputError(
                        f"{name} = {given} does not match values of shape {arr.shape}."
                    )
            self._array = arr
            self._first = 0
            self.n_clients, self.dim, self.kind = int(arr.shape[0]), int(arr.shape[1]), "array"
            return
        if n_clients is None:
            raise DpfedInputError(
                "n_clients is needed when values is a block callable or an iterable of blocks."
            )
        self.n_clients = check_int("n_clients", n_clients, minimum=1)
        if callable(values):
            if dim is None:
                raise DpfedInputError("dim is needed when values is a block callable.")
            self.dim = check_int("dim", dim, minimum=1)
            self._callable = values
            self.kind = "callable"
            return
        if isinstance(values, str | bytes) or not isinstance(values, Iterable):
            raise DpfedInputError(
                "values must be an (N, D) array, a callable f(start, stop) or an iterable of "
                f"(b, D) arrays. Found {type(values)!r}."
            )
        self._iterator = iter(values)
        first = next(self._iterator, None)
        if first is None:
            raise DpfedInputError("values yielded no block. Expected blocks of N clients.")
        block = _as_block(first, None, dim, "the first block of values")
        self.dim = int(block.shape[1])
        if self.dim < 1:
            raise DpfedInputError(f"values must have D >= 1 columns. Found {self.dim}.")
        self._pending = block
        self.kind = "iterable"

    @property
    def partitionable(self) -> bool:
        """True if any range of clients can be read independently (array or callable)."""
        return self.kind != "iterable"

    def part(self, start: int, stop: int) -> ClientSource:
        """The same source restricted to clients ``start .. stop - 1`` (for a worker process).

        Client indices stay global. For an array the part holds a copy of those rows only, so
        only they are sent to a worker process; a callable is shared as it is.
        """
        if self._callable is not None:
            return self
        if self._array is None:
            raise DpfedInputError("an iterable of blocks cannot be split between workers.")
        first = self._first
        part = ClientSource.__new__(ClientSource)
        part.__dict__.update(self.__dict__)
        part._array = np.array(self._array[start - first : stop - first])
        part._first = start
        return part

    def blocks(
        self, block_size: int, start: int = 0, stop: int | None = None
    ) -> Iterator[tuple[int, np.ndarray]]:
        """Yield ``(first_client, block)`` over clients ``start .. stop - 1``, in order.

        Blocks hold at most ``block_size`` rows (an iterable's blocks are cut, never joined).
        An iterable can only be read once, from 0 to :math:`N`.

        Raises
        ------
        DpfedInputError
            If a block has the wrong shape, or an iterable yields more or fewer than
            :math:`N` rows.
        """
        stop = self.n_clients if stop is None else stop
        if self._array is not None or self._callable is not None:
            for a in range(start, stop, block_size):
                b = min(a + block_size, stop)
                if self._array is not None:
                    yield a, self._array[a - self._first : b - self._first]
                else:
                    where = f"values({a}, {b})"
                    yield a, _as_block(self._callable(a, b), b - a, self.dim, where)
            return
        if start != 0 or stop != self.n_clients or self._iterator is None:
            raise DpfedInputError("an iterable of blocks can only be read once, in full.")
        iterator, pending = self._iterator, self._pending
        self._iterator, self._pending = None, None
        pos = 0
        while True:
            block = pending if pending is not None else next(iterator, None)
            pending = None
            if block is None:
                break
            block = _as_block(block, None, self.dim, f"the block of values at client {pos}")
            if pos + block.shape[0] > self.n_clients:
                raise DpfedInputError(
                    f"values yielded more than n_clients = {self.n_clients} rows."
                )
            for a in range(0, block.shape[0], block_size):
                yield pos + a, block[a : a + block_size]
            pos += block.shape[0]
        if pos != self.n_clients:
            raise DpfedInputError(
                f"values yielded {pos} rows. Expected n_clients = {self.n_clients}."
            )
