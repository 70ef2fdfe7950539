"""Validity circuits: what makes an input valid, as arithmetic a proof can check on shares.

Each circuit here calls one gadget, a sum of ``chunk_length`` products (the draft's
``ParallelSum(Mul(), chunk_length)``; Count's single product is the case chunk_length 1),
so one proof system (`_flp`) serves them all. A circuit says what the gadget is given on
each call, affine in the input so that each aggregator computes its share of it, and how
the circuit's outputs follow from the gadget's; an input is valid when every output is 0.

Count, SumVec, Histogram and MultihotCountVec are the draft's (draft-irtf-cfrg-vdaf,
section 7.4). ``RowSumVec`` is ours: a SumVec whose rows (of ``row_length`` entries)
each add up to ``row_total``, as a party's votes do (each student votes once per row);
and ``NormSumVec``: a SumVec of signed values within an L2 norm (FedAvg's weights).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass, field as dataclass_field

import numpy as np

from ._field import Field


def range_checked_bits(max_measurement: int) -> tuple[int, np.ndarray]:
    """The draft's encoding of an integer in [0, max_measurement] as bits with weights
    1, 2, ..., 2^(b-2) and a last weight that makes them add up to max_measurement: any
    0/1 vector then decodes into the range, and every value of the range is reached."""
    bits = max_measurement.bit_length()
    rest = 2 ** (bits - 1) - 1
    weights = [1 << bit for bit in range(bits - 1)] + [max_measurement - rest]
    return bits, np.array(weights, dtype=object)


def encode_range_checked(values: np.ndarray, max_measurement: int) -> np.ndarray:
    """Integers in [0, max_measurement] (any shape) as their bits, in a last axis."""
    bits, weights = range_checked_bits(max_measurement)
    values = np.asarray(values, dtype=np.int64)
    if values.size and (values.min() < 0 or values.max() > max_measurement):
        raise ValueError(f"a value is outside [0, {max_measurement}]")
    high = values > 2 ** (bits - 1) - 1
    rest = np.where(high, values - int(weights[-1]), values)
    encoded = (rest[..., None] >> np.arange(bits - 1)) & 1
    return np.concatenate([encoded, high[..., None].astype(np.int64)], axis=-1)


def decode_range_checked(field: Field, bits: np.ndarray, max_measurement: int) -> np.ndarray:
    """The weighted sum of bits (last axis), on shares as on values: it is linear."""
    _, weights = range_checked_bits(max_measurement)
    return field.sum(field.mul(bits, field.array(weights)), axis=-1)


@dataclass(frozen=True)
class Circuit(ABC):
    """A validity circuit over one gadget, a sum of ``chunk_length`` products."""

    field: Field
    meas_len: int = dataclass_field(init=False)
    output_len: int = dataclass_field(init=False)
    joint_rand_len: int = dataclass_field(init=False)
    eval_output_len: int = dataclass_field(init=False)
    chunk_length: int = dataclass_field(init=False)
    calls: int = dataclass_field(init=False)

    def _shape(self, **sizes: int) -> None:
        for name, value in sizes.items():
            object.__setattr__(self, name, value)

    @property
    def arity(self) -> int:
        return 2 * self.chunk_length

    @abstractmethod
    def encode(self, measurement) -> np.ndarray:
        """The measurement as field elements, refused where it is not valid."""

    @abstractmethod
    def gadget_inputs(self, meas: np.ndarray, joint_rand: np.ndarray,
                      shares_inv: np.ndarray) -> np.ndarray:
        """What the gadget is given on each call: (calls, arity)."""

    @abstractmethod
    def outputs(self, meas: np.ndarray, gadget_outputs: np.ndarray,
                shares_inv: np.ndarray) -> np.ndarray:
        """The circuit's outputs, all 0 on a valid input."""

    def truncate(self, meas: np.ndarray) -> np.ndarray:
        """The part of the encoded input that is summed."""
        return meas

    def gadget(self, inputs: np.ndarray) -> np.ndarray:
        """The gadget on inputs (last axis: pairs), evaluated: sum of the pairs' products."""
        return self.field.sum(self.field.mul(inputs[..., 0::2], inputs[..., 1::2]), axis=-1)


