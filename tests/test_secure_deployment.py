"""Secure aggregation in a deployment: the secure sum's stages as files between the
command-line steps of five parties with a threshold of three, and the Python objects
(`SecureSession`, `SecureParty`, `SecureCoordinator`, `PartyIdentity`) those steps run,
through files and through Flower."""

import base64
import dataclasses
import json
import tempfile
from pathlib import Path

import numpy as np
import pytest
from numpy.testing import assert_array_equal
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa
from sklearn.base import clone
from sklearn.datasets import load_breast_cancer
from sklearn.tree import DecisionTreeClassifier

from _flower_grid import flower_context, flower_task, in_process_grid  # noqa: F401
from _commands import run_command
from _secure_forgery import routed_from
import skfedkt
from skfedkt import (
    FedCTClassifier,
    FedKTClassifier,
    InputLedger,
    PartyIdentity,
    PartyUpload,
    load_model,
)
from skfedkt._cli._main import main
from skfedkt import SecureCoordinator, SecureParty, SecureSession
from skfedkt._deployment._secure import decoded
from skfedkt._secure_sum import (
    SecureSumError,
    SecureSumParty,
    message_from_bytes,
    message_to_bytes,
    new_identities,
)
from skfedkt.datasets import load_local_file
from skfedkt.privacy import BitFlips

NAMES = [f"h{i}" for i in range(5)]
# each party's identity, made once at the party; the session names the public keys
IDENTITIES = [PartyIdentity.generate() for _ in NAMES]
PUBLIC_KEYS = [identity.public_bytes for identity in IDENTITIES]
# every party and the server pass the same flags: small trees, hard votes (identical sums)
FEDKT = ["fedkt", "--estimator", "dt", "--voting", "hard", "--random-state", "0"]


@pytest.fixture(scope="module")
def consortium(tmp_path_factory):
    folder = tmp_path_factory.mktemp("secure-consortium")
    assert main(["split", "breast_cancer", "--parties", "5", "--iid", "--out-dir",
                 str(folder)]) == 0
    return folder


_run = run_command


class _Round:
    """One round of five parties and a coordinator, each step a command on files."""

    def __init__(self, consortium, folder, capsys, keys_from=None):
        """A new session of the five parties, their identities made in `folder`, or
        those of the round `keys_from`, whose folder this one must be."""
        self.consortium, self.folder, self.capsys = consortium, folder, capsys
        self.session = folder / "session.json"
        rows = [len(load_local_file(consortium / f"party-{p}.csv")[1]) for p in range(5)]
        for name in NAMES if keys_from is None else ():
            # each party, once: the private key stays, the .pub is sent
            _run(["identity", "--out", self.key(name)], capsys)
        _run(["secure-session", *FEDKT, "--parties", *NAMES, "--party-rows", *rows,
              "--threshold", 3, "--identities",
              *[self.key(name).with_suffix(".pub") for name in NAMES],
              "--out", self.session], capsys)
        self.uploads = {}
        for p, name in enumerate(NAMES):
            self.uploads[name] = folder / f"upload-{name}.skfedkt"
            self._party(p, self.uploads[name], "--secure-session", self.session,
                        "--secure-state", self.state(name), "--identity", self.key(name))

    def _party(self, p, out, *secure):
        _run(["party", *FEDKT, "--data", self.consortium / f"party-{p}.csv", "--public",
              self.consortium / "public.csv", "--classes", 0, 1, "--name", NAMES[p],
              "--out", out, *secure], self.capsys)

    def state(self, name):
        return self.folder / f"state-{name}.json"

    def key(self, name):
        return self.folder / f"{name}.key"

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
                        self.state(name), "--identity", self.key(name), "--message",
                        message, "--out", out], self.capsys, status)
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
        # refused, nothing changed: the honest request is answered, the hostile one
        # still refused
        secure.answer(name, files[name])
        printed = secure.answer(name, hostile, status=1)
        assert "done with the round's secure sum" in printed


