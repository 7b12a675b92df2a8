"""``dpfed party``, ``dpfed run``, ``dpfed predict`` and ``dpfed monitor``: serve one party of a
networked job, lead a job, score new rows with a finished job's model, show a job's page.

Needs the ``net`` extra (grpcio); :mod:`dpfed.cli.main` says so when it is missing.
"""

from __future__ import annotations

import argparse
import sys
import time
from typing import Any

from dpfed._validation import DpfedInputError
from dpfed.cli.common import output_path, print_result
from dpfed.parameters import parse_float
from dpfed.runtime.alignment import alignment_file, alignment_spec
from dpfed.runtime.disclosure import result_warnings
from dpfed.runtime.grpc_log import grpc_log_to, handshake_log_enabled
from dpfed.runtime.jobfile import load_job
from dpfed.runtime.leader import (
    EXIT_STOPPED,
    EXIT_UNREACHABLE,
    JobStopped,
    Leader,
    PartyUnreachable,
    run_alignment,
)
from dpfed.runtime.logs import LOG_FORMATS, LOG_LEVELS, configure_logging, process_logger
from dpfed.runtime.monitor import MONITOR_KEEP, MonitorServer, checkpoint_view
from dpfed.runtime.party import EXIT_FINISHED, run_party
from dpfed.runtime.prediction import PredictionFailed, run_prediction
from dpfed.runtime.service import PartyService, is_party_config, load_party_config


def configure_party(p: argparse.ArgumentParser) -> None:
    """``dpfed party``."""
    p.add_argument(
        "--config",
        required=True,
        help="the party's own file (party.toml: a service that serves every job the "
        "leaders present, until SIGTERM), or a job file with --name (serve that "
        "one job)",
    )
    p.add_argument("--name", help="with a job file: the party this process serves")
    p.add_argument(
        "--allow-exact-disclosure",
        action="store_true",
        help="this party's own policy: although its ledger holds a privacy budget on its data, "
        "it may send values computed exactly from its rows, which no epsilon covers, when "
        'the job file asks for them ([job].evaluate = "full"; the scores of its training '
        "rows under [job].predict_training_rows = true). Without it such a party refuses "
        "them; the job file, written by the leader, cannot grant this",
    )
    add_log_options(p)
    p.set_defaults(func=run_party_command)


def add_log_options(p: argparse.ArgumentParser) -> None:
    """``--log-level`` and ``--log-format`` of the runtime's processes."""
    p.add_argument(
        "--log-level",
        choices=LOG_LEVELS,
        default="info",
        help="least severe messages shown (default info)",
    )
    p.add_argument(
        "--log-format",
        choices=LOG_FORMATS,
        default="text",
        help="text: '[name] message' lines; json: one object per line",
    )


def run_party_command(args: argparse.Namespace) -> int:
    configure_logging(args.log_level, args.log_format)
    if not handshake_log_enabled():
        return _serve_party(args)
    name = (
        load_party_config(args.config).name
        if is_party_config(args.config)
        else args.name or "party"
    )
    transport_log = process_logger("dpfed.runtime.transport", name)
    with grpc_log_to(transport_log.warning):
        return _serve_party(args)


def _serve_party(args: argparse.Namespace) -> int:
    if is_party_config(args.config):
        if args.name is not None or args.allow_exact_disclosure:
            raise DpfedInputError(
                f"{args.config} is a party file (no [job] table): its name and policy are in "
                "it; --name and --allow-exact-disclosure go with a job file."
            )
        return PartyService(load_party_config(args.config)).serve()
    if args.name is None:
        raise DpfedInputError(
            f"{args.config} is a job file: --name says which of its parties this process "
            "serves (or give a party file, party.toml, to serve every job as a service)."
        )
    spec = load_job(args.config)
    try:
        if spec.align and not alignment_file(spec, args.name).exists():
            code = run_party(
                alignment_spec(spec), args.name, allow_exact_disclosure=args.allow_exact_disclosure
            )
            if code != EXIT_FINISHED:
                return code
        return run_party(spec, args.name, allow_exact_disclosure=args.allow_exact_disclosure)
    except KeyboardInterrupt:
        folder = spec.party(args.name).workdir / spec.id
        print(
            f"dpfed: {args.name} interrupted; what it has handled is kept in {folder} "
            "(journal, snapshot, noise secret): start it again with the same command and it "
            "continues the job",
            file=sys.stderr,
        )
        return 130


