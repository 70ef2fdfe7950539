"""The command line: `python -m skfedkt` / `skfedkt run`."""

import argparse
import csv
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from sklearn.datasets import load_breast_cancer
from sklearn.neural_network import MLPClassifier
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import FunctionTransformer

from skfedkt import LabelCollapseWarning
from skfedkt._cli._main import DEFAULT_PARTIES, build_parser, main


def test_run_prints_the_table_and_writes_csv_and_plot(tmp_path, capsys, recwarn):
    pytest.importorskip("matplotlib")
    output, plot = tmp_path / "results.csv", tmp_path / "results.png"
    algorithms = ["fedkt", "fedkt-undistilled", "fedkt-paper", "fedct", "oneshot", "solo",
                  "central"]
    status = main([
        "run", "--dataset", "iris", "--estimator", "dt", "--parties", "3", "--trials", "2",
        "--algorithms", *algorithms, "--quiet",
        "--output", str(output), "--plot", str(plot), "--n-jobs", "1",
    ])
    assert status == 0
    printed = capsys.readouterr().out
    lines = printed.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("algorithm"))
    header, table = lines[start], lines[start + 2 : lines.index("", start)]
    for algorithm in algorithms:
        (row,) = [line for line in table if line.split()[0] == algorithm]
        assert len(row) == len(header)  # columns aligned, even for the longest name
        # and named in words below the table
        assert f"  {algorithm} " in printed[printed.index("methods:"):]
    assert "SOLO: each party alone" in printed
    assert "upload/party" in printed and "collapse" in printed
    assert " KiB" in printed and " B " in printed  # student models; FedCT's label bits
    # collapse warnings are counted in the table, not printed
    assert not [w for w in recwarn if issubclass(w.category, LabelCollapseWarning)]
    with output.open() as handle:
        rows = list(csv.DictReader(handle))
    assert len(rows) == len(algorithms) * 2
    assert {row["algorithm"] for row in rows} == set(algorithms)
    assert {row["collapse_warned"] for row in rows} <= {"True", "False"}
    assert all(0 <= float(row["accuracy"]) <= 1 for row in rows)
    assert plot.stat().st_size > 0


