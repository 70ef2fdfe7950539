"""The deployment commands: skfedkt split, party, server and score, through files."""

import subprocess
import sys
import warnings

import numpy as np
import pytest
from numpy.testing import assert_array_equal

from skfedkt import (DSFLClassifier, FedCTClassifier, FedKTClassifier,
                     OneShotEnsembleClassifier)
from skfedkt._cli._main import main
from skfedkt import load_model
from skfedkt.datasets import load_local_file

PARTIES = [0, 1, 2]
# small models keep the test quick; every party and the server pass the same flags
MODEL = ["--estimator", "dt", "--random-state", "0"]


@pytest.fixture(scope="module")
def consortium(tmp_path_factory):
    folder = tmp_path_factory.mktemp("consortium")
    assert main(["split", "breast_cancer", "--parties", "3", "--out-dir", str(folder)]) == 0
    return folder


def _run(argv, capsys):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        status = main([str(a) for a in argv])
    printed = capsys.readouterr()
    assert status == 0, printed.err
    return printed.out


def _party(consortium, algorithm, p, out, capsys, *extra):
    return _run(["party", algorithm, *MODEL, "--data", consortium / f"party-{p}.csv",
                 "--public", consortium / "public.csv", "--classes", 0, 1,
                 "--name", f"hospital-{p}", "--out", out, *extra], capsys)


def _pooled(consortium):
    """The parties' rows pooled, their groups, and the public set: what fit takes."""
    parts = [load_local_file(consortium / f"party-{p}.csv") for p in PARTIES]
    X = np.vstack([X for X, _ in parts])
    y = np.concatenate([y for _, y in parts])
    groups = np.concatenate([[f"hospital-{p}"] * len(y) for p, (_, y) in zip(PARTIES, parts)])
    X_public, _ = load_local_file(consortium / "public.csv", labelled=False)
    return X, y, groups, X_public


@pytest.mark.parametrize("algorithm, estimator", [
    ("fedkt", FedKTClassifier), ("oneshot", OneShotEnsembleClassifier),
])
def test_one_round_through_files_gives_fits_model(consortium, tmp_path, capsys, algorithm,
                                                  estimator):
    uploads = [tmp_path / f"upload-{p}.skfedkt" for p in PARTIES]
    for p, upload in zip(PARTIES, uploads):
        assert f"'hospital-{p}'" in _party(consortium, algorithm, p, upload, capsys)
    model = tmp_path / "model.skops"
    printed = _run(["server", algorithm, *MODEL, "--public", consortium / "public.csv",
                    "--out", model, *uploads], capsys)
    assert "final model of 3 parties (hospital-0, hospital-1, hospital-2)" in printed
    printed = _run(["score", "--model", model, "--data", consortium / "test.csv"], capsys)
    assert printed.startswith("accuracy 0.")

    X, y, groups, X_public = _pooled(consortium)
    options = ({"selection": "cv", "n_selected": 5} if algorithm == "oneshot" else {})
    from sklearn.tree import DecisionTreeClassifier

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        fitted = estimator(DecisionTreeClassifier(), random_state=0, **options).fit(
            X, y, groups=groups, X_unlabeled=X_public
        )
    X_test, _ = load_local_file(consortium / "test.csv")
    assert_array_equal(load_model(model).predict_proba(X_test), fitted.predict_proba(X_test))


@pytest.mark.parametrize("algorithm, estimator_class", [("fedct", FedCTClassifier),
                                                       ("dsfl", DSFLClassifier)])
