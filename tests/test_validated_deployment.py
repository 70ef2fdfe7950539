"""Validated sums deployed: five parties' uploads, the coordinator and the helper as
Python objects (`ValidatedCoordinator`, `ValidatedHelper`, `HelperLedger`, `HelperKey`)
and as command-line steps on files. Honest rounds give the plain deployment's model; a
party that edits what it proves is refused by name, and the model is the other four's;
a hostile coordinator's requests are refused by the helper."""

import dataclasses
import json
import warnings

import numpy as np
import pytest
from sklearn.base import clone
from sklearn.datasets import load_breast_cancer

import skfedkt
from _flower_grid import flower_task  # noqa: F401  (a fixture)
from _validated_attacks import ATTACKS, HONEST, fedkt, hostile
from skfedkt import (
    FedAvgClassifier,
    HelperKey,
    HelperLedger,
    PartyIdentity,
    SecureSession,
    ValidatedCoordinator,
    ValidatedHelper,
    load_model,
)
from _commands import run_command
from skfedkt._deployment import _validated_report
from skfedkt._deployment._secure_documents import b64, dumps
from skfedkt.datasets import load_local_file

PARTIES = list(range(5))
IDENTITIES = [PartyIdentity.generate() for _ in PARTIES]
HELPER = HelperKey.generate()
X, Y = load_breast_cancer(return_X_y=True)
X_PUBLIC, X, Y = X[:150], X[150:], Y[150:]
GROUP = np.arange(len(Y)) % 5


def _session(clf):
    with skfedkt.config_context(secure_aggregation="validated"):
        return clf.secure_session(PARTIES, np.bincount(GROUP).tolist(), threshold=3,
                                  identities=[key.public_bytes for key in IDENTITIES],
                                  helper=HELPER.public_bytes)


def _uploads(clf, parties, session, message):
    return [clf.fit_party(X[GROUP == p], Y[GROUP == p], party=p, classes=[0, 1],
                          X_unlabeled=X_PUBLIC, message=message, secure_session=session,
                          identity=None if session is None else IDENTITIES[p])
            for p in parties]


def _validated_round(session, uploads, ledger):
    coordinator, request = ValidatedCoordinator.start(session, uploads)
    coordinator.finish(ValidatedHelper(session, HELPER).answer(request, ledger))
    return coordinator


def _deployed(clf, parties, session=None, ledger=None):
    """The fitted server of a deployment of `parties`, under validated sums where
    `session` is given (the helper's `ledger`); and each round's coordinator."""
    server, message, coordinators = clone(clf), None, []
    with skfedkt.config_context(secure_aggregation=session is not None and "validated"):
        while True:
            uploads = _uploads(clf, parties, session, message)
            coordinator = None if session is None else _validated_round(session, uploads,
                                                                        ledger)
            coordinators.append(coordinator)
            files = [upload.to_bytes() for upload in uploads]
            if not clf.runs_rounds or message is not None and message.manifest["done"]:
                return server.fit_server(files, X_PUBLIC, message=message,
                                         secure_sum=coordinator), coordinators
            message = server.server_round(files, X_PUBLIC, message=message,
                                          secure_sum=coordinator)


def _quietly(function, *args, **kwargs):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return function(*args, **kwargs)


@pytest.mark.parametrize("estimator", list(HONEST.values()), ids=list(HONEST))
def test_honest_parties_deployed_give_the_plain_deployments_model(estimator, tmp_path):
    """Exactly, but for FedAvg: its weights within their fixed point, which the next
    round's training carries into its outputs (within 1e-5)."""
    plain, _ = _quietly(_deployed, estimator, PARTIES)
    validated, coordinators = _quietly(_deployed, estimator, PARTIES, _session(estimator),
                                       HelperLedger(tmp_path / "ledger.json"))
    assert all(c.survivors == tuple(PARTIES) for c in coordinators)
    assert np.allclose(validated.predict_proba(X), plain.predict_proba(X), rtol=0, atol=1e-5)
    if not isinstance(estimator, FedAvgClassifier):
        assert np.array_equal(validated.predict_proba(X), plain.predict_proba(X))


# every edit runs through Flower below, which runs these same steps
@pytest.mark.parametrize("attack", ["hard votes +-1000", "labels counted twice",
                                    "weights beyond their norm bound"])
