"""Tests for dpfed.data.psi: private set intersection of row IDs and the agreed order."""

from __future__ import annotations

import numpy as np
import pytest

from dpfed._validation import DpfedInputError

psi = pytest.importorskip("private_set_intersection.python")

from dpfed.data.psi import (  # noqa: E402 - after the optional dependency's check
    PsiHolder,
    PsiSeeker,
    agreed_order,
    alignment_digest,
    intersect,
    order_key,
)


def _ids(n, offset, rng):
    ids = [f"C{1_000_000 + i}" for i in range(offset, offset + n)]
    rng.shuffle(ids)
    return ids


def test_the_seeker_learns_exactly_the_intersection_in_its_own_order():
    rng = np.random.default_rng(0)
    bank, shop = _ids(3000, 0, rng), _ids(3000, 300, rng)  # 90 % overlap, shuffled
    common, size = intersect(bank, shop)
    assert common == [v for v in bank if v in set(shop)]
    assert len(common) == 2700
    assert size > 0


def test_the_holder_sees_only_encrypted_values_and_each_run_uses_fresh_keys():
    # IDs of 16 bytes: a random message contains a given one with probability ~ 2^-115
    ids = [f"customer-{i:07d}" for i in range(50)]
    seeker = PsiSeeker(ids)
    holder = PsiHolder(ids)
    request = seeker.request()
    for v in ids[:5]:
        assert v.encode() not in request  # no ID travels in the clear
        assert v.encode() not in holder.setup(len(ids))
    assert PsiSeeker(ids).request() != request  # a new key per run


def test_the_three_messages_run_between_two_parties():
    seeker, holder = PsiSeeker(["a", "b", "c"]), PsiHolder(["c", "d", "a"])
    setup = holder.setup(3)
    response = holder.answer(seeker.request())
    assert seeker.intersection(setup, response) == ["a", "c"]


def test_empty_and_duplicate_ids_are_refused():
    with pytest.raises(DpfedInputError, match="no IDs"):
        PsiSeeker([])
    with pytest.raises(DpfedInputError, match="unique"):
        PsiHolder(["a", "a"])


def test_the_agreed_order_depends_on_the_key_alone():
    ids = [f"C{i}" for i in range(1000)]
    key = order_key()
    assert len(key) == 32
    order = agreed_order(ids, key)
    assert sorted(order) == sorted(ids)
    assert agreed_order(list(reversed(ids)), key) == order  # not either party's file order
    assert agreed_order(ids, order_key()) != order
    assert order != sorted(ids)  # nor the IDs' own order
    assert alignment_digest(order) == alignment_digest(list(order))
    assert alignment_digest(order) != alignment_digest(sorted(order))
    with pytest.raises(DpfedInputError, match="32 bytes"):
        agreed_order(ids, b"short")