def test_every_honest_party_refuses_the_shares_of_a_party_told_another_roster(
        consortium, tmp_path, capsys):
    secure = _Round(consortium, tmp_path, capsys)
    files = secure.coordinator("--uploads", *secure.uploads.values())[1]
    agreement = secure.agreement()
    roster = message_from_bytes("roster", files["h0"].read_bytes(), agreement, reader=0)
    del roster[4]  # h0 is told h4 never sent its keys
    files["h0"].write_bytes(message_to_bytes("roster", roster, agreement))
    told = message_from_bytes("shares", secure.answer("h0", files["h0"]).read_bytes(),
                              agreement)
    routed = secure.stage(files, NAMES[1:])
    for p, name in enumerate(NAMES[1:4], start=1):
        # the coordinator passes h0's shares on, sealed over the roster h0 was told
        forged = {**message_from_bytes("routed", routed[name].read_bytes(), agreement,
                                       reader=p), 0: routed_from(told, p)}
        routed[name].write_bytes(message_to_bytes("routed", forged, agreement))
        printed = secure.answer(name, routed[name], status=1)
        assert (f"refused by party '{name}': the message from party 'h0', sealed: its "
                "shares do not open" in printed)


def _made_up_roster(data, agreement, victim=0):
    """The roster `data` as a coordinator rewrites it for `victim`, to unmask it alone:
    the victim's own entry, and parties the coordinator runs itself, their keys well
    formed and signed by identity keys it made."""
    keys, forged = new_identities(len(agreement.parties))
    made_up = dataclasses.replace(agreement, identities=forged)
    roster = message_from_bytes("roster", data, agreement, reader=victim)
    for index in roster:
        if index != victim:
            roster[index] = {name: value for name, value in SecureSumParty(
                made_up, index, keys[index]).advertise().items() if name != "party"}
    return message_to_bytes("roster", roster, agreement)


def test_a_party_refuses_a_roster_of_parties_the_coordinator_made_up(consortium, tmp_path,
                                                                     capsys):
    secure = _Round(consortium, tmp_path, capsys)
    files = secure.coordinator("--uploads", *secure.uploads.values())[1]
    files["h0"].write_bytes(_made_up_roster(files["h0"].read_bytes(), secure.agreement()))
    printed = secure.answer("h0", files["h0"], status=1)
    assert ("refused by party 'h0': the message from party 'h1', roster: its keys are not "
            "signed by the identity the consortium agreed for it: a party the coordinator "
            "made up, or altered keys" in printed)
    assert not (tmp_path / "answer-h0.json").exists()


def test_a_party_that_alters_a_share_is_named_and_the_sum_is_exact(consortium, tmp_path,
                                                                   capsys):
    secure = _Round(consortium, tmp_path, capsys)
    files = secure.coordinator("--uploads", *secure.uploads.values())[1]
    for _ in range(3):  # shares, masked sums, confirmations
        files = secure.stage(files, NAMES)
    answers = {name: secure.answer(name, files[name]) for name in NAMES}
    agreement = secure.agreement()
    # h2 gives back its share of h0's self-mask seed with one bit flipped
    altered = message_from_bytes("unmask", answers["h2"].read_bytes(), agreement)
    share = altered["seed_shares"][0]
    altered["seed_shares"][0] = bytes([share[0] ^ 1]) + share[1:]
    answers["h2"].write_bytes(message_to_bytes("unmask", altered, agreement))
    printed, _ = secure.coordinator("--answers", *answers.values())
    assert "done, over 5 parties" in printed
    assert ("coordinator: party 'h2' gave back shares other than the ones their dealers "
            "signed, so altered, and left out: of the self-mask seed of party 'h0'" in printed)
    # the sums are exactly those of the parties' own words
    session = SecureSession.load(secure.session)
    sums = SecureCoordinator.load(session, tmp_path / "coordinator.json").sums
    states = [SecureParty.load(session, secure.state(name), PartyIdentity.load(
        secure.key(name))) for name in NAMES]
    expected = decoded(sum(state.words for state in states), states[0].layout,
                       session.fixed_point)
    assert sums.keys() == expected.keys()
    for name, values in sums.items():
        assert_array_equal(values, expected[name])