def test_a_party_that_edits_its_sums_is_refused_by_name_and_left_out(monkeypatch, attack,
                                                                     tmp_path):
    estimator, name, edit = ATTACKS[attack]
    four, _ = _quietly(_deployed, estimator, PARTIES[:4])
    hostile(monkeypatch, _validated_report, party=4, name=name, edit=edit)
    attacked, coordinators = _quietly(_deployed, estimator, PARTIES, _session(estimator),
                                      HelperLedger(tmp_path / "ledger.json"))
    # refused where its proof fails; a later step without its edit sums it no more
    assert f"{name}: proof verifier check failed" in coordinators[0].left_out[4]
    for coordinator in coordinators:
        assert coordinator.survivors == (0, 1, 2, 3)
        assert list(coordinator.left_out) == [4]
    assert np.allclose(attacked.predict_proba(X), four.predict_proba(X), rtol=0, atol=1e-5)


def _started(tmp_path, parties=PARTIES):
    """A FedKT round's session, uploads, and the coordinator's start on them."""
    clf = fedkt("hard")
    session = _session(clf)
    with skfedkt.config_context(secure_aggregation="validated"):
        uploads = _uploads(clf, parties, session, None)
    coordinator, request = ValidatedCoordinator.start(session, uploads)
    return clf, session, uploads, coordinator, request


def _edited(request, edit):
    document = json.loads(request)
    edit(document)
    return dumps(document)


def test_the_helper_answers_a_round_once_and_the_same_request_alike(tmp_path):
    _, session, uploads, coordinator, request = _started(tmp_path)
    ledger, helper = HelperLedger(tmp_path / "ledger.json"), ValidatedHelper(session, HELPER)
    answer = helper.answer(request, ledger)
    assert helper.answer(request, ledger) == answer  # an answer lost: given again
    # the coordinator starts the round again on three uploads, to difference two out
    _, again = ValidatedCoordinator.start(session, uploads[:3])
    with pytest.raises(ValueError, match=r"answered another request of this step \(round 0\)"):
        helper.answer(again, ledger)
    coordinator.finish(answer)
    assert coordinator.survivors == tuple(PARTIES)


@pytest.mark.parametrize("edit, match", [
    (lambda d: d["reports"].__setitem__(1, d["reports"][0]), r"reports\[1\].party: not a "
     "party of the session named once"),
    (lambda d: d.update(reports=d["reports"][:2]), "accepts 2 parties' reports of round 0, "
     "fewer than the threshold, 3"),
    (lambda d: d.update(round=1), "session: not a round of this secure session"),
    (lambda d: d.update(verify_key=b64(bytes(80))), "verify_key: not sealed to this helper"),
    (lambda d: d["specs"][0].__setitem__(4, 1), "not the party's signature"),
], ids=["a party twice", "fewer than the threshold", "another round", "a verify key not "
        "sealed to the helper", "other specs than the parties signed"])
def test_the_helper_refuses_a_hostile_coordinators_request(tmp_path, edit, match):
    _, session, _, _, request = _started(tmp_path)
    with pytest.raises(ValueError, match=match):
        ValidatedHelper(session, HELPER).answer(_edited(request, edit),
                                                HelperLedger(tmp_path / "ledger.json"))


def test_reports_the_coordinator_alters_or_makes_up_are_refused_naming_the_party(tmp_path):
    _, session, _, _, request = _started(tmp_path)

    def forged(document):
        # a report of party 1 whose leader share the coordinator swapped, and one of
        # party 2 whose sealed shares are party 3's
        name = next(iter(document["reports"][1]["leader"]))
        document["reports"][1]["leader"][name] = "00" * 32
        document["reports"][2]["helper"] = document["reports"][3]["helper"]

    answer = json.loads(ValidatedHelper(session, HELPER).answer(
        _edited(request, forged), HelperLedger(tmp_path / "ledger.json")))
    assert answer["accepted"] == [0, 3, 4]
    assert set(answer["refused"]) == {"1", "2"}
    assert all("not the party's signature" in why for why in answer["refused"].values())


def test_an_upload_altered_after_signing_or_from_another_session_is_left_out(tmp_path):
    clf, session, uploads, _, _ = _started(tmp_path)
    shares = {name: share.copy() for name, share in uploads[1].payload["leader_shares"].items()}
    next(iter(shares.values()))[-1] ^= 1
    uploads[1] = dataclasses.replace(uploads[1], payload=dict(uploads[1].payload,
                                                              leader_shares=shares))
    other = _session(clf)
    with skfedkt.config_context(secure_aggregation="validated"):
        uploads[2] = _uploads(clf, [2], other, None)[0]
    coordinator, _ = ValidatedCoordinator.start(session, uploads)
    assert "not the party's signature" in coordinator.left_out[1]
    assert "not this round's secure session" in coordinator.left_out[2]


