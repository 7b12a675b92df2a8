"""``dpfed schema draft``: a first draft of a party's schema, read from its table."""

from __future__ import annotations

import argparse
import sys

from dpfed._io import write_text_atomic
from dpfed.cli.common import output_path
from dpfed.data.tables import draft_schema


def configure_schema(p: argparse.ArgumentParser) -> None:
    """``dpfed schema``: its ``draft`` subcommand."""
    sub = p.add_subparsers(dest="schema_command", required=True)
    d = sub.add_parser(
        "draft",
        help="draft a schema from a CSV table: every bound and category READ FROM THE DATA, "
        "to be reviewed and replaced by public ones before use",
    )
    d.add_argument("--data", required=True, help="the party's table (CSV with a header)")
    d.add_argument("--id", required=True, dest="id_column", help="the ID column")
    d.add_argument("--label", help="the label column (the label holder only)")
    d.add_argument("--positive", help="the label's positive value (with --label)")
    d.add_argument(
        "--out", type=output_path("file"), help="write the draft here (default: standard output)"
    )
    d.set_defaults(func=run_schema_draft)


def run_schema_draft(args: argparse.Namespace) -> int:
    text = draft_schema(
        args.data, id_column=args.id_column, label=args.label, positive=args.positive
    )
    if args.out is None:
        sys.stdout.write(text)
        return 0
    write_text_atomic(args.out, text)
    print(
        f"wrote a DRAFT schema to {args.out}: its bounds and categories were read from the "
        "data and are not public until reviewed (see its header)",
        file=sys.stderr,
    )
    return 0
