"""The live job page: ``dpfed run --monitor [HOST:]PORT`` and ``dpfed monitor``.

The leader serves one page and the JSON it polls, ``/status.json``, from a thread of its own
process. Everything on the page is what the leader already holds:

* the job file's public settings (protocol, parties and their addresses, budgets, rounds);
* the round reports' history entries (the same figures ``dpfed run`` prints and writes), so
  the curves are exactly as private as the result file;
* every party's answer to the leader's status polls: its round, whether it has finished, and
  what the job has spent so far on its budget (a function of the job's public parameters);
  whether the leader is waiting for it or cannot reach it;
* at the end, the result's final figures and privacy.

So the page widens nothing the leader learns. It binds to ``127.0.0.1`` unless an address is
given (``0.0.0.0:8765`` shows it to the network, and so shows the job's figures to anyone who
can reach the port: the page has no login).

The page is plain HTML with a small script (no build step, no external file): it fetches
``status.json`` every second and draws its charts as SVG. When the leader has stopped, it keeps
the last state and says so. ``dpfed monitor --checkpoint DIR`` serves the same page for a
finished or stopped job from the leader's checkpoint.
"""

from __future__ import annotations

import copy
import itertools
import json
import math
import threading
import time
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from importlib import resources
from pathlib import Path
from typing import Any

from dpfed._validation import DpfedInputError
from dpfed.runtime.checkpoint import load_checkpoint
from dpfed.runtime.jobspec import JobSpec
from dpfed.runtime.registry import get_protocol

__all__ = ["MONITOR_KEEP", "JobView", "MonitorServer", "checkpoint_view", "parse_address"]

#: Seconds the leader keeps serving the page after the job ends, so an open page (polling
#: every second) shows the final state.
MONITOR_KEEP = 3.0

#: The history entries' figures the page draws (others are left out of ``status.json``).
FIGURES = (
    "iteration",
    "seconds",
    "train_objective",
    "test_log_loss",
    "test_accuracy",
    "epsilon",
    "primal_residual",
    "dual_residual",
)


def parse_address(text: str) -> tuple[str, int]:
    """``[HOST:]PORT`` as ``(host, port)``; the host defaults to ``127.0.0.1``."""
    host, _, port = str(text).rpartition(":")
    host = host.strip("[]") or "127.0.0.1"
    if not port.isdigit() or not 0 <= int(port) <= 65535:
        raise DpfedInputError(
            f"the monitor's address must be [HOST:]PORT with a port from 0 to 65535. "
            f"Found {text!r}."
        )
    return host, int(port)


class JobView:
    """What the page shows of a job: a :class:`~dpfed.runtime.job_events.JobListener` of the
    leader's events, read by the server.

    Parameters
    ----------
    spec : JobSpec
        The job (its public settings).
    """

    def __init__(self, spec: JobSpec) -> None:
        self._lock = threading.Lock()
        self._state: dict[str, Any] = {
            "job": spec.id,
            "protocol": spec.protocol,
            "state": "opening",
            "message": None,
            "warning": None,
            "rounds_planned": get_protocol(spec.protocol).planned_rounds(spec),
            "history": [],
            "parties": {
                p.name: {
                    "address": p.address,
                    "status": "not contacted",
                    "round": None,
                    "finished": False,
                    "epsilon": None,
                    "budget": None if p.budget is None else p.budget.epsilon,
                }
                for p in spec.parties
            },
            "final": None,
            "privacy": None,
            "started": time.time(),
            "updated": time.time(),
        }

    def on_state(self, state: str, message: str | None = None) -> None:
        """The job's state: ``opening``, ``running``, ``finished``, ``stopped`` or ``failed``."""
        with self._lock:
            self._state["state"], self._state["message"] = state, message
            self._state["updated"] = time.time()

    def on_party(self, name: str, status: str, reply: dict[str, Any] | None = None) -> None:
        """Party ``name``'s status (``waiting``, ``serving``, ``unreachable``, ``finished``)
        and, from a status reply, its round and this job's epsilon on its budget."""
        with self._lock:
            party = self._state["parties"].get(name)
            if party is None:
                return
            party["status"] = status
            if reply is not None:
                party["round"] = reply.get("round")
                party["finished"] = bool(reply.get("finished"))
                if reply.get("epsilon") is not None:
                    party["epsilon"] = float(reply["epsilon"])
            self._state["updated"] = time.time()

    def on_history(self, history: list[dict[str, Any]]) -> None:
        """The round reports' history entries so far (entries already shown are kept: the
        history only grows, so each report adds one)."""
        with self._lock:
            shown = self._state["history"]
            if len(history) < len(shown):  # not the same job's history: start again
                shown.clear()
            shown.extend({k: e.get(k) for k in FIGURES if k in e} for e in history[len(shown) :])
            self._state["warning"] = rising_loss_warning(shown)
            self._state["updated"] = time.time()

    def on_result(self, result: dict[str, Any]) -> None:
        """The written result: its final figures and privacy (per party, when it has them)."""
        privacy = result.get("privacy") or {}
        per_party = privacy.get("per_party") or {}
        with self._lock:
            self._state["final"] = result.get("final")
            self._state["privacy"] = {
                "mechanism": privacy.get("mechanism"),
                "epsilon": privacy.get("epsilon"),
                "delta": privacy.get("delta"),
                "per_party": {
                    n: v.get("epsilon") for n, v in per_party.items() if isinstance(v, dict)
                },
            }
            for name, party in self._state["parties"].items():
                spent = self._state["privacy"]["per_party"].get(name)
                if spent is not None:
                    party["epsilon"] = spent
            self._state["updated"] = time.time()

    def snapshot(self) -> dict[str, Any]:
        """A copy of the view, as ``status.json`` serves it."""
        with self._lock:
            return copy.deepcopy(self._state)


