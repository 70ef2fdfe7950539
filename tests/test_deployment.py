"""Party and server steps through upload files: the same model as fit, and safe uploads."""

import io
import json
import pickle
import warnings
import zipfile

import numpy as np
import pytest
from numpy.testing import assert_array_equal
from sklearn.base import clone
from sklearn.datasets import load_breast_cancer
from sklearn.ensemble import RandomForestClassifier
from sklearn.linear_model import LogisticRegression
from sklearn.tree import DecisionTreeClassifier

from skfedkt import (
    FedCTClassifier,
    FedKTClassifier,
    OneShotEnsembleClassifier,
    PartyUpload,
    UploadError,
    read_upload,
)
from skfedkt.privacy import BitFlips, PartyNoise, ServerNoise, TeacherVotes

N_PARTIES = 3


@pytest.fixture(scope="module")
def consortium():
    """Three hospitals' rows, the agreed public set and classes, and a test set."""
    X, y = load_breast_cancer(return_X_y=True)
    rng = np.random.RandomState(0)
    order = rng.permutation(len(y))
    X, y = X[order], y[order]
    X_public, X_test = X[:120], X[120:220]
    X, y = X[220:], y[220:]
    party = rng.randint(N_PARTIES, size=len(y))
    return X, y, party, X_public, X_test


def _quiet(call, *args, **kwargs):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return call(*args, **kwargs)


def _party_files(clf, consortium, tmp_path, **kwargs):
    X, y, party, X_public, _ = consortium
    paths = []
    for p in range(N_PARTIES):
        upload = _quiet(clf.fit_party, X[party == p], y[party == p], party=p,
                        classes=[0, 1], X_unlabeled=X_public, **kwargs)
        path = tmp_path / f"party-{p}.skfedkt"
        upload.save(path)
        paths.append(path)
    return paths


FEDKT_SETTINGS = [
    dict(),
    dict(voting="hard", privacy=ServerNoise(gamma=0.5)),
    dict(privacy=PartyNoise(gamma=0.5, query_fraction=0.5)),
    dict(soft_labels="all", estimator=LogisticRegression(max_iter=500)),
    dict(distill=False),
]


@pytest.mark.parametrize("params", FEDKT_SETTINGS,
                         ids=["L0", "L1-hard", "L2", "soft-labels", "undistilled"])
def test_fedkt_files_give_the_model_fit_gives(consortium, tmp_path, params):
    X, y, party, X_public, X_test = consortium
    params = {"estimator": RandomForestClassifier(10, max_depth=4), **params}
    clf = FedKTClassifier(random_state=0, **params)
    fitted = _quiet(clone(clf).fit, X, y, groups=party, X_unlabeled=X_public)
    server = _quiet(clone(clf).fit_server, _party_files(clf, consortium, tmp_path), X_public)
    assert_array_equal(server.vote_counts_, fitted.vote_counts_)
    assert_array_equal(server.public_labels_, fitted.public_labels_)
    assert_array_equal(server.predict_proba(X_test), fitted.predict_proba(X_test))
    assert server.epsilon_ == fitted.epsilon_
    assert_array_equal(server.parties_, fitted.parties_)
    assert (server.upload_bytes_ > 0).all()


@pytest.mark.parametrize("selection", ["all", "cv", "random"])
def test_oneshot_files_give_the_model_fit_gives(consortium, tmp_path, selection):
    X, y, party, X_public, X_test = consortium
    clf = OneShotEnsembleClassifier(
        RandomForestClassifier(10, max_depth=4), selection=selection, n_selected=2,
        distill=True, final_estimator=DecisionTreeClassifier(max_depth=4), random_state=0,
    )
    fitted = _quiet(clone(clf).fit, X, y, groups=party, X_unlabeled=X_public)
    server = _quiet(clone(clf).fit_server, _party_files(clf, consortium, tmp_path), X_public)
    assert_array_equal(server.selected_parties_, fitted.selected_parties_)
    assert_array_equal(server.predict_proba(X_test), fitted.predict_proba(X_test))
    if selection == "cv":
        assert_array_equal(server.local_scores_, fitted.local_scores_)


