"""The secure sum: exact sums through dropouts down to the threshold, a named refusal
below it, a coordinator that learns nothing of one party's input, parties that refuse a
hostile coordinator (parties it made up among them) and a dealer of shares it did not
sign,
and a coordinator that leaves out altered shares and names who altered them."""

import itertools
from fractions import Fraction

import numpy as np
import pytest
from scipy import stats

from _secure_forgery import routed_from
from skfedkt._secure_sum import (
    STAGES,
    Agreement,
    FixedPoint,
    SecureSumCoordinator,
    SecureSumError,
    SecureSumParty,
    decode_integers,
    encode_integers,
    new_identities,
    run_secure_sum,
)
from skfedkt._deployment._secure import fixed_point_for
from skfedkt._secure_sum._shamir import combine, split

SESSION = b"a test session of the secure sum"
# every party's identity key, agreed before the sums: the private keys and the public
IDENTITY_KEYS, IDENTITIES = new_identities(7)


def _agreement(n=5, threshold=3, length=64, identities=IDENTITIES):
    return Agreement(SESSION, tuple(f"p{i}" for i in range(n)), threshold, length,
                     identities[:n])


def _sum(agreement, inputs, drop_before=None):
    return run_secure_sum(agreement, IDENTITY_KEYS[:len(agreement.parties)], inputs,
                          drop_before)


def _inputs(agreement, seed=0):
    rng = np.random.default_rng(seed)
    return {i: rng.integers(-1000, 1000, agreement.length)
            for i in range(len(agreement.parties))}


def test_the_sum_is_exact_with_no_party_lost():
    agreement = _agreement()
    inputs = _inputs(agreement)
    run = _sum(agreement, {i: encode_integers(x) for i, x in inputs.items()})
    assert run.survivors == (0, 1, 2, 3, 4)
    np.testing.assert_array_equal(decode_integers(run.total), sum(inputs.values()))


@pytest.mark.parametrize("stages", list(itertools.combinations_with_replacement(STAGES, 2)))
def test_two_parties_lost_at_any_stages_leave_the_survivors_sum(stages):
    agreement = _agreement()
    inputs = _inputs(agreement)
    run = _sum(agreement, {i: encode_integers(x) for i, x in inputs.items()},
                         drop_before={1: stages[0], 3: stages[1]})
    # a party counts in the sum once its masked input arrived
    counted = [i for i in range(5) if {1: stages[0], 3: stages[1]}.get(i, "unmask") in
               ("confirm", "unmask") or i not in (1, 3)]
    assert run.survivors == tuple(counted)
    np.testing.assert_array_equal(decode_integers(run.total),
                                  sum(inputs[i] for i in counted))


@pytest.mark.parametrize("stage", STAGES)
def test_fewer_than_the_threshold_refuse_naming_the_lost_and_the_threshold(stage):
    agreement = _agreement()
    inputs = {i: encode_integers(x) for i, x in _inputs(agreement).items()}
    with pytest.raises(SecureSumError, match=r"2 parties remain, fewer than the threshold "
                       r"3; lost: \['p0', 'p2', 'p4'\]"):
        _sum(agreement, inputs, drop_before={0: stage, 2: stage, 4: "unmask"})


def test_fixed_point_sums_stay_within_the_stated_error_bound():
    agreement = _agreement(length=10_000)
    encoding = FixedPoint(scale=2.0 ** 20, bound=1.0, parties=5)
    rng = np.random.default_rng(1)
    inputs = {i: rng.uniform(-1, 1, agreement.length) for i in range(5)}
    run = _sum(agreement, {i: encoding.encode(x) for i, x in inputs.items()})
    error = np.abs(encoding.decode(run.total) - sum(inputs.values())).max()
    assert 0 < error <= encoding.error_bound(5) == pytest.approx(5 / 2 ** 21)
    with pytest.raises(ValueError, match="beyond the agreed bound 1"):
        encoding.encode(np.array([1.5]))
    # the scale a secure sum agrees on leaves its total room in 64 bits
    for n_parties, bound in ((5, 1.0), (100, 1e6), (1000, 1e12)):
        scale = fixed_point_for(n_parties, bound).scale
        assert n_parties * bound * scale < 2.0 ** 63 and scale <= 2.0 ** 32


