"""A coordinator facing a hostile party: every crafted file is refused, naming party,
file and field, before anything runs it, within bounded memory and time.

Honest uploads are made once per module; each case changes one thing, as an attacker
would, and checks the refusal (and, where it matters, that nothing ran or was written).
"""

import copy
import hashlib
import io
import json
import re
import subprocess
import sys
import warnings
import zipfile

import numpy as np
import pytest
from numpy.testing import assert_array_equal
import skops.io
from sklearn.base import clone
from sklearn.datasets import load_breast_cancer
from sklearn.ensemble import HistGradientBoostingClassifier
from sklearn.neighbors import KNeighborsClassifier
from sklearn.preprocessing import FunctionTransformer
from sklearn.tree import DecisionTreeClassifier

from skfedkt import (
    FedCTClassifier,
    FedKTClassifier,
    OneShotEnsembleClassifier,
    PartyUpload,
    SoftVotes,
    UploadError,
    UploadLimits,
    load_model,
    read_upload,
    save_model,
)
from skfedkt._cli._main import main
from skfedkt._deployment._upload import DEFAULT_TRUSTED_TYPES
from skfedkt.datasets import load_local_file
from skfedkt.privacy import BitFlips, PartyNoise, TeacherVotes

PARTIES = [0, 1, 2]


class Unknown:
    """A class no list trusts: loading it would run its code."""


@pytest.fixture(scope="module")
def data():
    X, y = load_breast_cancer(return_X_y=True)
    rng = np.random.RandomState(0)
    order = rng.permutation(len(y))
    X, y = X[order], y[order]
    return X[100:], y[100:], np.arange(len(y) - 100) % 3, X[:100]


def _quiet(call, *args, **kwargs):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return call(*args, **kwargs)


def _fedkt(**params):
    params = {"estimator": DecisionTreeClassifier(max_depth=3), **params}
    return FedKTClassifier(random_state=0, voting=SoftVotes(min_public_rows=0), **params)


def _uploads(clf, data, **kwargs):
    X, y, groups, X_public = data
    return [_quiet(clf.fit_party, X[groups == p], y[groups == p], party=p, classes=[0, 1],
                   X_unlabeled=X_public, **kwargs) for p in PARTIES]


@pytest.fixture(scope="module")
def fedkt_uploads(data):
    return [upload.to_bytes() for upload in _uploads(_fedkt(), data)]


def _server(uploads, data, clf=None, **kwargs):
    return _quiet((clf or _fedkt()).fit_server, uploads, data[3], **kwargs)


def _crafted(honest, manifest=None, payload=None):
    """An honest upload's bytes with its manifest or payload changed (checksum redone,
    as an attacker who writes the whole file would)."""
    upload = read_upload(honest)
    changed = PartyUpload(copy.deepcopy(upload.manifest), copy.deepcopy(upload.payload))
    if manifest:
        manifest(changed.manifest)
    if payload:
        payload(changed.payload)
    return changed.to_bytes()


def _zip(members, compression=zipfile.ZIP_STORED):
    buffer = io.BytesIO()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # duplicate names
        with zipfile.ZipFile(buffer, "w", compression) as archive:
            for member in members:
                if isinstance(member, zipfile.ZipInfo):
                    archive.writestr(member, b"{}")
                else:
                    archive.writestr(*member)
    return buffer.getvalue()


def _members(honest):
    with zipfile.ZipFile(io.BytesIO(honest)) as archive:
        return {name: archive.read(name) for name in archive.namelist()}


def _refused(uploads, data, match, field=None, **kwargs):
    with pytest.raises(UploadError, match=match) as info:
        _server(uploads, data, **kwargs)
    if field is not None:
        assert info.value.field == field
    return info.value


# --- the archive --------------------------------------------------------------------

def _manifest_twice(honest):
    members = _members(honest)
    impostor = dict(json.loads(members["manifest.json"]), party="impostor")
    return _zip([("manifest.json", members["manifest.json"]),
                 ("manifest.json", json.dumps(impostor)),
                 ("payload.skops", members["payload.skops"])])


def _with_member(name):
    def craft(honest):
        return _zip([*_members(honest).items(), (name, b"x")])
    return craft


def _renamed(old, new):
    def craft(honest):
        members = _members(honest)
        members[new] = members.pop(old)
        return _zip(members.items())
    return craft


def _encrypted(honest):
    """Every member flagged as encrypted (general purpose bit 0), as zip tools write it."""
    data = bytearray(honest)
    for signature, offset in ((b"PK\x03\x04", 6), (b"PK\x01\x02", 8)):
        start = data.find(signature)
        while start >= 0:
            data[start + offset] |= 0x1
            start = data.find(signature, start + 4)
    return bytes(data)


def _compressed_with(method):
    def craft(honest):
        return _zip(_members(honest).items(), compression=method)
    return craft


def _symlink(honest):
    members = _members(honest)
    info = zipfile.ZipInfo("payload.skops")
    info.external_attr = 0o120777 << 16
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        archive.writestr("manifest.json", members["manifest.json"])
        archive.writestr(info, members["payload.skops"])
    return buffer.getvalue()


def _manifest_bomb(honest):
    members = _members(honest)
    manifest = json.loads(members["manifest.json"])
    manifest["padding"] = " " * (4 << 20)
    return _zip([("manifest.json", json.dumps(manifest)),
                 ("payload.skops", members["payload.skops"])], zipfile.ZIP_DEFLATED)


def _deep_manifest(depth):
    def craft(honest):
        members = _members(honest)
        manifest = members["manifest.json"].decode()
        nested = "[" * depth + "]" * depth
        manifest = manifest.replace('"format"', f'"nested": {nested}, "format"', 1)
        return _zip([("manifest.json", manifest), ("payload.skops", members["payload.skops"])])
    return craft


