"""A party's privacy budget spent across several networked jobs, until a job is refused.

Each party keeps a ledger (SQLite) of every noisy release computed from its data. Jobs on the
same columns compose: the ledger's epsilon is that of all their releases together (PLD
accountant; epsilons do not simply add), and a job whose planned releases would take it over
the budget is refused before its first round, with nothing run and nothing recorded.

The script runs real networked jobs (three ``dpfed party`` processes and ``dpfed run``, as in
``networked_job.py``, whose helpers it imports: keep the two files together), one after
another, on the same ledgers. After each job it prints the ``bank`` and ``shop`` parties'
spent, committed and remaining epsilon (``BudgetLedger.summary``); then the refusal.

Run it as (needs the ``net`` extra; each job takes a few seconds)::

    python examples/budget_across_jobs.py                          # budget 1.5, jobs at 1
    python examples/budget_across_jobs.py --budget 4 --epsilon 1 --keep budget-demo
"""

from __future__ import annotations

import argparse
import json
import signal
import sys
import tempfile
from pathlib import Path

from networked_job import BUDGETED, ledger_path, make_certificates, run_job, write_job

from dpfed.runtime.budget import BudgetLedger


def print_ledgers(folder: Path) -> None:
    """One line per budgeted party: its budget and the epsilon spent (recorded releases),
    committed (with the open jobs' reservations) and remaining (budget minus committed)."""
    for name in BUDGETED:
        with BudgetLedger(ledger_path(folder, name)) as ledger:
            for e in ledger.summary()["entries"]:
                print(
                    f"    {e['party']:<5} on {e['dataset']}: budget {e['epsilon']:g}  "
                    f"spent {e['spent']:.3f}  committed {e['committed']:.3f}  "
                    f"remaining {e['remaining']:.3f}"
                )


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--budget", type=float, default=1.5, help="bank's and shop's epsilon budget")
    p.add_argument("--epsilon", type=float, default=1.0, help="each job's epsilon")
    p.add_argument("--max-jobs", type=int, default=10, help="stop after this many jobs")
    p.add_argument("--port", type=int, default=18050, help="first port to try")
    p.add_argument("--keep", type=Path, metavar="DIR", help="run in DIR and keep it")
    args = p.parse_args()
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # clean up when killed too

    with tempfile.TemporaryDirectory(prefix="dpfed-budget-") as tmp:
        folder = (args.keep or Path(tmp)).resolve()
        folder.mkdir(parents=True, exist_ok=True)
        make_certificates(folder)
        print(
            f"bank and shop hold a budget of epsilon {args.budget:g} (delta 1e-5); every job "
            f"asks for epsilon {args.epsilon:g}, its rounds from the sound mechanism's rule"
        )
        for k in range(1, args.max_jobs + 1):
            job_id = f"job-{k}"
            # no iterations: the public rule picks the rounds (one below epsilon 3)
            config = write_job(
                folder,
                job_id,
                epsilon=args.epsilon,
                budget=args.budget,
                iterations=None,
                first_port=args.port,
            )
            out = folder / f"{job_id}.json"
            done = run_job(config, out)
            if done.returncode == 2 and "refused the job" in done.stderr:
                print(f"{job_id}: refused before its first round (dpfed run exit status 2):")
                print("    " + done.stderr.strip().splitlines()[-1])
                print("  the ledgers are unchanged: nothing ran and nothing was reserved")
                print_ledgers(folder)
                break
            if done.returncode != 0:
                print(done.stdout + done.stderr, file=sys.stderr)
                sys.exit(f"error: {job_id}: dpfed run exited with status {done.returncode}")
            final = json.loads(out.read_text())["final"]
            print(f"{job_id}: finished, test accuracy {final['test_accuracy']:.3f}")
            print_ledgers(folder)
        else:
            print(f"no job was refused in {args.max_jobs} jobs: raise --epsilon or --max-jobs")
        if args.keep:
            print(f"kept {folder}")


if __name__ == "__main__":
    main()
