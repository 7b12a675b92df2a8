"""Modules imported on first use, and what a party or leader process imports at start."""

from __future__ import annotations

import subprocess
import sys

from dpfed._lazy import lazy_module


def test_a_lazy_module_is_imported_on_first_attribute_access():
    code = (
        "import sys\nfrom dpfed._lazy import lazy_module\n"
        "m = lazy_module('colorsys')\nassert 'colorsys' not in sys.modules\n"
        "assert m.rgb_to_hsv(1, 0, 0) == (0.0, 1.0, 1)\nassert 'colorsys' in sys.modules\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True)
    assert "imported on first use" in repr(lazy_module("colorsys"))


def test_a_party_or_leader_starts_without_the_slow_imports():
    """dp-accounting, scikit-learn, scipy.stats, scipy.optimize and networkx take seconds
    to import together; a networked
    process imports them when its job needs them, not at start."""
    code = (
        "import sys, dpfed.cli.net, dpfed.protocols.vertical.host\n"
        "print(sorted(m for m in ('dp_accounting', 'sklearn', 'scipy.stats', "
        "'scipy.optimize', 'networkx') "
        "if m in sys.modules))\n"
    )
    done = subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, text=True)
    assert done.stdout.strip() == "[]"
