"""The proof that a new algorithm is new files only: `tests/consensus_plugin/`, an algorithm of
DS-FL's shape (rounds, a float payload, a --rounds flag FedCT also declares, a final
model), written and registered as ``doc/extending.rst`` tells a contributor, through
everything the package's own algorithms go through."""

import importlib
import os
import shutil
import subprocess
import sys
import warnings
from pathlib import Path

import numpy as np
import pytest
from numpy.testing import assert_allclose, assert_array_equal
from sklearn.base import clone
from sklearn.datasets import load_breast_cancer
from sklearn.tree import DecisionTreeClassifier

from _flower_grid import flower_task  # noqa: F401  (a fixture)
from skfedkt import load_model, save_model
from skfedkt._cli._main import main
from skfedkt.datasets import load_local_file
from skfedkt.privacy import membership_audit


# the plugin's source, importable by name: the package of the distribution that
# test_an_installed_plugin_needs_no_launcher_nor_trust installs
PLUGIN = Path(__file__).parent / "consensus_plugin"


@pytest.fixture(scope="module", autouse=True)
def declared():
    """The algorithm registered by importing its package, as a contributor's is, in a
    registry that this module's tests alone see."""
    from skfedkt.algorithm import algorithms, isolated_registry

    sys.path.insert(0, str(PLUGIN))
    try:
        with isolated_registry():
            if "consensus" not in [algorithm.name for algorithm in algorithms()]:
                if "skfedkt_consensus._declaration" in sys.modules:  # an earlier run
                    importlib.reload(sys.modules["skfedkt_consensus._declaration"])
                else:
                    importlib.import_module("skfedkt_consensus")
            yield
    finally:
        sys.path.remove(str(PLUGIN))


def _estimator(**params):
    from skfedkt_consensus import ConsensusDistillClassifier

    return ConsensusDistillClassifier(DecisionTreeClassifier(max_depth=3), random_state=0,
                                      **params)


@pytest.fixture(scope="module")
def data():
    X, y = load_breast_cancer(return_X_y=True)
    party = np.arange(400) % 3
    return X[:400], y[:400], party, X[400:500], X[500:], y[500:]


def test_an_outside_algorithm_runs_under_secure_aggregation_by_declaring_its_sums(data):
    """Its probabilities are declared in the sum: secure aggregation adds them with no
    other line of the plugin, and gives the plain fit's model; without that declaration
    the algorithm is refused under it, before any fit."""
    from dataclasses import replace

    import skfedkt
    from skfedkt_consensus import ConsensusDistillClassifier

    X, y, party, X_public, X_test, _ = data
    plain = _estimator(n_rounds=2).fit(X, y, groups=party, X_unlabeled=X_public)
    with skfedkt.config_context(secure_aggregation=True):
        secure = _estimator(n_rounds=2).fit(X, y, groups=party, X_unlabeled=X_public)
    # the sum's fixed point is off by far less than this
    np.testing.assert_allclose(secure._consensus, plain._consensus, atol=1e-6)
    assert_array_equal(secure.predict(X_test), plain.predict(X_test))

    class Undeclared(ConsensusDistillClassifier):
        _uploads = replace(ConsensusDistillClassifier._uploads, fields=())

    with skfedkt.config_context(secure_aggregation=True), pytest.raises(
            ValueError, match="Undeclared cannot run under secure_aggregation: it "
            "declares no fields in the sum"):
        Undeclared(DecisionTreeClassifier()).fit(X, y, groups=party, X_unlabeled=X_public)


