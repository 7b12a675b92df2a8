"""The Ray engine: roles in groups, one group per Ray actor, messages through the object store.

Delivery is the in-process engine's first-in-first-out order, taken a *wave* at a time: the
messages in the queue are delivered at once, each actor handling its share in queue order,
and the messages they cause form the next wave in the order the in-process queue would hold
them (the outputs of the first message first). Every role therefore sees the same messages in
the same order as in-process, and a seeded run is the same run bit for bit.

Messages never pass through the calling process: an actor puts the messages it produced for
each other actor into Ray's object store, one object per destination, and returns only their
references and the order; the destination fetches them from the store. The calling process
holds the queue's order, never its payloads.

Observers (a role's ``observer`` attribute, see :mod:`dpfed.engines.base`) stay in the calling
process: an actor's role records what it would have reported, and at the end of that wave the
calling process copies every role's state back (the role's ``state_dict``, the contract its
checkpoints use) and calls the observer with each record in order. At the end of the run the
roles' final states are copied back the same way.

Ray is an optional dependency (``pip install "dpfed[ray]"``). Without an address the engine
starts a local Ray (``address="local"``); with one (``ray://...``, ``HOST:PORT`` or ``auto``)
it joins that cluster. A Ray already initialised in the process is used as it is.
"""

from __future__ import annotations

import logging
import os
import socket
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from dpfed._validation import DpfedInputError, check_int
from dpfed.core.threads import limit_blas_threads
from dpfed.engines.base import EngineReport, Role, unknown_recipient
from dpfed.engines.memory import peak_rss_bytes
from dpfed.runtime.messages import Message

__all__ = ["RayEngine", "ensure_ray", "ray_or_error"]

#: Where a message lies: the wave's batch (source group, destination group) and its index.
_Slot = tuple[tuple[int, int], int]


def ray_or_error() -> Any:
    """The ``ray`` module, or a clear error when the extra is not installed."""
    try:
        import ray
    except ImportError:
        raise DpfedInputError(
            'the Ray engine needs Ray: install it with `pip install "dpfed[ray]"`.'
        ) from None
    return ray


def ensure_ray(address: str | None = None, *, num_cpus: int | None = None) -> Any:
    """Initialise Ray unless it is: join ``address``, or start a local Ray with ``num_cpus``
    CPUs (default: the machine's). Returns the ``ray`` module."""
    ray = ray_or_error()
    if ray.is_initialized():
        return ray
    options: dict[str, Any] = {"include_dashboard": False, "logging_level": logging.WARNING}
    if address:
        _check_reachable(address)
        try:
            ray.init(address=address, **options)
        except (ConnectionError, RuntimeError, TimeoutError) as err:
            raise DpfedInputError(
                f"could not join the Ray cluster at {address!r}: {err}. Check that the head "
                "node runs (`ray status` there prints its address) and that this machine "
                "reaches it; a cluster started with token authentication (RAY_AUTH_MODE=token) "
                "needs the same RAY_AUTH_MODE and token in this shell."
            ) from None
    else:
        ray.init(address="local", num_cpus=num_cpus, **options)
    return ray


#: Seconds to wait for a TCP connection to a Ray head before calling it unreachable.
REACH_TIMEOUT = 3.0


def _check_reachable(address: str) -> None:
    """Refuse at once a ``HOST:PORT`` (or ``ray://HOST:PORT``) where nothing listens: Ray's own
    client retries for minutes, printing warnings, before it gives up."""
    target = address.removeprefix("ray://")
    host, sep, port = target.rpartition(":")
    if not sep or not port.isdigit() or not host:
        return  # "auto" or another form Ray resolves itself
    try:
        socket.create_connection((host.strip("[]"), int(port)), timeout=REACH_TIMEOUT).close()
    except OSError as err:
        raise DpfedInputError(
            f"no Ray cluster answers at {address!r} ({err.strerror or err}). Start one with "
            "`ray start --head` on the head node and pass the address it prints, or leave "
            "--ray-address out to start a local Ray."
        ) from None


