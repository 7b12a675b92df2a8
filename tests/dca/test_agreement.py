"""The compute nodes agree on the clients whose shares reached all of them."""

from __future__ import annotations

import numpy as np
import pytest

from dpfed import DpfedInputError
from dpfed.dca.agreement import agree_included, check_dropouts, received_reports


def test_without_dropouts_everybody_is_included():
    reports = received_reports(5, 3, None)
    assert reports.shape == (3, 5) and reports.all()
    assert agree_included(reports).all()


def test_a_client_missing_at_one_node_is_dropped_everywhere():
    reports = received_reports(6, 3, {1: [2], 4: [0, 1]})
    assert reports.sum(axis=1).tolist() == [5, 5, 5]
    included = agree_included(reports)
    assert np.flatnonzero(~included).tolist() == [1, 4]


def test_plain_indices_reach_no_node():
    reports = received_reports(4, 2, [3, 0])
    assert not reports[:, [0, 3]].any()
    np.testing.assert_array_equal(check_dropouts(agree_included(reports), 2), [0, 3])


def test_more_than_tolerated_dropouts_are_refused():
    included = agree_included(received_reports(10, 2, [1, 2, 5]))
    with pytest.raises(DpfedInputError, match=r"3 clients.*clients 1, 2, 5.*tolerated = 2"):
        check_dropouts(included, 2)


@pytest.mark.parametrize(
    "dropped, match",
    [
        ([7], "dropped client must be < 5"),
        ({1: [3]}, "node missing client 1 must be < 2"),
        ({1: []}, "at least one node"),
        ("abc", "client indices"),
    ],
)
def test_bad_specifications_are_refused(dropped, match):
    with pytest.raises(DpfedInputError, match=match):
        received_reports(5, 2, dropped)