def test_fit_and_the_deployed_steps_give_one_model(data, tmp_path):
    X, y, party, X_public, X_test, _ = data
    fitted = _estimator(n_rounds=3).fit(X, y, groups=party, X_unlabeled=X_public)
    assert fitted.n_rounds_ == 3 and fitted.score(X_test, data[5]) > 0.8

    clf, message = _estimator(n_rounds=3), None
    while True:
        uploads = []
        for name in range(3):
            upload = clf.fit_party(X[party == name], y[party == name], party=name,
                                   classes=[0, 1], X_unlabeled=X_public, message=message)
            uploads.append(tmp_path / f"upload-{name}")
            upload.save(uploads[-1])
        if message is not None and message.manifest["done"]:
            break
        message = clf.server_round(uploads, X_public, message=message)
        assert message.manifest["party"] == "server"  # stamped by the base
    served = clone(clf).fit_server(uploads, X_public, message=message)
    assert_array_equal(served.predict_proba(X_test), fitted.predict_proba(X_test))

    path = tmp_path / "model.skops"
    save_model(served, path)
    # the registry's declaration is what model files trust: nothing by hand
    assert_array_equal(load_model(path).predict(X_test), fitted.predict(X_test))

    audit = membership_audit(fitted, X[:200], y[:200], groups=party[:200],
                             X_unlabeled=X_public, X_holdout=X_test, y_holdout=data[5],
                             n_reference=0)
    assert {result.release for result in audit.results} == {"final model"}


def test_the_temperature_shapes_what_the_parties_learn(data):
    # the sharpened consensus is learned as soft labels: a temperature that leaves the
    # argmax alone still changes the weights, and so the models
    X, y, party, X_public, X_test, _ = data
    sharp, flat = (_estimator(n_rounds=1, temperature=t).fit(X, y, groups=party,
                                                            X_unlabeled=X_public)
                   for t in (0.1, 5.0))
    assert not np.allclose(sharp._consensus, flat._consensus)
    assert not np.allclose(sharp.predict_proba(X_test), flat.predict_proba(X_test))


def test_an_estimator_without_random_state_is_seeded_as_the_engine_seeds_it(data):
    from sklearn.neighbors import KNeighborsClassifier
    from skfedkt_consensus import ConsensusDistillClassifier

    X, y, party, X_public, X_test, y_test = data
    clf = ConsensusDistillClassifier(KNeighborsClassifier(), n_rounds=1, random_state=0)
    central = KNeighborsClassifier().fit(X, y).score(X_test, y_test)
    score = clf.fit(X, y, groups=party, X_unlabeled=X_public).score(X_test, y_test)
    assert score >= central - 0.1, (score, central)


def test_rows_of_any_kind_and_any_n_jobs_give_one_model(data):
    # the party step indexes rows through the toolkit, so DataFrames and sparse
    # matrices train as arrays do, and its one tier per round is the same for any n_jobs
    import pandas as pd
    from scipy import sparse

    from sklearn.utils import get_tags

    X, y, party, X_public, X_test, _ = data
    expected = _estimator().fit(X, y, groups=party, X_unlabeled=X_public)
    kinds = [(pd.DataFrame, 1), (np.asarray, 2)]
    # the oldest supported scikit-learn tags its trees as refusing sparse rows
    if get_tags(_estimator()).input_tags.sparse:
        kinds.append((sparse.csr_matrix, 2))
    for to_rows, n_jobs in kinds:
        fitted = _estimator(n_jobs=n_jobs).fit(to_rows(X), y, groups=party,
                                               X_unlabeled=to_rows(X_public))
        # a tree fitted on sparse rows sums its weighted leaves in another order: its
        # probabilities may differ in the last bit
        np.testing.assert_allclose(fitted.predict_proba(to_rows(X_test)),
                                   expected.predict_proba(X_test), rtol=0, atol=1e-15)
        assert_array_equal(fitted.predict(to_rows(X_test)), expected.predict(X_test))
    assert [tier["tier"] for tier in expected.tier_fits_] == [
        "party models, round 0", "party models, round 1", "final model"]