def test_a_party_the_helper_refuses_is_named_and_the_model_is_the_others(monkeypatch,
                                                                         tmp_path):
    """A party that seals garbage for the helper, signed: the coordinator's checks pass,
    the helper's refuse it, and the server fits on the other four."""
    honest = _validated_report.seal_to

    def seal(public, info, plaintext, associated):
        garbage = bytes(len(plaintext)) if associated[:4] == (4).to_bytes(4, "big") else (
            plaintext)
        return honest(public, info, garbage, associated)

    monkeypatch.setattr(_validated_report, "seal_to", seal)
    clf = fedkt("hard")
    four, _ = _quietly(_deployed, clf, PARTIES[:4])
    attacked, (coordinator,) = _quietly(_deployed, clf, PARTIES, _session(clf),
                                        HelperLedger(tmp_path / "ledger.json"))
    assert coordinator.survivors == (0, 1, 2, 3)
    assert coordinator.left_out[4].startswith("the helper refused it:")
    assert np.array_equal(attacked.predict_proba(X), four.predict_proba(X))


def test_an_answer_that_is_not_the_requests_is_refused_and_state_survives(tmp_path):
    _, session, _, coordinator, request = _started(tmp_path)
    answer = ValidatedHelper(session, HELPER).answer(request,
                                                     HelperLedger(tmp_path / "ledger.json"))
    coordinator.save(tmp_path / "coordinator.json")
    loaded = ValidatedCoordinator.load(session, tmp_path / "coordinator.json")
    with pytest.raises(ValueError, match="uploads: not a digest"):
        ValidatedCoordinator.from_bytes(session, _edited(coordinator.to_bytes(),
                                                         lambda d: d.update(uploads="x")))
    with pytest.raises(ValueError, match="not the request's parties"):
        loaded.finish(_edited(answer, lambda d: d["accepted"].remove(4)))
    with pytest.raises(ValueError, match="not the answer to this round's request"):
        loaded.finish(_edited(answer, lambda d: d.update(request="00" * 32)))
    loaded.finish(answer)
    coordinator.finish(answer)
    assert all(np.array_equal(loaded.sums[name], coordinator.sums[name])
               for name in coordinator.sums)


def test_the_server_refuses_sums_proved_by_another_estimators_specs(tmp_path):
    clf, session, uploads, coordinator, request = _started(tmp_path)
    coordinator.finish(ValidatedHelper(session, HELPER).answer(
        request, HelperLedger(tmp_path / "ledger.json")))
    with skfedkt.config_context(secure_aggregation="validated"):
        with pytest.raises(ValueError, match="specs .* are not those of this server"):
            clone(clf).set_params(n_students=5).fit_server(
                [u.to_bytes() for u in uploads], X_PUBLIC, secure_sum=coordinator)


def test_steps_refuse_a_session_of_the_other_mode():
    clf = fedkt("hard")
    session = _session(clf)
    with skfedkt.config_context(secure_aggregation=True):
        with pytest.raises(ValueError, match="runs the validated sum, but "
                                             "secure_aggregation is True"):
            _uploads(clf, [0], session, None)
        with pytest.raises(ValueError, match="helper is given, but secure_aggregation is "
                                             "not 'validated'"):
            clf.secure_session(PARTIES, [10] * 5, helper=HELPER.public_bytes,
                               identities=[key.public_bytes for key in IDENTITIES])
    with skfedkt.config_context(secure_aggregation="validated"):
        with pytest.raises(ValueError, match="give its public key"):
            clf.secure_session(PARTIES, [10] * 5,
                               identities=[key.public_bytes for key in IDENTITIES])
    with pytest.raises(ValueError, match="The helper's key is not the one the secure "
                                         "session names"):
        ValidatedHelper(session, HelperKey.generate())


def test_helper_keys_are_pem_files_read_as_hostile(tmp_path):
    HELPER.save(tmp_path / "helper.key")
    HELPER.save_public(tmp_path / "helper.pub")
    assert HelperKey.load(tmp_path / "helper.key").public_bytes == HELPER.public_bytes
    assert HelperKey.load_public(tmp_path / "helper.pub") == HELPER.public_bytes
    assert (tmp_path / "helper.key").stat().st_mode & 0o777 == 0o600
    IDENTITIES[0].save(tmp_path / "party.key")
    with pytest.raises(ValueError, match="not an unencrypted X25519 private key"):
        HelperKey.load(tmp_path / "party.key")
    with pytest.raises(ValueError, match="not an Ed25519 public key"):
        PartyIdentity.load_public(tmp_path / "helper.pub")
    session = SecureSession.from_bytes(_session(fedkt("hard")).to_bytes())
    assert session.helper == HELPER.public_bytes and session.mode == "validated"


