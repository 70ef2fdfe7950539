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