def test_a_sum_of_100_parties_past_2_to_the_53_decodes_within_the_stated_bound():
    """Values near the bound make the summed integer pass 2**53, where a float no longer
    holds every integer: the decoded sums stay within the stated bound of the exact sums
    of the inputs (as fractions), though beyond the encoding's rounding alone,
    n / (2 * scale), which the float's rounding of the decoded sum outweighs."""
    n_parties, bound = 100, 2.0 ** 28
    encoding = fixed_point_for(n_parties, bound)
    assert encoding.scale == 2.0 ** 27  # the finest at which 100 such values fit
    rng = np.random.default_rng(3)
    inputs = rng.uniform(0.99 * bound, bound, (n_parties, 200))
    total = sum(encoding.encode(values) for values in inputs)  # words add modulo 2**64
    assert (decode_integers(total) > 2 ** 53).all()
    decoded = encoding.decode(total)
    error = max(abs(Fraction(float(value)) - sum(map(Fraction, column)))
                for value, column in zip(decoded, inputs.T))
    assert n_parties / (2 * encoding.scale) < error <= encoding.error_bound(n_parties)
    # beyond the parties the encoding was made for, or a sum that could pass 63 bits
    with pytest.raises(ValueError, match="up to 100 parties, not 101"):
        encoding.error_bound(101)
    with pytest.raises(ValueError, match="can sum beyond 63 bits"):
        type(encoding)(scale=2.0 ** 32, bound=bound, parties=2 ** 12)
    with pytest.raises(ValueError, match="a power of two"):
        type(encoding)(scale=1000.0, bound=1.0)


def test_integers_beyond_their_bound_are_refused():
    np.testing.assert_array_equal(decode_integers(encode_integers([-5, 5], bound=5)),
                                  [-5, 5])
    with pytest.raises(ValueError, match="magnitude 6 is beyond the agreed bound 5"):
        encode_integers(np.array([1, -6]), bound=5)
    with pytest.raises(ValueError, match="beyond the 64-bit integers' bound"):
        encode_integers(np.array([2 ** 63], dtype=np.uint64))


def test_the_agreement_refuses_sums_that_protect_no_one():
    with pytest.raises(ValueError, match="at least 3 parties"):
        Agreement(SESSION, ("a", "b"), 2, 4, IDENTITIES[:2])
    with pytest.raises(ValueError, match="a majority of them, from 3 to 5; got 2"):
        Agreement(SESSION, tuple("abcde"), 2, 4, IDENTITIES[:5])
    with pytest.raises(ValueError, match="named once each"):
        Agreement(SESSION, tuple("abca"), 3, 4, IDENTITIES[:4])
    with pytest.raises(ValueError, match="a tuple of 3 public keys of 32 bytes"):
        Agreement(SESSION, tuple("abc"), 2, 4, IDENTITIES[:2])
    with pytest.raises(ValueError, match=r"Parties \['a', 'c'\] have one identity key"):
        Agreement(SESSION, tuple("abc"), 2, 4, (IDENTITIES[0], IDENTITIES[1], IDENTITIES[0]))
    # a party holds its own identity key, and no other
    with pytest.raises(ValueError, match="The identity key given to party 'p1' is not "
                       "the one the agreement names for it"):
        SecureSumParty(_agreement(), 1, IDENTITY_KEYS[0])


def test_any_threshold_of_shamir_shares_give_the_secret():
    secret = bytes(range(32))
    shares = split(secret, [1, 2, 3, 4, 5], 3)
    for chosen in itertools.combinations(shares, 3):
        assert combine({x: shares[x] for x in chosen}) == secret
    with pytest.raises(ValueError, match="do not combine"):
        combine({x: shares[x] for x in (1, 2)})


def test_no_input_appears_in_what_the_coordinator_received():
    agreement = _agreement(length=256)
    inputs = {i: encode_integers(x) for i, x in _inputs(agreement).items()}
    run = _sum(agreement, inputs, drop_before={2: "confirm"})
    transcript = b"".join(_bytes_of(message) for stage in run.received.values()
                          for message in stage)
    for words in inputs.values():
        raw = words.tobytes()
        assert not any(raw[start:start + 16] in transcript
                       for start in range(0, len(raw) - 16, 8))