class _Recorder:
    """Stands in for a role's observer inside an actor: keeps the records for the caller."""

    def __init__(self) -> None:
        self.records: list[Any] = []

    def __call__(self, record: Any) -> None:
        self.records.append(record)


class RoleGroup:
    """The roles one actor runs (the actor class is ``ray.remote(RoleGroup)``).

    Parameters
    ----------
    roles : dict of str to Role
        The roles, observers replaced by recorders.
    group_of : dict of str to int
        Every role's group: where the messages for it go.
    """

    def __init__(self, roles: dict[str, Role], group_of: dict[str, int]) -> None:
        self.roles = roles
        self.group_of = group_of
        self.recorders: dict[str, _Recorder] = {}
        for name, role in roles.items():
            observer = getattr(role, "observer", None)
            if isinstance(observer, _Recorder):
                self.recorders[name] = observer

    def deliver(
        self, batches: Sequence[Any], order: Sequence[tuple[int, int]]
    ) -> tuple[list[list[tuple[int, int]]], dict[int, Any], list[tuple[int, str, Any]]]:
        """Handle ``batches[b][i]`` for every ``(b, i)`` of ``order`` in turn.

        ``batches`` are object references (lists of messages). Returns, per message handled,
        where each message it caused went (destination group, index in that group's batch);
        the batches by destination, as object references; the records its observers made,
        with the position of the message that made them.
        """
        import ray

        lists = ray.get(list(batches))
        out: dict[int, list[Message]] = {}
        where: list[list[tuple[int, int]]] = []
        records: list[tuple[int, str, Any]] = []
        with limit_blas_threads():
            for position, (b, i) in enumerate(order):
                message = lists[b][i]
                role = self.roles.get(message.recipient)
                if role is None:
                    raise unknown_recipient(message)
                caused = []
                for produced in role.handle(message):
                    group = self.group_of.get(produced.recipient)
                    if group is None:
                        raise unknown_recipient(produced)
                    batch = out.setdefault(group, [])
                    caused.append((group, len(batch)))
                    batch.append(produced)
                where.append(caused)
                for name, recorder in self.recorders.items():
                    records.extend((position, name, r) for r in recorder.records)
                    recorder.records = []
        return where, {g: ray.put(batch) for g, batch in out.items()}, records

    def states(self) -> dict[str, tuple[dict[str, Any], dict[str, Any]]]:
        """Every role's ``state_dict()``."""
        return {name: role.state_dict() for name, role in self.roles.items()}

    def usage(self) -> dict[str, Any]:
        """This worker process: its roles, node and peak resident memory in bytes."""
        import ray

        return {
            "roles": len(self.roles),
            "node": ray.get_runtime_context().get_node_id()[:12],
            "host": socket.gethostname(),
            "pid": os.getpid(),
            "peak_rss_bytes": peak_rss_bytes(),
        }