# --- the command line --------------------------------------------------------------------

FEDKT = ["fedkt", "--estimator", "dt", "--voting", "hard", "--random-state", "0"]


_run = run_command


def test_a_round_on_the_command_line_refuses_a_hostile_party_by_name(tmp_path, capsys,
                                                                     monkeypatch):
    """Five parties' commands, one editing its votes, the coordinator's and the
    helper's: the server's model is the plain model of the four honest parties."""
    _run(["split", "breast_cancer", "--parties", 5, "--iid", "--out-dir", tmp_path], capsys)
    names = [f"h{p}" for p in PARTIES]
    rows = [len(load_local_file(tmp_path / f"party-{p}.csv")[1]) for p in PARTIES]
    for name in names:
        _run(["identity", "--out", tmp_path / f"{name}.key"], capsys)
    _run(["helper-key", "--out", tmp_path / "helper.key"], capsys)
    printed = _run(["secure-session", *FEDKT, "--parties", *names, "--party-rows", *rows,
                    "--identities", *[tmp_path / f"{name}.pub" for name in names],
                    "--helper", tmp_path / "helper.pub", "--out", tmp_path / "session.json"],
                   capsys)
    assert "secure session (validated sums)" in printed

    def party(p, out, *secure):
        return _run(["party", *FEDKT, "--data", tmp_path / f"party-{p}.csv", "--public",
                     tmp_path / "public.csv", "--classes", 0, 1, "--name", names[p],
                     "--out", out, *secure], capsys)

    def server(uploads, out, *secure):
        _run(["server", *FEDKT, *uploads, "--public", tmp_path / "public.csv", "--classes",
              0, 1, "--out", out, *secure], capsys)
        return load_model(out)

    plain = [party(p, tmp_path / f"plain-{p}.skfedkt") for p in PARTIES[:4]]
    assert all("wrote" in printed for printed in plain)
    four = server([tmp_path / f"plain-{p}.skfedkt" for p in PARTIES[:4]],
                  tmp_path / "four.skops")
    hostile(monkeypatch, _validated_report, party="h4", name="votes",
            edit=ATTACKS["hard votes +-1000"][2])
    session = ["--secure-session", tmp_path / "session.json"]
    uploads = [tmp_path / f"upload-{p}.skfedkt" for p in PARTIES]
    for p in PARTIES:
        assert "as a validated report" in party(p, uploads[p], *session, "--identity",
                                                tmp_path / f"{names[p]}.key")
    coordinator = ["secure-coordinator", "--session", tmp_path / "session.json", "--state",
                   tmp_path / "coordinator.json"]
    started = _run([*coordinator, "--uploads", *uploads, "--out-dir", tmp_path / "out"],
                   capsys)
    request = (tmp_path / "out" / "request.json").read_bytes()
    # a rerun after a crash writes the same request
    assert "(as before)" in _run([*coordinator, "--uploads", *uploads, "--out-dir",
                                  tmp_path / "out"], capsys)
    assert (tmp_path / "out" / "request.json").read_bytes() == request
    helper = ["secure-helper", "--session", tmp_path / "session.json", "--key",
              tmp_path / "helper.key", "--request", tmp_path / "out" / "request.json",
              "--out", tmp_path / "answer.json"]
    _run(helper, capsys)
    done = _run([*coordinator, "--answers", tmp_path / "answer.json"], capsys)
    assert "left out party 'h4'" in done and "proof verifier check failed" in done
    assert "done, over 4 parties (h0, h1, h2, h3)" in done
    validated = server(uploads, tmp_path / "validated.skops", *session, "--secure-state",
                       tmp_path / "coordinator.json")
    assert np.array_equal(validated.predict_proba(X), four.predict_proba(X))
    assert "checked 5 uploads" in started
    # a second request of the round, on other uploads, is refused by the helper
    (tmp_path / "coordinator.json").unlink()
    _run([*coordinator, "--uploads", *uploads[:4], "--out-dir", tmp_path / "out"], capsys)
    assert "answered another request of this step (round 0)" in _run(helper, capsys,
                                                                      status=1)
    # a party keeps no state under validated sums
    assert "a party keeps nothing" in _run(
        ["party", *FEDKT, "--data", tmp_path / "party-0.csv", "--public",
         tmp_path / "public.csv", "--classes", 0, 1, "--name", "h0", "--out",
         tmp_path / "x.skfedkt", *session, "--identity", tmp_path / "h0.key",
         "--secure-state", tmp_path / "s.json"], capsys, status=1)