def _bytes_of(value):
    if isinstance(value, dict):
        return b"".join(_bytes_of(item) for pair in value.items() for item in pair)
    if isinstance(value, (list, tuple)):
        return b"".join(_bytes_of(item) for item in value)
    if isinstance(value, np.ndarray):
        return value.tobytes()
    return value if isinstance(value, bytes) else repr(value).encode()


def test_the_coordinators_view_of_a_party_is_alike_for_any_input():
    """Its masked input, the one part of its messages that depends on its input, is
    distributed alike for an input of zeros and one of large counts (a chi-square test
    of every byte of its words), as are the sizes of all its messages."""
    agreement = _agreement(n=3, threshold=2, length=16)
    views = {}
    for name, value in (("zeros", 0), ("counts", 10 ** 6)):
        inputs = {0: encode_integers(np.full(16, value)),
                  **{i: encode_integers(np.ones(16, dtype=int)) for i in (1, 2)}}
        runs = [_sum(agreement, inputs) for _ in range(150)]
        views[name] = np.concatenate([
            next(m["masked"] for m in run.received["masked"] if m["party"] == 0).view(np.uint8)
            for run in runs])
        sizes = {len(_bytes_of([m for m in stage if m["party"] == 0]))
                 for run in runs for stage in run.received.values()}
        views[f"{name} sizes"] = sizes
    table = np.array([np.bincount(views[name].astype(int) // 16, minlength=16)
                      for name in ("zeros", "counts")])
    assert stats.chi2_contingency(table).pvalue > 1e-3
    assert views["zeros sizes"] == views["counts sizes"]


class _Federation:
    """Five parties and an honest coordinator taken stage by stage, for a hostile
    coordinator's requests to be tried at any point."""

    def __init__(self, n=5, threshold=3):
        self.agreement = _agreement(n, threshold)
        self.parties = [SecureSumParty(self.agreement, i, IDENTITY_KEYS[i]) for i in range(n)]
        self.coordinator = SecureSumCoordinator(self.agreement)
        self.inputs = {i: encode_integers(x) for i, x in _inputs(self.agreement).items()}

    def keys(self):
        return self.coordinator.collect_keys([party.advertise() for party in self.parties])

    def routed(self):
        roster = self.keys()
        return self.coordinator.route_shares([party.share_keys(roster)
                                              for party in self.parties])

    def confirmed(self, leaving=()):
        routed = self.routed()
        survivors = self.coordinator.collect_masked([
            party.masked_input(routed[i], self.inputs[i])
            for i, party in enumerate(self.parties) if i not in leaving])
        return self.coordinator.unmask_request([self.parties[i].confirm(survivors)
                                                for i in survivors])

    def unmasked(self, leaving=()):
        """Every survivor's answer to the unmasking request, `leaving` lost before
        their masked input."""
        request = self.confirmed(leaving)
        return [self.parties[i].unmask(**request) for i in request["survivors"]]

    def expected(self, leaving=()):
        return sum(decode_integers(self.inputs[i]) for i in range(len(self.parties))
                   if i not in leaving)


def test_parties_refuse_a_coordinator_that_sends_them_different_rosters():
    federation = _Federation()
    roster = federation.keys()
    altered = dict(roster)
    altered.pop(4)  # party 0 is told party 4 never advertised
    shares = [party.share_keys(altered if i == 0 else roster)
              for i, party in enumerate(federation.parties)]
    routed = federation.coordinator.route_shares(shares[1:])
    # party 0's shares were sealed over another roster: they do not open
    with pytest.raises(SecureSumError, match="refused by party 'p1': the message from "
                       "party 'p0', sealed: its shares do not open"):
        federation.parties[1].masked_input({**routed[1], 0: routed_from(shares[0], 1)},
                                           federation.inputs[1])


def test_parties_refuse_to_give_both_shares_of_one_party():
    federation = _Federation()
    request = federation.confirmed(leaving=(2,))
    hostile = dict(request, survivors=request["survivors"], dropped=[2, 3])
    for party in federation.parties[:2]:
        with pytest.raises(SecureSumError, match="asks for both the self-mask share and "
                           "the mask-key share of party 'p3'"):
            party.unmask(**hostile)


def test_parties_refuse_survivors_they_did_not_confirm_and_a_second_request():
    federation = _Federation()
    request = federation.confirmed(leaving=(2,))
    with pytest.raises(SecureSumError, match="not the survivors this party confirmed"):
        federation.parties[0].unmask(**dict(request, survivors=[0, 1, 3]),)
    answer = federation.parties[1].unmask(**request)
    assert set(answer["mask_shares"]) == {2} and set(answer["seed_shares"]) == {0, 1, 3, 4}
    with pytest.raises(SecureSumError, match="out of order"):
        federation.parties[1].unmask(**request)


def test_parties_refuse_to_unmask_without_the_thresholds_confirmations():
    federation = _Federation()
    request = federation.confirmed()
    forged = dict(request["signatures"])
    for index in (1, 2, 3):
        forged[index] = bytes(64)
    with pytest.raises(SecureSumError, match="signatures: 2 survivors confirmed these "
                       "survivors, fewer than the threshold 3"):
        federation.parties[0].unmask(**dict(request, signatures=forged))


def test_a_party_refuses_a_roster_with_its_own_keys_altered():
    federation = _Federation()
    roster = federation.keys()
    altered = {index: dict(keys) for index, keys in roster.items()}
    altered[0]["mask"] = roster[1]["mask"]
    with pytest.raises(SecureSumError, match="this party's own keys are missing or altered"):
        federation.parties[0].share_keys(altered)


def test_the_coordinator_refuses_malformed_messages_naming_the_party():
    federation = _Federation()
    roster = federation.keys()
    shares = [party.share_keys(roster) for party in federation.parties]
    shares[2]["sealed"].pop(0)
    with pytest.raises(SecureSumError, match="from party 'p2', sealed: not one sealed share"):
        federation.coordinator.route_shares(shares)
    with pytest.raises(SecureSumError, match="a keys message from 7"):
        SecureSumCoordinator(federation.agreement).collect_keys([{"party": 7}])


def _made_up_roster(federation, victim=0):
    """The roster a coordinator gives `victim` to unmask it alone: the victim's own
    entry, and parties it runs itself, their keys well formed and signed by identity
    keys it made."""
    forged_keys, forged = new_identities(len(federation.parties))
    agreement = _agreement(len(federation.parties), federation.agreement.threshold,
                           identities=forged)
    sybils = {i: SecureSumParty(agreement, i, forged_keys[i]).advertise()
              for i in range(len(federation.parties)) if i != victim}
    roster = federation.keys()
    return {i: roster[i] if i == victim else {key: value for key, value in sybils[i].items()
                                               if key != "party"} for i in roster}


def test_a_party_refuses_a_roster_of_parties_the_coordinator_made_up():
    federation = _Federation()
    with pytest.raises(SecureSumError, match="refused by party 'p0': the message from "
                       "party 'p1', roster: its keys are not signed by the identity the "
                       "consortium agreed for it: a party the coordinator made up") as refusal:
        federation.parties[0].share_keys(_made_up_roster(federation))
    assert (refusal.value.party, refusal.value.field) == ("p1", "roster")


def test_a_party_refuses_a_roster_entry_unsigned_or_altered_naming_its_party():
    federation = _Federation()
    roster = federation.keys()
    unsigned = {i: dict(entry) for i, entry in roster.items()}
    del unsigned[3]["identity_signature"]
    with pytest.raises(SecureSumError, match="from party 'p3', roster: .*identity_signature "
                       "of 64 bytes expected"):
        federation.parties[0].share_keys(unsigned)
    # another party's keys swapped for the coordinator's own, its signature kept
    altered = {i: dict(entry) for i, entry in roster.items()}
    altered[2]["mask"] = _made_up_roster(_Federation())[2]["mask"]
    with pytest.raises(SecureSumError, match="from party 'p2', roster: its keys are not "
                       "signed by the identity"):
        federation.parties[1].share_keys(altered)


def test_the_coordinator_refuses_keys_no_agreed_identity_signed_naming_the_party():
    federation = _Federation()
    advertised = [party.advertise() for party in federation.parties]
    forged = dict(_made_up_roster(_Federation())[4], party=4)
    with pytest.raises(SecureSumError, match="by the coordinator: the message from party "
                       "'p4', identity_signature: not the signature of the identity the "
                       "consortium agreed for this party"):
        federation.coordinator.collect_keys([*advertised[:4], forged])
    # one advertisement checked alone, as a deployment leaves out one bad upload
    assert federation.coordinator.checked_advertisement(advertised[4])["commitment"]
    with pytest.raises(SecureSumError, match="party 'p4', identity_signature"):
        federation.coordinator.checked_advertisement(forged)


def _flip_a_bit(answer, field, owner):
    share = answer[field][owner]
    answer[field][owner] = bytes([share[0] ^ 1]) + share[1:]


@pytest.mark.parametrize("field, leaving", [("seed_shares", ()), ("mask_shares", (6,))])
def test_the_coordinator_leaves_out_an_altered_share_naming_its_holder(field, leaving):
    """7 parties, a threshold of 5: p3 gives back one share (of p1's self-mask seed, or
    of p6's mask key once p6 dropped) with one bit flipped. The coordinator sums the
    survivors exactly from the other shares, and names p3."""
    federation = _Federation(n=7, threshold=5)
    answers = federation.unmasked(leaving)
    assert len(answers) == 7 - len(leaving)
    owner = 1 if field == "seed_shares" else 6
    _flip_a_bit(answers[3], field, owner)
    total = federation.coordinator.total(answers)
    np.testing.assert_array_equal(decode_integers(total), federation.expected(leaving))
    what = "self-mask seed" if field == "seed_shares" else "mask key"
    assert federation.coordinator.refused_shares == {
        "p3": "gave back shares other than the ones their dealers signed, so altered, and "
              f"left out: of the {what} of party 'p{owner}'"}


def test_too_few_good_shares_refuse_the_sum_naming_who_altered_them():
    federation = _Federation(n=7, threshold=5)
    answers = federation.unmasked()
    for holder in (2, 4, 5):
        _flip_a_bit(answers[holder], "seed_shares", 0)
    with pytest.raises(SecureSumError, match=r"seed_shares: the self-mask seed of party 'p0' "
                       r"has 4 good shares, fewer than the threshold 5: parties \['p2', 'p4', "
                       r"'p5'\] gave back altered ones"):
        federation.coordinator.total(answers)


def test_a_holder_refuses_shares_other_than_the_ones_their_dealer_signed_naming_it():
    federation = _Federation()
    roster = federation.keys()
    dealer = federation.parties[2]
    digests = dealer._digests

    def misdigested(dealer_index, holder, dealt):  # it signs another digest of p0's seed
        pair = digests(dealer_index, holder, dealt)
        return dict(pair, seed=bytes(32)) if holder == 0 else pair

    dealer._digests = misdigested
    routed = federation.coordinator.route_shares([party.share_keys(roster)
                                                  for party in federation.parties])
    with pytest.raises(SecureSumError, match="refused by party 'p0': the message from party "
                       "'p2', sealed: its shares are not the ones whose digests it signed"):
        federation.parties[0].masked_input(routed[0], federation.inputs[0])
    # the others' shares from p2 are the ones it signed
    federation.parties[1].masked_input(routed[1], federation.inputs[1])


@pytest.mark.parametrize("field, edit", [
    ("signature", lambda message: dict(message, signature=bytes(64))),
    ("digests", lambda message: dict(message, digests={
        holder: pair for holder, pair in message["digests"].items() if holder != 0}))])
def test_the_coordinator_refuses_shares_whose_digests_their_dealer_did_not_sign(field, edit):
    federation = _Federation()
    roster = federation.keys()
    shares = [party.share_keys(roster) for party in federation.parties]
    shares[3] = edit(shares[3])
    with pytest.raises(SecureSumError, match=f"by the coordinator: the message from party "
                       f"'p3', {field}: not "):
        federation.coordinator.route_shares(shares)


def test_the_coordinator_names_a_dealer_whose_signed_shares_are_inconsistent(monkeypatch):
    federation = _Federation()
    seed = federation.parties[2]._self_seed

    def inconsistent(secret, points, threshold):  # p4's share of p2's seed off its polynomial
        shares = split(secret, points, threshold)
        if secret == seed:
            shares[5] = shares[5][:-1] + bytes([shares[5][-1] ^ 1])
        return shares

    monkeypatch.setattr("skfedkt._secure_sum._party.split", inconsistent)
    answers = federation.unmasked()
    with pytest.raises(SecureSumError, match="by the coordinator: the message from party "
                       "'p2', seed_shares: its shares, which it signed, do not combine "
                       "into the self-mask seed it committed to"):
        federation.coordinator.total(answers)
    assert federation.coordinator.refused_shares == {}
