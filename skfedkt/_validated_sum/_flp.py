"""The fully linear proof of Boneh, Boyle, Corrigan-Gibbs, Gilboa and Ishai (CRYPTO 2019,
Theorem 4.3) as draft-irtf-cfrg-vdaf specifies it (section 7.3), for a circuit of one
gadget, vectorised over the gadget's calls.

The prover puts each of the gadget's input wires through a polynomial: its value at the
p-th roots of unity is a random seed, then the wire's value on each call (p, a power of
two, above the number of calls). The gadget applied to those polynomials is a polynomial
of degree 2(p - 1) whose values on the roots are the gadget's outputs; the proof is the
seeds and that polynomial's values at the first 2p - 1 of the 2p-th roots. Each verifier
holds a share of the input and of the proof, both linear: it computes its share of the
circuit's output with the gadget's outputs read off the proof, and its shares of the wire
polynomials and the gadget polynomial at a random point t. Together, the shares say
whether the output is 0 and whether the gadget polynomial is the gadget of the wires at t.
"""

from __future__ import annotations

import numpy as np

from ._circuits import Circuit


def wire_poly_len(calls: int) -> int:
    """p: the first power of two above the number of calls (the seed takes a node)."""
    return 1 << calls.bit_length()


class FLP:
    """Prove, query and decide for one circuit."""

    def __init__(self, circuit: Circuit):
        self.circuit = circuit
        self.field = circuit.field
        self.wire_len = wire_poly_len(circuit.calls)
        self.prove_rand_len = circuit.arity
        self.query_rand_len = 1 + (circuit.eval_output_len
                                   if circuit.eval_output_len > 1 else 0)
        self.proof_len = circuit.arity + 2 * self.wire_len - 1
        self.verifier_len = circuit.arity + 2

    def _wires(self, seeds: np.ndarray, inputs: np.ndarray) -> np.ndarray:
        """Each input wire's values on the p-th roots: seed, one per call, then zeros."""
        wires = self.field.zeros((self.circuit.arity, self.wire_len))
        wires[:, 0] = seeds
        wires[:, 1:self.circuit.calls + 1] = inputs.T
        return wires

    def prove(self, meas: np.ndarray, prove_rand: np.ndarray,
              joint_rand: np.ndarray) -> np.ndarray:
        field = self.field
        inputs = self.circuit.gadget_inputs(meas, joint_rand, field.scalar(1))
        doubled = field.double_evaluations(self._wires(prove_rand, inputs))
        gadget_poly = self.circuit.gadget(doubled.T)
        return np.concatenate([prove_rand, gadget_poly[:2 * self.wire_len - 1]])

    def query(self, meas: np.ndarray, proof: np.ndarray, query_rand: np.ndarray,
              joint_rand: np.ndarray, num_shares: int) -> np.ndarray:
        field, circuit = self.field, self.circuit
        shares_inv = field.inv(field.scalar(num_shares))
        seeds, gadget_poly = proof[:circuit.arity], field.complete_values(proof[circuit.arity:])
        gadget_outputs = gadget_poly[2:2 * circuit.calls + 1:2]  # at the p-th roots 1..calls
        outputs = circuit.outputs(meas, gadget_outputs, shares_inv)
        if circuit.eval_output_len > 1:
            combined = field.sum(field.mul(query_rand[:circuit.eval_output_len], outputs))
            at = query_rand[circuit.eval_output_len]
        else:
            combined, at = outputs[0], query_rand[0]
        if field.power(at, self.wire_len) == field.scalar(1):
            raise ValueError("the query point is a root of unity")
        inputs = circuit.gadget_inputs(meas, joint_rand, shares_inv)
        wire_checks = field.evaluate(self._wires(seeds, inputs), at)
        gadget_check = field.evaluate(gadget_poly, at)
        return np.concatenate([np.asarray(combined)[None], wire_checks,
                               np.asarray(gadget_check)[None]])

    def decide(self, verifier: np.ndarray) -> bool:
        combined, wire_checks, gadget_check = verifier[0], verifier[1:-1], verifier[-1]
        return bool(combined == 0) and bool(self.circuit.gadget(wire_checks) == gadget_check)