ARCHIVES = {
    "not a zip": lambda honest: b"not an upload at all",
    "empty": lambda honest: b"",
    "truncated": lambda honest: honest[: len(honest) // 2],
    "pickle renamed as an upload": lambda honest: __import__("pickle").dumps({"a": 1}),
    "two manifests": _manifest_twice,
    "an extra member": _with_member("extra.bin"),
    "a member outside the folder": _with_member("../evil.pth"),
    "an absolute member": _with_member("/etc/evil"),
    "no payload": lambda honest: _zip([("manifest.json", _members(honest)["manifest.json"])]),
    "a directory entry": _with_member("folder/"),
    "the payload renamed": _renamed("payload.skops", "payload.pkl"),
    "an encrypted member": _encrypted,
    "bzip2 members": _compressed_with(zipfile.ZIP_BZIP2),
    "lzma members": _compressed_with(zipfile.ZIP_LZMA),
    "a symbolic link": _symlink,
    "a manifest that inflates to 4 MB": _manifest_bomb,
    "a manifest nested 100 deep": _deep_manifest(100),
    "a manifest nested 100,000 deep": _deep_manifest(100_000),
    "a manifest that is a list": lambda honest: _zip([
        ("manifest.json", "[1, 2]"), ("payload.skops", _members(honest)["payload.skops"])]),
}


@pytest.mark.parametrize("craft", ARCHIVES.values(), ids=ARCHIVES.keys())
def test_malformed_archives_are_refused_naming_the_file(fedkt_uploads, data, tmp_path,
                                                        craft):
    path = tmp_path / "party-evil.skfedkt"
    path.write_bytes(craft(fedkt_uploads[0]))
    error = _refused([str(path), *fedkt_uploads[1:]], data, "party-evil.skfedkt")
    assert error.party in (None, 0)
    # with min_parties the coordinator goes on without it
    server = _server([str(path), *fedkt_uploads[1:]], data, min_parties=2)
    assert server.parties_.tolist() == [1, 2]


def test_a_file_beyond_the_size_limit_is_refused_before_reading_it(fedkt_uploads, data):
    limits = UploadLimits(max_file_bytes=len(fedkt_uploads[0]) - 1)
    _refused(fedkt_uploads, data, "max_file_bytes", field="limits", limits=limits)


def test_a_payload_that_inflates_beyond_the_limit_stops_there(fedkt_uploads, data):
    bomb = _crafted(fedkt_uploads[0], payload=lambda p: p.update(
        padding=np.zeros(4 << 20, dtype=np.uint8)))
    assert len(bomb) < 100_000  # 4 MB of zeros deflate to a few kB
    limits = UploadLimits(max_inflated_bytes=2 << 20)
    _refused([bomb, *fedkt_uploads[1:]], data, "inflates beyond", field="limits",
             limits=limits)


def test_a_payload_of_too_many_objects_is_refused_before_skops_walks_it(fedkt_uploads,
                                                                        data):
    nested = [1]
    for _ in range(12):
        nested = [nested, nested]  # 8,000 objects in the schema
    crafted = _crafted(fedkt_uploads[0], payload=lambda p: p.update(padding=nested))
    _refused([crafted, *fedkt_uploads[1:]], data, "max_payload_nodes", field="limits",
             limits=UploadLimits(max_payload_nodes=5_000))


def test_limits_are_checked(fedkt_uploads):
    with pytest.raises(ValueError, match="max_file_bytes must be a positive integer"):
        UploadLimits(max_file_bytes=0)
    with pytest.raises(TypeError, match="limits must be an UploadLimits"):
        read_upload(fedkt_uploads[0], limits={"max_file_bytes": 10})


# --- what the payload would create ----------------------------------------------------

def _payload_with(student):
    return lambda payload: payload["students"].__setitem__(0, student)


CODE = {
    "eval in a FunctionTransformer": FunctionTransformer(eval),
    "os.system as a function": FunctionTransformer(__import__("os").system),
    "the package's own writer": FunctionTransformer(save_model),
    "a class outside the lists": FunctionTransformer(validate=Unknown()),
}


@pytest.mark.parametrize("student", CODE.values(), ids=CODE.keys())
def test_untrusted_types_are_refused_before_loading(fedkt_uploads, data, student):
    crafted = _crafted(fedkt_uploads[0], payload=_payload_with(student))
    _refused([crafted, *fedkt_uploads[1:]], data, "does not trust", field="types")


def test_a_model_file_may_not_call_the_package_s_functions(tmp_path):
    path = tmp_path / "model.skops"
    path.write_bytes(skops.io.dumps({"model": FunctionTransformer(save_model)}))
    with pytest.raises(UploadError, match="save_model"):
        load_model(path)
    assert main(["score", "--model", str(path), "--data", str(path)]) == 1
    assert sorted(p.name for p in tmp_path.iterdir()) == ["model.skops"]


def test_a_model_file_of_the_package_s_classes_loads(data, tmp_path):
    X, y, groups, X_public = data
    path = tmp_path / "model.skops"
    fitted = _quiet(_fedkt().fit, X, y, groups=groups, X_unlabeled=X_public)
    save_model(fitted, path)
    assert (load_model(path).predict(X) == fitted.predict(X)).all()


# --- native structures ----------------------------------------------------------------

def _tampered_tree(change):
    """Change the node array of the first student's tree."""
    def craft(payload):
        tree = payload["students"][0].tree_
        state = tree.__getstate__()
        nodes, values = state["nodes"].copy(), state["values"].copy()
        change(nodes, values)
        state.update(nodes=nodes, values=values)
        tree.__setstate__(state)
    return craft


def _set(field, value, node=0):
    def change(nodes, values):
        nodes[field][node] = value
    return change


def _nan_leaf(nodes, values):
    values[-1] = np.nan


TREES = {
    "a child far out of range": _set("left_child", 10**6),
    "a child pointing to itself": _set("left_child", 0),
    "a child pointing back": _set("right_child", 0, node=1),
    "a negative child": _set("right_child", -5),
    "a feature out of range": _set("feature", 5000),
    "a negative feature": _set("feature", -3),
    "a NaN threshold": _set("threshold", np.nan),
    "an infinite threshold": _set("threshold", np.inf),
    "a NaN leaf value": _nan_leaf,
}


@pytest.mark.parametrize("change", TREES.values(), ids=TREES.keys())
def test_malformed_trees_are_refused_before_they_run(fedkt_uploads, data, change):
    crafted = _crafted(fedkt_uploads[0], payload=_tampered_tree(change))
    _refused([crafted, *fedkt_uploads[1:]], data, r"Party 0 .*\['students'\]\[0\]\.tree_")


def test_a_tree_of_another_feature_count_is_refused(fedkt_uploads, data):
    X, y, _, _ = data
    other = DecisionTreeClassifier(max_depth=2).fit(X[:, :5], y)
    other.n_features_in_ = X.shape[1]  # claims the agreed width; its tree does not
    crafted = _crafted(fedkt_uploads[0], payload=_payload_with(other))
    _refused([crafted, *fedkt_uploads[1:]], data, "the tree has 5 features")


def test_a_malformed_tree_in_a_model_file_is_refused_by_score(data, tmp_path):
    X, y, groups, X_public = data
    fitted = _quiet(_fedkt().fit, X, y, groups=groups, X_unlabeled=X_public)
    _tampered_tree(_set("left_child", 0))({"students": [fitted.final_estimator_]})
    path = tmp_path / "model.skops"
    save_model(fitted, path)
    with pytest.raises(UploadError, match="model.skops.*node 0 points to children"):
        load_model(path)


@pytest.fixture(scope="module")
def hgb_uploads(data):
    # one teacher per partition: students of both classes, with trees to tamper with
    clf = _fedkt(estimator=HistGradientBoostingClassifier(max_iter=3, max_depth=2),
                 n_teachers=1)
    return clf, [upload.to_bytes() for upload in _uploads(clf, data)]


def _tampered_predictor(field, value):
    def craft(payload):
        predictor = payload["students"][0]._predictors[0][0]
        nodes = predictor.nodes.copy()
        nodes[field][0] = value
        predictor.nodes = nodes
    return craft


PREDICTORS = {
    "a child out of range": ("left", 10**6),
    "a child pointing to itself": ("right", 0),
    "a feature out of range": ("feature_idx", 4000),
    "a NaN leaf value": ("value", np.nan),
    "a NaN threshold": ("num_threshold", np.nan),
}


@pytest.mark.parametrize("field, value", PREDICTORS.values(), ids=PREDICTORS.keys())
def test_malformed_boosting_trees_are_refused(hgb_uploads, data, field, value):
    clf, uploads = hgb_uploads
    crafted = _crafted(uploads[0], payload=_tampered_predictor(field, value))
    _refused([crafted, *uploads[1:]], data, r"Party 0 .*_predictors", clf=clf)


def test_honest_boosting_uploads_are_accepted(hgb_uploads, data):
    clf, uploads = hgb_uploads
    assert _server(uploads, data, clf=clf).parties_.tolist() == PARTIES


@pytest.fixture(scope="module")
def knn_uploads(data):
    clf = OneShotEnsembleClassifier(KNeighborsClassifier(algorithm="kd_tree"),
                                    selection="all", random_state=0)
    return clf, [upload.to_bytes() for upload in _uploads(clf, data)]


def test_a_tampered_neighbour_tree_is_refused(knn_uploads, data):
    clf, uploads = knn_uploads

    def craft(payload):
        tree = payload["model"]._tree
        state = list(tree.__getstate__())
        state[1] = state[1][::-1].copy()  # idx_array: the rows' order in the tree
        tree.__setstate__(tuple(state))

    crafted = _crafted(uploads[0], payload=craft)
    _refused([crafted, *uploads[1:]], data, "neighbour tree is not the one", clf=clf)
    assert _server(uploads, data, clf=clf).parties_.tolist() == PARTIES


def test_xgboost_end_to_end_through_files(data):
    xgboost = pytest.importorskip("xgboost")
    X, y, groups, X_public = data
    clf = FedKTClassifier(xgboost.XGBClassifier(n_estimators=3, max_depth=2),
                          random_state=0, voting=SoftVotes(min_public_rows=0))
    uploads = [upload.to_bytes() for upload in _uploads(clf, data)]
    server = _server(uploads, data, clf=clf)
    fitted = _quiet(FedKTClassifier(xgboost.XGBClassifier(n_estimators=3, max_depth=2),
                                    random_state=0, voting=SoftVotes(min_public_rows=0)).fit,
                    X, y, groups=groups, X_unlabeled=X_public)
    assert (server.predict(X) == fitted.predict(X)).all()

    def craft(payload):
        booster = payload["students"][0].get_booster()
        model = json.loads(booster.save_raw("json"))
        tree = model["learner"]["gradient_booster"]["model"]["trees"][0]
        tree["split_indices"][0] = 4000
        booster.load_model(bytearray(json.dumps(model).encode()))

    with pytest.raises(UploadError, match="Party 0"):
        _server([_crafted(uploads[0], payload=craft), *uploads[1:]], data, clf=clf)


# --- what the payload's schema asks skops to build -----------------------------------

def _schema_crafted(honest, change, compression=zipfile.ZIP_DEFLATED):
    """An honest upload with its payload's skops schema changed by `change` (which may
    also change payload members), the checksum redone."""
    members = _members(honest)
    payload = _members(members["payload.skops"])
    schema = json.loads(payload["schema.json"])
    change(schema, payload)
    payload["schema.json"] = json.dumps(schema).encode()
    payload_bytes = _zip(list(payload.items()), compression)
    manifest = json.loads(members["manifest.json"])
    manifest["payload_sha256"] = hashlib.sha256(payload_bytes).hexdigest()
    return _zip([("manifest.json", json.dumps(manifest)), ("payload.skops", payload_bytes)])


def _json_node(value):
    return {"__class__": type(value).__name__, "__module__": "builtins",
            "__loader__": "JsonNode", "content": json.dumps(value), "is_json": True,
            "__id__": id(value)}


def _called(type_name, loader, arguments):
    """A node asking skops' `loader` to call `type_name` with `arguments`."""
    module, _, name = type_name.rpartition(".")
    arguments = {"__class__": "tuple", "__module__": "builtins", "__loader__": "TupleNode",
                 "content": [_json_node(a) for a in arguments], "__id__": 1}
    if loader == "ConstructorFromReduceNode":  # skops reads the arguments as the content
        return {"__class__": name, "__module__": module, "__loader__": loader,
                "content": arguments, "__id__": 3}
    return {"__class__": name, "__module__": module, "__loader__": loader,
            "__reduce__": {"args": arguments},
            "content": {"__class__": "dict", "__module__": "builtins",
                        "__loader__": "DictNode", "content": {}, "__id__": 2},
            "__id__": 3}


def _with_entry(node):
    """A schema change that adds `node` to the payload's dict as the key "extra"."""
    def add(schema, payload):
        schema["content"]["extra"] = node
        key_types = schema["key_types"]["content"]
        key_types.append(key_types[0])
    return add


def _first(schema, type_name):
    """The first node of `type_name` in a schema."""
    stack = [schema]
    while stack:
        node = stack.pop(0)
        if isinstance(node, dict):
            if f"{node.get('__module__')}.{node.get('__class__')}" == type_name:
                return node
            stack.extend(node.values())
        elif isinstance(node, list):
            stack.extend(node)
    raise AssertionError(f"no {type_name} in the schema")


@pytest.fixture(scope="module")
def xgboost_uploads(data):
    xgboost = pytest.importorskip("xgboost")
    clf = FedKTClassifier(xgboost.XGBClassifier(n_estimators=3, max_depth=2),
                          random_state=0, voting=SoftVotes(min_public_rows=0))
    return clf, [upload.to_bytes() for upload in _uploads(clf, data)]


def test_a_booster_may_not_load_a_file_of_the_server_s_disk(xgboost_uploads, data,
                                                             tmp_path):
    clf, uploads = xgboost_uploads
    secret = tmp_path / "the-server-s-own-model.json"
    read_upload(uploads[1]).payload["students"][0].get_booster().save_model(secret)

    def construct(schema, payload):  # Booster(None, None, "<a path on the server>")
        booster = _first(schema, "xgboost.core.Booster")
        booster.clear()
        booster.update(_called("xgboost.core.Booster", "ConstructorFromReduceNode",
                               [None, None, str(secret)]))

    crafted = _schema_crafted(uploads[0], construct)
    # what the file asks for works: skops alone loads the server's file as the student
    crafted_payload = _members(crafted)["payload.skops"]
    loaded = skops.io.loads(crafted_payload,
                            trusted=skops.io.get_untrusted_types(data=crafted_payload))
    assert loaded["students"][0].get_booster().save_raw("json") == secret.read_bytes()
    with pytest.raises(UploadError, match=r"Party 0 .*builds xgboost\.core\.Booster with skops' "
                       "ConstructorFromReduceNode"):
        read_upload(crafted)
    _refused([crafted, *uploads[1:]], data, "arguments the file chose", clf=clf)


@pytest.mark.parametrize("loader", ["ReduceNode", "LossNode", "ConstructorFromReduceNode",
                                    "TreeNode"])
@pytest.mark.parametrize("type_name", sorted(DEFAULT_TRUSTED_TYPES))
def test_no_type_trusted_by_default_is_called_with_the_file_s_arguments(
        fedkt_uploads, type_name, loader):
    crafted = _schema_crafted(fedkt_uploads[0], _with_entry(_called(type_name, loader, [1])))
    with pytest.raises(UploadError, match=(
            rf"Party 0 .*(builds|call|arguments of) {re.escape(type_name)}")):
        read_upload(crafted)


def test_a_type_the_operator_trusts_may_be_called(fedkt_uploads):
    crafted = _schema_crafted(fedkt_uploads[0], _with_entry(
        _called("datetime.timedelta", "ConstructorFromReduceNode", [1])))
    with pytest.raises(UploadError, match="call datetime.timedelta with arguments"):
        read_upload(crafted)
    assert read_upload(crafted, trusted=["datetime.timedelta"]).payload["extra"].days == 1


def test_a_loss_is_called_with_numbers_only(fedkt_uploads):
    from skfedkt._deployment._schema import _losses

    # the name skops gives it with this scikit-learn build
    (pinball,) = [name for name in _losses() if name.endswith(".CyPinballLoss")]
    crafted = _schema_crafted(fedkt_uploads[0], _with_entry(
        _called(pinball, "LossNode", ["/etc/passwd"])))
    with pytest.raises(UploadError, match="arguments of .*CyPinballLoss are not numbers"):
        read_upload(crafted)


def test_a_tree_of_more_outputs_than_class_counts_is_refused(fedkt_uploads):
    def more_outputs(schema, payload):
        _first(schema, "sklearn.tree._tree.Tree")["__reduce__"]["args"]["content"][2] = (
            _json_node(50))

    with pytest.raises(UploadError, match=r"Party 0 .*tree of 50 outputs from class "
                       r"counts of shape \(1,\)"):
        read_upload(_schema_crafted(fedkt_uploads[0], more_outputs))


def test_a_booster_is_only_its_bytes(xgboost_uploads):
    _, uploads = xgboost_uploads

    def with_an_object(schema, payload):
        state = _first(schema, "xgboost.core.Booster")["content"]["content"]
        state["extra"] = _called("sklearn.tree._classes.DecisionTreeClassifier",
                                 "ObjectNode", [])

    with pytest.raises(UploadError, match="Party 0 .*Booster is not its model's bytes"):
        read_upload(_schema_crafted(uploads[0], with_an_object))


def _flooded(honest, n_references, codes_too=False):
    """One student (and, with `codes_too`, one codes array) repeated `n_references`
    times by skops reference nodes: a few hundred kB that inflate to tens of MB."""
    def flood(schema, payload):
        for key in ("students", "codes") if codes_too else ("students",):
            listed = schema["content"][key]["content"]
            first = listed[0]
            listed += [{"__class__": first["__class__"], "__module__": first["__module__"],
                        "__loader__": "CachedNode", "__id__": first["__id__"]}
                       for _ in range(n_references)]
    return _schema_crafted(honest, flood)


def _deeply_nested(honest, depth):
    """A schema node nesting lists `depth` deep, written as text (json.dumps would
    refuse it)."""
    members = _members(honest)
    payload = _members(members["payload.skops"])
    schema = payload["schema.json"].decode()
    payload["schema.json"] = (schema[:-1] + ', "nested": ' + "[" * depth + "]" * depth
                              + "}").encode()
    payload_bytes = _zip(list(payload.items()), zipfile.ZIP_DEFLATED)
    manifest = json.loads(members["manifest.json"])
    manifest["payload_sha256"] = hashlib.sha256(payload_bytes).hexdigest()
    return _zip([("manifest.json", json.dumps(manifest)), ("payload.skops", payload_bytes)])


def _long_string(honest, n_mib):
    """A schema whose first student's class name is `n_mib` MiB long."""
    def lengthen(schema, payload):
        schema["content"]["students"]["content"][0]["__class__"] = "A" * (n_mib * 2**20)
    return _schema_crafted(honest, lengthen)


def _many_members(honest, n_members):
    """An honest payload beside `n_members` empty members: a directory that costs
    about 600 bytes a member once read."""
    def add(schema, payload):
        payload.update({f"{index}.npy": b"" for index in range(n_members)})
    return _schema_crafted(honest, add, zipfile.ZIP_STORED)


def _peak_memory_mib(*paths):
    """The peak memory, in MiB, of a fresh process after it has read each upload of
    `paths` in turn."""
    code = ("import resource, sys\n"
            "from skfedkt import read_upload\n"
            "for path in sys.argv[1:]:\n"
            "    try:\n        read_upload(path)\n    except Exception:\n        pass\n"
            "    print(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)")
    result = subprocess.run([sys.executable, "-c", code, *map(str, paths)], check=True,
                            capture_output=True, text=True)
    return [int(line) / 1024 for line in result.stdout.split()]


def _with_junk(honest, n_mib):
    """An honest upload whose payload also holds a member of `n_mib` MiB of zeros that
    no object refers to (about a thousandth of that once deflated), written in chunks."""
    members = _members(honest)
    payload = io.BytesIO()
    with zipfile.ZipFile(payload, "w", zipfile.ZIP_DEFLATED) as archive:
        for name, content in _members(members["payload.skops"]).items():
            archive.writestr(name, content)
        with archive.open("junk.bin", "w", force_zip64=True) as junk:
            for _ in range(n_mib):
                junk.write(bytes(2**20))
    manifest = json.loads(members["manifest.json"])
    manifest["payload_sha256"] = hashlib.sha256(payload.getvalue()).hexdigest()
    return _zip([("manifest.json", json.dumps(manifest)),
                 ("payload.skops", payload.getvalue())])


def _with_array(honest, n_mib, *, random, compression):
    """An honest upload whose first tree's values array is `n_mib` MiB: zeros (which
    deflate to almost nothing) or random numbers (which do not)."""
    def bloat(schema, payload):
        values = _first(schema, "sklearn.tree._tree.Tree")["content"]["content"]["values"]
        array = io.BytesIO()
        n_values = n_mib * 2**20 // 8
        np.save(array, np.random.RandomState(0).rand(n_values) if random
                else np.zeros(n_values))
        payload[values["file"]] = array.getvalue()
    return _schema_crafted(honest, bloat, compression)


def test_size_attacks_are_refused_within_256_mib_of_an_honest_read(fedkt_uploads,
                                                                   tmp_path):
    limits = UploadLimits()
    attacks = {
        # one student referenced 50,000 times: a schema within its cap, refused
        # before skops walks it
        "flooded": (_flooded(fedkt_uploads[0], 50_000), "repeats an object by reference"),
        # a student and a codes array, 300,000 times each: a schema of 86 MB
        "flooded twice": (_flooded(fedkt_uploads[0], 300_000, codes_too=True),
                          "'schema.json' inflates beyond .*max_schema_bytes"),
        "deeply nested": (_deeply_nested(fedkt_uploads[0], 2_000_000),
                          "schema nests too deeply"),
        "a long string": (_long_string(fedkt_uploads[0], 15), "does not trust: .{0,120}…'\\]"),
        "many members": (_many_members(fedkt_uploads[0], 400_000),
                         "lists 400[0-9]* members, more than max_members"),
        # a member no object refers to, under the inflated cap
        "junk": (_with_junk(fedkt_uploads[0], 64),
                 "members no object of its schema refers to \\('junk.bin'\\)"),
        # a referenced array at the inflated cap, from a file of a few hundred kB
        "zeros": (_with_array(fedkt_uploads[0], limits.max_inflated_bytes // 2**20 - 1,
                              random=False, compression=zipfile.ZIP_DEFLATED),
                  "unreadable payload"),
        # a referenced array that fills a stored file to its cap
        "random": (_with_array(fedkt_uploads[0], limits.max_file_bytes // 2**20 - 1,
                               random=True, compression=zipfile.ZIP_STORED),
                   "unreadable payload"),
    }
    paths = []
    for name, (upload, refusal) in attacks.items():
        paths.append(tmp_path / f"{name}.skfedkt")
        paths[-1].write_bytes(upload)
        with pytest.raises(UploadError, match=f"Party 0 .*{refusal}"):
            read_upload(paths[-1])
    assert len(attacks["flooded"][0]) < 10 * 2**20
    honest = tmp_path / "honest.skfedkt"
    honest.write_bytes(fedkt_uploads[0])
    after_honest, *_, after_attacks = _peak_memory_mib(honest, *paths)
    assert after_attacks - after_honest < 256


def _padded(honest, n_bytes):
    """An honest upload with `n_bytes` of random bytes, which do not deflate, in a
    member of its payload that no object refers to."""
    def pad(schema, payload):
        payload["padding.bin"] = np.random.RandomState(0).bytes(n_bytes)
    return _schema_crafted(honest, pad, zipfile.ZIP_STORED)


def test_caps_from_the_agreement_refuse_a_file_ten_times_an_honest_one(fedkt_uploads,
                                                                        data):
    limits = _fedkt().agreed_upload_limits(data[3], classes=[0, 1])
    assert limits.max_file_bytes < UploadLimits().max_file_bytes
    assert "FedKT's agreement for a party of 100 rows" in limits.derivation
    # every honest upload passes, and gives the model the defaults give
    served = _server(fedkt_uploads, data, limits=limits)
    assert_array_equal(served.predict_proba(data[0]),
                       _server(fedkt_uploads, data).predict_proba(data[0]))
    honest = max(len(upload) for upload in fedkt_uploads)
    for attack, cap in ((_padded(fedkt_uploads[0], 9 * honest), "max_file_bytes"),
                        (_with_junk(fedkt_uploads[0], -(-10 * honest // 2**20)),
                         "max_inflated_bytes")):
        assert len(attack) < UploadLimits().max_file_bytes  # the defaults would read it
        refusal = _refused([attack, *fedkt_uploads[1:]], data, f"(Party 0 |upload 0:).*{cap}",
                           field="limits", limits=limits)
        assert "4 x the largest honest file of FedKT's agreement" in str(refusal)


# --- what the manifest and payload claim ---------------------------------------------

def _manifest_set(key, value):
    return lambda manifest: manifest.__setitem__(key, value)


MANIFESTS = {
    "negative class counts": ("class_counts", _manifest_set("class_counts", [-500, 600])),
    "class counts off their rows": ("class_counts", _manifest_set("class_counts", [1, 1])),
    "class counts of three classes": ("class_counts",
                                      _manifest_set("class_counts", [1, 1, 1])),
    "fractional class counts": ("class_counts", _manifest_set("class_counts", [0.5, 1.5])),
    "text class counts": ("class_counts", _manifest_set("class_counts", "many")),
    "n_rows -5": ("n_rows", _manifest_set("n_rows", -5)),
    "n_rows 0": ("n_rows", _manifest_set("n_rows", 0)),
    "n_rows 1.5": ("n_rows", _manifest_set("n_rows", 1.5)),
    "n_rows 1e30": ("n_rows", _manifest_set("n_rows", 1e30)),
    "n_rows as text": ("n_rows", _manifest_set("n_rows", "150")),
    "n_rows true": ("n_rows", _manifest_set("n_rows", True)),
    "NaN class shares": ("student_class_shares",
                         _manifest_set("student_class_shares", [[np.nan, 1], [0, 1]])),
    "class shares above one": ("student_class_shares",
                               _manifest_set("student_class_shares", [[2, 0], [0, 1]])),
    "class shares of one student": ("student_class_shares",
                                    _manifest_set("student_class_shares", [[0.5, 0.5]])),
    "fewer queries": ("n_queries", _manifest_set("n_queries", 3)),
    "teachers its rows do not give": ("n_teachers", _manifest_set("n_teachers", 4)),
    "no teachers": ("n_teachers", _manifest_set("n_teachers", 0)),
    "teachers as text": ("n_teachers", _manifest_set("n_teachers", "auto")),
    "a guarantee at L0": ("privacy", _manifest_set("privacy", {"epsilon": 0.1})),
    "a party name that is an object": ("party", _manifest_set("party", {"a": 1})),
    "a party name that is a list": ("party", _manifest_set("party", [0])),
}


@pytest.mark.parametrize("field, change", MANIFESTS.values(), ids=MANIFESTS.keys())
def test_false_manifest_fields_are_refused_naming_the_field(fedkt_uploads, data, field,
                                                            change):
    crafted = _crafted(fedkt_uploads[0], manifest=change)
    error = _refused([crafted, *fedkt_uploads[1:]], data, field)
    assert error.field == field


def _students(change):
    return lambda payload: change(payload["students"], payload["codes"])


def _other_classes_student(students, codes):
    codes[0] = np.array([0, 1, 2])


PAYLOADS = {
    "three students where two were agreed": _students(
        lambda s, c: (s.append(s[0]), c.append(c[0]))),
    "one student": _students(lambda s, c: (s.pop(), c.pop())),
    "codes outside the classes": _students(
        lambda s, c: c.__setitem__(0, np.array([0, 7]))),
    "unsorted codes": _students(lambda s, c: c.__setitem__(0, np.array([1, 0]))),
    "codes of three classes": _students(_other_classes_student),
    "codes that are text": _students(lambda s, c: c.__setitem__(0, np.array(["a", "b"]))),
    "a student that is not a model": _students(lambda s, c: s.__setitem__(0, [1, 2, 3])),
    "a student of fewer features": _students(lambda s, c: s.__setitem__(
        0, DecisionTreeClassifier().fit(np.eye(2), [0, 1]))),
    "no students": lambda payload: payload.pop("students"),
}


@pytest.mark.parametrize("change", PAYLOADS.values(), ids=PAYLOADS.keys())
def test_false_payloads_are_refused_naming_the_party(fedkt_uploads, data, change):
    crafted = _crafted(fedkt_uploads[0], payload=change)
    error = _refused([crafted, *fedkt_uploads[1:]], data, "Party 0")
    assert error.party == 0 and error.field.startswith(("students", "codes"))


@pytest.fixture(scope="module")
def l2_uploads(data):
    clf = _fedkt(privacy=PartyNoise(gamma=0.5, query_fraction=0.5))
    return clf, [upload.to_bytes() for upload in _uploads(clf, data)]


@pytest.mark.parametrize("privacy", [
    None, {"epsilon": -1.0}, {"epsilon": 1e-9, "data_independent_epsilon": 1e-9},
    "private",
], ids=["missing", "negative", "a smaller bound", "text"])
def test_a_false_party_guarantee_at_l2_is_refused(l2_uploads, data, privacy):
    clf, uploads = l2_uploads
    crafted = _crafted(uploads[0], manifest=_manifest_set("privacy", privacy))
    error = _refused([crafted, *uploads[1:]], data, "privacy", clf=clf)
    assert error.field.startswith("privacy")
    assert _server(uploads, data, clf=clf).epsilon_ > 0


def test_l2_class_counts_come_exactly_where_the_votes_release_them(l2_uploads, data):
    clf, uploads = l2_uploads
    # soft votes: each party releases noisy counts; one that withholds them is refused
    crafted = _crafted(uploads[0], manifest=_manifest_set("class_counts", None))
    assert _refused([crafted, *uploads[1:]], data, "class_counts", clf=clf).party == 0
    # without a count release, counts sent anyway would go out unprotected: refused
    quiet = clone(clf).set_params(privacy__counts_gamma=None)
    quiet_uploads = [upload.to_bytes() for upload in _uploads(quiet, data)]
    crafted = _crafted(quiet_uploads[0], manifest=lambda manifest: manifest.__setitem__(
        "class_counts", [manifest["n_rows"], 0]))
    error = _refused([crafted, *quiet_uploads[1:]], data, "class_counts", clf=quiet)
    assert "no noise covers them" in str(error)


@pytest.fixture(scope="module")
def oneshot_uploads(data):
    clf = OneShotEnsembleClassifier(DecisionTreeClassifier(max_depth=3), selection="cv",
                                    random_state=0)
    return clf, [upload.to_bytes() for upload in _uploads(clf, data)]


@pytest.mark.parametrize("score", [1e9, np.inf, np.nan, "high"])
def test_one_shot_scores_out_of_range_are_refused(oneshot_uploads, data, score):
    clf, uploads = oneshot_uploads
    crafted = _crafted(uploads[0], manifest=_manifest_set("score", score))
    _refused([crafted, *uploads[1:]], data, "score", field="score", clf=clf)


def test_one_shot_model_without_codes_is_refused(oneshot_uploads, data):
    clf, uploads = oneshot_uploads
    crafted = _crafted(uploads[0], payload=lambda p: p.update(codes=None))
    _refused([crafted, *uploads[1:]], data, "model", clf=clf)


@pytest.fixture(scope="module")
def fedct_round(data):
    clf = FedCTClassifier(DecisionTreeClassifier(max_depth=3), n_rounds=2, random_state=0)
    uploads = [upload.to_bytes() for upload in _uploads(clf, data)]
    message = _quiet(clf.server_round, uploads, data[3])
    return clf, uploads, message.to_bytes()


def _sums(change):
    """A change of an upload's sums (what it sends in the sum, in the clear without
    secure aggregation)."""
    return lambda payload: change(payload["sums"])


FEDCT_LABELS = {
    "a count beyond one": (_sums(lambda s: s["label_counts"].__setitem__((0, 0), 2)),
                           "sums.label_counts: a value of magnitude 2, beyond the bound 1"),
    "labels of fewer rows": (_sums(lambda s: s.update(label_counts=s["label_counts"][:-1])),
                             "sums: its sums are not the names, shapes and kinds"),
    "labels that are floats": (_sums(lambda s: s.update(
        label_counts=s["label_counts"] + 0.5)), "sums.label_counts: not an array of "
                                                "integers"),
    "two labels on one row": (_sums(lambda s: s["label_counts"].__setitem__(0, 1)),
                              "sums.label_counts: rows that are not one-hot"),
    "a negative count": (_sums(lambda s: s["label_counts"].__setitem__((0, 0), -1)),
                         "sums.label_counts: rows that are not one-hot"),
    "labels that are a list": (_sums(lambda s: s.update(
        label_counts=s["label_counts"].tolist())), "sums.label_counts: not an array of "
                                                   "integers"),
    "a model before the end": (lambda p: p.update(
        model=DecisionTreeClassifier().fit(np.eye(2, 30), [0, 1]), codes=np.array([0, 1])),
        "model: a model before the server's message said done"),
}


@pytest.mark.parametrize("change, match", FEDCT_LABELS.values(), ids=FEDCT_LABELS.keys())
def test_false_fedct_labels_are_refused(fedct_round, data, change, match):
    clf, uploads, _ = fedct_round
    crafted = _crafted(uploads[0], payload=change)
    with pytest.raises(UploadError, match=f"Party 0 .*refused: {match}"):
        _quiet(clf.server_round, [crafted, *uploads[1:]], data[3])


@pytest.fixture(scope="module")
def fedct_teacher_round(data):
    clf = FedCTClassifier(DecisionTreeClassifier(max_depth=3), n_rounds=2,
                          privacy=TeacherVotes(4.0, n_teachers=3, n_queries=20),
                          random_state=0)
    return clf, [upload.to_bytes() for upload in _uploads(clf, data)]


FEDCT_VOTE_COUNTS = {
    # one party's huge counts would outvote every other party's
    "counts beyond any plausible noise": (
        _sums(lambda s: s["vote_counts"].__setitem__((0, 0), 1e9)),
        "sums.vote_counts: a value of magnitude 1e\\+09, beyond the bound"),
    "counts of fewer queries": (_sums(lambda s: s.update(vote_counts=s["vote_counts"][:-1])),
                                "sums: its sums are not the names"),
    "counts that are not finite": (
        _sums(lambda s: s["vote_counts"].__setitem__((0, 1), np.nan)),
        "sums.vote_counts: values must be finite"),
    "counts that are integers": (_sums(lambda s: s.update(
        vote_counts=s["vote_counts"].astype(np.int64))), "sums.vote_counts: not an array "
                                                         "of floats"),
    "no counts": (_sums(lambda s: s.pop("vote_counts")), "sums: its sums are not the names"),
    "labels instead of counts": (_sums(lambda s: s.update(
        label_counts=np.zeros((100, 2), dtype=np.int64), vote_counts=None) or s.pop(
            "vote_counts")), "sums: its sums are not the names"),
}


@pytest.mark.parametrize("change, match", FEDCT_VOTE_COUNTS.values(),
                         ids=FEDCT_VOTE_COUNTS.keys())
def test_false_teacher_vote_counts_are_refused(fedct_teacher_round, data, change, match):
    clf, uploads = fedct_teacher_round
    crafted = _crafted(uploads[0], payload=change)
    with pytest.raises(UploadError, match=f"Party 0 .*refused: {match}"):
        _quiet(clf.server_round, [crafted, *uploads[1:]], data[3])


def test_labels_of_a_round_the_server_does_not_vote_on_are_refused(data):
    # with n_rounds=0 the server votes on no round: labels sent anyway would be released
    # outside the accounting
    clf = FedCTClassifier(DecisionTreeClassifier(max_depth=3), n_rounds=0,
                          privacy=BitFlips(1.0), random_state=0)
    uploads = [upload.to_bytes() for upload in _uploads(clf, data)]
    crafted = _crafted(uploads[0], payload=_sums(lambda s: s.update(
        label_counts=np.zeros((100, 2), dtype=np.int64))))
    with pytest.raises(UploadError, match="Party 0 .*refused: sums: its sums are not the "
                       "names, shapes and kinds of most parties'"):
        _quiet(clf.server_round, [crafted, *uploads[1:]], data[3])


def test_a_false_training_accuracy_is_refused(fedct_round, data):
    clf, uploads, _ = fedct_round
    crafted = _crafted(uploads[0], payload=_sums(
        lambda s: s.update(training_accuracy=np.array([7.0]))))
    with pytest.raises(UploadError, match="sums.training_accuracy: a value of magnitude 7"):
        _quiet(clf.server_round, [crafted, *uploads[1:]], data[3])


FEDCT_MESSAGES = {
    "a consensus outside the classes": ("consensus", None,
                                        lambda p: p["consensus"].__setitem__(0, 5)),
    "a consensus of fewer rows": ("consensus", None,
                                  lambda p: p.update(consensus=p["consensus"][:3])),
    "a round beyond n_rounds": ("round", _manifest_set("round", 99), None),
    "done as text": ("done", _manifest_set("done", "yes"), None),
    "a history that is not a list": ("history", _manifest_set("history", "none"), None),
}


@pytest.mark.parametrize("field, manifest, payload", FEDCT_MESSAGES.values(),
                         ids=FEDCT_MESSAGES.keys())
def test_a_party_refuses_a_forged_server_message(fedct_round, data, field, manifest,
                                                 payload):
    clf, _, message = fedct_round
    forged = _crafted(message, manifest=manifest, payload=payload)
    X, y, groups, X_public = data
    with pytest.raises(UploadError, match=f"'server'.*{field}") as info:
        _quiet(clf.fit_party, X[groups == 0], y[groups == 0], party=0, classes=[0, 1],
               X_unlabeled=X_public, message=forged)
    assert info.value.field == field


# --- who sent what --------------------------------------------------------------------

def test_an_impostor_under_a_real_party_s_name_leaves_both_out(fedkt_uploads, data,
                                                               tmp_path):
    real, impostor = tmp_path / "real.skfedkt", tmp_path / "impostor.skfedkt"
    real.write_bytes(fedkt_uploads[0])
    # party 1's honest upload under party 0's name: nothing tells which one is real
    impostor.write_bytes(_crafted(fedkt_uploads[1], manifest=_manifest_set("party", 0)))
    for order in ([impostor, real], [real, impostor]):
        sources = [str(p) for p in order] + fedkt_uploads[1:]
        with pytest.raises(UploadError, match="Party 0 sent 2 uploads .*impostor.skfedkt"):
            _server(sources, data)
        with pytest.raises(UploadError, match="Party 0 sent 2 uploads .*real.skfedkt"):
            _server(sources, data)
        assert _server(sources, data, min_parties=2).parties_.tolist() == [1, 2]


# --- the command line ---------------------------------------------------------------

@pytest.fixture(scope="module")
def files(tmp_path_factory, fedkt_uploads):
    folder = tmp_path_factory.mktemp("consortium")
    assert main(["split", "breast_cancer", "--parties", "3", "--out-dir", str(folder)]) == 0
    return folder


def _cli(argv, capsys):
    status = _quiet(main, [str(a) for a in argv])
    return status, capsys.readouterr().err


@pytest.mark.parametrize("command, out", [
    ("party", "party-0.csv"), ("party", "public.csv"), ("server", "public.csv"),
    ("server", "upload.skfedkt"),
])
def test_the_command_line_never_overwrites_its_inputs(files, tmp_path, capsys, command,
                                                      out):
    shared = ["fedkt", "--estimator", "dt", "--public", files / "public.csv"]
    upload = tmp_path / "upload.skfedkt"
    status, err = _cli(["party", *shared, "--data", files / "party-0.csv", "--name", "a",
                        "--classes", 0, 1, "--out", upload], capsys)
    assert status == 0, err
    target = upload if out == "upload.skfedkt" else files / out
    before = target.read_bytes()
    argv = (["party", *shared, "--data", files / "party-0.csv", "--name", "a", "--classes",
             0, 1, "--out", target] if command == "party" else
            ["server", *shared, "--out", target, upload])
    status, err = _cli(argv, capsys)
    assert status == 1 and "is one of this command's inputs" in err
    assert target.read_bytes() == before


def test_a_failed_write_leaves_no_partial_file(fedkt_uploads, tmp_path, monkeypatch):
    upload = read_upload(fedkt_uploads[0])
    target = tmp_path / "upload.skfedkt"

    def fail(*args, **kwargs):
        raise OSError("disk full")

    monkeypatch.setattr("os.replace", fail)
    with pytest.raises(OSError, match="disk full"):
        upload.save(target)
    assert list(tmp_path.iterdir()) == []


def test_a_data_file_that_is_not_text_is_named(files, tmp_path, capsys):
    binary = tmp_path / "party.csv"
    binary.write_bytes(b"\xff\xfe,\x00\x81\n" * 10)
    status, err = _cli(["party", "fedkt", "--estimator", "dt", "--public",
                        files / "public.csv", "--data", binary, "--name", "a",
                        "--classes", 0, 1, "--out", tmp_path / "u"], capsys)
    assert status == 1 and str(binary) in err
    assert not (tmp_path / "u").exists()


def test_the_command_line_s_size_limit(data, files, tmp_path, capsys):
    X, y, groups, X_public = data
    path = tmp_path / "model.skops"
    save_model(_quiet(_fedkt().fit, X, y, groups=groups, X_unlabeled=X_public), path)
    status, err = _cli(["score", "--model", path, "--data", files / "test.csv",
                        "--max-upload-mb", "0.001"], capsys)
    assert status == 1 and "max_file_bytes=1048" in err and "--max-upload-mb" in err
    status, err = _cli(["score", "--model", path, "--data", files / "test.csv"], capsys)
    assert status == 0, err


@pytest.mark.parametrize("factor", [3, 1000])
def test_a_party_that_inflates_its_counts_weighs_at_most_the_bound(data, factor):
    # 1000 times: past twenty times the median party; 3 times: past the other parties
    # together, which in a small consortium binds first
    from skfedkt._engine._voting import MAX_PARTY_WEIGHT
    from skfedkt._fedkt._plan import FedKTPlan

    from skfedkt._fedkt._sums import SUMS

    clf = _fedkt()
    uploads = _uploads(clf, data)
    liar = uploads[0].manifest
    counts = [c * factor for c in liar["class_counts"]]
    # a liar keeps its manifest consistent: the teachers its claimed rows would give,
    # and the sums of that many rows (every sum weighted by rows grows with them)
    teachers = FedKTPlan.of(clf).teachers_for(sum(counts))
    liar.update(class_counts=counts, n_rows=sum(counts), n_teachers=teachers)
    sums = uploads[0].payload["sums"]
    for field in SUMS:
        if field.weighted:
            sums[field.name] = sums[field.name] * factor
    with pytest.warns(UserWarning, match=r"Parties claim more rows than 20 times the median "
                                         r"party .*\(party 0: \d+ rows\): the fit went on"):
        server = clf.fit_server([u.to_bytes() for u in uploads], data[3])
    totals = np.array([sum(u.manifest["class_counts"]) for u in uploads], dtype=float)
    totals[0] = min(totals[0], MAX_PARTY_WEIGHT * np.median(totals), totals[1:].sum())
    assert totals[0] == totals[1:].sum()
    shares = np.array([u.manifest["class_counts"] for u in uploads], dtype=float)
    shares /= shares.sum(axis=1, keepdims=True)
    expected = (shares * totals[:, None]).sum(axis=0)
    np.testing.assert_allclose(server.class_shares_["training"], expected / expected.sum())


INCONSISTENT_SUMS = {
    "counts other than the manifest's": lambda s: s["class_counts"].__setitem__(0, 1.0),
    "evidence that is not its probabilities'": lambda s: s["evidence"].__setitem__(
        (0, 0), s["evidence"][0, 0] + 1),
    "a class weight off its counts": lambda s: s.update(class_weight=s["class_weight"] / 2),
}


@pytest.mark.parametrize("change", INCONSISTENT_SUMS.values(), ids=INCONSISTENT_SUMS.keys())
def test_sums_that_do_not_hang_together_are_refused(fedkt_uploads, data, change):
    # each sum within its bound, but not what an honest party of that manifest computes
    crafted = _crafted(fedkt_uploads[0], payload=lambda p: change(p["sums"]))
    _refused([crafted, *fedkt_uploads[1:]], data, "Party 0 .*refused: sums: its "
             "(summed class_counts are not its manifest's|.* are not the prior-corrected "
             "terms of its proba and class_counts)", field="sums")


def test_xgboost_through_the_command_line(files, tmp_path, capsys):
    pytest.importorskip("xgboost")
    shared = ["fedkt", "--estimator", "xgb", "--teachers", "1", "--public",
              files / "public.csv"]
    uploads = [tmp_path / f"upload-{p}.skfedkt" for p in PARTIES]
    for p, upload in zip(PARTIES, uploads):
        status, err = _cli(["party", *shared, "--data", files / f"party-{p}.csv", "--name",
                            f"h{p}", "--classes", 0, 1, "--out", upload], capsys)
        assert status == 0, err
    model = tmp_path / "model.skops"
    status, err = _cli(["server", *shared, "--out", model, *uploads], capsys)
    assert status == 0, err
    status, err = _cli(["score", "--model", model, "--data", files / "test.csv"], capsys)
    assert status == 0, err


@pytest.mark.parametrize("attribute, value", [
    ("_n_support", np.array([1000, 1000], dtype=np.int32)),
    ("_dual_coef_", np.full((1, 3), np.nan)),
])
def test_a_malformed_support_vector_machine_is_refused(data, attribute, value):
    from sklearn.svm import SVC

    X, y, _, X_public = data
    clf = OneShotEnsembleClassifier(SVC(), selection="all", random_state=0)
    uploads = [upload.to_bytes() for upload in _uploads(clf, data)]

    def craft(payload):
        setattr(payload["model"], attribute, value)

    crafted = _crafted(uploads[0], payload=craft)
    _refused([crafted, *uploads[1:]], data, r"Party 0 .*\['model'\]", clf=clf)
    assert _server(uploads, data, clf=clf).parties_.tolist() == PARTIES


@pytest.mark.parametrize("out, message", [
    ("no/such/folder/model.skops", "the folder .*no/such/folder does not exist"),
    ("public.csv/upload.skfedkt", "the folder .*public.csv is a file, not a folder"),
])
def test_an_output_path_that_cannot_be_written_is_named(files, tmp_path, capsys, out,
                                                        message, monkeypatch):
    # the user's path and what is wrong with it, not the temporary file's name
    monkeypatch.chdir(files)
    shared = ["fedkt", "--estimator", "dt", "--public", "public.csv"]
    upload = tmp_path / "upload.skfedkt"
    status, err = _cli(["party", *shared, "--data", "party-0.csv", "--name", "a",
                        "--classes", 0, 1, "--out", upload], capsys)
    assert status == 0, err
    for argv in (["server", *shared, "--out", out, upload],
                 ["party", *shared, "--data", "party-0.csv", "--name", "a", "--classes", 0,
                  1, "--out", out]):
        status, err = _cli(argv, capsys)
        assert status == 1
        assert f"cannot write {out}" in err and ".part" not in err
        assert re.search(message, err), err


def test_a_stray_text_cell_in_a_numeric_column_is_named_not_coded(tmp_path):
    # coded, the column would become ranks in string order: 1, 3, 0, 2 ("10" < "2")
    path = tmp_path / "data.csv"
    path.write_text("1,2,0\n4,abc,1\n5,10,0\n6,9,1\n")
    with pytest.raises(ValueError, match=r"Column 1 of .*data.csv holds numbers but for 1 "
                                         r"cell\(s\): data row 2 holds 'abc'"):
        load_local_file(path, text_features="ordinal")
    # a column of text is still coded, missing cells kept missing
    path.write_text("1,red,0\n4,?,1\n5,blue,0\n6,red,1\n")
    X, _ = load_local_file(path, text_features="ordinal")
    np.testing.assert_array_equal(X[:, 1], [1, np.nan, 0, 1])


def test_a_payload_model_missing_its_native_arrays_is_refused_not_crashed():
    """A neighbours estimator without its rows, a support vector machine without its
    dual coefficients: refused as the upload's fault, naming the structure."""
    from sklearn.neighbors import KNeighborsClassifier
    from sklearn.svm import SVC

    from skfedkt._deployment._native import check_native_structures

    X, y = np.random.RandomState(0).normal(size=(30, 3)), np.arange(30) % 3
    neighbors = KNeighborsClassifier(algorithm="kd_tree").fit(X, y)
    del neighbors._fit_X
    svm = SVC().fit(X, y)
    del svm._dual_coef_
    for model, reason in ((neighbors, "cannot be rebuilt"), (svm, "dual coefficients")):
        with pytest.raises(UploadError, match=reason):
            check_native_structures(model, "party 'a'")
