"""Secure aggregation in a deployment: the secure sum's stages as files between the
command-line steps of five parties with a threshold of three, and the Python objects
(`SecureSession`, `SecureParty`, `SecureCoordinator`) those steps run."""

import json
import warnings

import numpy as np
import pytest
from numpy.testing import assert_array_equal
from sklearn.base import clone
from sklearn.datasets import load_breast_cancer
from sklearn.tree import DecisionTreeClassifier

from _flower_grid import flower_context, flower_task, in_process_grid  # noqa: F401
import skfedkt
from skfedkt import FedCTClassifier, FedKTClassifier, PartyUpload, load_model
from skfedkt._cli._main import main
from skfedkt import SecureCoordinator, SecureParty, SecureSession
from skfedkt._secure_sum import SecureSumError, message_from_bytes, message_to_bytes
from skfedkt._secure_sum import _primitives as crypto
from skfedkt.datasets import load_local_file

NAMES = [f"h{i}" for i in range(5)]
# every party and the server pass the same flags: small trees, hard votes (identical sums)
FEDKT = ["fedkt", "--estimator", "dt", "--voting", "hard", "--random-state", "0"]


@pytest.fixture(scope="module")
def consortium(tmp_path_factory):
    folder = tmp_path_factory.mktemp("secure-consortium")
    assert main(["split", "breast_cancer", "--parties", "5", "--iid", "--out-dir",
                 str(folder)]) == 0
    return folder


def _run(argv, capsys, status=0):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        returned = main([str(a) for a in argv])
    printed = capsys.readouterr()
    assert returned == status, printed.err
    return printed.out + printed.err


class _Round:
    """One round of five parties and a coordinator, each step a command on files."""

    def __init__(self, consortium, folder, capsys):
        self.consortium, self.folder, self.capsys = consortium, folder, capsys
        self.session = folder / "session.json"
        rows = [len(load_local_file(consortium / f"party-{p}.csv")[1]) for p in range(5)]
        _run(["secure-session", *FEDKT, "--parties", *NAMES, "--party-rows", *rows,
              "--threshold", 3, "--out", self.session], capsys)
        self.uploads = {}
        for p, name in enumerate(NAMES):
            self.uploads[name] = folder / f"upload-{name}.skfedkt"
            self._party(p, self.uploads[name], "--secure-session", self.session,
                        "--secure-state", self.state(name))

    def _party(self, p, out, *secure):
        _run(["party", *FEDKT, "--data", self.consortium / f"party-{p}.csv", "--public",
              self.consortium / "public.csv", "--classes", 0, 1, "--name", NAMES[p],
              "--out", out, *secure], self.capsys)

    def state(self, name):
        return self.folder / f"state-{name}.json"

    def coordinator(self, *given, status=0):
        """The coordinator's step on `given` (``--uploads ...`` or ``--answers ...``):
        the files it wrote, by party name."""
        out = self.folder / "to-parties"
        for old in out.glob("*.json") if out.exists() else ():
            old.unlink()
        printed = _run(["secure-coordinator", "--session", self.session, "--state",
                        self.folder / "coordinator.json", *given, "--out-dir", out],
                       self.capsys, status)
        return printed, {path.stem.split("-", 1)[1]: path for path in out.glob("*.json")}

    def answer(self, name, message, status=0):
        out = self.folder / f"answer-{name}.json"
        printed = _run(["secure-party", "--session", self.session, "--state",
                        self.state(name), "--message", message, "--out", out],
                       self.capsys, status)
        return printed if status else out

    def stage(self, files, staying):
        """The answers of the `staying` parties to `files`, read by the coordinator."""
        answers = [self.answer(name, files[name]) for name in staying]
        return self.coordinator("--answers", *answers)[1]

    def agreement(self):
        session = SecureSession.load(self.session)
        return SecureCoordinator.load(session, self.folder / "coordinator.json").agreement

    def server(self, *extra, status=0):
        model = self.folder / "model.skops"
        printed = _run(["server", *FEDKT, *self.uploads.values(), "--public",
                        self.consortium / "public.csv", "--classes", 0, 1, "--out", model,
                        *extra], self.capsys, status)
        return printed, model


