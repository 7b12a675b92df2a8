"""The checkpoint of a networked job's leader (:class:`~dpfed.runtime.leader.Leader`):
``leader.npz`` in the job's checkpoint folder, written before each round report is
acknowledged, when the submission deadline passes, when the job is aborted and when it has
finished (then with its result, so that ``--resume`` can write the result again).
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

from dpfed._validation import DpfedInputError
from dpfed.runtime.checkpoint import load_checkpoint, save_checkpoint

if TYPE_CHECKING:  # the leader imports this module
    from dpfed.runtime.leader import Leader

__all__ = ["LeaderCheckpoint"]


class LeaderCheckpoint:
    """Load, check and save the leader's checkpoint (``leader.checkpoint_path``).

    The state saved is the leader's own (its history, received links, seconds, what it knows
    of the droppable parties, and whether the job finished or was aborted); loading restores
    it on the leader.

    Parameters
    ----------
    leader : Leader
        The leader whose state is saved and restored.
    """

    def __init__(self, leader: Leader) -> None:
        self._leader = leader

    def load_or_check(self) -> None:
        """Restore the leader's state when resuming, or check that a fresh run has no
        checkpoint to continue.

        Raises
        ------
        DpfedInputError
            The job was aborted; or, without ``resume``, it has a checkpoint (unfinished or
            finished); or, with ``resume``, there is no checkpoint, it belongs to another
            version of the job file, or the job finished without a result kept.
        """
        leader = self._leader
        path, spec = leader.checkpoint_path, leader.spec
        exists = path.exists()
        if exists:
            _, state = load_checkpoint(path)
            if state.get("aborted"):
                raise DpfedInputError(
                    f"job {spec.id} was aborted: {state['aborted']} (see "
                    f"{str(path)!r}); give the job a new id to run it again."
                )
        if not leader.resume:
            if exists:
                if not state.get("finished"):
                    raise DpfedInputError(
                        f"job {spec.id} has a checkpoint at round {len(state['history'])} "
                        f"in {str(path)!r}; continue it with --resume, or give "
                        "the job a new id to start afresh (never remove a party's work folder: it "
                        "holds the party's budget ledger)."
                    )
                raise DpfedInputError(
                    f"job {spec.id} has already finished (see {str(path)!r});"
                    " give the job a new id to run it again, or add --resume to write its result "
                    "again."
                )
            return
        if not exists:
            raise DpfedInputError(
                f"--resume needs the leader's checkpoint {str(path)!r}. Found none."
            )
        _, state = load_checkpoint(path)
        if state.get("digest") != spec.digest:
            raise DpfedInputError(
                f"the checkpoint {str(path)!r} belongs to another version of job "
                f"{spec.id} (the job file changed)."
            )
        if state.get("finished"):
            if state.get("result") is None:
                raise DpfedInputError(f"job {spec.id} has already finished; nothing to resume.")
            # finished, but its result file may not have been written: write it again
            leader.finished, leader.result = True, state["result"]
            return
        leader.history = state["history"]
        leader.inbound.load(state["inbound"])
        leader.elapsed = float(state["seconds"])
        leader.protocol_done = bool(state["protocol_done"])
        leader.deadline_passed = bool(state.get("deadline_passed", False))
        leader.dropped = list(state.get("dropped", []))
        leader.droppable_samples = dict(state.get("droppable_samples", {}))

    def save(self, *, aborted: str | None = None) -> None:
        """Write the leader's state (``aborted``: why the job was aborted, never resumed)."""
        leader = self._leader
        save_checkpoint(
            leader.checkpoint_path,
            {},
            {
                "digest": leader.spec.digest,
                "history": leader.history,
                "inbound": leader.inbound.state(),
                "seconds": self.seconds(),
                "finished": leader.finished,
                "protocol_done": leader.protocol_done,
                "deadline_passed": leader.deadline_passed,
                "dropped": leader.dropped,
                "droppable_samples": leader.droppable_samples,
                "aborted": aborted,
                "result": leader.result,
            },
            fsync=leader.spec.fsync,
        )

    def seconds(self) -> float:
        """The seconds the job has run, over all its runs (those before a resume included)."""
        return self._leader.elapsed + (time.monotonic() - self._leader.started)
