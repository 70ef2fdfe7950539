"""Every benchmark's ``main`` runs on tiny inputs, so that a documented command never rots;
and every benchmark names the table of the docs it produces."""

import json
import os
import platform
import re
import shlex
import sys
from datetime import datetime, timedelta, timezone
from pathlib import Path

import numpy as np
import pytest
import sklearn
from sklearn.datasets import dump_svmlight_file, make_classification

import skfedkt

ROOT = Path(__file__).resolve().parents[1]
BENCHMARKS = ROOT / "benchmarks"
SCRIPTS = sorted(path.stem for path in BENCHMARKS.glob("*.py") if not path.stem.startswith("_"))

# each script's tiny run and a line of what it prints; the scripts whose main needs a
# local data file (census), or whose tiny runs check more, have tests of their own below
TINY = {
    "bench_busy_machine": (["--busy", "0", "--epochs", "1", "--parties", "3"],
                           "| the same networks by hand |"),
    "bench_choosing": (["--seeds", "1", "--trees", "2", "--references", "1", "--datasets",
                        "wine", "--n-jobs", "1"], "| wine | FedKT (default) |"),
    "bench_dask": (["--workers", "1", "--parties", "3", "--rows-per-party", "40",
                    "--trees", "2"], "identical predictions: True"),
    "bench_deployment": (["--datasets", "breast_cancer", "--parties", "3", "--trees", "2"],
                         "| breast_cancer | fedct |"),
    "bench_fedct_privacy": (["--seeds", "1", "--n-jobs", "1"],
                            "| breast_cancer | TeacherVotes | 4 |"),
    "bench_fedct_tables": (["--seeds", "1", "--models", "0"], "| decision tree | "),
    "bench_final_model": (["--datasets", "wine", "--seeds", "1", "--n-jobs", "1", "--trees",
                           "2"], "| margin weights, 10000 rows |"),
    "bench_hostile_party": (["--seeds", "1", "--seeds-skew", "0", "--datasets",
                             "breast_cancer", "--trees", "2"],
                            "| breast_cancer | 5 | one class, unbounded |"),
    "bench_main_job": (["--trees", "2", "--trials", "1", "--main-job-args=--parties 3"],
                       "| fedkt | "),
    "bench_label_skew": (["--datasets", "wine", "--betas", "1", "--seeds", "1", "--n-jobs",
                          "1", "--trees", "2"], "| wine | 1 | 4 |"),
    "bench_networks": (["--seeds", "1", "--n-jobs", "1", "--epochs", "1", "--rounds", "2",
                        "--parties", "3", "--device", "cpu", "--device-teachers", "10",
                        "--device-epochs", "1", "--device-rounds", "1",
                        "--stream-parties", "2", "--stream-teachers", "3"],
                       "| FedKT-Prox |"),
    "bench_peers": (["--seeds", "1", "--trees", "2", "--datasets", "wine", "--n-jobs", "1",
                     "--methods", "FedKT (default)", "centralized (not federated)"],
                    "| wine | FedKT (default) |"),
    "bench_privacy": (["--tasks", "cod-rna", "--seeds", "1", "--n-jobs", "1", "--trees", "2",
                       "--cod-rna-rows", "8000"], "| cod-rna | L2 |"),
    "bench_scaling": (["--algorithms", "oneshot", "--parties", "4", "--rows", "--n-jobs",
                       "1"], "oneshot"),
    "bench_secure_aggregation": (["--parties", "5", "--rows", "200", "--public", "100",
                                  "--classes", "3", "--trees", "2", "--n-jobs", "1",
                                  "--repeats", "1", "--sweep-parties", "3",
                                  "--sweep-public", "50", "--sweep-classes", "2"],
                                 "| hard (the paper's) | "),
    "bench_validated_sum": (["--parties", "5", "--rows", "200", "--public", "100",
                             "--classes", "3", "--trees", "2", "--n-jobs", "1", "--repeats",
                             "1", "--sweep-parties", "3", "--sweep-parties-public", "20",
                             "--sweep-public", "50", "--sweep-classes", "2"],
                            "| validated | "),
    "bench_share_tolerance": (["--datasets", "wine", "--betas", "1", "--seeds", "1",
                               "--n-jobs", "1", "--trees", "2"], "| wine | 1 |"),
    "count_options": ([], "| FedKTClassifier | "),
    "trace_fit": ([], "back into _fedkt/_classifier.py: 0"),
}
TESTED_BELOW = {"bench_census", "bench_membership", "bench_overhead", "bench_soft_rounds"}
# scripts that show no progress bar: quick at their defaults, or running a quiet command
QUICK = {"count_options", "trace_fit", "bench_main_job"}