def test_identity_files_are_pem_readable_by_their_user_alone_and_read_as_hostile(
        tmp_path, capsys):
    key = tmp_path / "h0.key"
    printed = _run(["identity", "--out", key], capsys)
    assert f"wrote the private key to {key}" in printed and "h0.pub" in printed
    assert oct(key.stat().st_mode & 0o777) == "0o600"
    identity = PartyIdentity.load(key)
    assert PartyIdentity.load_public(tmp_path / "h0.pub") == identity.public_bytes
    assert key.read_bytes().startswith(b"-----BEGIN PRIVATE KEY-----")
    assert identity.public_bytes.hex() in printed and identity.public_bytes.hex() in repr(
        identity)
    printed = _run(["identity", "--out", key], capsys, 1)
    assert "h0.key exists: an identity is made once" in printed
    printed = _run(["identity", "--out", tmp_path / "h1.pub"], capsys, 1)
    assert "ends in .pub" in printed
    rsa_key = rsa.generate_private_key(65537, 2048).private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption())
    encrypted = identity.key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
        serialization.BestAvailableEncryption(b"a passphrase"))
    public = (tmp_path / "h0.pub").read_bytes()
    for data, read, reason in [
        (public, PartyIdentity.from_pem, "format: not one PEM key, beginning "
         "'-----BEGIN PRIVATE KEY-----'"),
        (key.read_bytes(), PartyIdentity.public_from_pem, "format: .*: a private key, which "
         "stays with its party"),
        (encrypted, PartyIdentity.from_pem, "format: not one PEM key"),
        (rsa_key, PartyIdentity.from_pem, "key: not an unencrypted Ed25519 private key"),
        (b"-----BEGIN PUBLIC KEY-----\nAAAA\n-----END PUBLIC KEY-----\n",
         PartyIdentity.public_from_pem, "key: not an Ed25519 public key"),
        (key.read_bytes() * 2, PartyIdentity.from_pem, "format: not one PEM key"),
        (b" " * 5000, PartyIdentity.from_pem, "bytes: 5000 bytes, more than 4096"),
    ]:
        with pytest.raises(ValueError, match=f"Identity key refused \\(x\\), {reason}"):
            read(data, "x")
    large = tmp_path / "large.key"
    large.write_bytes(b" " * 5000)
    with pytest.raises(ValueError, match="large.key: the file is larger than max_file_bytes"):
        PartyIdentity.load(large)
    # the session needs one public key per party
    printed = _run(["secure-session", *FEDKT, "--parties", *NAMES, "--party-rows",
                    *[10] * 5, "--identities", tmp_path / "h0.pub", "--out",
                    tmp_path / "s.json"], capsys, 1)
    assert "--identities gives 1 public keys for 5 parties" in printed


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
    printed = _run(["party", *FEDKT, "--data", consortium / "party-0.csv", "--public",
                    consortium / "public.csv", "--classes", 0, 1, "--name", "h0", "--out",
                    tmp_path / "u.skfedkt", "--secure-session", secure.session,
                    "--secure-state", tmp_path / "s.json"], capsys, 1)
    assert "--secure-session needs --identity" in printed
    other = tmp_path / "other"
    other.mkdir()
    elsewhere = _Round(consortium, other, capsys)
    with pytest.raises(ValueError, match="state-h0.json.*session: not this secure "
                       "session's"):
        SecureParty.load(SecureSession.load(secure.session), elsewhere.state("h0"),
                         PartyIdentity.load(secure.key("h0")))
    # another session's identity of h0 is not the one this session names
    printed = _run(["party", *FEDKT, "--data", consortium / "party-0.csv", "--public",
                    consortium / "public.csv", "--classes", 0, 1, "--name", "h0", "--out",
                    tmp_path / "u.skfedkt", "--secure-session", secure.session,
                    "--secure-state", tmp_path / "s.json", "--identity",
                    elsewhere.key("h0")], capsys, 1)
    assert "Party 'h0': its identity key is not the one the secure session names" in printed
    for path in (secure.state("h0"), secure.key("h0")):
        assert oct(path.stat().st_mode & 0o777) == "0o600"


# --- the Python objects ------------------------------------------------------------------

def _data():
    X, y = load_breast_cancer(return_X_y=True)
    X_public, X, y = X[:100], X[100:], y[100:]
    return X, y, np.arange(len(y)) % 5, X_public


def _ledgers(folder):
    """Each party's ledger, in a folder of its own under `folder`."""
    return {name: InputLedger(folder / f"ledger-{name}.json") for name in NAMES}


def _secure_round(session, uploads, ledgers, dead=()):
    """The finished coordinator of a round whose `dead` parties sent their keys only."""
    states = {upload.party: upload.secure_state for upload in uploads}
    coordinator, out = SecureCoordinator.start(session, [u.manifest for u in uploads])
    while coordinator.stage != "done":
        out = coordinator.advance([states[party].answer(message, ledgers[party])
                                   for party, message in out.items() if party not in dead])
    return coordinator