def test_a_party_that_dies_after_the_keys_leaves_the_survivors_model(consortium, tmp_path,
                                                                     capsys):
    secure = _Round(consortium, tmp_path, capsys)
    survivors = NAMES[:4]  # h4 sent its upload and keys, then nothing
    files = secure.coordinator("--uploads", *secure.uploads.values())[1]
    assert sorted(files) == NAMES
    for _ in range(3):  # shares, masked sums, confirmations
        files = secure.stage(files, survivors)
    printed, _ = secure.coordinator("--answers", *[secure.answer(name, files[name])
                                                   for name in survivors])
    assert "done, over 4 parties (h0, h1, h2, h3)" in printed
    printed, model = secure.server("--secure-session", secure.session, "--secure-state",
                                   tmp_path / "coordinator.json", "--agreed-limits")
    assert "under secure aggregation" in printed
    assert "final model of 4 parties (h0, h1, h2, h3)" in printed
    assert "left out: h4" in printed
    # the survivors' model: the plain deployment of the four survivors
    plain = [tmp_path / f"plain-{name}.skfedkt" for name in survivors]
    for p, upload in enumerate(plain):
        secure._party(p, upload)
    plain_model = tmp_path / "plain.skops"
    _run(["server", *FEDKT, *plain, "--public", consortium / "public.csv", "--classes", 0, 1,
          "--out", plain_model], capsys)
    X_test, _ = load_local_file(consortium / "test.csv")
    assert_array_equal(load_model(model).predict_proba(X_test),
                       load_model(plain_model).predict_proba(X_test))
    # no party's sums crossed in the clear: no upload holds them
    for upload in secure.uploads.values():
        assert "sums" not in skfedkt.read_upload(upload).payload


def test_three_parties_that_die_refuse_the_round_naming_them_and_the_threshold(
        consortium, tmp_path, capsys):
    secure = _Round(consortium, tmp_path, capsys)
    files = secure.coordinator("--uploads", *secure.uploads.values())[1]
    answers = [secure.answer(name, files[name]) for name in NAMES[:2]]
    printed, _ = secure.coordinator("--answers", *answers, status=1)
    assert ("2 parties remain, fewer than the threshold 3; lost: ['h2', 'h3', 'h4']"
            in printed)
    # and no server step runs on a sum that did not finish
    printed, _ = secure.server("--secure-session", secure.session, "--secure-state",
                               tmp_path / "coordinator.json", status=1)
    assert "not done" in printed


def test_every_honest_party_refuses_a_request_for_both_shares_of_one_party(
        consortium, tmp_path, capsys):
    secure = _Round(consortium, tmp_path, capsys)
    survivors = NAMES[:4]  # h4 shares its keys, then dies: its mask key is asked for
    files = secure.coordinator("--uploads", *secure.uploads.values())[1]
    files = secure.stage(files, NAMES)
    for _ in range(2):
        files = secure.stage(files, survivors)
    agreement = secure.agreement()
    request = message_from_bytes("request", files["h0"].read_bytes(), agreement, reader=0)
    assert request["dropped"] == [4]
    hostile = tmp_path / "hostile-request.json"
    hostile.write_bytes(message_to_bytes("request", dict(request, dropped=[4, 1]),
                                         agreement))
    for name in survivors:
        printed = secure.answer(name, hostile, status=1)
        assert (f"refused by party '{name}'" in printed and "asks for both the self-mask "
                "share and the mask-key share of party 'h1'" in printed)
        # refused, the stage is not answered again, even to the honest request
        printed = secure.answer(name, files[name], status=1)
        assert "done with the round's secure sum" in printed


def test_every_honest_party_refuses_the_shares_of_a_party_told_another_roster(
        consortium, tmp_path, capsys):
    secure = _Round(consortium, tmp_path, capsys)
    files = secure.coordinator("--uploads", *secure.uploads.values())[1]
    agreement = secure.agreement()
    roster = message_from_bytes("roster", files["h0"].read_bytes(), agreement, reader=0)
    # h0 is told other keys of h4 (the coordinator's own, say)
    roster[4] = dict(cipher=crypto.public_bytes(crypto.new_agreement_key()),
                     mask=crypto.public_bytes(crypto.new_agreement_key()),
                     signing=crypto.public_bytes(crypto.new_signing_key()))
    files["h0"].write_bytes(message_to_bytes("roster", roster, agreement))
    routed = secure.stage(files, NAMES)
    for name in NAMES[1:]:
        printed = secure.answer(name, routed[name], status=1)
        assert (f"refused by party '{name}': the message from party 'h0', sealed: its "
                "shares do not open" in printed)


