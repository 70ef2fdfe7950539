"""The secure sum in bytes: a sum whose every message is sent as bytes and whose parties
and coordinator are saved and loaded between stages gives the one-process sum, refuses
what the one-process sum refuses, reads any malformed message as a refusal naming its
field, and sends none of a party's secrets."""

import base64
import json

import numpy as np
import pytest

from _secure_forgery import routed_from
from skfedkt._secure_sum import (
    Agreement,
    SecureSumCoordinator,
    SecureSumError,
    SecureSumParty,
    decode_integers,
    encode_integers,
    message_from_bytes,
    message_to_bytes,
    new_identities,
    run_secure_sum,
)
from skfedkt._secure_sum import _primitives as crypto
from skfedkt._secure_sum._wire import SEALED_BYTES, TO_COORDINATOR
from skfedkt._secure_sum._wire import _digest as content_digest

SESSION = b"a test session of the secure sum"
PARTIES = range(5)
IDENTITY_KEYS, IDENTITIES = new_identities(len(PARTIES))


def _agreement(session=SESSION):
    return Agreement(session, tuple(f"p{i}" for i in PARTIES), 3, 64, IDENTITIES)


def _reader(stage):
    """Who reads a message of `stage`: the coordinator (None), or party 0."""
    return None if stage in TO_COORDINATOR else 0


class _Deployment:
    """Five parties and a coordinator taken stage by stage as separate processes take
    them: each loaded from its saved state, answering, and saved again, answered or
    refused; every message sent as bytes and kept, by stage, in `sent`."""

    def __init__(self):
        self.agreement = _agreement()
        rng = np.random.default_rng(0)
        self.inputs = {i: encode_integers(rng.integers(-1000, 1000, 64)) for i in PARTIES}
        self.states = {i: SecureSumParty(self.agreement, i, IDENTITY_KEYS[i]).to_bytes()
                       for i in PARTIES}
        self.coordinator_state = SecureSumCoordinator(self.agreement).to_bytes()
        self.sent = {}

    def _say(self, stage, message):
        data = message_to_bytes(stage, message, self.agreement)
        self.sent.setdefault(stage, []).append(data)
        return data

    def heard(self, stage, data, index):
        return message_from_bytes(stage, data, self.agreement, reader=index)

    def party(self, index, stage, answer):
        """Party `index`'s message of `stage`, ``answer(party)``, as bytes."""
        party = SecureSumParty.from_bytes(self.agreement, index, self.states[index],
                                          IDENTITY_KEYS[index])
        try:
            return self._say(stage, answer(party))
        finally:
            self.states[index] = party.to_bytes()

    def coordinator(self, stage, messages, answer):
        """The coordinator's ``answer(coordinator, messages)`` to the parties' messages
        of `stage`, read from their bytes."""
        coordinator = SecureSumCoordinator.from_bytes(self.agreement, self.coordinator_state)
        try:
            return answer(coordinator, [message_from_bytes(stage, data, self.agreement)
                                        for data in messages])
        finally:
            self.coordinator_state = coordinator.to_bytes()

    def roster(self, senders):
        keys = [self.party(i, "keys", lambda party: party.advertise()) for i in senders]
        return self.coordinator("keys", keys, lambda coordinator, messages: self._say(
            "roster", coordinator.collect_keys(messages)))

    def routed(self, senders, roster):
        shares = [self.party(i, "shares", lambda party: party.share_keys(
            self.heard("roster", roster, party.index))) for i in senders]
        return self.coordinator("shares", shares, lambda coordinator, messages: {
            i: self._say("routed", routed)
            for i, routed in coordinator.route_shares(messages).items()})

    def survivors(self, senders, routed):
        masked = [self.party(i, "masked", lambda party: party.masked_input(
            self.heard("routed", routed[party.index], party.index),
            self.inputs[party.index])) for i in senders]
        return self.coordinator("masked", masked, lambda coordinator, messages: self._say(
            "survivors", coordinator.collect_masked(messages)))

    def request(self, senders, survivors):
        confirmations = [self.party(i, "confirm", lambda party: party.confirm(
            self.heard("survivors", survivors, party.index))) for i in senders]
        return self.coordinator("confirm", confirmations, lambda coordinator, messages:
                                self._say("request", coordinator.unmask_request(messages)))

    def unmask(self, index, request):
        return self.party(index, "unmask", lambda party: party.unmask(
            **self.heard("request", request, party.index)))

    def run(self, staying):
        """The sum's total: every party advertises its keys, those `staying` go on."""
        routed = self.routed(staying, self.roster(PARTIES))
        request = self.request(staying, self.survivors(staying, routed))
        return self.coordinator("unmask", [self.unmask(i, request) for i in staying],
                                lambda coordinator, messages: coordinator.total(messages))