def test_a_false_sum_is_refused_naming_party_and_field(data):
    from skfedkt import UploadError

    X, y, party, X_public, _, _ = data
    clf = _estimator()
    uploads = [clf.fit_party(X[party == name], y[party == name], party=name, classes=[0, 1],
                             X_unlabeled=X_public) for name in range(3)]
    sums = uploads[1].payload["sums"]
    sums["proba"] = sums["proba"][:-1]
    with pytest.raises(UploadError, match=r"Party 1 refused: sums: its sums are not the "
                       r"names, shapes and kinds of most parties'"):
        clf.server_round(uploads, X_public)
    # within the bound, yet no probabilities: a party pulling the consensus its way
    sums["proba"] = np.tile([1.0, -1.0], (len(X_public), 1))
    with pytest.raises(UploadError, match=r"Party 1 refused: sums.proba: rows that are "
                       "not non-negative and summing to 1"):
        clf.server_round(uploads, X_public)
    sums["proba"] = np.tile([0.9, 0.9], (len(X_public), 1))
    with pytest.raises(UploadError, match="sums.proba: rows that are not non-negative"):
        clf.server_round(uploads, X_public)
    sums["fake"] = sums.pop("proba")
    with pytest.raises(UploadError, match="sums.fake: not a sum the algorithm declares"):
        clf.server_round(uploads, X_public)


def test_the_command_line_runs_it(tmp_path, capsys):
    assert main(["split", "breast_cancer", "--parties", "3", "--out-dir", str(tmp_path)]) == 0
    common = ["--estimator", "dt", "--random-state", "0", "--rounds", "2",
              "--public", str(tmp_path / "public.csv")]
    message, round_ = [], 0
    while True:
        uploads = [str(tmp_path / f"round-{round_}-{p}") for p in range(3)]
        for p, upload in enumerate(uploads):
            assert main(["party", "consensus", *common, "--data",
                         str(tmp_path / f"party-{p}.csv"), "--classes", "0", "1", "--name",
                         f"hospital-{p}", "--out", upload, *message]) == 0, \
                capsys.readouterr().err
        if message and "done" in capsys.readouterr().out:
            break
        out = str(tmp_path / f"message-{round_}")
        assert main(["server", "consensus", *common, "--out", out, *uploads, *message]) == 0
        message, round_ = ["--message", out], round_ + 1
    model = str(tmp_path / "model.skops")
    assert main(["server", "consensus", *common, "--out", model, *uploads, *message]) == 0
    X_test, _ = load_local_file(tmp_path / "test.csv")
    assert load_model(model).predict(X_test).shape == (len(X_test),)
    # its flag is its own: FedKT's party command refuses it, FedCT's has its own
    assert main(["party", "fedkt", *common[:4], "--data", str(tmp_path / "party-0.csv"),
                 "--classes", "0", "1", "--name", "a", "--out", str(tmp_path / "u"),
                 "--rounds", "3"]) == 2
    assert ("--rounds is a flag of fedct, dsfl and consensus, not of fedkt"
            in capsys.readouterr().err)

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert main(["run", "--dataset", "iris", "--estimator", "dt", "--trials", "1",
                     "--quiet", "--algorithms", "consensus", "fedct", "--rounds", "2",
                     "--audit", "0", "--n-jobs", "1"]) == 0
    printed = capsys.readouterr().out
    assert "consensus distillation: rounds of shared public-set probabilities" in printed
    # its uploads declare no release of a party's rows (`_upload_releases`): the final
    # model alone is attacked
    row = next(line for line in printed.splitlines() if line.startswith("consensus "))
    assert row.split()[-2] == "-" and 0 <= float(row.split()[-1]) <= 1