def _deployed(clf, parties, session=None, dead=(), ledgers=None):
    """The server's messages and fitted model of a deployment of `parties` (indices),
    under secure aggregation where `session` is given (the parties' `ledgers`), `dead`
    leaving after round 0's keys."""
    X, y, party, X_public = _data()
    server, message, messages = clone(clf), None, []
    with skfedkt.config_context(secure_aggregation=session is not None):
        while True:
            uploads = [clf.fit_party(X[party == p], y[party == p], party=NAMES[p],
                                     classes=[0, 1], X_unlabeled=X_public, message=message,
                                     secure_session=session,
                                     identity=None if session is None else IDENTITIES[p])
                       for p in parties]
            coordinator = None if session is None else _secure_round(session, uploads,
                                                                     ledgers, dead)
            parties = [p for p in parties if NAMES[p] not in dead]
            files = [upload.to_bytes() for upload in uploads]
            if message is not None and message.manifest["done"]:
                return messages, server.fit_server(files, X_public, message=message,
                                                   secure_sum=coordinator)
            message = server.server_round(files, X_public, message=message,
                                          secure_sum=coordinator)
            messages.append(message)


def test_fedct_deployed_securely_keeps_the_survivors_consensus_every_round(tmp_path):
    clf = FedCTClassifier(DecisionTreeClassifier(max_depth=3), n_rounds=4, distill=True,
                          random_state=0)
    _, y, party, _ = _data()
    session = clf.secure_session(NAMES, np.bincount(party).tolist(), threshold=3,
                                 identities=PUBLIC_KEYS)
    with pytest.warns(UserWarning, match="left out 1: 'h4': left the secure sum"):
        secure, model = _deployed(clf, range(5), session, dead={"h4"},
                                  ledgers=_ledgers(tmp_path))
    plain, _ = _deployed(clf, range(4))
    assert len(secure) == len(plain)
    for ours, theirs in zip(secure, plain):
        assert_array_equal(ours.payload["consensus"], theirs.payload["consensus"])
    assert list(model.parties_) == NAMES[:4]


