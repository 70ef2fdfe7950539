"""The main job, ``python -m skfedkt``, with its small forests and with the papers'.

Runs the README's main job as a user does (``python -m skfedkt``: digits, 10
Dirichlet(0.5) parties, forests of 10 trees, 3 trials, every method attacked by the
membership loss attack) and again with ``--trees 100``, the papers' forests, and prints
each run's table: test accuracy, fit seconds, what a party uploads, the trials whose
labels collapsed, and the attack's AUC on a party's releases and on the final model,
mean ± std over trials. The same numbers the command prints, from its ``--output`` CSV.

    python benchmarks/bench_main_job.py
    python benchmarks/bench_main_job.py --trees 10 100 --trials 3

Produces: doc/getting_started.rst, "The main job" (and the README's results).
"""

import csv
import shlex
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np
from _common import accuracy_axis, cell_spread, mean_std, new_figure, parser, print_table

COLUMNS = ["algorithm", "accuracy", "fit time (s)", "upload/party (KiB)", "collapse",
           "attack party", "attack final"]


def run_main_job(trees, trials, extra):
    """The main job's CSV lines, one per algorithm and trial."""
    with tempfile.TemporaryDirectory() as folder:
        output = Path(folder) / "main_job.csv"
        subprocess.run([sys.executable, "-m", "skfedkt", "--trees", str(trees), "--trials",
                        str(trials), "--quiet", "--output", str(output), *extra],
                       check=True, stdout=subprocess.DEVNULL)
        with open(output, newline="") as handle:
            return list(csv.DictReader(handle))


def spread(lines, field, digits, scale=1.0):
    """Mean ± std of a CSV field over trials, "-" where no trial has it."""
    values = np.array([float(line[field]) for line in lines]) / scale
    values = values[np.isfinite(values)]
    return mean_std(values, digits) if values.size else "-"


def main(argv=None):
    command = parser(__doc__)
    command.add_argument("--trees", type=int, nargs="+", default=[10, 100],
                         help="one run of the main job per forest size")
    command.add_argument("--trials", type=int, default=3, help="the main job's trials")
    command.add_argument("--main-job-args", default="", metavar="ARGS",
                         help="more arguments of python -m skfedkt, in one string (a tiny "
                         "run's: --main-job-args='--parties 3')")
    args = command.parse_args(argv)
    for trees in args.trees:
        lines = run_main_job(trees, args.trials, shlex.split(args.main_job_args))
        print(f"\npython -m skfedkt --trees {trees} --trials {args.trials} "
              f"{args.main_job_args}".rstrip() + "\n")
        algorithms = list(dict.fromkeys(line["algorithm"] for line in lines))
        print_table([f"algorithm ({trees} trees)", *COLUMNS[1:]], [
            [algorithm, spread(own, "accuracy", 3), spread(own, "fit_seconds", 2),
             spread(own, "upload_bytes", 1, 1024),
             f"{sum(line['collapse_warned'] == 'True' for line in own)}/{len(own)}",
             spread(own, "party_attack_auc", 2), spread(own, "final_attack_auc", 2)]
            for algorithm in algorithms
            for own in [[line for line in lines if line["algorithm"] == algorithm]]
        ])


def figure(results):
    """Accuracy against the attack's AUC on a party's releases, one point per method and
    forest size, from the stored tables of `main`: what each method's accuracy costs
    its parties."""
    fig, axes = new_figure(1, 1, width=7, height=4)
    ax = axes[0][0]
    for table, marker in zip(results["tables"], "os^"):
        trees = table["header"][0].split("(")[1].rstrip(")")
        for row in table["rows"]:
            if "-" in (row[1], row[5]):
                continue
            (accuracy, accuracy_std), (auc, auc_std) = cell_spread(row[1]), cell_spread(row[5])
            ax.errorbar(auc, accuracy, xerr=auc_std, yerr=accuracy_std, marker=marker,
                        capsize=2, color="black" if "fedkt" in row[0] else "tab:blue")
            ax.annotate(f"{row[0]} ({trees})", (auc, accuracy), fontsize="x-small",
                        xytext=(4, 3), textcoords="offset points")
    ax.axvline(0.5, color="grey", linewidth=1, linestyle="--")
    ax.set_xlabel("membership attack AUC on a party's releases (0.5: a guess)")
    accuracy_axis(ax)
    return fig


if __name__ == "__main__":
    main()