#: Consecutive rises of the test log loss after which the page warns.
RISING_ROUNDS = 3


def rising_loss_warning(history: list[dict[str, Any]]) -> str | None:
    """A warning when the test log loss rose in each of the last :data:`RISING_ROUNDS`
    rounds, else None: more rounds are making the model worse, and a private job spends
    budget on every one of them."""
    losses = [
        v
        for e in history[-(RISING_ROUNDS + 1) :]
        if isinstance(v := e.get("test_log_loss"), int | float)
    ]
    if len(losses) <= RISING_ROUNDS:
        return None
    if all(b > a for a, b in itertools.pairwise(losses)):
        first = len(history) - RISING_ROUNDS
        return (
            f"the test log loss has risen in each of the last {RISING_ROUNDS} rounds "
            f"({losses[0]:.4g} at round {first} to {losses[-1]:.4g}): more rounds are "
            "making the model worse, and a private job spends budget on every one"
        )
    return None


def checkpoint_view(spec: JobSpec, folder: str | Path | None = None) -> JobView:
    """The view of a finished or stopped job from its leader checkpoint (``leader.npz`` in
    ``folder``, default the job's checkpoint folder)."""
    path = (Path(folder) if folder is not None else spec.checkpoint) / "leader.npz"
    if not path.is_file():
        raise DpfedInputError(
            f"no leader checkpoint at {str(path)!r}: the job has not run from this folder "
            "(give the folder that holds leader.npz with --checkpoint)."
        )
    _, state = load_checkpoint(path)
    if state.get("digest") != spec.digest:
        raise DpfedInputError(
            f"the checkpoint {str(path)!r} is of another version of the job file (its digest "
            "differs): give the job file the job ran with."
        )
    view = JobView(spec)
    view.on_history(list(state.get("history", [])))
    finished = bool(state.get("finished"))
    aborted = state.get("aborted")
    for name in (p.name for p in spec.parties):
        view.on_party(name, "finished" if finished else "not polled")
    if finished:
        history = state.get("history") or []
        # the result the leader wrote (kept in the checkpoint), else the last round's figures
        view.on_result(state.get("result") or {"final": history[-1] if history else None})
        view.on_state("finished", "read from the leader's checkpoint")
    else:
        view.on_state("stopped", aborted or "stopped part-way; read from the leader's checkpoint")
    return view


def _page() -> bytes:
    return resources.files("dpfed.runtime").joinpath("monitor_page.html").read_bytes()


class MonitorServer:
    """Serves the page and ``status.json`` from ``view()`` in a background thread.

    Parameters
    ----------
    view : callable
        Returns the current ``status.json`` content.
    address : str
        ``[HOST:]PORT`` (port 0: any free port; see :attr:`url`).
    """

    def __init__(self, view: Callable[[], dict[str, Any]], address: str) -> None:
        host, port = parse_address(address)
        page = _page()

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                path = self.path.split("?", 1)[0]
                if path in ("/", "/index.html"):
                    self._send(200, "text/html; charset=utf-8", page)
                elif path == "/status.json":
                    body = json.dumps(
                        _finite(view()), allow_nan=False, default=_json_default
                    ).encode()
                    self._send(200, "application/json", body)
                else:
                    self._send(404, "text/plain; charset=utf-8", b"not found\n")

            def _send(self, code: int, kind: str, body: bytes) -> None:
                self.send_response(code)
                self.send_header("Content-Type", kind)
                self.send_header("Content-Length", str(len(body)))
                self.send_header("Cache-Control", "no-store")
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, format: str, *args: Any) -> None:
                return  # the job's log is the leader's; page fetches are not news

        try:
            self._server = ThreadingHTTPServer((host, port), Handler)
        except OSError as exc:
            raise DpfedInputError(
                f"the monitor cannot listen on {host}:{port} ({exc.strerror or exc})."
            ) from None
        self._server.daemon_threads = True
        self._thread = threading.Thread(
            target=self._server.serve_forever, name="monitor", daemon=True
        )

    @property
    def url(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host!s}:{port}/"

    def start(self) -> MonitorServer:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=5)


def _finite(value: Any) -> Any:
    """``value`` with every non-finite float as None (JSON has no NaN or infinity)."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {k: _finite(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_finite(v) for v in value]
    return value


def _json_default(value: Any) -> Any:
    """Numbers numpy hands over (``float64``, ...) as plain JSON numbers."""
    try:
        return value.item()
    except AttributeError:
        raise TypeError(f"{type(value).__name__} is not JSON serialisable") from None