def test_the_coordinator_refuses_uploads_of_another_session_or_layout(consortium, tmp_path,
                                                                      capsys):
    secure = _Round(consortium, tmp_path, capsys)
    other = tmp_path / "other"
    other.mkdir()
    elsewhere = _Round(consortium, other, capsys)
    uploads = [*list(secure.uploads.values())[:4], elsewhere.uploads["h4"]]
    printed, _ = secure.coordinator("--uploads", *uploads, status=1)
    assert "the message from party 'h4', secure.session: not the secure session's" in printed
    plain = tmp_path / "plain-h0.skfedkt"
    secure._party(0, plain)
    printed, _ = secure.coordinator("--uploads", plain,
                                    *list(secure.uploads.values())[1:], status=1)
    assert "party 'h0', secure: not the secure sum's session, sums and keys" in printed


def test_secure_flags_come_in_pairs_and_a_state_is_this_sessions(consortium, tmp_path,
                                                                 capsys):
    secure = _Round(consortium, tmp_path, capsys)
    printed = _run(["party", *FEDKT, "--data", consortium / "party-0.csv", "--public",
                    consortium / "public.csv", "--classes", 0, 1, "--name", "h0", "--out",
                    tmp_path / "u.skfedkt", "--secure-session", secure.session], capsys, 1)
    assert "--secure-session needs --secure-state" in printed
    other = tmp_path / "other"
    other.mkdir()
    elsewhere = _Round(consortium, other, capsys)
    with pytest.raises(ValueError, match="state-h0.json.*session: not this secure "
                       "session's"):
        SecureParty.load(SecureSession.load(secure.session), elsewhere.state("h0"))
    assert oct(secure.state("h0").stat().st_mode & 0o777) == "0o600"


# --- the Python objects ------------------------------------------------------------------

def _data():
    X, y = load_breast_cancer(return_X_y=True)
    X_public, X, y = X[:100], X[100:], y[100:]
    return X, y, np.arange(len(y)) % 5, X_public


def _secure_round(session, uploads, dead=()):
    """The finished coordinator of a round whose `dead` parties sent their keys only."""
    states = {upload.party: upload.secure_state for upload in uploads}
    coordinator, out = SecureCoordinator.start(session, [u.manifest for u in uploads])
    while coordinator.stage != "done":
        out = coordinator.advance([states[party].answer(message)
                                   for party, message in out.items() if party not in dead])
    return coordinator


def _deployed(clf, parties, session=None, dead=()):
    """The server's messages and fitted model of a deployment of `parties` (indices),
    under secure aggregation where `session` is given, `dead` leaving after round 0's
    keys."""
    X, y, party, X_public = _data()
    server, message, messages = clone(clf), None, []
    with skfedkt.config_context(secure_aggregation=session is not None):
        while True:
            uploads = [clf.fit_party(X[party == p], y[party == p], party=NAMES[p],
                                     classes=[0, 1], X_unlabeled=X_public, message=message,
                                     secure_session=session) for p in parties]
            coordinator = None if session is None else _secure_round(session, uploads, dead)
            parties = [p for p in parties if NAMES[p] not in dead]
            files = [upload.to_bytes() for upload in uploads]
            if message is not None and message.manifest["done"]:
                return messages, server.fit_server(files, X_public, message=message,
                                                   secure_sum=coordinator)
            message = server.server_round(files, X_public, message=message,
                                          secure_sum=coordinator)
            messages.append(message)


def test_fedct_deployed_securely_keeps_the_survivors_consensus_every_round():
    clf = FedCTClassifier(DecisionTreeClassifier(max_depth=3), n_rounds=4, random_state=0)
    _, y, party, _ = _data()
    session = clf.secure_session(NAMES, np.bincount(party).tolist(), threshold=3)
    with pytest.warns(UserWarning, match="left out 1: 'h4': left the secure sum"):
        secure, model = _deployed(clf, range(5), session, dead={"h4"})
    plain, _ = _deployed(clf, range(4))
    assert len(secure) == len(plain)
    for ours, theirs in zip(secure, plain):
        assert_array_equal(ours.payload["consensus"], theirs.payload["consensus"])
    assert list(model.parties_) == NAMES[:4]


