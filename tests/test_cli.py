"""The command line: `python -m skfedkt` / `skfedkt run`."""

import csv
import subprocess
import sys

import pytest

from skfedkt import LabelCollapseWarning
from skfedkt.__main__ import build_parser, main


def test_run_prints_the_table_and_writes_csv_and_plot(tmp_path, capsys, recwarn):
    pytest.importorskip("matplotlib")
    output, plot = tmp_path / "results.csv", tmp_path / "results.png"
    algorithms = ["fedkt", "fedkt-paper", "fedct", "oneshot", "solo", "central"]
    status = main([
        "run", "--dataset", "iris", "--estimator", "dt", "--parties", "3", "--trials", "2",
        "--algorithms", *algorithms, "--quiet",
        "--output", str(output), "--plot", str(plot), "--n-jobs", "1",
    ])
    assert status == 0
    printed = capsys.readouterr().out
    for algorithm in algorithms:
        assert any(line.split()[0] == algorithm for line in printed.splitlines()[2:])
    assert "upload/party (KiB)" in printed and "collapse" in printed
    # collapse warnings are counted in the table, not printed
    assert not [w for w in recwarn if issubclass(w.category, LabelCollapseWarning)]
    with output.open() as handle:
        rows = list(csv.DictReader(handle))
    assert len(rows) == len(algorithms) * 2
    assert {row["algorithm"] for row in rows} == set(algorithms)
    assert {row["collapse_warned"] for row in rows} <= {"True", "False"}
    assert all(0 <= float(row["accuracy"]) <= 1 for row in rows)
    assert plot.stat().st_size > 0


def test_privacy_options_reach_the_estimators(capsys):
    status = main([
        "--dataset", "breast_cancer", "--estimator", "lr", "--trials", "1", "--quiet",
        "--algorithms", "fedkt", "fedct", "--privacy-level", "L1", "--gamma", "0.5",
        "--query-fraction", "0.5", "--dp-epsilon", "5", "--dp-sensitivity", "10",
        "--rounds", "2",
    ])
    assert status == 0
    table = capsys.readouterr().out.splitlines()
    # both private algorithms report a finite epsilon in the last column
    for algorithm in ("fedkt", "fedct"):
        line = next(line for line in table if line.startswith(algorithm))
        assert line.split()[-4] not in ("-", "inf")


def test_defaults_match_the_documented_main_job():
    args = build_parser().parse_args(["run"])
    assert (args.dataset, args.estimator, args.parties, args.beta, args.trials) == (
        "digits", "rf", 10, 0.5, 3
    )
    assert args.algorithms == ["fedkt", "fedkt-paper", "fedct", "oneshot", "solo", "pate",
                               "central"]


@pytest.mark.parametrize(
    "argv, message",
    [
        (["--dataset", "mnist"], "argument --dataset: invalid choice: 'mnist'"),
        (["--beta", "0"], "argument --beta: must be > 0, got 0"),
        (["--beta", "-1"], "argument --beta: must be > 0, got -1"),
        (["--trials", "many"], "argument --trials: 'many' is not a number"),
        (["--query-fraction", "2"], "argument --query-fraction: must be <= 1, got 2"),
    ],
)
def test_bad_arguments_exit_with_one_clear_line(argv, message, capsys):
    with pytest.raises(SystemExit) as exit_info:
        main(argv)
    assert exit_info.value.code == 2
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"skfedkt run: error: {message}")


def test_impossible_partitions_exit_with_one_clear_line(capsys):
    status = main(["--dataset", "iris", "--parties", "500", "--quiet"])
    assert status == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert err == ["skfedkt run: error: Cannot split 112 training rows of 'iris' into "
                   "500 parties."]


def test_module_entry_point_runs_in_a_subprocess():
    result = subprocess.run(
        [sys.executable, "-m", "skfedkt", "--dataset", "no-such-data"],
        capture_output=True, text=True,
    )
    assert result.returncode == 2
    assert "Traceback" not in result.stderr
    assert "invalid choice: 'no-such-data'" in result.stderr