# --- Flower ------------------------------------------------------------------------------

def _flower(clf, session, n_parties=5, helper_folder=None):
    """The apps of parties 0 to ``n_parties - 1`` (node k: party k) and, under `session`,
    the helper's node after them; the server's fitted models land in the list."""
    from skfedkt.flower import client_app, server_app

    def party_data(context):
        p = int(context.node_config["partition-id"])
        return X[GROUP == p], Y[GROUP == p], p

    def helper(context):
        if int(context.node_config["partition-id"]) != n_parties:
            return None
        return HELPER, helper_folder / "ledger.json"

    served = []
    return (client_app(clf, party_data, X_PUBLIC, classes=[0, 1], secure_session=session,
                       identity=lambda context: IDENTITIES[
                           int(context.node_config["partition-id"])],
                       helper=helper if session is not None else None),
            server_app(clf, X_PUBLIC, n_parties, lambda model, context: served.append(model),
                       secure_session=session), served)


def test_through_flower_honest_parties_give_the_plain_deployments_model(flower_task,
                                                                      tmp_path):
    from _flower_grid import flower_context, in_process_grid

    estimator = HONEST["fedct"]
    client, server, served = _flower(estimator, _session(estimator), helper_folder=tmp_path)
    _quietly(server, in_process_grid(client, 6), flower_context())
    five, _ = _quietly(_deployed, estimator, PARTIES)
    assert np.array_equal(served[0].predict_proba(X), five.predict_proba(X))


@pytest.mark.parametrize("attack", list(ATTACKS))
def test_through_flower_a_hostile_party_is_refused_and_the_model_is_the_others(
        flower_task, monkeypatch, tmp_path, attack):
    from _flower_grid import flower_context, in_process_grid

    estimator, name, edit = ATTACKS[attack]
    plain_client, plain_server, plain = _flower(estimator, None, n_parties=4)
    _quietly(plain_server, in_process_grid(plain_client, 4), flower_context())
    hostile(monkeypatch, _validated_report, party=4, name=name, edit=edit)
    client, server, served = _flower(estimator, _session(estimator), helper_folder=tmp_path)
    with pytest.warns(UserWarning, match=f"left out 1: 4: the helper refused it: {name}: "
                                         "proof verifier check failed"):
        server(in_process_grid(client, 6), flower_context())
    assert np.allclose(served[0].predict_proba(X), plain[0].predict_proba(X), rtol=0,
                       atol=1e-5)


def test_through_flower_a_run_without_its_helper_is_refused(flower_task):
    from _flower_grid import flower_context, in_process_grid

    clf = fedkt("hard")
    client, server, served = _flower(clf, _session(clf))
    with pytest.raises(TimeoutError, match="Only 5 of 6 SuperNodes"):
        _quietly(_flower_server_briefly(clf), in_process_grid(client, 5), flower_context())


def _flower_server_briefly(clf):
    from skfedkt.flower import server_app

    return server_app(clf, X_PUBLIC, 5, lambda model, context: None, timeout=0.1,
                      secure_session=_session(clf))


# --- in the clear --------------------------------------------------------------------------

def test_in_the_clear_the_server_refuses_weights_beyond_their_norm_naming_the_party():
    clf = HONEST["fedavg-clipped"]
    uploads = _uploads(clf, PARTIES, None, None)
    weights = uploads[2].payload["sums"]["weighted_0"]
    assert np.linalg.norm(weights) <= np.sum(GROUP == 2) * 1.0 * (1 + 1e-9)
    uploads[2] = dataclasses.replace(uploads[2], payload=dict(
        uploads[2].payload, sums=dict(uploads[2].payload["sums"], weighted_0=weights * 3)))
    with pytest.raises(skfedkt.UploadError, match=r"Party 2 .*weighted_0: an L2 norm of "
                                                  r"[\d.]+, beyond the bound"):
        clone(clf).server_round([u.to_bytes() for u in uploads], X_PUBLIC)
