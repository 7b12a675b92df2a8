"""What a result says about figures computed from exact (un-noised) private values.

Under a privacy mechanism the epsilon in a result covers what the parties *released*. A figure
computed from exact private values (a training objective, a protected party's residuals, the
unreleased iterates of output perturbation) is covered by no epsilon. Such figures are allowed
only where they stay inside the process that holds the data (the in-process runners), or in a
networked job that asks for them by name (``[job].evaluate = "full"``, or
``[job].predict_training_rows = true`` for a prediction's scores of training rows); either way
the result says so at its top, in ``exact_values``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

__all__ = [
    "exact_values",
    "in_process_seed_note",
    "result_warnings",
    "with_exact_values",
    "with_simulation",
]


def in_process_seed_note(seed: int | None) -> list[str]:
    """The note an in-process run with a private mechanism adds about its noise seed."""
    if seed is None:
        return []
    return [
        f"simulation: every party's noise comes from seed {seed}, and whoever knows the seed "
        "can regenerate it. That is harmless here (one program holds every party's data, "
        "whether its roles run in this process or on an engine's workers); a deployment must "
        "not share a seed: `dpfed run` draws each party's noise from its own secret."
    ]


def exact_values(
    figures: Sequence[str],
    *,
    left_parties: bool,
    what: str = "",
    because: str = '[job].evaluate = "full"',
) -> dict[str, Any] | None:
    """The ``exact_values`` section of a result, or None when there is nothing to flag.

    Parameters
    ----------
    figures : sequence of str
        History fields computed from exact private values.
    left_parties : bool
        True when exact values were sent out of the parties that hold them (a networked job
        with ``evaluate = "full"``); False when they were computed in the process that holds
        every party's data.
    what : str
        What was sent, for the note (networked jobs).
    because : str
        The job file's key that asked for them (networked jobs).
    """
    if not figures and not what:
        return None
    if left_parties:
        note = (
            f"exact values left the parties ({because})"
            + (f": {what}" if what else "")
            + "; they are covered by no epsilon in this result"
        )
    else:
        note = (
            "these history figures are computed from exact private values inside this one "
            "process; they are covered by no epsilon and would not be available to any one "
            "party of a deployment"
        )
    return {"figures": list(figures), "left_parties": left_parties, "note": note}


def _at_top(result: dict[str, Any], key: str, value: Any) -> dict[str, Any]:
    """``result`` with ``key`` placed right after ``protocol`` (or first)."""
    out: dict[str, Any] = {}
    for k, v in result.items():
        if k == key:
            continue
        out[k] = v
        if k == "protocol":
            out[key] = value
    if key not in out:
        out = {key: value, **out}
    return out


def with_exact_values(result: dict[str, Any], section: dict[str, Any] | None) -> dict[str, Any]:
    """``result`` with ``exact_values`` placed right after ``protocol`` (at the top of the
    file), or unchanged when ``section`` is None."""
    if section is None:
        return result
    return _at_top(result, "exact_values", section)


def with_simulation(result: dict[str, Any], warning: str) -> dict[str, Any]:
    """A simulation's result: ``privacy_guarantee`` at the top says there is none, and the
    warning is the first of the privacy notes."""
    privacy = dict(result.get("privacy", {}))
    notes = [n for n in privacy.get("notes", []) if n != warning]
    privacy["notes"] = [warning, *notes]
    out = _at_top(result, "privacy_guarantee", "none: noise is shared (simulation)")
    out["privacy"] = privacy
    return out


def result_warnings(result: dict[str, Any]) -> list[str]:
    """What a front end prints before a result's figures: no guarantee, exact values."""
    warnings = []
    if "privacy_guarantee" in result:
        warnings.append(f"privacy guarantee: {result['privacy_guarantee']}")
    exact = result.get("exact_values")
    if exact:
        shown = ", ".join(exact.get("figures", [])) or "see the note"
        warnings.append(f"exact values ({shown}): {exact['note']}")
    return warnings
