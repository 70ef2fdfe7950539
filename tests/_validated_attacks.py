"""A hostile party's edits of what it proves under validated sums, shared by the tests of
validated sums in fit and deployed: each edit, the estimator it attacks and the sum."""

from dataclasses import replace

import numpy as np
from sklearn.neural_network import MLPClassifier
from sklearn.tree import DecisionTreeClassifier

from skfedkt import (
    DSFLClassifier,
    FedAvgClassifier,
    FedCTClassifier,
    FedKTClassifier,
    OneShotEnsembleClassifier,
    SoftVotes,
)
from skfedkt._validated_sum import _circuits
from skfedkt._validated_sum._field import FIELD64


def fedkt(voting):
    """FedKT labelling the public rows alone, not the copies that make up its default
    2,000 rows (each row's prior-corrected terms cost a proof of their bits)."""
    return FedKTClassifier(DecisionTreeClassifier(), n_teachers=3, n_students=3,
                           voting=voting, random_state=0)


def oneshot():
    return OneShotEnsembleClassifier(DecisionTreeClassifier(), distill=True, random_state=0)


def fedct():
    return FedCTClassifier(DecisionTreeClassifier(), distill=True, random_state=0)


def dsfl():
    return DSFLClassifier(DecisionTreeClassifier(), distill=True, random_state=0)


def fedavg(max_weight_norm=None):
    return FedAvgClassifier(MLPClassifier(hidden_layer_sizes=(2,), max_iter=5), n_rounds=2,
                            max_weight_norm=max_weight_norm, random_state=0)


def bits_plus(delta_first, delta_second):
    """An edit of the bits a party proves: its rows' first entry raised by
    `delta_first` and second by `delta_second` (times the sum's units), in the entries'
    lowest bit, which then is no bit (its honest encoder refuses such values)."""

    def edit(meas, circuit, spec):
        p, bits = FIELD64.modulus, circuit.max_measurement.bit_length()
        entries = meas.reshape(-1, spec.shape[-1] + spec.at_most if spec.shape else 1,
                               bits).astype(object)
        entries[:, 0, 0] = (entries[:, 0, 0] + delta_first * spec.scale) % p
        if entries.shape[1] > 1:
            entries[:, 1, 0] = (entries[:, 1, 0] + delta_second * spec.scale) % p
        return entries.astype(np.uint64).ravel()

    return edit


def rows_doubled(meas, circuit, spec):
    """Bits that are bits, each row's entries in range, and the rows' total doubled:
    every row's first entry set to the row's whole total."""
    bits = circuit.max_measurement.bit_length()
    entries = meas.reshape(-1, spec.row_length, bits).copy()
    total = circuit.row_total
    entries[:, 0] = [(total >> bit) & 1 for bit in range(bits - 1)] + [0]
    return entries.ravel()


def two_at_the_largest(meas, circuit, spec):
    """Bits that are bits and values within their range, the first two at the largest
    magnitude (all their bits set): an array whose norm is beyond its bound."""
    bits = circuit.max_measurement.bit_length()
    edited = meas.copy()
    edited[:2 * bits] = 1
    return edited


def hostile(monkeypatch, module, party, name, edit):
    """Party `party`'s client edits what it proves of sum `name` by `edit`, where
    `module` makes its reports (``party_reports``)."""
    honest_encode, honest_reports = _circuits.SumVec.encode, module.party_reports
    editing = {}

    def encode(self, measurement):
        meas = honest_encode(self, measurement)
        spec = editing.get("spec")
        return meas if spec is None else edit(meas, self, spec)

    def reports(agreement, index, values):
        if agreement.parties[index] != party:
            return honest_reports(agreement, index, values)
        to_leader, to_helper = {}, {}
        for spec in agreement.specs:
            editing["spec"] = spec if spec.name == name else None
            one = replace(agreement, specs=(spec,))
            leader, helper = honest_reports(one, index, values)
            to_leader.update(leader)
            to_helper.update(helper)
        editing.clear()
        return to_leader, to_helper

    monkeypatch.setattr(_circuits.SumVec, "encode", encode)
    monkeypatch.setattr(module, "party_reports", reports)


# each attack: the estimator it attacks, the sum edited, the edit
ATTACKS = {
    "hard votes +-1000": (fedkt("hard"), "votes", bits_plus(1000, -1000)),
    "class counts +-1,000,000": (fedkt("hard"), "class_counts",
                                 bits_plus(10 ** 6, -10 ** 6)),
    "rows of votes adding up to twice the students": (fedkt("hard"), "votes",
                                                       rows_doubled),
    "soft votes +-1000": (fedkt(SoftVotes(min_public_rows=0)), "proba",
                          bits_plus(1000, -1000)),
    "probabilities of 2 and -1": (oneshot(), "votes", bits_plus(1, -1)),
    "a weight beyond its bound": (fedavg(), "weighted_0", bits_plus(2 ** 30, 0)),
    "weights beyond their norm bound": (fedavg(max_weight_norm=50.0), "weighted_0",
                                        two_at_the_largest),
    "labels counted twice": (fedct(), "label_counts", bits_plus(1, 0)),
}
# every algorithm, as its honest validated fit is compared with the plain one
HONEST = {"fedkt-hard": fedkt("hard"), "fedkt-soft": fedkt(SoftVotes(min_public_rows=0)),
          "oneshot": oneshot(), "fedct": fedct(), "dsfl": dsfl(), "fedavg": fedavg(),
          "fedavg-clipped": fedavg(max_weight_norm=1.0)}