def test_a_session_file_is_read_as_hostile_naming_the_field(tmp_path):
    session = FedKTClassifier().secure_session(NAMES, [10, 20, 30, 40, 50],
                                               identities=PUBLIC_KEYS)
    assert SecureSession.from_bytes(session.to_bytes()) == session
    document = json.loads(session.to_bytes())
    assert document["identities"] == [key.hex() for key in PUBLIC_KEYS]
    for field, value, reason in [
        ("identities", document["identities"][:4], "a tuple of 5 public keys of 32 bytes"),
        ("identities", [*document["identities"][:4], document["identities"][0]],
         r"Parties \['h0', 'h4'\] have one identity key"),
        ("identities", [*document["identities"][:4], "AB" * 32],
         r"identities\[4\]: not a public key of 32 bytes in lowercase hexadecimal"),
        ("identities", "00" * 32, "identities: not a list"),
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
    session = clf.secure_session(NAMES, np.bincount(party).tolist(), identities=PUBLIC_KEYS)
    h0 = dict(party="h0", classes=[0, 1], X_unlabeled=X_public)
    with pytest.raises(ValueError, match="secure_session is given, but secure_aggregation "
                       "is off"):
        clf.fit_party(X[party == 0], y[party == 0], secure_session=session, **h0)
    with pytest.raises(ValueError, match="identity is given, but secure_aggregation is off"):
        clf.fit_party(X[party == 0], y[party == 0], identity=IDENTITIES[0], **h0)
    with skfedkt.config_context(secure_aggregation=True):
        with pytest.raises(ValueError, match=r"Party 'h0' holds 93 rows, the secure "
                           r"session says 94"):
            clf.fit_party(X[party == 0][1:], y[party == 0][1:], secure_session=session,
                          identity=IDENTITIES[0], **h0)
        # before any work: the party's identity, and its own
        with pytest.raises(TypeError, match="secure_session needs identity: the private "
                           "identity key of party 'h0'"):
            clf.fit_party(X[party == 0], y[party == 0], secure_session=session, **h0)
        with pytest.raises(ValueError, match="Party 'h0': its identity key is not the one "
                           "the secure session names for it"):
            clf.fit_party(X[party == 0], y[party == 0], secure_session=session,
                          identity=IDENTITIES[1], **h0)
        upload = clf.fit_party(X[party == 0], y[party == 0], secure_session=session,
                               identity=IDENTITIES[0], **h0)
        with pytest.raises(TypeError, match="pass the round's finished SecureCoordinator"):
            clone(clf).fit_server([upload.to_bytes()], X_public)
    assert "sums" not in upload.payload and upload.manifest["secure"]["sums"]
    with pytest.raises(SecureSumError, match="3 uploads: one party, one upload"):
        SecureCoordinator.start(session, [upload.manifest] * 3)


def test_the_coordinator_warns_naming_a_party_that_altered_a_share(tmp_path):
    X, y, party, X_public = _data()
    session = _session(FEDKT_HARD)
    with skfedkt.config_context(secure_aggregation=True):
        uploads = [FEDKT_HARD.fit_party(X[party == p], y[party == p], party=NAMES[p],
                                        classes=[0, 1], X_unlabeled=X_public,
                                        secure_session=session, identity=IDENTITIES[p])
                   for p in range(5)]
    states = {upload.party: upload.secure_state for upload in uploads}
    coordinator, out = SecureCoordinator.start(session, [u.manifest for u in uploads])
    ledgers = _ledgers(tmp_path)
    while coordinator.stage != "unmask":
        out = coordinator.advance([states[name].answer(data, ledgers[name])
                                   for name, data in out.items()])
    answers = [states[name].answer(data, ledgers[name]) for name, data in out.items()]
    altered = message_from_bytes("unmask", answers[4], coordinator.agreement)
    share = altered["seed_shares"][1]
    altered["seed_shares"][1] = share[::-1]
    answers[4] = message_to_bytes("unmask", altered, coordinator.agreement)
    with pytest.warns(UserWarning, match="exact without the altered shares some parties "
                      "gave back: 'h4' gave back shares other than the ones their dealers "
                      "signed"):
        coordinator.advance(answers)
    assert list(coordinator.refused_shares) == ["h4"]
    assert coordinator.survivors == tuple(NAMES)
    expected = sum(state.words for state in states.values())
    for name, values in decoded(expected, coordinator.layout, session.fixed_point).items():
        assert_array_equal(coordinator.sums[name], values)


def test_with_min_parties_an_upload_no_agreed_identity_signed_is_left_out():
    X, y, party, X_public = _data()
    session = _session(FEDKT_HARD)
    # h4's keys are signed by an identity the session does not name for it
    impostor = PartyIdentity.generate()
    told = dataclasses.replace(session, identities=(*PUBLIC_KEYS[:4], impostor.public_bytes))
    with skfedkt.config_context(secure_aggregation=True):
        manifests = [FEDKT_HARD.fit_party(
            X[party == p], y[party == p], party=NAMES[p], classes=[0, 1],
            X_unlabeled=X_public, secure_session=told if p == 4 else session,
            identity=impostor if p == 4 else IDENTITIES[p]).manifest for p in range(5)]
    with pytest.raises(SecureSumError, match="party 'h4', identity_signature: not the "
                       "signature of the identity the consortium agreed for this party"):
        SecureCoordinator.start(session, manifests)
    coordinator, out = SecureCoordinator.start(session, manifests, min_parties=3)
    assert sorted(out) == NAMES[:4]
    assert "identity_signature" in coordinator.left_out["h4"]


# --- through Flower ---------------------------------------------------------------------

def _flower_apps(clf, session, n_nodes=5, ledgers=None):
    """The client app of the parties h0 to h4 (node k: h<k>), each node's ledger in the
    folder `ledgers` (a new one: None), and a server app whose fitted models land in
    the returned list."""
    from skfedkt.flower import client_app, server_app

    X, y, party, X_public = _data()
    folder = tempfile.mkdtemp() if ledgers is None else ledgers

    def party_data(context):
        p = int(context.node_config["partition-id"])
        return X[party == p], y[party == p], NAMES[p]

    served = []
    return (client_app(clf, party_data, X_public, classes=[0, 1], secure_session=session,
                       identity=_node_identity, ledger=_node_ledger(folder)),
            server_app(clf, X_public, n_nodes, lambda model, context: served.append(model),
                       secure_session=session), served)


def _node_identity(context):
    return IDENTITIES[int(context.node_config["partition-id"])]


def _node_ledger(folder):
    """Each node's ledger, a file of its own in `folder`."""
    return lambda context: Path(folder) / f"ledger-{context.node_config['partition-id']}.json"


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
    return clf.secure_session(NAMES, np.bincount(party).tolist(), threshold=3,
                              identities=PUBLIC_KEYS)


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
        # refused, nothing changed: the honest request is answered, then no other
        ask(name, out[name])
        with pytest.raises(SecureSumError, match="done with the round's secure sum"):
            ask(name, hostile)


def test_through_flower_every_honest_node_refuses_the_shares_of_a_node_told_another_roster(
        flower_task):
    session = _session(FEDKT_HARD)
    ask = _node_of_party(session)
    coordinator, out = _rosters(session, ask)
    roster = message_from_bytes("roster", out["h0"], coordinator.agreement, reader=0)
    del roster[4]  # h0 is told h4 never sent its keys
    agreement = coordinator.agreement
    told = message_from_bytes("shares", ask("h0", message_to_bytes("roster", roster,
                                                                    agreement)), agreement)
    routed = coordinator.advance([ask(name, out[name]) for name in NAMES[1:]])
    for p, name in enumerate(NAMES[1:4], start=1):
        # the coordinator passes h0's shares on, sealed over the roster h0 was told
        forged = {**message_from_bytes("routed", routed[name], agreement, reader=p),
                  0: routed_from(told, p)}
        with pytest.raises(SecureSumError, match=f"refused by party '{name}': the message "
                           "from party 'h0', sealed: its shares do not open"):
            ask(name, message_to_bytes("routed", forged, agreement))


def test_through_flower_a_node_refuses_a_roster_of_parties_the_server_made_up(flower_task):
    session = _session(FEDKT_HARD)
    ask = _node_of_party(session)
    coordinator, out = _rosters(session, ask)
    with pytest.raises(SecureSumError, match="refused by party 'h0': the message from party "
                       "'h1', roster: its keys are not signed by the identity the "
                       "consortium agreed for it"):
        ask("h0", _made_up_roster(out["h0"], coordinator.agreement))
    # refused, nothing changed: the honest roster is answered, then no other
    ask("h0", out["h0"])
    with pytest.raises(SecureSumError, match="not the routed this party waits for"):
        ask("h0", _made_up_roster(out["h0"], coordinator.agreement))


def test_a_party_starts_each_round_of_a_session_once(consortium, tmp_path, capsys,
                                                     flower_task):
    # a coordinator that asked twice, dropping the party in one sum, would learn its input
    secure = _Round(consortium, tmp_path, capsys)
    again = ["party", *FEDKT, "--data", consortium / "party-0.csv", "--public",
             consortium / "public.csv", "--classes", 0, 1, "--name", "h0", "--out",
             tmp_path / "again.skfedkt", "--secure-session", secure.session,
             "--secure-state", secure.state("h0"), "--identity", secure.key("h0")]
    # before it answers the coordinator, only its keys may have left: a rerun after a
    # crash starts the round again, with new keys
    _run(again, capsys)
    files = secure.coordinator("--uploads", secure.uploads["h0"].with_name("again.skfedkt"),
                               *list(secure.uploads.values())[1:])[1]
    secure.answer("h0", files["h0"])
    (tmp_path / "again.skfedkt").unlink()
    printed = _run(again, capsys, 1)
    assert ("Party 'h0' already started round 0 of this secure session, and answered the "
            "coordinator" in printed)
    assert not (tmp_path / "again.skfedkt").exists()
    # a node likewise, once it answered the coordinator
    session = _session(FEDKT_HARD)
    ask = _node_of_party(session)
    _, out = _rosters(session, ask)
    ask("h1", out["h1"])
    with pytest.raises(ValueError, match="already started round 0"):
        ask("h1", b"", secure_stage=False)


def test_through_flower_a_node_of_a_bad_upload_is_left_out_with_min_parties(flower_task):
    from skfedkt.flower import client_app, server_app

    session = _session(FEDKT_HARD)
    other = FEDKT_HARD.secure_session(NAMES, session.party_rows, threshold=3,
                                      identities=PUBLIC_KEYS)
    X, y, party, X_public = _data()

    def party_data(context):
        p = int(context.node_config["partition-id"])
        return X[party == p], y[party == p], NAMES[p]

    # h4 runs another session: its upload's round session is not this one's
    client = client_app(FEDKT_HARD, party_data, X_public, classes=[0, 1],
                        secure_session=lambda context: (
                            other if context.node_config["partition-id"] == 4 else session),
                        identity=_node_identity, ledger=_node_ledger(tempfile.mkdtemp()))
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
            X_unlabeled=X_public, secure_session=session,
            identity=IDENTITIES[p]).manifest for p in range(5)]
    hostile = [dict(manifest, **{field: value}) for manifest in manifests]
    if field == "secure":
        hostile = [dict(manifest, secure=dict(manifest["secure"], keys=value["keys"]))
                   for manifest in manifests]
    with pytest.raises(SecureSumError, match=reason):
        SecureCoordinator.start(session, hostile)
    with pytest.raises(ValueError, match="float_bound must be positive and at most"):
        SecureSession.new(NAMES, session.party_rows, 1e308, identities=PUBLIC_KEYS)


