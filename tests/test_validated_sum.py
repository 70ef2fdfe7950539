"""The validated sum's Prio3 against draft-irtf-cfrg-vdaf's published test vectors: every
share, verifier share and message byte for byte, and every corrupted report refused at
the operation the draft says."""

import json
from pathlib import Path

import numpy as np
import pytest

from skfedkt._validated_sum._circuits import Count, Histogram, MultihotCountVec, SumVec
from skfedkt._validated_sum._field import FIELD64, FIELD128
from skfedkt._validated_sum._prio3 import Prio3, Xof

VECTORS = Path(__file__).parent / "data" / "vdaf"


def _instance(name, vector):
    """The draft's instances (vdaf_prio3.py): ids 1, 3, 4, 5, and 0xFFFFFFFF for the
    multiproof SumVec over Field64 with three proofs."""
    shares = vector["shares"]
    if name == "Prio3Count":
        return Prio3(Count(FIELD64), algorithm_id=1, shares=shares)
    if name == "Prio3SumVec":
        return Prio3(SumVec(FIELD128, vector["length"], vector["max_measurement"],
                            vector["chunk_length"]), algorithm_id=3, shares=shares)
    if name == "Prio3SumVecWithMultiproof":
        return Prio3(SumVec(FIELD64, vector["length"], vector["max_measurement"],
                            vector["chunk_length"]), algorithm_id=0xFFFFFFFF,
                     shares=shares, proofs=3)
    if name == "Prio3Histogram":
        return Prio3(Histogram(FIELD128, vector["length"], vector["chunk_length"]),
                     algorithm_id=4, shares=shares)
    return Prio3(MultihotCountVec(FIELD128, vector["length"], vector["max_weight"],
                                  vector["chunk_length"]), algorithm_id=5, shares=shares)


def _public_share(prio, hex_):
    data = bytes.fromhex(hex_)
    if not prio.uses_joint_rand:
        assert data == b""
        return None
    return [data[i:i + 32] for i in range(0, len(data), 32)]


def _operations(vector, index):
    """A report's operations (aggregate and unshard, over all reports, are checked after)."""
    return [op for op in vector["operations"] if op.get("report_index") == index]


def _run(prio, vector, index, report):
    """Each report's operations in the vector's order; returns the outcomes."""
    ctx, key = bytes.fromhex(vector["ctx"]), bytes.fromhex(vector["verify_key"])
    nonce = bytes.fromhex(report["nonce"])
    public = _public_share(prio, report["public_share"])
    states, verifier_shares, outcomes, out_shares = {}, {}, [], []
    for operation in _operations(vector, index):
        kind = operation["operation"]
        try:
            if kind == "shard":
                parts, shares = prio.shard(ctx, prio.circuit.encode(report["measurement"]),
                                           nonce, bytes.fromhex(report["rand"]))
                assert b"".join(parts or []).hex() == report["public_share"]
                assert [prio.encode_input_share(s).hex() for s in shares] == \
                    report["input_shares"]
            elif kind == "verify_init":
                agg = operation["aggregator_id"]
                share = prio.decode_input_share(agg, bytes.fromhex(report["input_shares"][agg]))
                states[agg], verifier_shares[agg] = prio.verify_init(
                    key, ctx, agg, nonce, public, share)
                assert prio.encode_verifier_share(verifier_shares[agg]).hex() == \
                    report["verifier_shares"][0][agg]
            elif kind == "verifier_shares_to_message":
                shares = [prio.decode_verifier_share(bytes.fromhex(hex_))
                          for hex_ in report["verifier_shares"][0]]
                message = prio.verifier_shares_to_message(ctx, shares)
                assert (message or b"").hex() == report["verifier_messages"][0]
            else:
                agg = operation["aggregator_id"]
                message = bytes.fromhex(report["verifier_messages"][0]) or None
                out = prio.verify_next(states[agg], message)
                assert prio.field.encode(out).hex() == report["out_shares"][agg]
                out_shares.append((agg, out))
            outcomes.append(True)
        except ValueError:
            outcomes.append(False)
    expected = [op["success"] for op in _operations(vector, index)]
    assert outcomes == expected
    return out_shares


@pytest.mark.parametrize("path", sorted(VECTORS.glob("Prio3*.json")), ids=lambda p: p.stem)
def test_prio3_matches_the_drafts_test_vectors(path):
    vector = json.loads(path.read_text())
    prio = _instance(path.stem.split("_")[0], vector)
    totals = {}
    for index, report in enumerate(vector["reports"]):
        for agg, out in _run(prio, vector, index, report):
            totals[agg] = prio.field.add(totals.get(agg, prio.field.zeros(len(out))), out)
    assert [prio.field.encode(totals[agg]).hex() for agg in sorted(totals)] == \
        vector["agg_shares"]
    if totals:
        result = prio.field.add(*[totals[agg] for agg in sorted(totals)][:2])
        for extra in [totals[agg] for agg in sorted(totals)][2:]:
            result = prio.field.add(result, extra)
        assert [int(v) for v in np.atleast_1d(result)] == np.atleast_1d(
            vector["agg_result"]).tolist()


