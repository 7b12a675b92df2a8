"""The end of a networked job at its leader (:class:`~dpfed.runtime.leader.Leader`): the result
assembled from every required party's public account (and, under ``evaluate = "full"``, their
losses), the parties told to finish, the result kept in the finished checkpoint and written
(again, when a finished job is resumed because its result file was not written).
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from dpfed._io import jsonable, write_json_atomic
from dpfed._validation import DpfedInputError
from dpfed.runtime.control import AccountRequest, EvaluateRequest, FinishJob
from dpfed.runtime.disclosure import with_simulation
from dpfed.runtime.jobfile import SIMULATION_WARNING
from dpfed.runtime.leader_progress import leader_log
from dpfed.runtime.registry import JobRecord

if TYPE_CHECKING:  # the leader imports this module
    from dpfed.runtime.leader import Leader

__all__ = ["JobResult"]


class JobResult:
    """Assemble, keep and write the result of a leader's job.

    Parameters
    ----------
    leader : Leader
        The leader whose job ends (its ``spec``, ``protocol``, parties and ``history``, read
        when used); read-only requests go through its ``_query``, the others through its
        ``_control``.
    """

    def __init__(self, leader: Leader) -> None:
        self._leader = leader

    def finish(self, out: str | Path, infos: dict[str, dict[str, Any]]) -> dict[str, Any]:
        """Every required party has finished: collect their accounts, make the protocol's
        result, tell the parties to finish (the droppable ones to finish or abort), keep the
        result in the finished checkpoint, write it to ``out`` and return it.

        ``infos`` are the descriptions of the parties opened (their ``n_samples``).

        Raises
        ------
        JobStopped
            A party did not answer a query within ``grace``.
        DpfedInputError
            Writing ``out`` failed (the result is kept in the checkpoint).
        """
        leader = self._leader
        accounts = {name: leader._query(name, AccountRequest) for name in leader.required}
        samples = {name: int(info["n_samples"]) for name, info in infos.items()}
        record = JobRecord(
            history=leader.history,
            accounts=accounts,
            n_samples=leader.droppable_samples | samples,
            evaluate=self.evaluate,
            seconds=leader.checkpoints.seconds(),
        )
        result = leader.protocol.result(leader.spec, record)
        for name in leader.required:
            leader._control(name, FinishJob)
        if leader.dropouts is not None:
            leader.submissions.end()
        if leader.spec.simulation:
            result = with_simulation(result, SIMULATION_WARNING)
        with leader.lock:
            # the finished checkpoint keeps the result: if writing `out` fails, --resume
            # writes it again (the parties have finished and cannot be asked twice)
            leader.finished, leader.result = True, jsonable(result)
            leader.checkpoints.save()
        self.write(out, result)
        leader.events.result(result)
        rounds = len(leader.history) or None
        for name in leader.required:
            leader.events.party(name, "finished", {"round": rounds, "finished": True})
        leader.events.state("finished")
        return result

    def write_again(self, out: str | Path, result: dict[str, Any]) -> dict[str, Any]:
        """``--resume`` of a finished job: write its ``result``, kept in the checkpoint, to
        ``out`` again and return it.

        Raises
        ------
        DpfedInputError
            Writing ``out`` failed.
        """
        leader = self._leader
        self.write(out, result)
        leader_log(
            f"job {leader.spec.id} had finished; its result, kept in the checkpoint, "
            f"is written again to {out}"
        )
        leader.events.result(result)
        leader.events.state("finished")
        return result

    def write(self, out: str | Path, result: dict[str, Any]) -> None:
        """Write the finished job's result; a failed write names what was kept and how to get
        the file (the parties have finished: the checkpoint's copy is the only one).

        Raises
        ------
        DpfedInputError
            Writing ``out`` failed.
        """
        leader = self._leader
        try:
            write_json_atomic(out, result)
        except OSError as err:
            raise DpfedInputError(
                f"job {leader.spec.id} finished, but writing its result to {str(out)!r} failed "
                f"({err.strerror or err}). Nothing was written there; the result is kept in the "
                f"leader's checkpoint {str(leader.checkpoint_path)!r}. Once the cause is fixed, "
                f"`{leader.resume_command()}` writes it (add another --out to write it "
                "elsewhere)."
            ) from None

    def evaluate(self, name: str, models: list[list[float]]) -> list[float]:
        """Party ``name``'s losses at ``models`` (evaluation after training)."""
        reply = self._leader._query(
            name, EvaluateRequest, models=np.asarray(models, dtype=np.float64)
        )
        return [float(v) for v in reply["losses"]]