def test_files_mixed_up_are_refused_saying_what_to_do(consortium, tmp_path, capsys):
    secure = _Round(consortium, tmp_path, capsys)
    files = secure.coordinator("--uploads", *secure.uploads.values())[1]
    start_again = ["secure-coordinator", "--session", secure.session, "--state",
                   tmp_path / "coordinator.json", "--uploads", *secure.uploads.values(),
                   "--out-dir", tmp_path / "again"]
    # the same command again (after a crash) writes the same rosters again
    assert "took these uploads of round 0 before" in _run(start_again, capsys)
    assert all((tmp_path / "again" / path.name).read_bytes() == path.read_bytes()
               for path in files.values())
    old_roster = tmp_path / "old-roster-h0.json"
    old_roster.write_bytes(files["h0"].read_bytes())
    routed = secure.stage(files, NAMES)
    # a round's sum starts once: the parties are past their keys
    printed = _run(start_again, capsys, 1)
    assert "round 0 of this secure session started already" in printed
    printed = secure.answer("h0", routed["h1"], status=1)  # another party's file
    assert "shares from this party itself: the shares routed to another party" in printed
    # refused, nothing changed: its own file is then answered, and again byte for byte
    answer = secure.answer("h0", routed["h0"]).read_bytes()
    assert secure.answer("h0", routed["h0"]).read_bytes() == answer
    printed = secure.answer("h0", old_roster, status=1)
    assert ("not the survivors this party waits for: it answered each stage before once"
            in printed)
    answers = [secure.answer(name, routed[name]) for name in NAMES[1:]]
    printed, _ = secure.coordinator("--answers", *answers, secure.uploads["h0"], status=1)
    assert f"{secure.uploads['h0']}: Secure sum refused by the coordinator" in printed