def configure_run(p: argparse.ArgumentParser) -> None:
    """``dpfed run``."""
    p.add_argument("--config", required=True, help="the job file (TOML)")
    p.add_argument("--out", type=output_path("file"), required=True, help="result JSON file")
    p.add_argument(
        "--resume", action="store_true", help="continue a stopped job from its checkpoints"
    )
    p.add_argument("--quiet", action="store_true", help="no progress output")
    p.add_argument(
        "--monitor",
        metavar="[HOST:]PORT",
        help="serve the job's live page on this address (host 127.0.0.1 unless given; "
        "0.0.0.0:PORT shows it to the network, without a login)",
    )
    p.add_argument(
        "--monitor-keep",
        type=parse_float,
        default=MONITOR_KEEP,
        metavar="SECONDS",
        help=f"keep serving the page this long after the job ends (default {MONITOR_KEEP:g})",
    )
    add_log_options(p)
    p.set_defaults(func=run_run_command)


def run_run_command(args: argparse.Namespace) -> int:
    configure_logging(args.log_level, args.log_format)
    spec = load_job(args.config)
    if spec.align:
        aligned = run_alignment(spec, progress=not args.quiet)
        shared = aligned["parts"]["train"]
        print(
            f"aligned {shared['rows']} rows shared by every party (digest "
            f"{shared['digest'][:16]}); training on them"
        )
    leader = Leader(
        spec,
        resume=args.resume,
        progress=not args.quiet,
        monitor=args.monitor,
        monitor_keep=args.monitor_keep,
    )

    def summary(result: dict) -> None:  # printed at once, before the page's last seconds
        if leader.protocol.result_kind == "aggregate":
            print_secure_sum(result, args.out)
        else:
            print_result(result, args.out)
        sys.stdout.flush()

    try:
        leader.run(args.out, on_result=summary)
    except KeyboardInterrupt:
        if leader.checkpoint_path.exists():
            kept = (
                "the parties keep their state and the leader its checkpoint; continue with "
                f"`{leader.resume_command()}`"
            )
        else:
            kept = "no round had run, so there is nothing to resume"
        print(f"dpfed: interrupted; no result was written; {kept}", file=sys.stderr)
        return 130
    except JobStopped as exc:
        print(f"dpfed: {exc}", file=sys.stderr)
        return EXIT_STOPPED
    except PartyUnreachable as exc:
        print(f"dpfed: {exc}", file=sys.stderr)
        return EXIT_UNREACHABLE
    return 0


def configure_predict(p: argparse.ArgumentParser) -> None:
    """``dpfed predict``."""
    p.add_argument("--config", required=True, help="the finished job's file (TOML)")
    p.add_argument(
        "--data",
        required=True,
        help="the rows to score, as every party names them at its own site: NAME:test of a "
        "named data set, or a .npy, .csv or LIBSVM file with the training data's columns; "
        "for a job on the parties' own tables ([job].align), a CSV in each party's "
        "data folder, keyed by its ID column, whose rows are matched by ID. "
        "Every party refuses rows that equal one of its training rows in its columns "
        "(NAME:train among them), or by ID rows whose IDs are its training rows', unless "
        "the job file sets [job].predict_training_rows = true",
    )
    p.add_argument(
        "--out",
        type=output_path("file"),
        required=True,
        help="receipt JSON (where the recipient wrote the scores, their SHA-256); "
        "with --to leader, the scores",
    )
    p.add_argument(
        "--to",
        default=None,
        metavar="NAME",
        help="the party that receives the shares and alone sees the scores "
        "(default: the label holder), or 'leader'",
    )
    p.add_argument("--id", default=None, help="the prediction's id (default: time + random)")
    add_log_options(p)
    p.set_defaults(func=run_predict_command)


