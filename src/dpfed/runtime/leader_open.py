"""How a networked job's leader (:class:`~dpfed.runtime.leader.Leader`) opens the job at its
parties: one at a time in name order, each waited for while it is not serving yet (saying
which parties it still waits for), each checking the job file's digest and reserving the
job's releases in its budget ledger. A failed TLS handshake is named at once; any failure
aborts the job everywhere, which frees the reservations already made.
"""

from __future__ import annotations

import json
import shlex
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn

import grpc

from dpfed import __version__
from dpfed._validation import DpfedInputError
from dpfed.runtime.control import OpenJob, kinds_fingerprint
from dpfed.runtime.leader_progress import leader_log
from dpfed.runtime.leader_requests import JobStopped
from dpfed.runtime.transport import HANDSHAKE_CLOSED, RemoteError, tls_failure

if TYPE_CHECKING:  # the leader imports this module
    from dpfed.runtime.leader import Leader

__all__ = [
    "HANDSHAKE_CLOSED_TRIES",
    "WAITING_EVERY",
    "WAITING_FIRST",
    "JobOpening",
    "PartyUnreachable",
]

#: Seconds before the leader first says which parties it is still waiting for, and between
#: repeats.
WAITING_FIRST, WAITING_EVERY = 1.0, 10.0

#: Handshakes a party may close in a row before the leader concludes it refuses the leader's
#: certificate (a party going down closes one or two).
HANDSHAKE_CLOSED_TRIES = 5


class PartyUnreachable(RuntimeError):
    """A party never answered the job's opening: nothing ran, so there is nothing to resume."""


class JobOpening:
    """Open a leader's job at its parties (:class:`~dpfed.runtime.control.OpenJob`).

    Parameters
    ----------
    leader : Leader
        The leader whose job is opened (its ``spec``, ``protocol``, ``resume`` and ``events``,
        read when used); requests go through its ``_control``.
    """

    def __init__(self, leader: Leader) -> None:
        self._leader = leader

    def open(self, name: str, *, timeout: float | None = None) -> dict[str, Any]:
        """Send party ``name`` the job's :class:`OpenJob` and return its description."""
        leader = self._leader
        spec = leader.spec
        return leader._control(
            name,
            OpenJob,
            timeout=timeout,
            digest=spec.digest,
            resume=leader.resume,
            version=__version__,
            kinds=kinds_fingerprint(leader.protocol.messages),
            keys=json.dumps(spec.key_digests(), sort_keys=True),
            text=spec.text,
        )

    def open_required(self) -> dict[str, dict[str, Any]]:
        """Open the job at the required parties (:meth:`open_all`), check that they hold the
        same number of rows if the protocol needs the same rows, checkpoint a fresh job and
        say that the parties are open; return their descriptions.

        Raises
        ------
        DpfedInputError
            A party refused the job, a certificate was refused, or the row counts differ.
        PartyUnreachable
            A party was never reached.
        JobStopped
            A party did not answer its opening.
        """
        leader = self._leader
        infos = self.open_all(leader.required)
        n_samples = {info["n_samples"] for info in infos.values()}
        if leader.protocol.same_rows and len(n_samples) != 1:
            leader.requests.abort_all(
                "the parties hold different numbers of rows", retry_for=leader.spec.round_timeout
            )
            raise DpfedInputError(
                "the parties must hold the same rows in the same order. Found row counts "
                f"{ {n: i['n_samples'] for n, i in infos.items()} }."
            )
        if not leader.resume:
            leader.checkpoints.save()
        leader_log(
            f"job {leader.spec.id}: {len(infos)} parties open"
            + (f", resuming after round {len(leader.history)}" if leader.resume else "")
        )
        return infos

    def open_all(self, parties: list[str]) -> dict[str, dict[str, Any]]:
        """Open the job at ``parties`` one at a time in name order, each waited for up to
        ``round_timeout``; any failure aborts the job everywhere.

        Raises
        ------
        DpfedInputError
            A party refused the job or the leader's certificate (or presented a certificate
            the leader refuses).
        PartyUnreachable
            A party was never reached within ``round_timeout``.
        JobStopped
            A party reached did not answer its opening within ``round_timeout``.
        """
        leader = self._leader
        spec = leader.spec
        infos: dict[str, dict[str, Any]] = {}
        started = time.monotonic()
        next_word = started + WAITING_FIRST
        names = sorted(parties)
        for name in names:
            deadline = time.monotonic() + spec.round_timeout
            closed = 0  # connections the party closed during the handshake, in a row
            while True:
                if time.monotonic() >= next_word:
                    waiting = [n for n in names if n not in infos]
                    leader_log(
                        f"waiting for {waiting[0]} at {spec.party(waiting[0]).address} "
                        f"(not serving yet, {time.monotonic() - started:.0f} s)"
                        + (f"; not yet opened: {', '.join(waiting[1:])}" if waiting[1:] else "")
                        + f"; giving up after {spec.round_timeout:g} s"
                    )
                    next_word = time.monotonic() + WAITING_EVERY
                leader.events.party(name, "waiting")
                try:
                    infos[name] = self.open(name)
                    leader.events.party(name, "serving")
                    break
                except RemoteError as exc:
                    # retry while the party is not serving yet; never re-send an open that
                    # may still be running
                    starting = exc.code == grpc.StatusCode.UNAVAILABLE
                    address = spec.party(name).address
                    tls = tls_failure(name, address, exc.details) if starting else None
                    closed = closed + 1 if starting and HANDSHAKE_CLOSED in exc.details else 0
                    if closed >= HANDSHAKE_CLOSED_TRIES:
                        tls = (
                            f"{name} at {address} closed the connection during the TLS "
                            f"handshake {closed} times in a row: it does not accept the "
                            "leader's certificate (not signed by the CA of its job file, "
                            "or not the leader's)"
                        )
                    if tls is not None:
                        leader.requests.abort_all(f"{name} could not open the job", retry_for=0.0)
                        raise DpfedInputError(
                            f"{tls}. Nothing ran and nothing was recorded; fix the certificate "
                            "and run this command again."
                        ) from None
                    if starting and time.monotonic() < deadline:
                        time.sleep(0.2)
                        continue
                    self._not_opened(name, exc, never=starting)
        return infos

    def _not_opened(self, name: str, exc: RemoteError, *, never: bool) -> NoReturn:
        """Party ``name`` could not open the job (``exc``): every party of a job that cannot
        start stops, and frees its reservation; one ``never`` reached is not waited for
        again."""
        leader = self._leader
        spec = leader.spec
        leader.requests.abort_all(
            f"{name} could not open the job", retry_for=0.0 if never else spec.round_timeout
        )
        if never:
            raise PartyUnreachable(
                f"party {name!r} at {spec.party(name).address} was never "
                f"reached within {spec.round_timeout:g} s ({exc.details}). "
                "Nothing ran and nothing was recorded; start it (`dpfed party "
                f"--config {shlex.quote(str(Path(spec.path).resolve()))} "
                f"--name {name}`) and run this command again."
            ) from None
        if exc.retryable:
            raise JobStopped(
                f"party {name!r} at {spec.party(name).address} did not answer "
                f"within {spec.round_timeout:g} s ({exc.details})"
            ) from None
        raise DpfedInputError(f"party {name!r} refused the job: {exc.details}") from None