def test_every_benchmark_has_a_tiny_run():
    assert sorted([*TINY, *TESTED_BELOW]) == SCRIPTS


# the benchmarks of PyTorch networks
NEEDS_TORCH = {"bench_networks", "bench_busy_machine"}


# the scripts whose tables a results page shows, with a figure drawn from them
DRAWN = {"bench_choosing", "bench_label_skew", "bench_main_job", "bench_final_model",
         "bench_networks", "bench_scaling", "bench_deployment", "bench_fedct_privacy",
         "bench_secure_aggregation", "bench_validated_sum"}


@pytest.mark.parametrize("script", sorted(TINY))
def test_benchmark_main_runs_on_tiny_data(script, monkeypatch, capsys, tmp_path):
    """Every script's main runs; one whose tables a results page shows stores them as
    printed, with the command, under ``--results FILE``, and its ``figure`` draws from
    that file, as the docs build does."""
    if script in NEEDS_TORCH:
        pytest.importorskip("skorch", reason="the benchmark needs the torch extra")
    monkeypatch.syspath_prepend(str(BENCHMARKS))
    # without a terminal (a pytest-xdist worker) tqdm sizes its line by these; at the
    # 80 columns that older tqdm assumes, a long description cuts the rate off
    monkeypatch.setenv("COLUMNS", "200")
    monkeypatch.setenv("LINES", "50")
    module = __import__(script)
    argv, printed = TINY[script]
    stored = tmp_path / "results.json"
    module.main([*argv, "--results", str(stored)] if script in DRAWN else argv)
    captured = capsys.readouterr()
    assert printed in captured.out, captured.out[-2000:]
    assert "nan ± nan" not in captured.out
    if script not in QUICK:  # what runs is shown on stderr as it runs
        assert "%|" in captured.err and "run" in captured.err, captured.err[-500:]
    if script in DRAWN:
        _check_stored(module, script, argv, stored, captured.out)


def _check_stored(module, script, argv, stored, printed):
    from matplotlib.figure import Figure

    import _common

    results = json.loads(stored.read_text())
    # the command that reproduces the tables, without where this run stored them
    assert results["command"] == "python " + shlex.join([f"benchmarks/{script}.py", *argv])
    assert results["tables"]
    for table in results["tables"]:
        assert "| " + " | ".join(table["header"]) + " |" in printed
        for row in table["rows"]:
            assert "| " + " | ".join(row) + " |" in printed
    assert isinstance(module.figure(results), Figure)
    _check_provenance(results["provenance"], argv)
    # a later run without --results stores nothing
    _common.parser("a later run").parse_args([])
    _common.print_table(["another table"], [["its row"]])
    assert json.loads(stored.read_text()) == results