def test_a_session_file_is_read_as_hostile_naming_the_field(tmp_path):
    session = FedKTClassifier().secure_session(NAMES, [10, 20, 30, 40, 50])
    assert SecureSession.from_bytes(session.to_bytes()) == session
    document = json.loads(session.to_bytes())
    for field, value, reason in [
        ("threshold", 2, "threshold of a secure sum of 5 parties is a majority"),
        ("threshold", True, "threshold: not an integer"),
        ("party_rows", [10, 20, 30, 40], "one per party"),
        ("parties", ["a", "a", "b", "c", "d"], "named once each"),
        ("parties", [1.5, 2, 3, 4, 5], "party must be the party's name"),
        ("session", "00" * 31, "session: not 32 bytes"),
        ("scale", 1.0, "scale: not"),
        ("float_bound", float("nan"), "not UTF-8 JSON"),
        ("extra", 1, "extra: not a field"),
    ]:
        altered = json.dumps(dict(document, **{field: value})).encode()
        with pytest.raises(ValueError, match=reason):
            SecureSession.from_bytes(altered)
    with pytest.raises(ValueError, match="more than"):
        SecureSession.from_bytes(b" " * (2 ** 20 + 1))


def test_an_upload_never_writes_its_sums_and_steps_need_their_session():
    X, y, party, X_public = _data()
    clf = FedKTClassifier(DecisionTreeClassifier(max_depth=3), voting="hard")
    session = clf.secure_session(NAMES, np.bincount(party).tolist())
    with pytest.raises(ValueError, match="secure_session is given, but secure_aggregation "
                       "is off"):
        clf.fit_party(X[party == 0], y[party == 0], party="h0", classes=[0, 1],
                      X_unlabeled=X_public, secure_session=session)
    with skfedkt.config_context(secure_aggregation=True):
        with pytest.raises(ValueError, match=r"Party 'h0' holds 93 rows, the secure "
                           r"session says 94"):
            clf.fit_party(X[party == 0][1:], y[party == 0][1:], party="h0", classes=[0, 1],
                          X_unlabeled=X_public, secure_session=session)
        upload = clf.fit_party(X[party == 0], y[party == 0], party="h0", classes=[0, 1],
                               X_unlabeled=X_public, secure_session=session)
        with pytest.raises(TypeError, match="pass the round's finished SecureCoordinator"):
            clone(clf).fit_server([upload.to_bytes()], X_public)
    assert "sums" not in upload.payload and upload.manifest["secure"]["sums"]
    with pytest.raises(ValueError, match="holds what it sends in sum only"):
        PartyUpload(upload.manifest, dict(upload.payload, sums={})).to_bytes()
    with pytest.raises(SecureSumError, match="3 uploads: one party, one upload"):
        SecureCoordinator.start(session, [upload.manifest] * 3)


# --- through Flower ---------------------------------------------------------------------

def _flower_apps(clf, session, n_nodes=5):
    """The client app of the parties h0 to h4 (node k: h<k>), and a server app whose
    fitted models land in the returned list."""
    from skfedkt.flower import client_app, server_app

    X, y, party, X_public = _data()

    def party_data(context):
        p = int(context.node_config["partition-id"])
        return X[party == p], y[party == p], NAMES[p]

    served = []
    return (client_app(clf, party_data, X_public, classes=[0, 1], secure_session=session),
            server_app(clf, X_public, n_nodes, lambda model, context: served.append(model),
                       secure_session=session), served)


def _silent_after_keys(app, dead):
    """`app`, except that the nodes of the partitions `dead` answer no secure stage."""
    def client(message, context):
        if (message.content["skfedkt"]["secure_stage"]
                and context.node_config["partition-id"] in dead):
            return None
        return app(message, context)
    return client


FEDKT_HARD = FedKTClassifier(DecisionTreeClassifier(max_depth=3), voting="hard",
                             random_state=0)


def _session(clf):
    _, _, party, _ = _data()
    return clf.secure_session(NAMES, np.bincount(party).tolist(), threshold=3)