def _fedct_rounds(clf, consortium, tmp_path, share_model=None):
    """The parties and the server exchanging files until the server says done."""
    X, y, party, X_public, _ = consortium
    server, message = clone(clf), None
    for round_ in range(50):
        uploads = []
        for p in range(N_PARTIES):
            upload = _quiet(clf.fit_party, X[party == p], y[party == p], party=p,
                            classes=[0, 1], X_unlabeled=X_public, share_model=share_model,
                            message=message)
            path = tmp_path / f"party-{p}-round-{round_}.skfedkt"
            upload.save(path)
            uploads.append(path)
        if message is not None and read_upload(message).manifest["done"]:
            return server, uploads, message
        message = tmp_path / f"server-round-{round_}.skfedkt"
        server.server_round(uploads, X_public, message=None if round_ == 0 else
                            tmp_path / f"server-round-{round_ - 1}.skfedkt").save(message)
    raise AssertionError("the server never said done")


@pytest.mark.parametrize("params", [dict(), dict(n_rounds=0),
                                    dict(privacy=BitFlips(50.0), n_rounds=3),
                                    dict(privacy=TeacherVotes(8.0, n_teachers=3,
                                                              n_queries=20), n_rounds=3)],
                         ids=["default", "local-only", "bit-flips", "teacher-votes"])
def test_fedct_files_give_the_model_fit_gives(consortium, tmp_path, params):
    X, y, party, X_public, X_test = consortium
    clf = FedCTClassifier(DecisionTreeClassifier(max_depth=3), random_state=0, **params)
    fitted = _quiet(clone(clf).fit, X, y, groups=party, X_unlabeled=X_public)
    server, uploads, message = _fedct_rounds(clf, consortium, tmp_path)
    server.fit_server(uploads, X_public, message=message)
    assert_array_equal(server.predict_proba(X_test), fitted.predict_proba(X_test))
    assert server.history_ == fitted.history_
    assert_array_equal(server.consensus_labels_, fitted.consensus_labels_)
    assert server.epsilon_ == fitted.epsilon_


def test_fedct_party_keeps_its_model_without_sharing_it(consortium, tmp_path):
    X, y, party, X_public, X_test = consortium
    clf = FedCTClassifier(DecisionTreeClassifier(max_depth=3), n_rounds=2, random_state=0)
    fitted = _quiet(clone(clf).fit, X, y, groups=party, X_unlabeled=X_public)
    server, uploads, message = _fedct_rounds(clf, consortium, tmp_path, share_model=False)
    upload = read_upload(uploads[0])
    assert upload.payload["model"] is None
    kept = _quiet(clf.fit_party, X[party == 0], y[party == 0], party=0, classes=[0, 1],
                  X_unlabeled=X_public, message=message, share_model=False).local_model
    assert_array_equal(kept.predict(X_test), fitted.classes_[
        fitted.estimators_[0].predict(X_test)])
    with pytest.raises(UploadError, match="sent no model"):
        server.fit_server(uploads, X_public, message=message)


# --- tampered and damaged uploads ----------------------------------------------------

@pytest.fixture(scope="module")
def uploads(consortium, tmp_path_factory):
    clf = FedKTClassifier(RandomForestClassifier(5, max_depth=3), random_state=0)
    return clf, _party_files(clf, consortium, tmp_path_factory.mktemp("uploads"))