def _check_provenance(provenance, argv):
    """The commit, date, machine, versions, arguments and modules a stored result
    records are this run's."""
    assert set(provenance) == {"commit", "clean", "date", "machine", "python", "versions",
                               "arguments", "data_files", "modules"}
    assert provenance["commit"] is None or len(provenance["commit"]) == 40
    assert abs(datetime.now(timezone.utc) - datetime.fromisoformat(provenance["date"])) < (
        timedelta(hours=1))
    assert provenance["machine"]["cores"] >= 1 and provenance["machine"]["cpu"]
    assert provenance["machine"]["device"] == "CPU" or "torch" in sys.modules
    assert provenance["python"] == platform.python_version()
    assert provenance["versions"]["skfedkt"] == skfedkt.__version__
    assert provenance["versions"]["scikit-learn"] == sklearn.__version__
    # every argument parsed (those left at their defaults too), none of where it was
    # stored
    named = {arg[2:].split("=")[0].replace("-", "_") for arg in argv if arg.startswith("--")}
    assert named <= set(provenance["arguments"]) and "results" not in provenance["arguments"]
    # every local data file an argument names, by its digest
    assert all(os.path.isfile(path) and len(digest) == 64
               for path, digest in provenance["data_files"].items())
    # the package's modules the benchmark ran, for the staleness check
    assert "skfedkt" in provenance["modules"]
    assert all(name.startswith("skfedkt") for name in provenance["modules"])


@pytest.mark.parametrize("script", SCRIPTS)
def test_benchmark_names_the_table_it_produces(script):
    doc = (BENCHMARKS / f"{script}.py").read_text().split('"""')[1]
    produces = re.search(r"Produces: (\S+), \"([^\"]+)\"", " ".join(doc.split()))
    assert produces, f"{script}'s docstring has no 'Produces: page, \"section\"' line"
    page, section = produces.groups()
    assert section in (ROOT / page).read_text(), f"{page} has no section {section!r}"


def test_census_benchmark_reads_a_local_file_and_prints_every_method(tmp_path, monkeypatch,
                                                                      capsys):
    X, y = make_classification(n_samples=600, n_features=8, weights=[0.76], random_state=0)
    path = tmp_path / "census.libsvm"
    dump_svmlight_file(X, np.where(y == 1, 1, -1), str(path))
    monkeypatch.syspath_prepend(str(BENCHMARKS))
    import bench_census

    stored = tmp_path / "census.json"
    bench_census.main(["--path", str(path), "--parties", "4", "--betas", "1", "--seeds", "1",
                       "--n-jobs", "1", "--trees", "5", "--results", str(stored)])
    out = capsys.readouterr().out
    for method in bench_census.METHODS:
        assert f"| 1 | {method} | " in out
    assert "| 1 | FedKT | nan" not in out
    bench_census.figure(json.loads(stored.read_text()))  # the results page's figure


def test_soft_rounds_benchmark_reads_a_local_file_and_prints_every_method(tmp_path,
                                                                         monkeypatch, capsys):
    X, y = make_classification(n_samples=600, n_features=8, weights=[0.76], random_state=0)
    path = tmp_path / "census.libsvm"
    dump_svmlight_file(X, np.where(y == 1, 1, -1), str(path))
    monkeypatch.syspath_prepend(str(BENCHMARKS))
    import bench_soft_rounds

    stored = tmp_path / "soft_rounds.json"
    argv = ["--path", str(path), "--parties", "4", "--seeds", "1", "--n-jobs", "1",
            "--trees", "5"]
    bench_soft_rounds.main([*argv, "--results", str(stored)])
    out = capsys.readouterr().out
    for method in bench_soft_rounds.METHODS:
        assert f"| {method} | " in out
    assert f"| {bench_soft_rounds.CENTRAL} | " in out and "| +0.000 |" in out
    results = json.loads(stored.read_text())
    _check_provenance(results["provenance"], argv)
    assert str(path) in results["provenance"]["data_files"]
    bench_soft_rounds.figure(results)  # the results page's figure