def test_through_flower_a_node_that_dies_after_its_keys_leaves_the_survivors_model(
        flower_task):
    client, server, served = _flower_apps(FEDKT_HARD, _session(FEDKT_HARD))
    with pytest.warns(UserWarning) as warned:
        server(in_process_grid(_silent_after_keys(client, {4}), 5), flower_context())
    assert ["SuperNode 104: did not answer" in str(w.message) for w in warned] == [True, False]
    assert "left out 1: 'h4': left the secure sum" in str(warned[1].message)
    plain_client, plain_server, plain = _flower_apps(FEDKT_HARD, None, n_nodes=4)
    plain_server(in_process_grid(plain_client, 4), flower_context())
    X, _, _, _ = _data()
    (model,), (expected,) = served, plain
    assert list(model.parties_) == NAMES[:4] and "h4" in model.left_out_parties_
    assert_array_equal(model.predict_proba(X), expected.predict_proba(X))


def test_through_flower_three_nodes_that_die_refuse_the_round(flower_task):
    client, server, served = _flower_apps(FEDKT_HARD, _session(FEDKT_HARD))
    with (pytest.raises(SecureSumError, match=r"2 parties remain, fewer than the "
                        r"threshold 3; lost: \['h2', 'h3', 'h4'\]"),
          pytest.warns(UserWarning)):
        server(in_process_grid(_silent_after_keys(client, {2, 3, 4}), 5), flower_context())
    assert served == []


def _node_of_party(session):
    """``ask(party, data, secure_stage=True)``: the reply of the client app of the party's
    node (h<k> at node 100 + k) to a message, as a server of our own, hostile or not,
    sends it over the Grid."""
    from flwr.app import Message, MessageType

    from skfedkt.flower import _bytes_of, _payload

    client, _, _ = _flower_apps(FEDKT_HARD, session)
    contexts = in_process_grid(client, 5).contexts

    def ask(party, data, secure_stage=True):
        node = 100 + NAMES.index(party)
        message = Message(content=_payload(data, secure_stage), dst_node_id=node,
                          message_type=MessageType.QUERY)
        return _bytes_of(client(message, contexts[node]))
    return ask


def _rosters(session, ask):
    """The coordinator of a round every node's upload started, and its rosters."""
    uploads = [ask(name, b"", secure_stage=False) for name in NAMES]
    return SecureCoordinator.start(
        session, [skfedkt.read_upload(data).manifest for data in uploads])


def test_through_flower_every_honest_node_refuses_a_hostile_servers_requests(flower_task):
    session = _session(FEDKT_HARD)
    ask = _node_of_party(session)
    coordinator, out = _rosters(session, ask)
    out = coordinator.advance([ask(name, data) for name, data in out.items()])
    survivors = NAMES[:4]  # h4 shared its keys, then died
    for _ in range(2):
        out = coordinator.advance([ask(name, out[name]) for name in survivors])
    request = message_from_bytes("request", out["h0"], coordinator.agreement, reader=0)
    hostile = message_to_bytes("request", dict(request, dropped=[4, 2]),
                               coordinator.agreement)
    for name in survivors:
        with pytest.raises(SecureSumError, match=f"refused by party '{name}'.*asks for both "
                           "the self-mask share and the mask-key share of party 'h2'"):
            ask(name, hostile)
        with pytest.raises(SecureSumError, match="done with the round's secure sum"):
            ask(name, out[name])


def test_through_flower_every_honest_node_refuses_the_shares_of_a_node_told_another_roster(
        flower_task):
    session = _session(FEDKT_HARD)
    ask = _node_of_party(session)
    coordinator, out = _rosters(session, ask)
    roster = message_from_bytes("roster", out["h0"], coordinator.agreement, reader=0)
    roster[4] = dict(cipher=crypto.public_bytes(crypto.new_agreement_key()),
                     mask=crypto.public_bytes(crypto.new_agreement_key()),
                     signing=crypto.public_bytes(crypto.new_signing_key()))
    out["h0"] = message_to_bytes("roster", roster, coordinator.agreement)
    routed = coordinator.advance([ask(name, data) for name, data in out.items()])
    for name in NAMES[1:]:
        with pytest.raises(SecureSumError, match=f"refused by party '{name}': the message "
                           "from party 'h0', sealed: its shares do not open"):
            ask(name, routed[name])