def test_the_xof_matches_the_drafts_test_vector():
    vector = json.loads((VECTORS / "XofTurboShake128.json").read_text())
    seed, dst, binder = (bytes.fromhex(vector[k]) for k in ("seed", "dst", "binder"))
    assert Xof.derive_seed(seed, dst, binder).hex() == vector["derived_seed"]
    expanded = Xof.expand(FIELD128, seed, dst, binder, vector["length"])
    assert FIELD128.encode(expanded).hex() == vector["expanded_vec_field128"]


# --- validated sums in fit ------------------------------------------------------------

import warnings  # noqa: E402

from sklearn.datasets import load_breast_cancer  # noqa: E402

import skfedkt  # noqa: E402
from _validated_attacks import ATTACKS, HONEST, fedkt, hostile  # noqa: E402
from skfedkt import FedAvgClassifier  # noqa: E402
from skfedkt._validated_sum import _simulation  # noqa: E402
from skfedkt._deployment._validated import RefusedPartyWarning  # noqa: E402
from skfedkt._validated_sum._sums import SumSpec  # noqa: E402
from dataclasses import replace  # noqa: E402

X, Y = load_breast_cancer(return_X_y=True)
PUBLIC = np.arange(len(Y)) < 150
GROUPS = np.arange(len(Y)) % 5


def _fit(estimator, mode, keep=None):
    keep = ~PUBLIC if keep is None else ~PUBLIC & keep
    with skfedkt.config_context(secure_aggregation=mode):
        estimator.fit(X[keep], Y[keep], groups=GROUPS[keep], X_unlabeled=X[PUBLIC])
    return estimator.predict_proba(X)


@pytest.mark.parametrize("estimator", list(HONEST.values()), ids=list(HONEST))
def test_honest_parties_give_the_plain_model(estimator):
    """Exactly, but for FedAvg: its weights within their fixed point, which the next
    round's training carries into its outputs (within 1e-5)."""
    validated, plain = _fit(estimator, "validated"), _fit(estimator, False)
    assert np.allclose(validated, plain, rtol=0, atol=1e-5)
    if not isinstance(estimator, FedAvgClassifier):
        assert np.array_equal(validated, plain)


@pytest.mark.parametrize("attack", list(ATTACKS))
def test_a_party_that_edits_its_sums_is_refused_by_name_and_left_out(monkeypatch, attack):
    estimator, name, edit = ATTACKS[attack]
    four = _fit(estimator, False, keep=GROUPS != 4)
    hostile(monkeypatch, _simulation, party=4, name=name, edit=edit)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        attacked = _fit(estimator, "validated")
    refusals = {str(w.message) for w in caught if w.category is RefusedPartyWarning}
    assert refusals and all(f"party 4 for {name!r}" in refusal for refusal in refusals)
    assert all("proof verifier check failed" in refusal for refusal in refusals)
    assert np.allclose(attacked, four, rtol=0, atol=1e-5)


def test_a_party_refuses_to_prove_values_outside_their_range():
    spec = SumSpec("votes", (2, 2), 1, 0, 3, row_totals=(3,))
    assert spec.units(np.array([[1, 2], [3, 0]]), 0).tolist() == [1, 2, 3, 0]
    with pytest.raises(ValueError, match="outside its agreed range"):
        spec.units(np.array([[4, -1], [3, 0]]), 0)


def test_rows_of_floats_are_rounded_to_their_exact_total():
    spec = SumSpec("proba", (3, 3), 2 ** 4, 0, 16, row_totals=(16,))
    rows = np.array([[1 / 3] * 3, [0.5, 0.25, 0.25], [0.9, 0.05, 0.05]])
    units = spec.units(rows, 0).reshape(3, 3)
    assert (units.sum(axis=1) == 16).all() and np.abs(units / 16 - rows).max() <= 1 / 16


def test_the_mode_is_checked():
    with pytest.raises(TypeError, match="'masked' or 'validated'"):
        skfedkt.set_config(secure_aggregation="checked")


def test_a_report_that_is_no_share_is_refused_by_name(monkeypatch):
    honest_reports = _simulation.party_reports

    def reports(agreement, index, values):
        to_leader, to_helper = honest_reports(agreement, index, values)
        if agreement.parties[index] == 2:
            to_leader = {name: replace(report, share=report.share[:-8])
                         for name, report in to_leader.items()}
        return to_leader, to_helper

    monkeypatch.setattr(_simulation, "party_reports", reports)
    estimator = fedkt("hard")
    with pytest.warns(RefusedPartyWarning, match=r"party 2 for '\w+' was refused: an "
                                                 r"input share of \d+ bytes, not \d+"):
        attacked = _fit(estimator, "validated")
    assert np.array_equal(attacked, _fit(estimator, False, keep=GROUPS != 2))


def test_parties_and_aggregators_in_parallel_give_the_same_model():
    """n_jobs=2 runs each party's proofs and both aggregators' checks in worker
    processes; the model is the plain one of any n_jobs."""
    parallel = _fit(fedkt("hard").set_params(n_jobs=2), "validated")
    assert np.array_equal(parallel, _fit(fedkt("hard"), False))