def test_rounds_through_files(consortium, tmp_path, capsys, algorithm, estimator_class):
    message, printed = None, ""
    for round_ in range(20):
        uploads = [tmp_path / f"round-{round_}-{p}.skfedkt" for p in PARTIES]
        extra = [] if message is None else ["--message", message]
        for p, upload in zip(PARTIES, uploads):
            _party(consortium, algorithm, p, upload, capsys, *extra)
        if message is not None and "done" in printed:
            break
        new_message = tmp_path / f"message-{round_}.skfedkt"
        printed = _run(["server", algorithm, *MODEL, "--public", consortium / "public.csv",
                        "--out", new_message, *uploads, *extra], capsys)
        message = new_message
    model = tmp_path / "model.skops"
    printed = _run(["server", algorithm, *MODEL, "--public", consortium / "public.csv",
                    "--out", model, *uploads, "--message", message], capsys)
    assert "final model of 3 parties" in printed

    X, y, groups, X_public = _pooled(consortium)
    from sklearn.tree import DecisionTreeClassifier

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        fitted = estimator_class(DecisionTreeClassifier(), random_state=0).fit(
            X, y, groups=groups, X_unlabeled=X_public
        )
    X_test, _ = load_local_file(consortium / "test.csv")
    served = load_model(model)
    assert served.n_rounds_ == fitted.n_rounds_
    assert_array_equal(served.predict_proba(X_test), fitted.predict_proba(X_test))


def test_server_refuses_mismatched_flags_naming_the_party(consortium, tmp_path, capsys):
    upload = tmp_path / "upload.skfedkt"
    _party(consortium, "fedkt", 0, upload, capsys)
    status = main(["server", "fedkt", *MODEL, "--students", "3", "--public",
                   str(consortium / "public.csv"), "--out", str(tmp_path / "m"), str(upload)])
    err = capsys.readouterr().err
    assert status == 1
    assert err.startswith(f"skfedkt server: error: Party 'hospital-0' ({upload}) refused: "
                          "algorithm parameters (params) differ: n_students: the party "
                          "has 2, the server 3")


def test_min_parties_leaves_out_a_damaged_upload(consortium, tmp_path, capsys):
    uploads = [tmp_path / f"upload-{p}.skfedkt" for p in PARTIES]
    for p, upload in zip(PARTIES, uploads):
        _party(consortium, "fedkt", p, upload, capsys)
    uploads[2].write_bytes(uploads[2].read_bytes()[:5000])
    printed = _run(["server", "fedkt", *MODEL, "--public", consortium / "public.csv",
                    "--out", tmp_path / "model.skops", "--min-parties", 2, *uploads], capsys)
    assert "final model of 2 parties (hospital-0, hospital-1)" in printed
    assert "left out: hospital-2" in printed
    # the warning that says so is one clean line, without Python's source lines
    status = main([str(a) for a in ["server", "fedkt", *MODEL, "--public",
                                    consortium / "public.csv", "--out", tmp_path / "again",
                                    "--min-parties", 2, *uploads]])
    err = capsys.readouterr().err
    assert status == 0
    warned = [line for line in err.splitlines() if "Proceeding with 2 parties" in line]
    assert len(warned) == 1 and warned[0].startswith("skfedkt server: warning: ")
    assert "warnings.warn" not in err and ".py:" not in err


def test_a_party_file_with_an_extra_column_names_both_files_and_the_column(
        consortium, tmp_path, capsys):
    lines = (consortium / "party-0.csv").read_text().splitlines()
    extra = tmp_path / "party-extra.csv"
    extra.write_text("\n".join(["bmi," + lines[0]] + ["1.5," + line for line in lines[1:]]))
    status = main(["party", "fedkt", *map(str, MODEL), "--data", str(extra), "--public",
                   str(consortium / "public.csv"), "--classes", "0", "1", "--name", "a",
                   "--out", str(tmp_path / "u")])
    err = capsys.readouterr().err
    assert status == 1
    assert (f"{extra} has 31 feature columns (besides the label), the public set "
            f"{consortium / 'public.csv'} has 30; only {extra} has 'bmi'.") in err
    assert not (tmp_path / "u").exists()


def test_party_needs_the_public_set(consortium, tmp_path, capsys):
    status = main(["party", "fedkt", "--data", str(consortium / "party-0.csv"), "--classes",
                   "0", "1", "--name", "a", "--out", str(tmp_path / "u")])
    assert status == 1
    assert "fedkt needs the agreed public set: pass --public" in capsys.readouterr().err