@pytest.mark.parametrize("leaving", [(), (1,)])
def test_a_sum_through_bytes_and_saved_states_is_the_one_process_sum(leaving):
    deployment = _Deployment()
    staying = [i for i in PARTIES if i not in leaving]
    total = deployment.run(staying)
    expected = run_secure_sum(deployment.agreement, IDENTITY_KEYS, deployment.inputs,
                              drop_before={i: "shares" for i in leaving}).total
    np.testing.assert_array_equal(total, expected)
    np.testing.assert_array_equal(decode_integers(total), sum(
        decode_integers(deployment.inputs[i]) for i in staying))


def test_three_parties_lost_after_the_keys_refuse_naming_them_and_the_threshold():
    with pytest.raises(SecureSumError, match=r"2 parties remain, fewer than the threshold "
                       r"3; lost: \['p0', 'p2', 'p4'\]"):
        _Deployment().run([1, 3])


def _request_with_party_2_lost():
    deployment = _Deployment()
    staying = [0, 1, 3, 4]
    routed = deployment.routed(PARTIES, deployment.roster(PARTIES))
    return deployment, deployment.request(staying, deployment.survivors(staying, routed))


def test_loaded_parties_refuse_to_give_both_shares_of_one_party_and_to_answer_twice():
    deployment, request = _request_with_party_2_lost()
    hostile = message_to_bytes("request", dict(deployment.heard("request", request, 0),
                                               dropped=[2, 3]), deployment.agreement)
    with pytest.raises(SecureSumError, match="asks for both the self-mask share and the "
                       "mask-key share of party 'p3'"):
        deployment.unmask(0, hostile)
    answer = message_from_bytes("unmask", deployment.unmask(1, request),
                                deployment.agreement)
    assert set(answer["mask_shares"]) == {2} and set(answer["seed_shares"]) == {0, 1, 3, 4}
    # refused, nothing changed: party 0 answers the honest request; answered, a stage
    # is not answered again
    deployment.unmask(0, request)
    for index in (0, 1):
        with pytest.raises(SecureSumError, match="out of order"):
            deployment.unmask(index, request)


def test_loaded_parties_refuse_a_coordinator_that_sends_them_different_rosters():
    deployment = _Deployment()
    roster = deployment.roster(PARTIES)
    altered = dict(deployment.heard("roster", roster, 0))
    altered.pop(4)  # party 0 is told party 4 never advertised
    shares = message_from_bytes("shares", deployment.party(0, "shares", lambda party: (
        party.share_keys(deployment.heard("roster", message_to_bytes(
            "roster", altered, deployment.agreement), 0)))), deployment.agreement)
    routed = deployment.routed([1, 2, 3, 4], roster)
    forged = message_to_bytes("routed", {**deployment.heard("routed", routed[1], 1),
                                         0: routed_from(shares, 1)}, deployment.agreement)
    with pytest.raises(SecureSumError, match="refused by party 'p1': the message from "
                       "party 'p0', sealed: its shares do not open"):
        deployment.party(1, "masked", lambda party: party.masked_input(
            deployment.heard("routed", forged, 1), deployment.inputs[1]))


@pytest.fixture(scope="module")
def sent():
    """The bytes of the messages of every stage of a sum, party 2 lost after its keys."""
    deployment = _Deployment()
    deployment.run([0, 1, 3, 4])
    return deployment


def _edited(data, edit):
    """`data` edited as a hostile sender would: its content's digest written anew."""
    document = json.loads(data)
    edit(document)
    if isinstance(document.get("content"), (dict, list)):
        document["digest"] = content_digest(document["content"])
    return json.dumps(document, separators=(",", ":")).encode()


def _shortened(document, path):
    """The byte string at `path` in `document`'s content one word (8 bytes) shorter."""
    *above, last = path
    holder = document["content"]
    for key in above:
        holder = holder[key]
    holder[last] = base64.b64encode(base64.b64decode(holder[last])[:-8]).decode()


def _extended(stage, content):
    """`content` with one entry more than its shape has, and the field that names it."""
    if isinstance(content, list):
        content.append(5)
        return f"{stage}[{len(content) - 1}]"
    if stage in ("roster", "routed"):
        content["5"] = next(iter(content.values()))
        return f"{stage}[5]"
    content["extra"] = 0
    return "extra"


