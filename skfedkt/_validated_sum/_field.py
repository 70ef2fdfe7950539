"""The prime fields of draft-irtf-cfrg-vdaf (Field64, Field128) as numpy arrays, and the
polynomial arithmetic the proofs need, in the Lagrange basis over roots of unity.

Field64 (p = 2^64 - 2^32 + 1) computes on ``uint64`` arrays: a product's 128 bits are
assembled from 32-bit halves and reduced with 2^64 = 2^32 - 1 (mod p), so a proof over
hundreds of thousands of values takes numpy calls, not Python loops. Field128 holds Python
integers in object arrays: exact and slower, it is here for the draft's Field128 circuits
and their test vectors.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from functools import cache, wraps

import numpy as np

_LOW32 = np.uint64(0xFFFFFFFF)
_SHIFT32 = np.uint64(32)
_CARRY32 = np.uint64(2 ** 32)
_BLOCK = 2 ** 16  # elements of Field64's products at a time (half a megabyte)


def _bit_reversed(log_n: int) -> np.ndarray:
    indices = np.arange(1 << log_n)
    reversed_ = np.zeros_like(indices)
    for bit in range(log_n):
        reversed_ |= ((indices >> bit) & 1) << (log_n - 1 - bit)
    return reversed_


class Field(ABC):
    """A prime field whose multiplicative group has a subgroup of order ``gen_order``
    (a power of two): what the number theoretic transform needs."""

    modulus: int
    encoded_size: int
    gen_order: int
    generator: int  # of the subgroup of order gen_order

    # --- elements -------------------------------------------------------------------
    @abstractmethod
    def array(self, values) -> np.ndarray:
        """Integers in [0, p) as this field's array type."""

    @abstractmethod
    def add(self, a: np.ndarray, b: np.ndarray) -> np.ndarray: ...

    @abstractmethod
    def sub(self, a: np.ndarray, b: np.ndarray) -> np.ndarray: ...

    @abstractmethod
    def mul(self, a: np.ndarray, b: np.ndarray) -> np.ndarray: ...

    @abstractmethod
    def sum(self, a: np.ndarray, axis: int = -1) -> np.ndarray: ...

    @abstractmethod
    def encode(self, a: np.ndarray) -> bytes:
        """Little-endian, ``encoded_size`` bytes an element (the draft's encode_vec)."""

    @abstractmethod
    def _decode_unchecked(self, data: bytes) -> np.ndarray: ...

    def zeros(self, shape) -> np.ndarray:
        return self.array(np.zeros(shape, dtype=np.int64))

    def neg(self, a: np.ndarray) -> np.ndarray:
        return self.sub(self.zeros(np.shape(a)), a)

    def power(self, a: np.ndarray, exponent: int) -> np.ndarray:
        # Python's pow, a microsecond an element, beats a hundred numpy products below
        # thousands of elements (the verifier inverts a node's worth at a time)
        if np.size(a) <= 4096:
            return self.array(np.array([pow(int(value), exponent, self.modulus)
                                        for value in np.ravel(a)], dtype=object)
                              ).reshape(np.shape(a))
        result = self.array(np.ones(np.shape(a), dtype=np.int64))
        base = a
        while exponent:
            if exponent & 1:
                result = self.mul(result, base)
            base = self.mul(base, base)
            exponent >>= 1
        return result

    def inv(self, a: np.ndarray) -> np.ndarray:
        """Inverses by Fermat; the inverse of 0 is 0 (callers refuse a zero first)."""
        return self.power(a, self.modulus - 2)

    def scalar(self, value: int) -> np.ndarray:
        """One element, as a 0-d array."""
        return self.array(np.array(value % self.modulus, dtype=object))

    def decode(self, data: bytes) -> np.ndarray:
        """The draft's decode_vec: a length that is not a whole number of elements, or an
        element not below p, is refused."""
        if len(data) % self.encoded_size:
            raise ValueError(f"{len(data)} bytes are not a whole number of "
                             f"{self.encoded_size}-byte field elements")
        values = self._decode_unchecked(data)
        if np.any(values >= self.modulus):
            raise ValueError("a field element is not below the field's modulus")
        return values

    def from_stream(self, data: bytes) -> np.ndarray:
        """The elements that rejection sampling keeps from uniform bytes (the draft's
        next_vec: mask to the next power of two above p, keep what is below p)."""
        values = self._decode_unchecked(data)
        mask = (1 << (self.modulus - 1).bit_length()) - 1
        if mask < (1 << (8 * self.encoded_size)) - 1:
            values = values & self.scalar(mask)
        return values[values < self.modulus]

    # --- roots of unity and the number theoretic transform ---------------------------
    def root(self, order: int) -> np.ndarray:
        """The draft's root of unity of ``order`` (a power of two): gen^(GEN_ORDER/order)."""
        return _root(self, order)

    def root_powers(self, order: int, count: int | None = None) -> np.ndarray:
        """``w^i`` for i < count (count defaults to the order), w the root of `order`
        (read-only: shared by every caller)."""
        return _root_powers(self, order, order if count is None else count)

    def geometric(self, ratio: np.ndarray, count: int, *, start=None) -> np.ndarray:
        """``start * ratio^i`` for i < count, each ``ratio`` of a vector along the last
        axis (ratio of shape (m,) gives (m, count)), by doubling: log(count) products."""
        ratio = np.asarray(ratio)
        first = self.array(np.ones(ratio.shape, dtype=np.int64)) if start is None else start
        powers = first[..., None]
        step = ratio
        while powers.shape[-1] < count:
            powers = np.concatenate([powers, self.mul(powers, step[..., None])], axis=-1)
            step = self.mul(step, step)
        return powers[..., :count]

    def ntt(self, coefficients: np.ndarray, *, coset: bool = False) -> np.ndarray:
        """Values of polynomials (rows of monomial coefficients, length n a power of two)
        at the n-th roots of unity w^i, or at s*w^i with s the 2n-th root (``coset``)."""
        n = coefficients.shape[-1]
        if coset:
            coefficients = self.mul(coefficients, self.root_powers(2 * n, n))
        return self._transform(coefficients)

    def _transform(self, coefficients: np.ndarray) -> np.ndarray:
        """The radix-2 transform: bit-reversed input, butterflies stage by stage (the
        first stage's twiddle is 1, multiplied by nothing)."""
        n = coefficients.shape[-1]
        log_n = n.bit_length() - 1
        values = coefficients[..., _bit_reversed(log_n)]
        batch = values.shape[:-1]
        for stage in range(1, log_n + 1):
            half = 1 << (stage - 1)
            blocks = values.reshape(*batch, n >> stage, 2, half)
            low, high = blocks[..., 0, :], blocks[..., 1, :]
            if stage > 1:
                high = self.mul(high, self.root_powers(1 << stage, half))
            values = np.stack([self.add(low, high), self.sub(low, high)], axis=-2)
            values = values.reshape(*batch, n)
        return values

    def inverse_ntt(self, values: np.ndarray) -> np.ndarray:
        """Monomial coefficients of polynomials given by their values at the n-th roots."""
        n = values.shape[-1]
        return self.mul(self._reversed_transform(values), self.inv(self.scalar(n)))

    def _reversed_transform(self, values: np.ndarray) -> np.ndarray:
        """n times the monomial coefficients: the transform, read at -i."""
        n = values.shape[-1]
        return self._transform(values)[..., (-np.arange(n)) % n]

    def double_evaluations(self, values: np.ndarray) -> np.ndarray:
        """From values at the n-th roots, the values at the 2n-th roots (in their order):
        the given ones interleaved with those at the coset s*w^i (the inverse
        transform's 1/n and the coset's s^i in one product)."""
        n = values.shape[-1]
        scaled = self.mul(self._reversed_transform(values), _coset_over_n(self, n))
        odd = self._transform(scaled)
        return np.stack([values, odd], axis=-1).reshape(*values.shape[:-1], -1)

    def evaluate(self, values: np.ndarray, at: np.ndarray) -> np.ndarray:
        """Polynomials given by their values at the n-th roots (rows), evaluated at ``at``,
        not itself a root: P(t) = (t^n - 1)/n * sum_i v_i w^i / (t - w^i)."""
        n = values.shape[-1]
        nodes = self.root_powers(n)
        weights = self.mul(nodes, self.inv(self.sub(at, nodes)))
        factor = self.mul(self.sub(self.power(at, n), self.scalar(1)),
                          self.inv(self.scalar(n)))
        return self.mul(self.sum(self.mul(values, weights), axis=-1), factor)

    def complete_values(self, values: np.ndarray) -> np.ndarray:
        """Values at all n-th roots of a polynomial of degree below n - 1 given its values
        at the first n - 1 (the draft's extend_values_to_power_of_2 for one missing value):
        over all n-th roots, sum_i P(w^i) w^i = 0."""
        n = values.shape[-1] + 1
        nodes = self.root_powers(n)
        partial = self.sum(self.mul(values, nodes[:-1]), axis=-1)
        last = self.neg(self.mul(partial, self.inv(nodes[-1])))
        return np.concatenate([values, last[..., None]], axis=-1)


