"""The parties' own tables of an aligned job (``[job].align``), joined by ID in one process.

Each party of the job file holds a CSV with a header, keyed by its ``id_column``, read through
its ``schema`` (:mod:`dpfed.data.tables`); the first party is the label holder and its schema
names the label. In one process the rows are joined directly: the IDs every party holds, in
the label holder's file order (the networked runtime would find the same set by private set
intersection, :mod:`dpfed.data.psi`). The test tables, when the parties give them, are joined
the same way. Nothing of the IDs leaves this module but their count and a digest
(:func:`dpfed.data.psi.alignment_digest`), which a result may record.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

import numpy as np

from dpfed._validation import DpfedInputError
from dpfed.data.psi import alignment_digest
from dpfed.data.tables import PartyTable, TableSchema, check_disjoint, load_schema, read_table

__all__ = ["JoinedTables", "TableParty", "join_tables"]


class TableParty(Protocol):
    """What the join reads of a party (a job file's aligned ``[[party]]``)."""

    name: str
    data: str
    test: str
    id_column: str
    schema: Path | None


@dataclass(frozen=True)
class JoinedTables:
    """The column blocks of the rows every party holds.

    Attributes
    ----------
    names : tuple of str
        The parties, label holder first.
    blocks : list of numpy.ndarray, shapes (n, d_m)
    labels : numpy.ndarray, shape (n,)
        +1 / -1 from the label holder's schema.
    test_blocks, test_labels : optional
        The joined test tables.
    record : dict
        What a result may say: each table's rows, the joined rows and their digest, each
        party's schema (its preprocessing) and encoded feature names.
    """

    names: tuple[str, ...]
    blocks: list[np.ndarray]
    labels: np.ndarray
    test_blocks: list[np.ndarray] | None
    test_labels: np.ndarray | None
    record: dict[str, Any]


def _common(tables: dict[str, PartyTable], order: tuple[str, ...]) -> list[str]:
    """The IDs every table holds, in ``order`` (the label holder's)."""
    shared = set(order)
    for table in tables.values():
        shared &= set(table.ids)
    return [i for i in order if i in shared]


def _read(
    parties: Sequence[TableParty], schemas: dict[str, TableSchema], which: str
) -> dict[str, PartyTable]:
    return {
        p.name: read_table(
            p.data if which == "data" else p.test,
            id_column=p.id_column,
            schema=schemas[p.name],
            labels=k == 0,
        )
        for k, p in enumerate(parties)
    }


def join_tables(
    parties: Sequence[TableParty], *, min_rows: int = 1, align: str = "psi"
) -> JoinedTables:
    """Read and join the parties' tables of an aligned job (label holder first).

    Raises
    ------
    DpfedInputError
        If the job is not aligned, the label holder's schema names no label or another's
        does, two parties declare the same column, some parties give a test table and others
        not, or fewer rows than ``[job].min_rows`` are shared (naming each table's count);
        and every refusal of :func:`dpfed.data.tables.read_table` (naming file, line, value).
    """
    if any(p.schema is None or not p.id_column for p in parties):
        raise DpfedInputError("every party of an aligned job needs id_column and schema.")
    schemas = {p.name: load_schema(str(p.schema)) for p in parties}
    if schemas[parties[0].name].label is None:
        raise DpfedInputError(
            f"the label holder {parties[0].name!r} (the first party) has a schema without "
            "label and positive."
        )
    labelled = [p.name for p in parties[1:] if schemas[p.name].label is not None]
    if labelled:
        raise DpfedInputError(
            f"only the label holder's schema names the label. Found one in {labelled}'s."
        )
    check_disjoint(schemas)
    tables = _read(parties, schemas, "data")
    order = _common(tables, tables[parties[0].name].ids)
    if len(order) < min_rows:
        sizes = ", ".join(f"{n} {len(t.ids)}" for n, t in tables.items())
        raise DpfedInputError(
            f"the parties share {len(order)} IDs, fewer than [job].min_rows = {min_rows} "
            f"(rows per table: {sizes})."
        )
    joined = {n: t.take(order) for n, t in tables.items()}
    given = [p.name for p in parties if p.test]
    test_blocks = test_labels = None
    test_record: dict[str, Any] | None = None
    if given and len(given) != len(parties):
        raise DpfedInputError(
            f"every party gives a test table or none does. Found one for {given} only."
        )
    if given:
        tests = _read(parties, schemas, "test")
        test_order = _common(tests, tests[parties[0].name].ids)
        if not test_order:
            raise DpfedInputError("the parties' test tables share no ID.")
        joined_test = {n: t.take(test_order) for n, t in tests.items()}
        test_blocks = [joined_test[p.name].X for p in parties]
        test_labels = joined_test[parties[0].name].y
        test_record = {
            "rows_per_table": {n: len(t.ids) for n, t in tests.items()},
            "joined_rows": len(test_order),
            "digest": alignment_digest(test_order),
        }
    labels = joined[parties[0].name].y
    assert labels is not None
    record = {
        "align": align,
        "rows_per_table": {n: len(t.ids) for n, t in tables.items()},
        "joined_rows": len(order),
        "digest": alignment_digest(order),
        "test": test_record,
        "how": "joined by ID in one process (the label holder's row order)",
        "features": {p.name: list(schemas[p.name].feature_names) for p in parties},
        "preprocessing": {p.name: schemas[p.name].record() for p in parties},
    }
    return JoinedTables(
        tuple(p.name for p in parties),
        [joined[p.name].X for p in parties],
        labels,
        test_blocks,
        test_labels,
        record,
    )