# by stage: the path to a byte string in its content, and the field that names it
SHORTENED = {"keys": (["identity_signature"], "identity_signature"),
             "shares": (["digests", "1", "seed"], "digests[1].seed"),
             "masked": (["masked"], "masked"), "confirm": (["signature"], "signature"),
             "unmask": (["seed_shares", "0"], "seed_shares[0]"),
             "roster": (["0", "commitment"], "roster[0].commitment"),
             "routed": (["1", "sealed"], "routed[1].sealed"),
             "request": (["signatures", "0"], "signatures[0]")}
OTHER_SESSION = _agreement(b"another session of the secure sum")


def _malformed(stage, case, data):
    """`data` made malformed as `case` says, the stage to read it as, and the field its
    refusal names."""
    first = "keys" if stage in TO_COORDINATOR else "roster"
    other = {"keys": "shares", "roster": "survivors"}.get(stage, first)
    message = message_from_bytes(stage, data, _agreement(), reader=_reader(stage))
    if case == "extra content":
        extended = {}
        return _edited(data, lambda d: extended.update(
            field=_extended(stage, d["content"]))), stage, extended["field"]
    return {
        "truncated": (data[:len(data) // 2], stage, "bytes"),
        "oversize": (data + b" " * 100_000, stage, "bytes"),
        "not JSON": (b"\xff" + data[1:], stage, "bytes"),
        "other format": (_edited(data, lambda d: d.update(format="1")), stage, "format"),
        "other session": (message_to_bytes(stage, message, OTHER_SESSION), stage, "session"),
        "other stage": (data, other, "stage"),
        "extra header": (_edited(data, lambda d: d.update(extra=1)), stage, "extra"),
    }[case]


@pytest.mark.parametrize("case", ["truncated", "oversize", "not JSON", "other format",
                                  "other session", "other stage", "extra header",
                                  "extra content"])
@pytest.mark.parametrize("stage", [*TO_COORDINATOR, "roster", "routed", "survivors",
                                   "request"])
def test_malformed_bytes_of_every_stage_are_refused_naming_the_field(sent, stage, case):
    data, read_as, field = _malformed(stage, case, sent.sent[stage][0])
    with pytest.raises(SecureSumError) as refusal:
        message_from_bytes(read_as, data, sent.agreement, reader=_reader(stage))
    assert refusal.value.field == field
    assert refusal.value.refused_by == (None if _reader(stage) is None else "p0")


@pytest.mark.parametrize("stage", SHORTENED)
def test_short_keys_shares_signatures_and_words_are_refused_naming_the_field(sent, stage):
    path, field = SHORTENED[stage]
    data = _edited(sent.sent[stage][0], lambda document: _shortened(document, path))
    with pytest.raises(SecureSumError, match="(bytes|words) in base64") as refusal:
        message_from_bytes(stage, data, sent.agreement, reader=_reader(stage))
    assert refusal.value.field == field
    # the coordinator's refusals name the party that sent the message
    assert refusal.value.party == ("p0" if stage in TO_COORDINATOR else None)


@pytest.mark.parametrize("stage", [*TO_COORDINATOR, "roster", "routed", "survivors",
                                   "request"])
def test_bytes_altered_anywhere_are_refused_or_read_as_a_message_of_the_stage(sent, stage):
    """Never another error: what is read is of the stage's shape, and writes back."""
    data, rng = sent.sent[stage][0], np.random.default_rng(len(stage))
    for _ in range(100):
        altered = bytearray(data)
        for _ in range(rng.integers(1, 4)):
            at = int(rng.integers(len(altered)))
            edits = [b"", bytes([int(rng.integers(256))]), b'"', b"[", b"{", b"0", b"A"]
            altered[at:at + 1] = edits[rng.integers(len(edits))]
        try:
            message = message_from_bytes(stage, bytes(altered), sent.agreement,
                                         reader=_reader(stage))
        except SecureSumError:
            continue
        message_to_bytes(stage, message, sent.agreement)


def test_messages_not_of_their_stages_shape_are_not_written(sent):
    agreement = sent.agreement
    with pytest.raises(ValueError, match="masked: not 64 words"):
        message_to_bytes("masked", dict(party=0, masked=np.zeros(64)), agreement)
    with pytest.raises(ValueError, match=r"signatures\[1\]: not 64 bytes"):
        message_to_bytes("request", dict(survivors=[1], dropped=[], signatures={1: None}),
                         agreement)
    with pytest.raises(ValueError, match="messages are keys, shares"):
        message_to_bytes("total", {}, agreement)


def test_saved_states_are_refused_for_another_sum_or_party_or_when_altered(sent):
    state = sent.states[0]
    for data, load, field in (
            (state, lambda d: SecureSumParty.from_bytes(OTHER_SESSION, 0, d,
                                                        IDENTITY_KEYS[0]), "session"),
            (state, lambda d: SecureSumParty.from_bytes(sent.agreement, 1, d,
                                                        IDENTITY_KEYS[1]), "index"),
            (_edited(state, lambda d: d["content"].update(stage="again")),
             lambda d: SecureSumParty.from_bytes(sent.agreement, 0, d, IDENTITY_KEYS[0]),
             "stage"),
            (_edited(state, lambda d: _shortened(d, ["shares", "1", "seed"])),
             lambda d: SecureSumParty.from_bytes(sent.agreement, 0, d, IDENTITY_KEYS[0]),
             "shares[1].seed"),
            (sent.coordinator_state[:-1],
             lambda d: SecureSumCoordinator.from_bytes(sent.agreement, d), "bytes"),
            (_edited(sent.coordinator_state, lambda d: _shortened(d, ["masked", "0"])),
             lambda d: SecureSumCoordinator.from_bytes(sent.agreement, d), "masked[0]"),
            (_edited(sent.coordinator_state, lambda d: _shortened(
                d, ["digests", "1", "2", "mask"])),
             lambda d: SecureSumCoordinator.from_bytes(sent.agreement, d),
             "digests[1][2].mask"),
            (sent.coordinator_state,
             lambda d: SecureSumCoordinator.from_bytes(OTHER_SESSION, d), "session")):
        with pytest.raises(SecureSumError) as refusal:
            load(data)
        assert refusal.value.field == field
    # a state is taken up with its party's identity key alone
    with pytest.raises(ValueError, match="given to party 'p0' is not the one the agreement "
                       "names"):
        SecureSumParty.from_bytes(sent.agreement, 0, state, IDENTITY_KEYS[1])


def _base64_texts(secret):
    """The base64 text of `secret` at each of the three offsets it may have in a longer
    byte string (less the groups it shares with its neighbours)."""
    return [base64.b64encode(bytes(offset) + secret)[4:-4] for offset in range(3)]


def test_no_secret_of_a_partys_state_is_in_what_it_sends(sent):
    messages = [data for stage in sent.sent.values() for data in stage]
    assert {stage: len(stage_sent) for stage, stage_sent in sent.sent.items()} == dict(
        keys=5, roster=1, shares=4, routed=4, masked=4, survivors=1, confirm=4, request=1,
        unmask=4)
    for index, state in sent.states.items():
        content = json.loads(state)["content"]
        secrets = [base64.b64decode(content[name])
                   for name in ("cipher", "mask", "signing", "self_seed")]
        # nor is the identity key, which no state holds either
        identity = crypto.private_bytes(IDENTITY_KEYS[index])
        assert not any(text in state for text in [identity, *_base64_texts(identity)])
        for secret in [*secrets, identity]:
            assert not any(text in data for data in messages
                           for text in [secret, *_base64_texts(secret)])


def test_each_message_holds_its_new_fields_at_their_sizes(sent):
    """The keys carry a 32-byte commitment and a 64-byte identity signature; the shares
    message a sealed box of two shares, their two digests per holder, and one
    signature; an unmasking answer, shares of 66 bytes."""
    content = {stage: json.loads(data[0])["content"] for stage, data in sent.sent.items()}
    routed = next(iter(content["routed"].values()))
    sizes = {stage: {name: len(base64.b64decode(value)) for name, value in fields.items()
                     if name != "party"}
             for stage, fields in (("keys", content["keys"]),
                                   ("roster", content["roster"]["0"]),
                                   ("digests", content["shares"]["digests"]["0"]),
                                   ("routed", dict(routed["digests"], sealed=routed["sealed"])),
                                   ("unmask", content["unmask"]["seed_shares"]))}
    assert sizes == dict(
        keys=dict(cipher=32, mask=32, signing=32, commitment=32, identity_signature=64),
        roster=dict(cipher=32, mask=32, signing=32, commitment=32, identity_signature=64),
        digests=dict(mask=32, seed=32), routed=dict(mask=32, seed=32, sealed=SEALED_BYTES),
        unmask={index: 66 for index in content["unmask"]["seed_shares"]})
    assert len(base64.b64decode(content["shares"]["signature"])) == 64
    assert SEALED_BYTES == 2 * 66 + 12 + 16
    assert {len(base64.b64decode(box)) for box in content["shares"]["sealed"].values()} == {
        SEALED_BYTES}
    assert all(json.loads(data[0])["format"] == "skfedkt secure sum message 4"
               for data in sent.sent.values())