def test_privacy_benchmark_calibrates_gaussian_noise_to_the_papers_epsilons(monkeypatch):
    monkeypatch.syspath_prepend(str(BENCHMARKS))
    import bench_privacy

    from skfedkt.privacy import gaussian_epsilon

    for row in bench_privacy.PAPER_ROWS:
        task, level, gamma, n_queries, epsilon, *_ = row
        _, paper, paper_queries = bench_privacy.configure(row, "paper", 2.0, 10**6)
        assert (paper.level, paper.noise, paper.gamma, paper_queries) == (
            level, "laplace", gamma, n_queries)
        _, ours, queries = bench_privacy.configure(row, "skfedkt", 2.0, 10**6)
        assert ours.noise == "gaussian" and queries == 2 * n_queries
        _, s, _ = bench_privacy.LEVELS[level]
        # L1: one party moves its s votes per query; L2: every one of the s partitions
        # answers every query, one example moving one teacher vote in each, and the
        # class counts are one more release of the same noise
        releases, sensitivity = ((queries, 2 ** 0.5 * s) if level == "L1"
                                 else (queries * s + 1, 2 ** 0.5))
        assert np.isclose(gaussian_epsilon(releases, sigma=1 / ours.gamma, delta=1e-5,
                                           sensitivity=sensitivity), epsilon, rtol=1e-6)
        # by default QUERIES_FACTOR times the paper's queries, at most the public set
        _, _, default_queries = bench_privacy.configure(row, "skfedkt", None, 5000)
        factor = bench_privacy.QUERIES_FACTOR[level]
        assert default_queries == min(round(factor * n_queries), 5000)


def test_membership_benchmark_audits_uploads_by_their_party_step(monkeypatch, capsys):
    monkeypatch.syspath_prepend(str(BENCHMARKS))
    import bench_membership

    bench_membership.main([
        "--uploads-only", "--seeds", "1", "--references", "1", "--n-jobs", "1", "--trees",
        "5", "--methods", "FedKT, students learn party rows", "FedCT"])
    out = capsys.readouterr().out
    # FedCT has no upload release: it is left out; no final model, hence no accuracy
    assert "| breast_cancer | FedKT, students learn party rows | upload |" in out
    assert "FedCT" not in out and "| final model |" not in out
    assert out.count("| inf | - |") == 1


def test_scaling_and_overhead_benchmarks_measure_every_algorithm(monkeypatch, capsys,
                                                                 tmp_path):
    monkeypatch.syspath_prepend(str(BENCHMARKS))
    import bench_overhead
    import bench_scaling

    for algorithm in bench_scaling.ALGORITHMS:
        bench_scaling.one(algorithm, 4, 200, n_jobs=1)
        measured = capsys.readouterr().out
        assert f'"algorithm": "{algorithm}", "parties": 4' in measured
        assert '"direct_cpu": NaN' not in measured
    bench_overhead.main([
        "--parties", "4", "--rows-per-party", "30", "--paper-parties", "2",
        "--paper-rows-per-party", "30", "--paper-trees", "5", "--repeats", "1",
        "--results", str(tmp_path / "overhead.json")])
    out = capsys.readouterr().out
    bench_overhead.figure(json.loads((tmp_path / "overhead.json").read_text()))
    for name in ('| OneShot "all" |', "| FedKT, the paper's hard votes |",
                 "| FedKT, soft votes (the default) |", "| FedCT, 3 rounds |"):
        assert name in out
    # the ensembles' prediction, set against their models' own; the paper's
    # configuration with one job and with two: the second and third stored tables
    tables = json.loads((tmp_path / "overhead.json").read_text())["tables"]
    assert [row[0] for row in tables[1]["rows"]] == ['OneShot "all"', "FedCT, 3 rounds"]
    assert [row[0] for row in tables[2]["rows"]] == ["n_jobs=1", "n_jobs=2"]


def _drawn_figures():
    """(script, stored results) of every figure a results page draws."""
    pages = (ROOT / "doc").rglob("*.rst")
    return sorted({figure for page in pages for figure in re.findall(
        r"^\.\. benchmark-figure:: (\w+) (\w+)$", page.read_text(), re.M)})