def _rewrite(path, tmp_path, manifest_change=None, payload=None):
    """A copy of the upload at `path` with its manifest or payload changed."""
    with zipfile.ZipFile(path) as archive:
        manifest = json.loads(archive.read("manifest.json"))
        original = archive.read("payload.skops")
    if manifest_change:
        manifest_change(manifest)
    if payload is not None:
        import hashlib

        manifest["payload_sha256"] = hashlib.sha256(payload).hexdigest()
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        archive.writestr("manifest.json", json.dumps(manifest))
        archive.writestr("payload.skops", original if payload is None else payload)
    tampered = tmp_path / f"tampered-{path.name}"
    tampered.write_bytes(buffer.getvalue())
    return tampered


@pytest.mark.parametrize("field, change", [
    ("classes", lambda m: m.update(classes=[0, 2])),
    ("n_features", lambda m: m.update(n_features=29)),
    ("public_fingerprint", lambda m: m.update(public_fingerprint="0" * 64)),
    ("params", lambda m: m["params"].update(n_students=3)),
    ("algorithm", lambda m: m.update(algorithm="FedCTClassifier")),
    ("package_version", lambda m: m.update(package_version="0.0.1")),
])
def test_tampered_manifest_is_refused_naming_party_and_field(
    uploads, consortium, tmp_path, field, change
):
    clf, paths = uploads
    X_public = consortium[3]
    tampered = _rewrite(paths[1], tmp_path, change)
    with pytest.raises(UploadError, match=f"Party 1.*{field}") as error:
        clone(clf).fit_server([paths[0], tampered, paths[2]], X_public)
    assert error.value.party == 1
    assert error.value.field == field


def test_a_different_public_set_is_refused(uploads, consortium):
    clf, paths = uploads
    X_public = consortium[3].copy()
    X_public[0, 0] += 1
    with pytest.raises(UploadError, match="Party 0.*public_fingerprint"):
        clone(clf).fit_server(paths, X_public)


