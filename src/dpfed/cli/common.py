"""What the ``dpfed`` command's modules share: the printed result and JSON summaries."""

from __future__ import annotations

import argparse
import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

from dpfed._io import SYSTEM_TREES, output_refusal
from dpfed.runtime.disclosure import result_warnings


def _writable_place(path: Path) -> str | None:
    """Why files cannot be created at ``path`` (a folder, existing or to be made), or None."""
    nearest = next(p for p in (path, *path.parents) if p.exists())
    if not nearest.is_dir():
        return f"{str(nearest)!r} is a file, so no folder can be made under it"
    if not os.access(nearest, os.W_OK | os.X_OK):
        return f"the folder {str(nearest)!r} is not writable"
    return None


def output_path(kind: str) -> Callable[[str], str]:
    """An argparse ``type`` that refuses, before any work, an output that cannot be written.

    ``kind`` is ``"file"`` (a JSON result, written atomically beside its name), ``"folder"``
    (made if missing) or ``"file or folder"`` (the command decides from its other options).
    A run whose result could not be written at the end would lose the work, and in a
    networked job the spending the parties' ledgers already hold.
    """

    def check(text: str) -> str:
        path = Path(text).absolute()
        if kind != "folder" and not path.is_dir():
            refusal = output_refusal(path)
            if refusal is not None:
                raise argparse.ArgumentTypeError(f"cannot write {text!r}: {refusal}")
        if kind == "folder" and any(
            path.resolve() == tree or tree in path.resolve().parents for tree in SYSTEM_TREES
        ):
            raise argparse.ArgumentTypeError(
                f"cannot write {text!r}: it lies under a system tree (/proc, /sys, /dev)"
            )
        if kind == "file" and path.is_dir():
            raise argparse.ArgumentTypeError(
                f"{text!r} is a folder; expected the path of a file to write"
            )
        if kind == "folder" and path.exists() and not path.is_dir():
            raise argparse.ArgumentTypeError(f"{text!r} is a file; expected a folder")
        folder = path if kind == "folder" or path.is_dir() else path.parent
        reason = _writable_place(folder)
        if reason is not None:
            raise argparse.ArgumentTypeError(f"cannot write {text!r}: {reason}")
        return text

    return check


def format_value(value: float | None) -> str:
    return "-" if value is None else f"{value:.4f}"


def privacy_line(privacy: dict[str, Any]) -> str:
    """The headline privacy line: the certified epsilon, or that there is none.

    A mechanism without a certified figure (``privacy["epsilon"]`` is None, e.g. the vertical
    ``paper`` mechanism) prints the paper's formula only as such, never as ``epsilon = X``.
    """
    delta = privacy.get("delta")
    at = "" if delta is None else f" at delta = {delta:g}"
    if privacy.get("epsilon") is not None:
        return (
            f"privacy ({privacy['mechanism']}, {privacy.get('accountant')}): "
            f"epsilon = {privacy['epsilon']:.4g}{at}"
        )
    if privacy.get("paper_epsilon") is not None:
        return (
            f"privacy ({privacy['mechanism']}): epsilon not certified (the paper's formula "
            f"gives {privacy['paper_epsilon']:.4g}{at}; see privacy.paper_epsilon_reason)"
        )
    return f"privacy ({privacy['mechanism']}): epsilon not certified"


def print_result(payload: dict[str, Any], out: str) -> None:
    """A training result's summary lines: warnings, final figures, privacy, baselines."""
    final, privacy = payload["final"], payload["privacy"]
    for warning in result_warnings(payload):
        print(f"WARNING: {warning}")
    print(
        f"rounds: {final.get('iteration')}  "
        f"train objective: {format_value(final.get('train_objective'))}"
        f"  test log loss: {format_value(final.get('test_log_loss'))}"
        f"  test accuracy: {format_value(final.get('test_accuracy'))}"
    )
    if privacy["mechanism"] != "none":
        print(privacy_line(privacy))
        for reason in privacy.get("paper_epsilon_reason", []):
            print(f"  not a guarantee: {reason}")
    for note in privacy.get("notes", []):
        print(f"note: {note}")
    for name, res in payload.get("baselines", {}).items():
        print(
            f"baseline {name}: test log loss {format_value(res.get('test_log_loss'))}, "
            f"accuracy {format_value(res.get('test_accuracy'))}"
        )
    print(f"wrote {out}")


def print_json(summary: Any) -> None:
    """A reproduction's summary, as every ``dpfed reproduce`` command prints it."""
    print(json.dumps(summary, indent=2, default=str))


def add_engine_arguments(p: Any) -> None:
    """``--engine``, ``--ray-address`` and ``--ray-workers`` on the parser ``p``."""
    p.add_argument(
        "--engine",
        choices=["inprocess", "ray"],
        default="inprocess",
        help="where the roles run: this process (default) or Ray actors (pip install "
        "'dpfed[ray]'); a seeded run is the same on both",
    )
    p.add_argument(
        "--ray-address",
        metavar="ADDR",
        help="Ray cluster to join (default: start a local Ray); with --engine ray",
    )
    p.add_argument(
        "--ray-workers",
        type=int,
        metavar="N",
        help="Ray actors, each a group of roles (default: the cluster's CPUs)",
    )


def engine_from_args(args: Any) -> Any:
    """The engine ``--engine`` names, with its options."""
    from dpfed._validation import DpfedInputError
    from dpfed.engines import get_engine

    if args.engine != "ray":
        if args.ray_address or args.ray_workers:
            raise DpfedInputError(
                f"--ray-address and --ray-workers need --engine ray. Found --engine {args.engine}."
            )
        return get_engine(args.engine)
    return get_engine("ray", address=args.ray_address, workers=args.ray_workers)


def add_task_engine_arguments(p: Any, what: str) -> None:
    """``--engine`` and ``--ray-address`` for a command whose independent ``what`` can run
    as Ray tasks."""
    p.add_argument(
        "--engine",
        choices=["inprocess", "ray"],
        default="inprocess",
        help=f"where the {what} run: this machine (default) or Ray tasks on a local Ray or a "
        "cluster (pip install 'dpfed[ray]'); the results are the same",
    )
    p.add_argument(
        "--ray-address",
        metavar="ADDR",
        help="Ray cluster to join (default: start a local Ray); with --engine ray",
    )


def executor_from_args(args: Any) -> Any:
    """A :class:`dpfed.engines.tasks.RayExecutor` for ``--engine ray``, else None."""
    from dpfed._validation import DpfedInputError

    if args.engine != "ray":
        if args.ray_address:
            raise DpfedInputError(
                f"--ray-address needs --engine ray. Found --engine {args.engine}."
            )
        return None
    from dpfed.engines.tasks import RayExecutor

    return RayExecutor(args.ray_address)