class _BitsCircuit(Circuit):
    """The draft's range check of 0/1 entries in chunks: on call i, with r_i the i-th
    joint random value, the gadget adds r_i^(j+1) * m_j * (m_j - 1) over the chunk, so a
    non-bit makes the sum nonzero except with probability about chunk_length / p."""

    def gadget_inputs(self, meas, joint_rand, shares_inv):
        return self._bit_inputs(meas, joint_rand, shares_inv)

    def _bit_inputs(self, meas, joint_rand, shares_inv):
        """The range check's calls, one per joint random value."""
        calls = len(joint_rand)
        padded = np.concatenate([meas, self.field.zeros(calls * self.chunk_length
                                                        - len(meas))])
        chunks = padded.reshape(calls, self.chunk_length)
        powers = self.field.geometric(joint_rand, self.chunk_length, start=joint_rand)
        return np.stack([self.field.mul(powers, chunks), self.field.sub(chunks, shares_inv)],
                        axis=-1).reshape(calls, self.arity)

    def _bits(self, total_bits: int, chunk_length: int) -> dict[str, int]:
        calls = -(-total_bits // chunk_length)
        return dict(chunk_length=chunk_length, calls=calls, joint_rand_len=calls)


@dataclass(frozen=True)
class Count(Circuit):
    """One bit: m * m - m = 0."""

    def __post_init__(self):
        self._shape(meas_len=1, output_len=1, joint_rand_len=0, eval_output_len=1,
                    chunk_length=1, calls=1)

    def encode(self, measurement):
        if measurement not in (0, 1):
            raise ValueError("a count is 0 or 1")
        return self.field.array([measurement])

    def gadget_inputs(self, meas, joint_rand, shares_inv):
        return np.stack([meas, meas], axis=-1).reshape(1, 2)

    def outputs(self, meas, gadget_outputs, shares_inv):
        return self.field.sub(gadget_outputs[:1], meas[:1])


@dataclass(frozen=True)
class SumVec(_BitsCircuit):
    """``length`` integers, each in [0, max_measurement]."""

    length: int
    max_measurement: int
    chunk: int

    def __post_init__(self):
        if self.length <= 0 or self.max_measurement <= 0 or self.chunk <= 0:
            raise ValueError("length, max_measurement and chunk_length must be positive")
        if 2 ** self.max_measurement.bit_length() >= self.field.modulus:
            raise ValueError("max_measurement exceeds the field")
        bits = self.max_measurement.bit_length()
        self._shape(meas_len=self.length * bits, output_len=self.length, eval_output_len=1,
                    **self._bits(self.length * bits, self.chunk))

    def encode(self, measurement):
        values = np.asarray(measurement)
        if values.shape != (self.length,):
            raise ValueError(f"a measurement of shape {values.shape}, not ({self.length},)")
        return self.field.array(encode_range_checked(values, self.max_measurement).ravel())

    def outputs(self, meas, gadget_outputs, shares_inv):
        return self.field.sum(gadget_outputs)[None]

    def truncate(self, meas):
        bits = self.max_measurement.bit_length()
        return decode_range_checked(self.field, meas.reshape(self.length, bits),
                                    self.max_measurement)


@dataclass(frozen=True)
class RowSumVec(SumVec):
    """A SumVec whose rows of ``row_length`` entries each add up to ``row_total``."""

    row_length: int = 1
    row_total: int = 0

    def __post_init__(self):
        super().__post_init__()
        if self.row_length <= 0 or self.length % self.row_length:
            raise ValueError(f"row_length={self.row_length} does not divide "
                             f"length={self.length}")
        self._shape(eval_output_len=1 + self.length // self.row_length)

    def encode(self, measurement):
        values = np.asarray(measurement).ravel()
        if values.size == self.length and np.any(
                values.reshape(-1, self.row_length).sum(axis=1) != self.row_total):
            raise ValueError(f"a row does not add up to {self.row_total}")
        return super().encode(values)

    def outputs(self, meas, gadget_outputs, shares_inv):
        rows = self.truncate(meas).reshape(-1, self.row_length)
        target = self.field.mul(self.field.scalar(self.row_total), shares_inv)
        row_checks = self.field.sub(self.field.sum(rows, axis=-1), target)
        return np.concatenate([self.field.sum(gadget_outputs)[None], row_checks])


@dataclass(frozen=True)
class NormSumVec(SumVec):
    """A SumVec of signed values, each entry less ``offset``, whose squares add up to at
    most ``norm_squared``. The slack, ``norm_squared`` less the sum of squares, follows
    the entries as bits of [0, norm_squared]; the squares are calls of the same gadget
    (a chunk of values times itself), after the range check's calls. Valid: every bit a
    bit, and the squares plus the slack equal to ``norm_squared``, which cannot wrap
    around the field: ``length`` squares of the largest value, and the slack, stay below
    its modulus."""

    offset: int = 0
    norm_squared: int = 1

    def __post_init__(self):
        super().__post_init__()
        largest = max(self.offset, self.max_measurement - self.offset)
        if not 0 <= self.offset <= self.max_measurement or not 0 < self.norm_squared < 2 ** 62:
            raise ValueError("0 <= offset <= max_measurement and 0 < norm_squared < 2**62")
        if self.length * largest ** 2 + self.norm_squared >= self.field.modulus:
            raise ValueError("the squares of the values and the slack would wrap around "
                             "the field")
        bits = self.max_measurement.bit_length()
        total = self.length * bits + self.norm_squared.bit_length()
        bit_calls = -(-total // self.chunk)
        self._shape(meas_len=total, eval_output_len=2, joint_rand_len=bit_calls,
                    calls=bit_calls - (-self.length // self.chunk))

    @property
    def _value_bits(self) -> int:
        return self.length * self.max_measurement.bit_length()

    def encode(self, measurement):
        values = np.asarray(measurement, dtype=np.int64)
        signed = values.astype(object) - self.offset
        slack = self.norm_squared - int(np.dot(signed, signed))
        if slack < 0:
            raise ValueError("the values' L2 norm is beyond the agreed bound")
        return np.concatenate([super().encode(values), self.field.array(
            encode_range_checked(np.array(slack, dtype=object), self.norm_squared))])

    def gadget_inputs(self, meas, joint_rand, shares_inv):
        values = self.field.sub(self.truncate(meas), self.field.mul(
            self.field.scalar(self.offset), shares_inv))
        calls = self.calls - len(joint_rand)
        chunks = np.concatenate([values, self.field.zeros(calls * self.chunk_length
                                                          - self.length)]).reshape(
            calls, self.chunk_length)
        squares = np.stack([chunks, chunks], axis=-1).reshape(calls, self.arity)
        return np.concatenate([self._bit_inputs(meas, joint_rand, shares_inv), squares])

    def outputs(self, meas, gadget_outputs, shares_inv):
        bit_calls = self.joint_rand_len
        slack = decode_range_checked(self.field, meas[self._value_bits:],
                                     self.norm_squared)
        norm = self.field.sub(self.field.add(self.field.sum(gadget_outputs[bit_calls:]),
                                             slack),
                              self.field.mul(self.field.scalar(self.norm_squared),
                                             shares_inv))
        return np.concatenate([self.field.sum(gadget_outputs[:bit_calls])[None],
                               np.asarray(norm).reshape(1)])

    def truncate(self, meas):
        return super().truncate(meas[:self._value_bits])


@dataclass(frozen=True)
class Histogram(_BitsCircuit):
    """One-hot vectors of ``length``: bits that add up to 1."""

    length: int
    chunk: int

    def __post_init__(self):
        if self.length <= 0 or self.chunk <= 0:
            raise ValueError("length and chunk_length must be positive")
        self._shape(meas_len=self.length, output_len=self.length, eval_output_len=2,
                    **self._bits(self.length, self.chunk))

    def encode(self, measurement):
        if not 0 <= measurement < self.length:
            raise ValueError(f"a bucket outside [0, {self.length})")
        encoded = np.zeros(self.length, dtype=np.int64)
        encoded[measurement] = 1
        return self.field.array(encoded)

    def outputs(self, meas, gadget_outputs, shares_inv):
        return np.stack([self.field.sum(gadget_outputs),
                         self.field.sub(self.field.sum(meas), shares_inv)])


@dataclass(frozen=True)
class MultihotCountVec(_BitsCircuit):
    """Bit vectors of ``length`` with at most ``max_weight`` ones: the bits, then their
    count (the weight) range-checked in [0, max_weight] and compared with their sum."""

    length: int
    max_weight: int
    chunk: int

    def __post_init__(self):
        if self.length <= 0 or not 0 < self.max_weight <= self.length or self.chunk <= 0:
            raise ValueError("length > 0, 0 < max_weight <= length, chunk_length > 0")
        total = self.length + self.max_weight.bit_length()
        self._shape(meas_len=total, output_len=self.length, eval_output_len=2,
                    **self._bits(total, self.chunk))

    def encode(self, measurement):
        bits = np.asarray(measurement, dtype=np.int64)
        if bits.shape != (self.length,) or np.any((bits != 0) & (bits != 1)):
            raise ValueError(f"a measurement is {self.length} bits")
        weight = encode_range_checked(np.array(bits.sum()), self.max_weight)
        return self.field.array(np.concatenate([bits, weight]))

    def outputs(self, meas, gadget_outputs, shares_inv):
        reported = decode_range_checked(self.field, meas[self.length:], self.max_weight)
        return np.stack([self.field.sum(gadget_outputs),
                         self.field.sub(self.field.sum(meas[:self.length]), reported)])

    def truncate(self, meas):
        return meas[:self.length]