# a dataset followed by a bare number ("digits 0.1"): the parameter is not named
UNNAMED_PARAMETER = re.compile(r"^(digits|wine|breast_cancer|imbalanced|census|adult|cod-rna|"
                               r"a9a|mnist),? \d", re.IGNORECASE)


@pytest.mark.parametrize("script, name", _drawn_figures())
def test_every_figure_names_its_axes_their_scale_and_where_accuracy_starts(
        script, name, monkeypatch):
    """Each axis that shows numbers has a label; a logarithmic one says so; an accuracy
    axis starts at zero or its label says where it starts; tick and legend labels name
    their parameters."""
    if script in NEEDS_TORCH:
        pytest.importorskip("skorch", reason="the benchmark needs the torch extra")
    monkeypatch.syspath_prepend(str(BENCHMARKS))
    import _common

    figure = __import__(script).figure(_common.stored_results(name))
    figure.canvas.draw()  # tick labels are set when drawn
    texts = []
    for ax in figure.axes:
        for axis, label, scale, limits in (
                ("x", ax.get_xlabel(), ax.get_xscale(), ax.get_xlim()),
                ("y", ax.get_ylabel(), ax.get_yscale(), ax.get_ylim())):
            ticks = [tick.get_text() for tick in getattr(ax, f"get_{axis}ticklabels")()]
            numbers = [text for text in ticks if text]
            if any(not re.fullmatch(r"[-−\d.,e+$\\{}^mathrf ]+", text) for text in numbers):
                numbers = []  # categories, which name themselves
            texts += ticks
            if numbers and ax.get_visible():  # a panel may share its row's label
                assert label or any(getattr(other, f"get_{axis}label")()
                                    for other in figure.axes), f"{name}: no {axis} label"
            if scale == "log":
                assert "log" in label, f"{name}: the {axis} axis {label!r} is logarithmic"
            if "accuracy" in label and "points" not in label and limits[0] != 0:
                assert f"from {limits[0]:g}" in label, (
                    f"{name}: the {axis} axis {label!r} starts at {limits[0]:g}")
        for legend in (ax.get_legend(), *figure.legends):
            texts += [text.get_text() for text in (legend.get_texts() if legend else [])]
        texts.append(ax.get_title())
    assert not [text for text in texts if UNNAMED_PARAMETER.match(text)], name


def test_peers_benchmark_names_the_missing_package_and_the_way_out(monkeypatch, capsys):
    monkeypatch.syspath_prepend(str(BENCHMARKS))
    import bench_peers

    monkeypatch.setattr(bench_peers, "find_spec", lambda name: None)
    with pytest.raises(SystemExit):
        bench_peers.main(["--methods", "flwr-trees: pooled forests"])
    assert "flwr-trees is not installed" in capsys.readouterr().err


def test_a_stored_result_counts_the_commits_that_changed_the_code_it_measured(
        monkeypatch):
    monkeypatch.syspath_prepend(str(BENCHMARKS))
    import _common

    if _common._git("rev-parse", "HEAD") is None:
        pytest.skip("needs the repository's history")
    module, path = "skfedkt._secure_sum._party", "skfedkt/_secure_sum/_party.py"
    assert _common.module_files([module, "skfedkt._secure_sum"]) == [
        path, "skfedkt/_secure_sum/__init__.py"]
    changes = _common._git("rev-list", "HEAD", "--", path).split()
    if len(changes) < 2:
        pytest.skip("a shallow clone: the module's earlier commits are missing")

    def measured_at(commit):
        return dict(provenance=dict(commit=commit, modules=[module]))

    assert _common.code_changes(measured_at(changes[0])) == 0
    # measured just before the module's last change: stale by one commit
    assert _common.code_changes(measured_at(changes[0] + "~1")) == 1
    assert _common.code_changes(dict(command="python benchmarks/x.py", tables=[])) is None
    assert _common.code_changes(measured_at("0" * 40)) is None