# run in a fresh interpreter where the plugin is installed and never imported by name
INSTALLED_PLUGIN_DRIVER = """
import contextlib, io, sys, warnings
from skfedkt import load_model
from skfedkt._registry import PluginWarning
warnings.simplefilter("error", PluginWarning)
from skfedkt._cli._main import main
from skfedkt.datasets import load_local_file

def run(*argv):
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        status = main([str(a) for a in argv])
    assert status == 0, (argv, status)
    return out.getvalue()

run("split", "breast_cancer", "--parties", "3", "--out-dir", ".")
common = ["--estimator", "dt", "--rounds", "2", "--public", "public.csv"]
message, round_, served = [], 0, ""
while True:
    uploads = [f"round-{round_}-{p}" for p in range(3)]
    for p, upload in enumerate(uploads):
        run("party", "consensus", *common, "--data", f"party-{p}.csv", "--classes", "0",
            "1", "--name", f"hospital-{p}", "--out", upload, *message)
    if "done" in served:
        break
    served = run("server", "consensus", *common, "--out", f"message-{round_}", *uploads,
                 *message)
    message, round_ = ["--message", f"message-{round_}"], round_ + 1
run("server", "consensus", *common, "--out", "model.skops", *uploads, *message)
print(run("score", "--model", "model.skops", "--data", "test.csv"), end="")
X_test, _ = load_local_file("test.csv")
print(type(load_model("model.skops")).__name__, load_model("model.skops").predict(X_test).shape)
print(run("audit", "consensus", *common, "--data", "party-0.csv", "--holdout", "test.csv",
          "--classes", "0", "1", "--name", "hospital-0", "--references", "0"), end="")
"""


def test_an_installed_plugin_needs_no_launcher_nor_trust(tmp_path):
    """Installed as a distribution of its own (pip, into a folder on the path), the
    algorithm goes through skfedkt's own commands - party, server, score, audit - and
    load_model, none of which is told of it: its entry point declares it."""
    site, source = tmp_path / "site", tmp_path / "plugin"
    # from a copy: pip builds in the source folder
    shutil.copytree(PLUGIN, source, ignore=shutil.ignore_patterns("__pycache__"))
    installed = subprocess.run(
        [sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--target",
         str(site), str(source)], capture_output=True, text=True)
    assert installed.returncode == 0, installed.stderr[-2000:]
    assert (site / "skfedkt_consensus").is_dir()
    work = tmp_path / "consortium"
    work.mkdir()
    # the skfedkt under test, and the plugin where pip put it
    path = os.pathsep.join([str(site), str(Path(__file__).parents[1])])
    done = subprocess.run([sys.executable, "-c", INSTALLED_PLUGIN_DRIVER], cwd=work,
                          capture_output=True, text=True,
                          env={**os.environ, "PYTHONPATH": path})
    assert done.returncode == 0, done.stderr[-3000:]
    lines = done.stdout.splitlines()
    assert lines[0].startswith("accuracy 0.") and "test.csv" in lines[0]
    assert lines[1].startswith("ConsensusDistillClassifier (")
    # its uploads declare no release of a party's rows: the audit says so
    assert "Membership audit of ConsensusDistillClassifier" in done.stdout
    assert "(nothing to attack: what ConsensusDistillClassifier's party step let out" in (
        done.stdout)


def test_a_plugin_that_fails_to_load_leaves_the_others_available(monkeypatch):
    from skfedkt import _registry

    class Broken:
        name, value, group = "broken", "nowhere.at_all:ALGORITHM", _registry.ENTRY_POINT_GROUP
        dist = type("Dist", (), {"name": "skfedkt-broken"})()

        def load(self):
            raise ModuleNotFoundError("No module named 'nowhere'")

    monkeypatch.setattr(_registry, "entry_points", lambda group: [Broken()])
    monkeypatch.setitem(_registry._plugins, "loaded", False)
    with pytest.warns(_registry.PluginWarning, match="The algorithm 'broken' that "
                      "skfedkt-broken installs .* was not loaded: ModuleNotFoundError"), \
            _registry.isolated_registry():
        names = [algorithm.name for algorithm in _registry.algorithms()]
    assert "fedkt" in names and "broken" not in names


def test_the_flower_apps_run_it(flower_task):
    from _flower_grid import N_PARTIES, served_by_flower

    X, y = load_breast_cancer(return_X_y=True)
    party = np.arange(len(y)) % N_PARTIES
    X_public = X[::7]
    clf = _estimator()
    served = served_by_flower(clf, X, y, party, X_public)
    fitted = clone(clf).fit(X, y, groups=party, X_unlabeled=X_public)
    assert_allclose(served.predict_proba(X), fitted.predict_proba(X))