# --- one input, one sum: each party's ledger -----------------------------------------------

INPUT_AGAIN = "survivors: it helped unmask this very input before, in a sum of"
OTHER_SURVIVORS = "survivors: round 1's survivors are not those of round 0 of this session"


def test_a_second_session_of_the_same_inputs_with_other_survivors_is_refused(
        consortium, tmp_path, capsys):
    # session one: every party; session two, the same parties' same rows without h0,
    # whose input the difference would give away
    first = _Round(consortium, tmp_path, capsys)
    files = first.coordinator("--uploads", *first.uploads.values())[1]
    for _ in range(4):
        files = first.stage(files, NAMES)
    second = _Round(consortium, tmp_path, capsys, keys_from=first)
    files = second.coordinator("--uploads", *list(second.uploads.values())[1:])[1]
    for _ in range(3):
        files = second.stage(files, NAMES[1:])
    for name in NAMES[1:]:
        printed = second.answer(name, files[name], status=1)
        assert (f"refused by party '{name}': the message, {INPUT_AGAIN} 5 survivors "
                "other than these 4" in printed)
    # the same survivors may unmask again: nothing new is given away
    third = _Round(consortium, tmp_path, capsys, keys_from=first)
    files = third.coordinator("--uploads", *third.uploads.values())[1]
    for _ in range(4):
        files = third.stage(files, NAMES)


def _fedct_rounds(clf, session, ledgers, rounds):
    """FedCT deployed in Python objects, round by round: ``rounds`` lists, per round,
    the parties whose uploads the coordinator takes (the others it leaves out, alive);
    a round whose secure sum is refused raises. Returns the server's messages."""
    X, y, party, X_public = _data()
    server, message, messages = clone(clf), None, []
    with skfedkt.config_context(secure_aggregation=True):
        for parties in rounds:
            uploads = [clf.fit_party(X[party == p], y[party == p], party=NAMES[p],
                                     classes=[0, 1], X_unlabeled=X_public, message=message,
                                     secure_session=session, identity=IDENTITIES[p])
                       for p in parties]
            coordinator = _secure_round(session, uploads, ledgers)
            message = server.server_round([u.to_bytes() for u in uploads], X_public,
                                          message=message, secure_sum=coordinator)
            messages.append(message)
    return messages