def test_the_audit_adds_attack_columns(capsys):
    assert main(["run", "--dataset", "iris", "--estimator", "dt", "--trials", "1", "--quiet",
                 "--algorithms", "fedkt", "fedct", "central", "--audit", "0",
                 "--n-jobs", "1"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[1].split()[-4:] == ["attack", "party", "attack", "final"]
    rows = {line.split()[0]: line.split() for line in lines[3:6]}
    # a decision tree's upload keeps its rows: FedCT's local models are full-depth trees
    # one trial: one number per cell, no spread
    assert 0.5 <= float(rows["fedct"][-2]) <= 1 and 0 <= float(rows["fedkt"][-1]) <= 1
    assert rows["central"][-2:] == ["-", "-"]  # a baseline has nothing to attack
    assert any(line.startswith("attack: membership-inference AUC") for line in lines)


def test_an_algorithm_whose_parties_release_nothing_has_no_party_attack(monkeypatch):
    from types import SimpleNamespace

    from skfedkt._cli import _runner

    # an audit whose only release is the final model (the parties send nothing of
    # their own): the party column says there is nothing to attack
    audit = SimpleNamespace(results=[SimpleNamespace(release="final model")],
                            auc=lambda release, attack: 0.6)
    monkeypatch.setattr(_runner, "membership_audit", lambda *args, **kwargs: audit)
    data = SimpleNamespace(X_train=None, y_train=None, X_public=None, X_test=None,
                           y_test=None)
    party, final = _runner._attack_aucs(None, data, None, 0, 0)
    assert np.isnan(party) and final == 0.6
    result = _runner.Result(dataset="iris", estimator="dt", algorithm="fedkt", trial=0,
                            accuracy=0.9, fit_seconds=1.0, upload_bytes=100.0,
                            epsilon=np.nan, party_attack_auc=party, final_attack_auc=final)
    table = _runner.summary_table([result], ["fedkt"])
    assert "fedkt: its parties release nothing of their own, so there is no party " in table


def _cell(printed, algorithm, column):
    """The last number of `algorithm`'s cell under `column` in the runner's table (its
    columns are right-aligned under their names)."""
    lines = printed.splitlines()
    header = next(line for line in lines if line.startswith("algorithm"))
    end = header.index(column) + len(column)
    row = next(line for line in lines if line.split() and line.split()[0] == algorithm)
    return row[:end].split()[-1]


def test_privacy_options_reach_the_estimators(capsys):
    status = main([
        "--dataset", "breast_cancer", "--estimator", "lr", "--trials", "1", "--quiet",
        "--algorithms", "fedkt", "fedct", "--privacy-level", "L1", "--gamma", "0.5",
        "--query-fraction", "0.5", "--dp-epsilon", "5", "--dp-sensitivity", "10",
        "--rounds", "2",
    ])
    assert status == 0
    printed = capsys.readouterr().out
    # both private algorithms report a finite epsilon
    for algorithm in ("fedkt", "fedct"):
        assert _cell(printed, algorithm, "epsilon") not in ("-", "inf")


def test_fedct_teacher_votes_from_the_command_line(capsys):
    status = main(["--dataset", "breast_cancer", "--estimator", "lr", "--trials", "1",
                   "--quiet", "--algorithms", "fedct", "--dp-epsilon", "4", "--dp-teachers",
                   "3", "--rounds", "2"])
    assert status == 0
    epsilon = _cell(capsys.readouterr().out, "fedct", "epsilon")
    assert float(epsilon) == pytest.approx(4.0, abs=0.01)  # the whole budget


def test_defaults_match_the_documented_main_job():
    args = build_parser().parse_args(["run"])
    assert (args.dataset, args.estimator, args.beta, args.trials) == ("digits", "rf", 0.5, 3)
    # parties: 10 unless the dataset is too small for them or the paper used 50
    assert args.parties is None and "digits" not in DEFAULT_PARTIES
    assert DEFAULT_PARTIES["adult"] == DEFAULT_PARTIES["cod-rna"] == 50
    # the averaged local models: the simple baseline FedKT is measured against
    assert args.algorithms == ["fedkt", "fedkt-paper", "fedct", "dsfl", "oneshot",
                               "ensemble", "solo", "pate", "central", "majority"]


@pytest.mark.parametrize("argv, teachers", [([], "auto"), (["--teachers", "auto"], "auto"),
                                            (["--teachers", "3"], 3)])
def test_teachers_flag_reaches_fedkt(argv, teachers):
    from skfedkt._cli._main import algorithm_options, build_parser

    args = build_parser().parse_args(["run", *argv])
    assert algorithm_options(args)["fedkt"]["n_teachers"] == teachers


@pytest.mark.parametrize(
    "argv, message",
    [
        (["--dataset", "imagenet"], "argument --dataset: invalid choice: 'imagenet'"),
        (["--beta", "0"], "argument --beta: must be > 0, got 0"),
        (["--beta", "-1"], "argument --beta: must be > 0, got -1"),
        (["--trials", "many"], "argument --trials: 'many' is not a number"),
        (["--query-fraction", "2"], "argument --query-fraction: must be <= 1, got 2"),
        (["--teachers", "0"], "argument --teachers: must be 'auto' or a number > 0, got '0'"),
        (["--teachers", "many"],
         "argument --teachers: must be 'auto' or a number > 0, got 'many'"),
    ],
)
def test_bad_arguments_exit_with_one_clear_line(argv, message, capsys):
    assert main(argv) == 2
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"skfedkt run: error: {message}")


def test_noise_flags_without_noise_are_refused(capsys):
    assert main(["--gamma", "0.5", "--noise", "gaussian"]) == 2
    lines = capsys.readouterr().err.strip().splitlines()
    assert lines == ["skfedkt run: error: --gamma, --noise set the noise of --privacy-level "
                     "L1 or L2; at L0 no noise is added"]
    assert main(["--dp-sensitivity", "4"]) == 2
    assert "--dp-sensitivity sets the bit flips of --dp-epsilon" in capsys.readouterr().err
    for flags in (["--dp-teachers", "5"],
                  ["--dp-teachers", "5", "--dp-epsilon", "4", "--dp-sensitivity", "2"]):
        assert main(flags) == 2
        assert "--dp-teachers shares noisy teacher votes" in capsys.readouterr().err


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


@pytest.mark.parametrize("dataset", ["iris", "wine"])
def test_small_datasets_run_with_the_default_parties(dataset, capsys):
    status = main(["--dataset", dataset, "--estimator", "dt", "--trials", "1", "--quiet",
                   "--algorithms", "fedkt", "solo", "--n-jobs", "1"])
    assert status == 0
    out = capsys.readouterr().out
    assert f"{DEFAULT_PARTIES[dataset]} parties" in out


def _write(path, text):
    path.write_text(text)
    return str(path)


@pytest.mark.parametrize(
    "content, message",
    [
        ("", "No data rows in"),
        ("a,b,label\n", "No data rows in"),
        ("".join(f"{i},{i * 0.37 % 1:.4f}\n" for i in range(60)),
         "looks continuous: 60 distinct values"),
    ],
    ids=["empty", "header-only", "continuous-label"],
)
def test_bad_data_files_exit_with_one_short_line(tmp_path, capsys, content, message):
    path = _write(tmp_path / "data.csv", content)
    status = main(["--dataset", "adult", "--data-path", path, "--quiet"])
    assert status == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and message in err[0] and len(err[0]) < 300


def test_every_algorithm_takes_labels_that_xgboost_would_refuse(tmp_path, capsys):
    # LIBSVM's adult (a9a) labels rows -1 and +1; XGBoost accepts only 0..K-1
    pytest.importorskip("xgboost")
    rng = np.random.RandomState(0)
    lines = []
    for i in range(400):
        label = 1 if i % 4 == 0 else -1
        features = rng.choice(20, size=3, replace=False) + (label > 0) * 20
        lines.append(f"{label:+d} " + " ".join(f"{f + 1}:1" for f in sorted(features)))
    path = _write(tmp_path / "a9a", "\n".join(lines) + "\n")
    status = main(["--dataset", "adult", "--data-path", path, "--estimator", "xgb",
                   "--parties", "4", "--trials", "1", "--n-jobs", "1", "--quiet",
                   "--algorithms", "fedkt", "fedkt-undistilled", "fedct", "ensemble", "solo",
                   "central"])
    assert status == 0, capsys.readouterr().err
    table = capsys.readouterr().out.splitlines()
    central = next(line for line in table if line.startswith("central"))
    assert float(central.split()[1]) > 0.9  # the classes are separable


def test_too_few_rows_and_parties_name_the_flags(capsys):
    assert main(["--dataset", "synthetic", "--n-samples", "10", "--quiet"]) == 1
    err = capsys.readouterr().err
    assert "--n-samples" in err and "Traceback" not in err
    assert main(["--dataset", "iris", "--parties", "20", "--quiet"]) == 1
    err = capsys.readouterr().err.strip()
    assert err == ("skfedkt run: error: Cannot give 20 parties at least "
                   "--min-party-size=10 rows each from 112 rows.")


def test_plot_without_matplotlib_fails_before_any_fit(monkeypatch, capsys):
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # import matplotlib now fails
    monkeypatch.setattr("skfedkt._cli._main.run_experiment",
                        lambda **kwargs: pytest.fail("fitted before checking --plot"))
    assert main(["--plot", "out.png", "--quiet"]) == 1
    assert "--plot needs matplotlib" in capsys.readouterr().err


def test_an_error_during_fitting_is_printed_on_its_own_line(monkeypatch, capsys):
    def fail_after_a_fit(make_progress, **kwargs):
        make_progress(2).update(1)
        raise ValueError("something went wrong")

    monkeypatch.setattr("skfedkt._cli._main.run_experiment", fail_after_a_fit)
    assert main(["--trials", "1"]) == 1
    err = capsys.readouterr().err
    assert "\nskfedkt run: error: something went wrong" in err


def test_offline_download_points_to_data_path(monkeypatch, capsys):
    def offline(**kwargs):
        raise OSError("<urlopen error [Errno -2] Name or service not known>")

    monkeypatch.setattr("skfedkt.datasets._loaders.fetch_openml", offline)
    assert main(["--dataset", "adult", "--quiet"]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "--data-path" in err[0]


def test_help_shows_defaults_and_version_prints(capsys):
    assert main(["run", "--help"]) == 0
    help_text = capsys.readouterr().out
    assert "(default: digits)" in help_text and "(default: 0.5)" in help_text
    assert main(["--version"]) == 0
    assert capsys.readouterr().out.startswith("skfedkt ")


def test_verbose_fits_say_their_stages(capsys):
    from sklearn.datasets import make_classification

    from skfedkt import FedCTClassifier, FedKTClassifier, OneShotEnsembleClassifier

    X, y = make_classification(n_samples=120, random_state=0)
    fit = dict(groups=np.arange(80) % 4, X_unlabeled=X[80:])
    FedKTClassifier(verbose=1, random_state=0).fit(X[:80], y[:80], **fit)
    FedCTClassifier(n_rounds=2, verbose=1, random_state=0).fit(X[:80], y[:80], **fit)
    OneShotEnsembleClassifier(verbose=1).fit(X[:80], y[:80], groups=fit["groups"])
    out = capsys.readouterr().out
    assert "[FedKTClassifier] party tier: 24 teachers (4 parties x 2 partitions x 3 " in out
    assert "[FedKTClassifier] server: prior-corrected vote of 8 students" in out
    assert "[FedCTClassifier] round 1: " in out and "consensus labels changed" in out
    assert "[OneShotEnsembleClassifier] 4 parties trained a local model" in out


def test_runner_shows_algorithm_trial_and_stages_on_the_progress_bar(capsys):
    from skfedkt._cli._runner import run_experiment

    class Recorder:
        def __init__(self):
            self.calls = []

        def set_description(self, text):
            self.calls.append(("description", text))

        def set_postfix_str(self, text):
            self.calls.append(("stage", text))

        def update(self, n):
            self.calls.append(("update", n))

    recorder = Recorder()
    run_experiment(
        dataset="iris", estimator="dt", algorithms=["fedkt", "fedct"], n_trials=1,
        dataset_options=dict(n_parties=3), algorithm_options={
            "fedkt": {}, "fedct": dict(n_rounds=2), "oneshot": {}},
        make_progress=lambda total: recorder,
    )
    assert ("description", "trial 1/1: fedkt") in recorder.calls
    stages = [text for kind, text in recorder.calls if kind == "stage"]
    # a stage's first clause, whole ("18 teachers (3 parties x 2..." was cut mid-way)
    assert "party tier: 18 teachers" in stages
    assert any(text.startswith("round 1:") for text in stages)
    assert capsys.readouterr().out == ""  # the stages went to the bar, not to stdout
    # whole: a bar on a terminal shortens a stage to its width, a log keeps it
    assert not any(text.endswith("…") for text in stages)
    # a method's last stage leaves the bar before the next method starts
    second = recorder.calls.index(("description", "trial 1/1: fedct"))
    assert recorder.calls[second - 1] == ("stage", "")


def test_the_main_job_fits_small_forests_and_the_full_benchmark_the_papers(capsys):
    from skfedkt._cli._main import MAIN_JOB_TREES

    for argv, trees in (([], MAIN_JOB_TREES), (["--trees", "3"], 3)):
        assert main(["--dataset", "iris", "--trials", "1", "--algorithms", "central",
                     "--quiet", *argv]) == 0
        assert f"estimator rf ({trees} trees)" in capsys.readouterr().out
    assert main(["--estimator", "dt", "--trees", "3", "--quiet"]) == 2
    assert "--trees sets the forest of --estimator rf" in capsys.readouterr().err


def test_the_progress_bar_estimates_the_time_left_after_the_first_trial():
    import io

    from skfedkt._cli._main import _TrialsBar

    out = io.StringIO()
    bar = _TrialsBar(total=6, per_trial=3, file=out, desc="fitting", mininterval=0)
    bar.update(1)
    assert "time left after the first trial" in out.getvalue().split("\r")[-1]
    bar.update(2)
    assert "<" in out.getvalue().split("\r")[-1]  # tqdm's elapsed<remaining
    bar.close()


def test_long_stages_are_cut_after_a_whole_word_on_a_bar_only():
    import io

    from skfedkt._cli._main import _TrialsBar
    from skfedkt._cli._progress import StageLines, shortened

    text = "party tier: 30 teachers (3 parties x 2 partitions x 5 subsets) vote on 40 rows"
    short = shortened(text)
    assert len(short) <= 48 and short.endswith("…")
    assert text.startswith(short[:-1]) and text[len(short) - 1] == " "
    assert shortened("round 1: 2% changed") == "round 1: 2% changed"
    out = io.StringIO()
    bar = _TrialsBar(total=2, per_trial=1, file=out, desc="fitting", mininterval=0)
    bar.set_postfix_str(text)
    assert short in out.getvalue() and text not in out.getvalue()
    lines = io.StringIO()
    StageLines("party", stream=lines).set_postfix_str(text)
    assert lines.getvalue() == f"party: {text}\n"


def test_install_hints_name_what_can_be_installed():
    # the package is installed from its source tree: extras are ".[name]", and a
    # published package is named as published (xgboost-cpu)
    root = Path(__file__).resolve().parents[1]
    texts = [root / "README.md", *(root / "doc").glob("**/*.rst"),
             *(root / "skfedkt").glob("**/*.py"), *(root / "examples").glob("*.py")]
    offenders = [str(path.relative_to(root)) for path in texts
                 if not {"_build", "generated", "auto_examples"} & set(path.parts)
                 and "skfedkt[" in path.read_text()]
    assert offenders == []


@pytest.mark.parametrize("command", ["run", "split", "party", "server", "audit", "score"])
def test_help_shows_each_default_once(command, capsys):
    assert main([command, "--help"]) == 0
    text = " ".join(capsys.readouterr().out.split())
    assert "(default: None)" not in text
    if command in ("run", "party"):
        assert text.count("(default: 2 x public rows)") == 1
        assert "(default: 2 x public rows) (default" not in text


def test_one_trial_shows_no_spread():
    from skfedkt._cli._runner import _mean_std

    assert _mean_std([0.5], 3) == "0.500"
    assert _mean_std([0.5, np.nan], 3) == "0.500"
    assert _mean_std([0.5, 0.7], 3) == "0.600 ± 0.100"
    assert _mean_std([np.nan], 3) == "-"


def test_the_table_says_when_fedct_stopped_at_its_round_cap():
    from skfedkt._cli._runner import Result, summary_table

    results = [Result("d", "rf", "fedct", trial, 0.8, 1.0, 10.0, np.nan,
                      still_changing=changing)
               for trial, changing in enumerate([0.003, np.nan])]
    table = summary_table(results, ["fedct"])
    assert ("fedct stopped at its round cap in 1 of 2 trials with 0.3% of its consensus "
            "labels still changing") in table
    results[0].still_changing = np.nan
    assert "round cap" not in summary_table(results, ["fedct"])


def test_the_iterative_algorithms_run_with_the_mlp(capsys):
    averaging = ["fedavg", "fedprox", "feddf", "fedkt-prox"]
    status = main(["--dataset", "iris", "--estimator", "mlp", "--trials", "1", "--quiet",
                   "--algorithms", *averaging, "--averaging-rounds", "2",
                   "--local-epochs", "2", "--distill-epochs", "2", "--mu", "0.5",
                   "--n-jobs", "1"])
    assert status == 0
    table = capsys.readouterr().out.splitlines()
    for algorithm in averaging:
        line = next(line for line in table if line.startswith(algorithm + " "))
        assert 0 <= float(line.split()[1]) <= 1


def test_the_flags_of_the_iterative_algorithms_reach_them():
    from skfedkt._cli._main import algorithm_options
    from skfedkt._registry import methods

    args = build_parser().parse_args(["run", "--averaging-rounds", "3", "--mu", "0.5",
                                      "--local-epochs", "4", "--distill-epochs", "6"])
    options = algorithm_options(args)
    mlp = make_pipeline(FunctionTransformer(), MLPClassifier(max_iter=300))
    common = dict(n_jobs=1, random_state=0, verbose=0)
    made = {name: methods()[name].make(mlp, options, common)
            for name in ("fedavg", "fedprox", "feddf", "fedkt-prox")}
    assert {name: (clf.n_rounds, clf.local_epochs, clf.proximal_mu, clf.distill_epochs)
            for name, clf in made.items()} == {
        "fedavg": (3, 4, 0.0, 0), "fedprox": (3, 4, 0.5, 0), "feddf": (3, 4, 0.0, 6),
        "fedkt-prox": (3, 4, 0.5, 0)}
    assert made["fedkt-prox"].init.n_students == 2
    # FedKT-Prox's first model, where its rounds start, trains as long as a round
    assert made["fedkt-prox"].init.final_estimator[-1].max_iter == 4
    assert mlp[-1].max_iter == 300


def test_the_iterative_algorithms_need_the_mlp(capsys):
    assert main(["--algorithms", "fedavg", "fedkt", "--quiet"]) == 2
    (line,) = capsys.readouterr().err.strip().splitlines()
    assert line.startswith("skfedkt run: error: the iterative algorithms (fedavg) average "
                           "the weights of an MLP: add --estimator mlp")


def test_every_argument_of_every_command_says_what_it_is():
    from skfedkt._cli._main import build_parser

    commands = next(action for action in build_parser()._actions
                    if isinstance(action, argparse._SubParsersAction))
    silent = [f"{name} {action.dest}" for name, command in commands.choices.items()
              for action in command._actions
              if not isinstance(action, argparse._HelpAction) and not action.help]
    assert silent == []


def test_run_compares_the_algorithms_on_a_csv_of_ones_own(tmp_path, capsys):
    rng = np.random.RandomState(0)
    X, y = load_breast_cancer(return_X_y=True)
    path = tmp_path / "consortium.csv"
    path.write_text("radius,texture,hospital,diagnosis\n" + "".join(
        f"{row[0]},{row[1]},{hospital},{label}\n" for row, hospital, label in zip(
            X, np.array(["north", "south", "east"])[rng.randint(3, size=len(y))], y)))
    assert main(["run", "--dataset", "file", "--data-path", str(path), "--party-column",
                 "hospital", "--trials", "1", "--audit", "off", "--algorithms", "fedkt",
                 "central", "--quiet"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("file: the parties of column 'hospital', estimator rf")
    assert "\nfedkt " in out and "\ncentral " in out
    assert main(["run", "--dataset", "file", "--data-path", str(path), "--party-column",
                 "ward", "--quiet"]) == 1
    assert "--party-column='ward' is not a feature column" in capsys.readouterr().err