@cache
def _root_powers(field: Field, order: int, count: int) -> np.ndarray:
    powers = field.geometric(field.root(order), count)
    powers.flags.writeable = False
    return powers


@cache
def _coset_over_n(field: Field, n: int) -> np.ndarray:
    """s^i / n for i < n, s the 2n-th root (read-only: shared by every caller)."""
    powers = field.mul(field.root_powers(2 * n, n), field.inv(field.scalar(n)))
    powers.flags.writeable = False
    return powers


@cache
def _root(field: Field, order: int) -> np.ndarray:
    if order & (order - 1) or not 0 < order <= field.gen_order:
        raise ValueError(f"no root of unity of order {order} in this field")
    generator = field.scalar(field.generator)
    return field.power(generator, field.gen_order // order)


def _wrapping(operation):
    """Run a uint64 operation whose wrap-around is intended (numpy warns on scalars)."""
    @wraps(operation)
    def wrapped(*args):
        with np.errstate(over="ignore"):
            return operation(*args)
    return wrapped


class Field64(Field):
    """GF(2^32 * 4294967295 + 1) on uint64 arrays."""

    modulus = 2**64 - 2**32 + 1
    encoded_size = 8
    gen_order = 2**32
    generator = pow(7, 4294967295, 2**64 - 2**32 + 1)
    _P = np.uint64(2**64 - 2**32 + 1)
    _EPSILON = np.uint64(2**32 - 1)  # 2^64 mod p

    def array(self, values) -> np.ndarray:
        return np.asarray(values).astype(np.uint64)

    # conditional corrections are added as a comparison times a constant (np.where costs
    # about ten of these passes), in place on the temporaries each operation makes
    @_wrapping
    def add(self, a, b):
        total = a + b
        total += (total < a) * self._EPSILON
        total -= (total >= self._P) * self._P
        return total

    @_wrapping
    def sub(self, a, b):
        difference = a - b
        difference -= (a < b) * self._EPSILON
        return difference

    def mul(self, a, b):
        """Products in blocks that keep the two dozen passes of each in the cache: on
        arrays of megabytes, six times faster than whole."""
        a, b = np.broadcast_arrays(a, b)  # the in-place steps write the result's shape
        if a.size <= _BLOCK:
            return self._mul(a, b)
        flat_a, flat_b = a.ravel(), b.ravel()
        product = np.empty(a.size, dtype=np.uint64)
        for start in range(0, a.size, _BLOCK):
            block = slice(start, start + _BLOCK)
            product[block] = self._mul(flat_a[block], flat_b[block])
        return product.reshape(a.shape)

    @_wrapping
    def _mul(self, a, b):
        """The product's 128 bits from 32-bit halves, then reduced: high * 2^64 + low
        with 2^64 = 2^32 - 1 and 2^96 = -1 (mod p)."""
        a_low, a_high = a & _LOW32, a >> _SHIFT32
        b_low, b_high = b & _LOW32, b >> _SHIFT32
        low_low, high = a_low * b_low, a_high * b_high
        a_low *= b_high  # the cross products
        a_high *= b_low
        cross = a_high
        cross += a_low
        high += (cross < a_low) * _CARRY32
        high += cross >> _SHIFT32
        low = cross
        low <<= _SHIFT32
        low += low_low
        high += low < low_low
        high_high = high >> _SHIFT32
        high &= _LOW32
        first = low - high_high
        first -= (low < high_high) * self._EPSILON
        high *= self._EPSILON
        high += first
        high += (high < first) * self._EPSILON
        high -= (high >= self._P) * self._P
        return high

    def sum(self, a, axis=-1):
        a = np.moveaxis(np.asarray(a), axis, -1)
        while a.shape[-1] > 1:
            if a.shape[-1] % 2:
                a = np.concatenate([a, np.zeros_like(a[..., :1])], axis=-1)
            a = self.add(a[..., 0::2], a[..., 1::2])
        return a[..., 0] if a.shape[-1] else np.zeros(a.shape[:-1], np.uint64)

    def encode(self, a):
        return np.ascontiguousarray(a, dtype="<u8").tobytes()

    def _decode_unchecked(self, data):
        return np.frombuffer(data, dtype="<u8").astype(np.uint64)


class Field128(Field):
    """GF(2^66 * 4611686018427387897 + 1) on object arrays of Python integers."""

    modulus = 2**66 * 4611686018427387897 + 1
    encoded_size = 16
    gen_order = 2**66
    generator = pow(7, 4611686018427387897, 2**66 * 4611686018427387897 + 1)

    def array(self, values) -> np.ndarray:
        return np.vectorize(int, otypes=[object])(np.asarray(values, dtype=object))

    def add(self, a, b):
        return np.asarray((a + b) % self.modulus, dtype=object)

    def sub(self, a, b):
        return np.asarray((a - b) % self.modulus, dtype=object)

    def mul(self, a, b):
        return np.asarray((a * b) % self.modulus, dtype=object)

    def sum(self, a, axis=-1):
        return np.asarray(np.sum(a, axis=axis) % self.modulus, dtype=object)

    def encode(self, a):
        return b"".join(int(value).to_bytes(16, "little") for value in np.ravel(a))

    def _decode_unchecked(self, data):
        return np.array([int.from_bytes(data[i:i + 16], "little")
                         for i in range(0, len(data), 16)], dtype=object)


FIELD64 = Field64()
FIELD128 = Field128()