def test_altered_payload_fails_its_checksum(uploads, consortium, tmp_path):
    clf, paths = uploads
    with zipfile.ZipFile(paths[2]) as archive:
        manifest = archive.read("manifest.json")
        payload = bytearray(archive.read("payload.skops"))
    payload[len(payload) // 2] ^= 0xFF
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        archive.writestr("manifest.json", manifest)
        archive.writestr("payload.skops", bytes(payload))
    with pytest.raises(UploadError, match="Party 2.*SHA-256"):
        clone(clf).fit_server([paths[0], paths[1], buffer.getvalue()], consortium[3])


class Intruder:
    """A type no server trusts."""


def test_untrusted_type_is_refused_and_nothing_is_unpickled(
    uploads, consortium, tmp_path, monkeypatch
):
    import skops.io

    clf, paths = uploads
    payload = read_upload(paths[0]).payload
    payload["students"][0] = Intruder()
    injected = _rewrite(paths[0], tmp_path, payload=skops.io.dumps(payload))

    def no_unpickling(*args, **kwargs):
        raise AssertionError("pickle was called")

    monkeypatch.setattr(pickle, "loads", no_unpickling)
    monkeypatch.setattr(pickle, "load", no_unpickling)
    monkeypatch.setattr(pickle, "Unpickler", no_unpickling)
    with pytest.raises(UploadError, match=r"Party 0.*test_deployment\.Intruder") as error:
        clone(clf).fit_server([injected, *paths[1:]], consortium[3])
    assert error.value.field == "types"
    # the genuine uploads load without pickle
    clone(clf).fit_server(paths, consortium[3])


@pytest.mark.parametrize("cut", [0.5, 0.9])
def test_truncated_upload_is_a_clear_error_naming_party(uploads, consortium, tmp_path, cut):
    clf, paths = uploads
    data = paths[1].read_bytes()
    truncated = tmp_path / "truncated.skfedkt"
    truncated.write_bytes(data[: int(cut * len(data))])
    with pytest.raises(UploadError, match=r"Party 1 .*truncated or corrupted"):
        clone(clf).fit_server([paths[0], truncated, paths[2]], consortium[3])


def test_not_an_upload(uploads, consortium, tmp_path):
    clf, paths = uploads
    junk = tmp_path / "junk.skfedkt"
    junk.write_bytes(b"hello")
    with pytest.raises(UploadError, match="junk.skfedkt: not a readable skfedkt upload"):
        clone(clf).fit_server([junk, *paths], consortium[3])


def test_the_same_party_twice_is_refused(uploads, consortium):
    clf, paths = uploads
    with pytest.raises(UploadError, match="Party 0 sent 2 uploads .*neither is used"):
        clone(clf).fit_server([paths[0], paths[0]], consortium[3])


def test_min_parties_proceeds_without_the_bad_upload_and_says_so(
    uploads, consortium, tmp_path
):
    clf, paths = uploads
    tampered = _rewrite(paths[1], tmp_path, lambda m: m.update(classes=[0, 2]))
    with pytest.warns(UserWarning, match="left out 1: 1: Party 1 .*refused: classes"):
        server = _quiet_except_left_out(clone(clf).fit_server, [paths[0], tampered, paths[2]],
                                        consortium[3], min_parties=2)
    assert_array_equal(server.parties_, [0, 2])
    assert list(server.left_out_parties_) == [1]
    with pytest.raises(UploadError, match="fewer than min_parties=3"):
        clone(clf).fit_server([paths[0], tampered, paths[2]], consortium[3], min_parties=3)


def _quiet_except_left_out(call, *args, **kwargs):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        warnings.filterwarnings("always", message="Proceeding with")
        return call(*args, **kwargs)


def test_party_step_checks_its_labels_against_the_agreed_classes(consortium):
    X, y, party, X_public, _ = consortium
    with pytest.raises(ValueError, match=r"outside the agreed classes: \[1\]"):
        FedKTClassifier().fit_party(X, y, party="a", classes=[0, 2], X_unlabeled=X_public)


def test_party_step_leaves_the_estimator_unfitted(consortium):
    X, y, party, X_public, _ = consortium
    clf = FedKTClassifier(n_students=1, random_state=0)
    upload = _quiet(clf.fit_party, X, y, party="a", classes=[0, 1], X_unlabeled=X_public)
    assert isinstance(upload, PartyUpload) and upload.party == "a"
    assert not hasattr(clf, "classes_")


def test_l2_party_step_asks_for_a_secret_seed(consortium):
    X, y, party, X_public, _ = consortium
    clf = FedKTClassifier(privacy=PartyNoise(), random_state=0)
    with pytest.warns(UserWarning, match="secret party_seed"):
        clf.fit_party(X, y, party="a", classes=[0, 1], X_unlabeled=X_public)
    with warnings.catch_warnings():
        warnings.simplefilter("error", UserWarning)
        upload = clf.fit_party(X, y, party="a", classes=[0, 1], X_unlabeled=X_public,
                               party_seed=12345)
    # at L2 a party sends its class counts only with noise, and its guarantee covers them
    assert sum(upload.manifest["class_counts"]) == len(y)
    assert upload.manifest["privacy"]["epsilon"] > 0
    without_counts = clone(clf).set_params(privacy__counts_gamma=None).fit_party(
        X, y, party="a", classes=[0, 1], X_unlabeled=X_public, party_seed=12345)
    assert without_counts.manifest["class_counts"] is None
    assert without_counts.manifest["privacy"]["epsilon"] < upload.manifest["privacy"]["epsilon"]


def test_skorch_net_needs_the_operators_trust(consortium, tmp_path):
    pytest.importorskip("skorch")
    import torch
    from _torch_modules import MLP, to_float32
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import FunctionTransformer, StandardScaler
    from skorch import NeuralNetClassifier

    X, y, party, X_public, _ = consortium
    net = make_pipeline(
        StandardScaler(), FunctionTransformer(to_float32),
        NeuralNetClassifier(MLP, module__n_features=30, module__n_classes=2, max_epochs=2,
                            criterion=torch.nn.CrossEntropyLoss, train_split=None,
                            verbose=0),
    )
    clf = OneShotEnsembleClassifier(net, random_state=0)
    path = tmp_path / "net.skfedkt"
    clf.fit_party(X[party == 0], y[party == 0], party=0, classes=[0, 1]).save(path)
    with pytest.raises(UploadError, match="skorch.classifier.NeuralNetClassifier"):
        clone(clf).fit_server([path])
    trusted = [t for t in _untrusted(path)]
    server = clone(clf).fit_server([path], trusted=trusted)
    assert server.predict(X[:5]).shape == (5,)


def _untrusted(path):
    import skops.io

    with zipfile.ZipFile(path) as archive:
        return skops.io.get_untrusted_types(data=archive.read("payload.skops"))


@pytest.mark.parametrize("call, error, message", [
    (lambda X, y, P: FedKTClassifier().fit_party(X, y, party=None, classes=[0, 1],
                                                 X_unlabeled=P),
     TypeError, "party must be the party's name"),
    (lambda X, y, P: FedKTClassifier().fit_party(X, y, party="a", classes=[0, 1],
                                                 X_unlabeled=None),
     ValueError, "party step needs the agreed public set"),
    (lambda X, y, P: FedCTClassifier().fit_party(X, y, party="a", classes=[0, 1],
                                                 X_unlabeled=None),
     ValueError, "party step needs the agreed public set"),
    (lambda X, y, P: FedKTClassifier().fit_server("upload.skfedkt", P),
     TypeError, "uploads must be a list"),
    (lambda X, y, P: FedKTClassifier().fit_server([], P), UploadError, "No uploads"),
    (lambda X, y, P: FedKTClassifier().fit_server(["missing.skfedkt"], None),
     ValueError, "server step needs the agreed public set"),
    (lambda X, y, P: OneShotEnsembleClassifier().fit_server(["missing.skfedkt"]),
     UploadError, "missing.skfedkt: cannot read the file"),
    (lambda X, y, P: FedKTClassifier().fit_party(X, y, party="a", classes=[1],
                                                 X_unlabeled=P),
     ValueError, "at least two"),
    (lambda X, y, P: FedKTClassifier().fit_party(X, y, party="a", classes=[0, 1, 1],
                                                 X_unlabeled=P),
     ValueError, "repeated"),
    (lambda X, y, P: FedKTClassifier().fit_party(X, y, party="a", classes=[0, 1],
                                                 X_unlabeled=P[:, :5]),
     ValueError, "Invalid X_unlabeled"),
    (lambda X, y, P: FedCTClassifier().fit_party(X, y, party="a", classes=[0, 1],
                                                 X_unlabeled=P, message=b"junk"),
     UploadError, "the server's message: not a readable"),
    (lambda X, y, P: FedCTClassifier([DecisionTreeClassifier()]).fit_party(
        X, y, party="a", classes=[0, 1], X_unlabeled=P),
     ValueError, "give a dict keyed by party name"),
    (lambda X, y, P: FedCTClassifier({"b": DecisionTreeClassifier()}).fit_party(
        X, y, party="a", classes=[0, 1], X_unlabeled=P),
     ValueError, "no entry for party 'a'"),
    (lambda X, y, P: FedKTClassifier(n_students=0).fit_party(
        X, y, party="a", classes=[0, 1], X_unlabeled=P),
     ValueError, "n_students"),
])
def test_bad_deployment_inputs_are_clear_errors(consortium, call, error, message):
    X, y, _, X_public, _ = consortium
    with pytest.raises(error, match=message):
        call(X, y, X_public)


def test_dataframes_keep_their_feature_names_and_must_agree(consortium):
    pd = pytest.importorskip("pandas")
    X, y, party, X_public, X_test = consortium
    columns = [f"f{j}" for j in range(X.shape[1])]
    frame, public = pd.DataFrame(X, columns=columns), pd.DataFrame(X_public, columns=columns)
    clf = OneShotEnsembleClassifier(random_state=0)
    uploads = [clf.fit_party(frame[party == p], y[party == p], party=p, classes=[0, 1],
                             X_unlabeled=public) for p in range(N_PARTIES)]
    assert uploads[0].manifest["feature_names"] == columns
    server = clone(clf).fit_server(uploads, public)
    assert_array_equal(server.feature_names_in_, columns)
    renamed = public.rename(columns={"f0": "age"})
    with pytest.raises(UploadError, match="Party 0 refused: feature_names"):
        clone(clf).fit_server(uploads, renamed)


@pytest.mark.parametrize("estimator", ["hgb", "knn", "mlp", "xgb", "pipeline"])
def test_common_estimators_load_without_extra_trust(consortium, estimator):
    from sklearn.ensemble import HistGradientBoostingClassifier
    from sklearn.neighbors import KNeighborsClassifier
    from sklearn.neural_network import MLPClassifier
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    if estimator == "xgb":
        xgboost = pytest.importorskip("xgboost")
        model = xgboost.XGBClassifier(n_estimators=3, max_depth=2)
    else:
        model = {
            "hgb": HistGradientBoostingClassifier(max_iter=3),
            "knn": KNeighborsClassifier(algorithm="kd_tree"),
            "mlp": MLPClassifier(hidden_layer_sizes=(4,), max_iter=5),
            "pipeline": make_pipeline(StandardScaler(), LogisticRegression()),
        }[estimator]
    X, y, party, *_ = consortium
    clf = OneShotEnsembleClassifier(model, random_state=0)
    upload = _quiet(clf.fit_party, X, y, party="a", classes=[0, 1])
    received = read_upload(upload.to_bytes())
    assert_array_equal(received.payload["model"].predict(X), upload.payload["model"].predict(X))


def test_one_trusted_name_is_not_read_letter_by_letter(uploads, consortium, tmp_path):
    clf, paths = uploads
    payload = read_upload(paths[0]).payload
    payload["students"][0] = Intruder()
    import skops.io

    injected = _rewrite(paths[0], tmp_path, payload=skops.io.dumps(payload))
    with pytest.raises(UploadError, match="Intruder"):
        read_upload(injected, trusted="test_deployment.Intruder.x")
    assert read_upload(injected, trusted="test_deployment.Intruder").party == 0


def test_parameter_mismatch_names_the_nested_parameter(consortium, tmp_path):
    X, y, party, X_public, _ = consortium
    party_side = OneShotEnsembleClassifier(RandomForestClassifier(5, max_depth=3))
    upload = _quiet(party_side.fit_party, X, y, party="a", classes=[0, 1])
    server_side = OneShotEnsembleClassifier(RandomForestClassifier(5, max_depth=4))
    with pytest.raises(UploadError, match=r"estimator\.max_depth: the party has 3, the "
                                          r"server 4"):
        server_side.fit_server([upload])


def test_the_odd_party_out_is_named_whatever_the_order(consortium):
    # the party with other classes is refused, not the first upload's neighbours
    X, y, party, X_public, _ = consortium
    clf = FedKTClassifier(RandomForestClassifier(5, max_depth=3), random_state=0)
    uploads = [
        _quiet(clf.fit_party, X[party == p], y[party == p], party=f"h{p}",
               classes=[0, 1, 2] if p == 0 else [0, 1], X_unlabeled=X_public)
        for p in range(N_PARTIES)
    ]
    with pytest.raises(UploadError, match=r"Party 'h0' .*classes is \[0, 1, 2\], but 2 of "
                                          r"the 3 uploads have \[0, 1\].*--classes"):
        clone(clf).fit_server(uploads, X_public)
    server = _quiet(clone(clf).fit_server, uploads, X_public, min_parties=2)
    assert server.parties_.tolist() == ["h1", "h2"]