class RayEngine:
    """Runs roles as Ray actors, ``workers`` groups of them (see the module docstring).

    Parameters
    ----------
    address : str, optional
        A Ray cluster to join (default: start a local Ray).
    workers : int, optional
        Actors (each a worker process holding a group of roles). Default: the cluster's
        CPUs, at most one per role.
    num_cpus : int, optional
        CPUs of a local Ray this engine starts (default: the machine's).
    """

    name = "ray"

    def __init__(
        self, address: str | None = None, *, workers: int | None = None, num_cpus: int | None = None
    ) -> None:
        self.address = address
        self.workers = None if workers is None else check_int("workers", workers, minimum=1)
        self.num_cpus = None if num_cpus is None else check_int("num_cpus", num_cpus, minimum=1)

    def run(self, roles: Mapping[str, Role], initial: Iterable[Message]) -> EngineReport:
        """Deliver ``initial`` and every message they cause on Ray actors; copy the final
        states back into ``roles`` and call observers in this process."""
        ray = ensure_ray(self.address, num_cpus=self.num_cpus)
        names = list(roles)
        cpus = max(1.0, float(ray.cluster_resources().get("CPU", 1.0)))
        count = min(len(names), self.workers or int(cpus))
        groups = [
            names[k * len(names) // count : (k + 1) * len(names) // count] for k in range(count)
        ]
        group_of = {name: k for k, members in enumerate(groups) for name in members}
        observers = _detach_observers(roles)
        try:
            payloads = [ray.put({n: roles[n] for n in members}) for members in groups]
        finally:
            for name, observer in observers.items():
                roles[name].observer = observer  # type: ignore[attr-defined]
        actor_class = ray.remote(RoleGroup).options(
            num_cpus=min(1.0, cpus / count),
            scheduling_strategy="SPREAD",
            max_concurrency=1,
        )
        actors = [actor_class.remote(p, group_of) for p in payloads]
        del payloads
        report = EngineReport(self.name)
        try:
            self._deliver(ray, actors, group_of, roles, observers, list(initial), report)
            self._copy_states(ray, actors, roles)
            report.workers = _get(ray, [a.usage.remote() for a in actors])
        finally:
            for actor in actors:
                ray.kill(actor)
        return report

    @staticmethod
    def _deliver(
        ray: Any,
        actors: list[Any],
        group_of: dict[str, int],
        roles: Mapping[str, Role],
        observers: dict[str, Any],
        initial: list[Message],
        report: EngineReport,
    ) -> None:
        firsts: dict[int, list[Message]] = {}
        queue: list[tuple[int, _Slot]] = []
        for message in initial:
            group = group_of.get(message.recipient)
            if group is None:
                raise unknown_recipient(message)
            batch = firsts.setdefault(group, [])
            queue.append((group, ((-1, group), len(batch))))
            batch.append(message)
        batches: dict[tuple[int, int], Any] = {
            (-1, g): ray.put(batch) for g, batch in firsts.items()
        }
        while queue:
            # each destination's messages in queue order, from the batches they lie in
            order: dict[int, list[tuple[int, int]]] = {}
            refs: dict[int, list[Any]] = {}
            keys: dict[int, dict[tuple[int, int], int]] = {}
            position: list[int] = []
            for group, (key, index) in queue:
                known = keys.setdefault(group, {})
                if key not in known:
                    known[key] = len(known)
                    refs.setdefault(group, []).append(batches[key])
                position.append(len(order.setdefault(group, [])))
                order[group].append((known[key], index))
            calls = {g: actors[g].deliver.remote(refs[g], order[g]) for g in order}
            done = dict(zip(calls, _get(ray, list(calls.values())), strict=True))
            report.delivered += len(queue)
            report.waves += 1
            batches = {
                (g, h): ref for g, (_, produced, _) in done.items() for h, ref in produced.items()
            }
            made: dict[tuple[int, int], list[tuple[str, Any]]] = {}
            for g, (_, _, records) in done.items():
                for p, name, record in records:
                    made.setdefault((g, p), []).append((name, record))
            following: list[tuple[int, _Slot]] = []
            ordered_records: list[tuple[str, Any]] = []
            for (group, _), p in zip(queue, position, strict=True):
                for h, index in done[group][0][p]:
                    following.append((h, ((group, h), index)))
                ordered_records.extend(made.get((group, p), []))
            if ordered_records:
                RayEngine._copy_states(ray, actors, roles)
                for name, record in ordered_records:
                    observers[name](record)
            queue = following

    @staticmethod
    def _copy_states(ray: Any, actors: list[Any], roles: Mapping[str, Role]) -> None:
        for states in _get(ray, [a.states.remote() for a in actors]):
            for name, (arrays, meta) in states.items():
                roles[name].load_state_dict(arrays, meta)


def _detach_observers(roles: Mapping[str, Role]) -> dict[str, Any]:
    """Replace every role's observer by a recorder; return the observers by role name."""
    observers = {}
    for name, role in roles.items():
        observer = getattr(role, "observer", None)
        if observer is not None:
            observers[name] = observer
            role.observer = _Recorder()  # type: ignore[attr-defined]
    return observers


def _get(ray: Any, refs: list[Any]) -> list[Any]:
    """``ray.get(refs)``, raising a role's own exception rather than Ray's wrapper."""
    try:
        return list(ray.get(refs))
    except ray.exceptions.RayTaskError as exc:
        cause = getattr(exc, "cause", None)
        if isinstance(cause, BaseException):
            raise cause from None
        raise