def test_a_party_starts_each_round_of_a_session_once(consortium, tmp_path, capsys,
                                                     flower_task):
    # a coordinator that asked twice, dropping the party in one sum, would learn its input
    secure = _Round(consortium, tmp_path, capsys)
    printed = _run(["party", *FEDKT, "--data", consortium / "party-0.csv", "--public",
                    consortium / "public.csv", "--classes", 0, 1, "--name", "h0", "--out",
                    tmp_path / "again.skfedkt", "--secure-session", secure.session,
                    "--secure-state", secure.state("h0")], capsys, 1)
    assert "Party 'h0' already started round 0 of this secure session" in printed
    assert not (tmp_path / "again.skfedkt").exists()
    ask = _node_of_party(_session(FEDKT_HARD))
    ask("h1", b"", secure_stage=False)
    with pytest.raises(ValueError, match="already started round 0"):
        ask("h1", b"", secure_stage=False)


def test_through_flower_a_node_of_a_bad_upload_is_left_out_with_min_parties(flower_task):
    from skfedkt.flower import client_app, server_app

    session = _session(FEDKT_HARD)
    other = FEDKT_HARD.secure_session(NAMES, session.party_rows, threshold=3)
    X, y, party, X_public = _data()

    def party_data(context):
        p = int(context.node_config["partition-id"])
        return X[party == p], y[party == p], NAMES[p]

    # h4 runs another session: its upload's round session is not this one's
    client = client_app(FEDKT_HARD, party_data, X_public, classes=[0, 1],
                        secure_session=lambda context: (
                            other if context.node_config["partition-id"] == 4 else session))
    served = []
    server = server_app(FEDKT_HARD, X_public, 5, lambda model, context: served.append(model),
                        secure_session=session, min_parties=3)
    with pytest.warns(UserWarning, match="left out 1"):
        server(in_process_grid(client, 5), flower_context())
    (model,) = served
    assert list(model.parties_) == NAMES[:4]
    assert "secure.session: not the secure session's" in model.left_out_parties_["h4"]


@pytest.mark.parametrize("field, value, reason", [
    ("round", 2 ** 64, "round: not a round from 0"),
    ("round", [1], "round: not a round from 0"),
    ("party", "h9", "party: not a party of the secure session"),
    ("secure", {"session": "x", "sums": [], "keys": "\udcff"}, "secure.keys: not UTF-8"),
])
def test_the_coordinator_refuses_hostile_manifests_naming_the_field(field, value, reason):
    X, y, party, X_public = _data()
    session = _session(FEDKT_HARD)
    with skfedkt.config_context(secure_aggregation=True):
        manifests = [FEDKT_HARD.fit_party(
            X[party == p], y[party == p], party=NAMES[p], classes=[0, 1],
            X_unlabeled=X_public, secure_session=session).manifest for p in range(5)]
    hostile = [dict(manifest, **{field: value}) for manifest in manifests]
    if field == "secure":
        hostile = [dict(manifest, secure=dict(manifest["secure"], keys=value["keys"]))
                   for manifest in manifests]
    with pytest.raises(SecureSumError, match=reason):
        SecureCoordinator.start(session, hostile)
    with pytest.raises(ValueError, match="float_bound must be positive and at most"):
        SecureSession.new(NAMES, session.party_rows, 1e308)


def test_files_mixed_up_are_refused_saying_what_to_do(consortium, tmp_path, capsys):
    secure = _Round(consortium, tmp_path, capsys)
    files = secure.coordinator("--uploads", *secure.uploads.values())[1]
    # a round's sum starts once: the parties are past their keys
    printed = _run(["secure-coordinator", "--session", secure.session, "--state",
                    tmp_path / "coordinator.json", "--uploads", *secure.uploads.values(),
                    "--out-dir", tmp_path / "again"], capsys, 1)
    assert "round 0 of this secure session started already" in printed
    routed = secure.stage(files, NAMES)
    printed = secure.answer("h0", routed["h1"], status=1)  # another party's file
    assert "shares from this party itself: the shares routed to another party" in printed
    printed = secure.answer("h0", routed["h0"], status=1)
    assert "not the survivors this party waits for: it answered, or refused" in printed
    answers = [secure.answer(name, routed[name]) for name in NAMES[1:]]
    printed, _ = secure.coordinator("--answers", *answers, secure.uploads["h0"], status=1)
    assert f"{secure.uploads['h0']}: Secure sum refused by the coordinator" in printed