def test_fedct_left_out_of_one_round_is_refused_by_every_honest_party(tmp_path):
    clf = FedCTClassifier(DecisionTreeClassifier(max_depth=3), n_rounds=3, distill=True,
                          random_state=0)
    session = _session(clf)
    with pytest.raises(SecureSumError, match=f"refused by party 'h1'.*{OTHER_SURVIVORS} "
                       r"\('h1', 'h2', 'h3', 'h4' now\).*The federation ends at round 0"):
        _fedct_rounds(clf, session, _ledgers(tmp_path), [range(5), range(1, 5)])
    # the parties' bit flips make each round's labels private, round by round: a round
    # with other survivors is one more release the accountant counts
    noisy = clone(clf).set_params(privacy=BitFlips(2.0))
    (tmp_path / "noisy").mkdir()
    _fedct_rounds(noisy, _session(noisy), _ledgers(tmp_path / "noisy"),
                  [range(5), range(1, 5)])


def test_a_consensus_replayed_under_a_new_round_number_is_the_same_input(tmp_path):
    # with bit flips a round may have other survivors, but not the same input
    clf = FedCTClassifier(DecisionTreeClassifier(max_depth=3), n_rounds=4, distill=True,
                          privacy=BitFlips(2.0), random_state=0)
    session, ledgers = _session(clf), _ledgers(tmp_path)
    # round 1 summed the parties' labels learned from the first message's consensus
    first, _ = _fedct_rounds(clf, session, ledgers, [range(5), range(5)])
    replayed = PartyUpload(dict(first.manifest, round=3), first.payload)
    X, y, party, X_public = _data()
    with skfedkt.config_context(secure_aggregation=True):
        uploads = [clf.fit_party(X[party == p], y[party == p], party=NAMES[p],
                                 classes=[0, 1], X_unlabeled=X_public, message=replayed,
                                 secure_session=session, identity=IDENTITIES[p])
                   for p in range(1, 5)]
    with pytest.raises(SecureSumError, match=f"refused by party 'h1'.*{INPUT_AGAIN} 5 "
                       "survivors other than these 4"):
        _secure_round(session, uploads, ledgers)


def test_through_flower_a_second_run_without_a_node_is_refused(flower_task):
    folder = tempfile.mkdtemp()  # the nodes' ledgers, kept from one run to the next
    session = _session(FEDKT_HARD)
    client, server, served = _flower_apps(FEDKT_HARD, session, ledgers=folder)
    server(in_process_grid(client, 5), flower_context())
    assert len(served) == 1
    # a second run of round 0, its session new, in which h4 sends its keys and no more
    again = _session(FEDKT_HARD)
    client, server, served = _flower_apps(FEDKT_HARD, again, ledgers=folder)
    with pytest.raises(SecureSumError, match=f"refused by party 'h0'.*{INPUT_AGAIN} 5 "
                       "survivors other than these 4"), pytest.warns(UserWarning):
        server(in_process_grid(_silent_after_keys(client, {4}), 5), flower_context())
    assert served == []


def test_through_flower_an_altered_share_is_named_and_the_model_is_the_honest_one(
        flower_task):
    session = _session(FEDKT_HARD)
    client, server, served = _flower_apps(FEDKT_HARD, session)

    def h2_alters_a_share(message, context):
        reply = client(message, context)
        stage = message.content["skfedkt"]["secure_stage"]
        if stage and context.node_config["partition-id"] == 2 and reply is not None:
            from skfedkt._secure_sum._wire import _digest as content_digest
            from skfedkt.flower import _bytes_of, _payload

            agreement = session.agreement(0, 1)
            data = _bytes_of(reply)
            try:
                answer = json.loads(data)
            except ValueError:
                return reply
            if answer.get("stage") != "unmask":
                return reply
            length = len(json.loads(data)["content"]["seed_shares"])
            assert length == 5, agreement
            content = answer["content"]
            share = bytearray(base64.b64decode(content["seed_shares"]["0"]))
            share[0] ^= 1
            content["seed_shares"]["0"] = base64.b64encode(bytes(share)).decode()
            answer["digest"] = content_digest(content)  # a hostile sender's own digest
            reply = type(reply)(content=_payload(json.dumps(answer).encode(),
                                                 secure_stage=True), reply_to=message)
        return reply

    with pytest.warns(UserWarning, match="'h2' gave back shares other than the ones "
                      "their dealers signed"):
        server(in_process_grid(h2_alters_a_share, 5), flower_context())
    plain_client, plain_server, plain = _flower_apps(FEDKT_HARD, None)
    plain_server(in_process_grid(plain_client, 5), flower_context())
    X, _, _, _ = _data()
    (model,), (expected,) = served, plain
    assert list(model.parties_) == NAMES
    assert_array_equal(model.predict_proba(X), expected.predict_proba(X))