def test_a_party_audits_its_upload_on_the_command_line(consortium, tmp_path, capsys):
    upload = tmp_path / "upload-0.skfedkt"
    _party(consortium, "fedkt", 0, upload, capsys)
    audit = ["audit", "fedkt", *MODEL, "--data", consortium / "party-0.csv", "--public",
             consortium / "public.csv", "--holdout", consortium / "test.csv", "--classes",
             0, 1, "--name", "hospital-0", "--references", 1]
    for extra in ([], ["--upload", upload]):
        printed = _run([*audit, *extra], capsys)
        assert "Membership audit of FedKTClassifier's party step" in printed
        rows = [line.split() for line in printed.splitlines() if line.startswith("upload")]
        assert [row[1] for row in rows] == ["loss", "lira"]
        assert all(0 <= float(row[2]) <= 1 for row in rows)
    assert main(["audit", "fedkt", *MODEL, "--data", str(consortium / "party-1.csv"),
                 "--public", str(consortium / "public.csv"), "--holdout",
                 str(consortium / "test.csv"), "--classes", "0", "1", "--name",
                 "hospital-1", "--upload", str(upload)]) == 1
    assert "upload is party 'hospital-0''s, not 'hospital-1''s" in capsys.readouterr().err


def test_the_server_caps_files_by_the_agreement(consortium, tmp_path, capsys):
    uploads = [tmp_path / f"upload-{p}.skfedkt" for p in PARTIES]
    for p, upload in zip(PARTIES, uploads):
        _party(consortium, "fedkt", p, upload, capsys)
    server = ["server", "fedkt", *MODEL, "--public", consortium / "public.csv", "--out",
              tmp_path / "model.skops", "--classes", 0, 1, "--agreed-limits"]
    printed = _run([*server, *uploads], capsys)
    assert "server: caps of " in printed and "FedKT's agreement" in printed
    assert "final model of 3 parties" in printed
    # ten times an honest upload: refused by the caps the agreement implies
    bloated = tmp_path / "bloated.skfedkt"
    bloated.write_bytes(uploads[0].read_bytes() + bytes(10 * uploads[0].stat().st_size))
    assert main([str(a) for a in [*server, bloated, *uploads[1:]]]) == 1
    assert "max_file_bytes" in capsys.readouterr().err
    assert main([str(a) for a in [*server[:-4], "--party-rows", 50, *uploads]]) == 1
    assert "--party-rows sizes the reference party" in capsys.readouterr().err


def test_a_deployment_s_stderr_in_a_file_holds_a_line_per_stage(consortium, tmp_path,
                                                                capsys):
    # a scheduler's log: stderr goes to a file, where a progress bar's refreshes would
    # run together on one line
    uploads = [tmp_path / f"upload-{p}.skfedkt" for p in PARTIES]
    for p, upload in zip(PARTIES, uploads):
        _party(consortium, "fedkt", p, upload, capsys)
    log = tmp_path / "server.log"
    with open(log, "w") as stderr:
        done = subprocess.run(
            [sys.executable, "-m", "skfedkt", "server", "fedkt", *MODEL, "--public",
             str(consortium / "public.csv"), "--out", str(tmp_path / "model.skops"),
             *map(str, uploads)], stderr=stderr, stdout=subprocess.PIPE, text=True)
    assert done.returncode == 0
    written = log.read_text()
    assert "\r" not in written
    stages = [line for line in written.splitlines() if line.startswith("server: ")]
    assert len(stages) >= 2 and len(set(stages)) == len(stages)
    # no refresh of one stage glued onto another's, and each stage whole
    assert all(line.count("fedkt's server step") <= 1 for line in written.splitlines())
    assert "…" not in written


def test_the_command_lines_schema_cap_is_the_file_cap():
    # FedCT's final model of the command line's four forests of 100 trees has a skops
    # schema over UploadLimits' 16 MiB: --max-upload-mb (48 by default) raises the cap
    from argparse import Namespace

    from skfedkt import UploadLimits
    from skfedkt._cli._deploy import _limits

    assert UploadLimits().max_schema_bytes == 16 * 2**20
    for mib in (48, 100):
        assert _limits(Namespace(max_upload_mb=mib)).max_schema_bytes == mib * 2**20
    assert _limits(Namespace(max_upload_mb=1)).max_schema_bytes == 16 * 2**20