def run_predict_command(args: argparse.Namespace) -> int:
    configure_logging(args.log_level, args.log_format)
    spec = load_job(args.config)
    try:
        receipt = run_prediction(spec, args.data, args.out, recipient=args.to, request=args.id)
    except PredictionFailed as exc:
        print(f"dpfed: prediction failed: {exc}; nothing was written", file=sys.stderr)
        return EXIT_STOPPED
    for warning in result_warnings(receipt):
        print(f"WARNING: {warning}")
    where = (
        f"{args.out}"
        if receipt["recipient"] == "leader"
        else f"{receipt['recipient']}'s {receipt['path']} (sha256 {receipt['sha256'][:16]})"
    )
    print(
        f"scored {receipt['n_rows']} rows of {args.data} (prediction {receipt['request']}); "
        f"the scores are in {where}"
    )
    if spec.align:
        print(
            f"rows matched by ID: only IDs every party holds are scored; "
            f"{receipt['recipient']}'s file lists them with their scores, and counts and "
            "lists the IDs that were not scored"
        )
    print(f"wrote {args.out}")
    return 0


def print_secure_sum(result: dict[str, Any], out: str) -> None:
    """The summary lines of a secure-sum job's result."""
    shown = ", ".join(f"{v:.6g}" for v in result["sum"][:8])
    more = f", ... ({len(result['sum'])} values)" if len(result["sum"]) > 8 else ""
    print(
        f"secure sum of {len(result['included'])} of {len(result['clients'])} clients over "
        f"{len(result['compute_nodes'])} compute nodes: [{shown}{more}]"
    )
    if result.get("dropped"):
        print(f"dropped (not in the sum): {', '.join(result['dropped'])}")
    for warning in result_warnings(result):
        print(f"WARNING: {warning}")
    privacy = result["privacy"]
    if privacy.get("epsilon") is not None:
        kind = (
            "distributed discrete Gaussian, exact in the ring"
            if privacy.get("noise") == "discrete"
            else "distributed Gaussian"
        )
        print(
            f"privacy ({kind}): epsilon = {privacy['epsilon']:.4g} at delta = "
            f"{privacy['delta']:g}; noise std per client {privacy['client_std']:.4g}"
        )
    elif privacy["mechanism"] != "none":
        print(
            f"privacy: noise std per client {privacy['client_std']:.4g} (no epsilon: the "
            "job gives noise_std, not a target)"
        )
    for note in privacy.get("notes", []):
        print(f"note: {note}")
    print(f"wrote {out}")


def configure_monitor(p: argparse.ArgumentParser) -> None:
    """``dpfed monitor``."""
    p.add_argument("--config", required=True, help="the job file (TOML)")
    p.add_argument(
        "--checkpoint",
        metavar="DIR",
        help="the folder holding the leader's leader.npz (default: the job's checkpoint folder)",
    )
    p.add_argument(
        "--address",
        default="127.0.0.1:8765",
        metavar="[HOST:]PORT",
        help="where to serve the page (default 127.0.0.1:8765)",
    )
    p.set_defaults(func=run_monitor_command)


def run_monitor_command(args: argparse.Namespace) -> int:
    spec = load_job(args.config)
    view = checkpoint_view(spec, args.checkpoint)
    page = MonitorServer(view.snapshot, args.address).start()
    print(f"job page: {page.url} (Ctrl-C to stop)", flush=True)
    try:
        while True:
            time.sleep(3600)
    except KeyboardInterrupt:
        return 0
    finally:
        page.stop()
