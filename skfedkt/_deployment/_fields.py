"""What crosses from a party to the server, declared once per field: in the clear (in
its manifest or its payload) or in the sum.

An algorithm's `Uploads` lists its fields. That one list drives the party's writer
(`_channel.outgoing`: what is withheld under secure aggregation), the server's checks
(`_channel.check_fields`: a withheld field refused in the clear, every sum within its
bound and valid) and the docs' tables of what each side sees (``doc/declared_fields.py``).

A field **in the sum** reaches the server only as the sum over the parties, with secure
aggregation on or off: the server adds the parties' values in the clear (checking each
one against its declared kind and bound first), or a secure sum adds them masked. A
field **in the clear** reaches the server party by party; one that holds the party's
own data beyond the sums (a model, its class counts) is *withheld* under secure
aggregation, and a parameter setting under which the server needs it is refused there
before any training (`InClear.needed_when`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from fnmatch import fnmatchcase
from typing import Any, Literal


def _never(plan: Any) -> tuple[str, str] | None:
    return None


@dataclass(frozen=True)
class Validity:
    """What an honest party's values of a sum are beyond their bound: checked in the
    clear by calling it (``validity(plan, values)``: why they are not, in words, or
    None), and proved on shares, under validated sums, as the circuit its attributes
    describe (each value in [0, bound] or [-bound, bound], each row's total).

    Attributes
    ----------
    check : callable
        ``check(plan, values)``: the check in the clear, which may say more than the
        proof can (votes that are multiples of the students).
    nonnegative : bool
        Whether the values lie in [0, bound] rather than [-bound, bound].
    row_total : callable or None
        ``row_total(plan)``: the total of each row (the last axis), or None.
    at_most : bool
        Whether that total is a ceiling (one-hot or empty rows) rather than exact.
    multiple_of : callable or None
        ``multiple_of(plan)``: the integer every value is a multiple of (FedKT's
        consistent votes: its students), or None.
    norm : callable or None
        ``norm(plan, n_rows)``: the largest L2 norm of the array a party of `n_rows`
        rows sends (FedAvg's weights times rows, with ``max_weight_norm``), or None
        (also where it returns None): checked in the clear, and proved on shares.
    """

    check: Callable[[Any, Any], str | None]
    nonnegative: bool = False
    row_total: Callable[[Any], float] | None = None
    at_most: bool = False
    multiple_of: Callable[[Any], int] | None = None
    norm: Callable[[Any, int], float | None] | None = None

    def __call__(self, plan: Any, values: Any) -> str | None:
        return self.check(plan, values)

    def with_plan(self, plan: Any) -> Validity:
        """This validity reading `plan` whatever plan it is handed."""
        check, total, multiple, norm = (self.check, self.row_total, self.multiple_of,
                                        self.norm)
        return replace(self, check=lambda _, values: check(plan, values),
                       row_total=None if total is None else lambda _: total(plan),
                       multiple_of=None if multiple is None else lambda _: multiple(plan),
                       norm=None if norm is None else lambda _, rows: norm(plan, rows))

    def norm_of(self, plan: Any, n_rows: int) -> float | None:
        """The largest L2 norm of a party's array under `plan`, or None (no bound)."""
        return None if self.norm is None else self.norm(plan, n_rows)


def _anything(plan: Any, values: Any) -> str | None:
    return None


@dataclass(frozen=True)
class InClear:
    """A field a party sends in the clear, in its manifest or its payload.

    Attributes
    ----------
    name : str
        The manifest's or the payload's key.
    about : str
        What it holds, as the docs' tables say it.
    place : {"manifest", "payload"}
        Where it is: the manifest (plain JSON) or the payload (skops).
    party_only : bool
        Whether it holds the party's own data beyond what the sums reveal (a model, its
        labels, its class counts): under secure aggregation the party withholds it
        (sends `withheld` instead) and the server refuses it in the clear.
    needed_when : callable
        ``needed_when(plan)``: where the server needs this field party by party under
        `plan`, the parameter setting that makes it (``"distill=False"``) and the one
        that runs without it (``"distill=True"``); None where it does not. Such a plan
        is refused under secure aggregation, naming both, before any training.
    withheld : object
        The field's value when it is withheld (None, or an empty list).
    """

    name: str
    about: str
    place: Literal["manifest", "payload"] = "payload"
    party_only: bool = False
    needed_when: Callable[[Any], tuple[str, str] | None] = _never
    withheld: Any = None


@dataclass(frozen=True)
class InSum:
    """A field a party sends in the sum: named numbers (an array of any shape, the same
    names and shapes at every party) of which the server learns only the total.

    Attributes
    ----------
    name : str
        The key under the payload's ``"sums"``; a name ending in ``*`` declares a
        family (``"weighted_*"``: ``weighted_0``, ``weighted_1``, ...).
    about : str
        What it holds, as the docs' tables say it.
    kind : {"int", "float"}
        Integers, summed exactly, or floats, summed in fixed point under secure
        aggregation.
    bound : callable
        ``bound(plan, max_rows)``: the largest magnitude of any one value a party sums,
        where no party holds more than `max_rows` rows. A party refuses to send a value
        beyond it, and the server refuses one received.
    weighted : bool
        Whether the party's weight in the sum (``Uploads.party_weights``) scales it
        before it is added.
    valid : Validity or callable
        ``valid(plan, values)``: why one party's `values` are not what an honest party
        sends beyond the bound (a negative count, a row of votes that does not sum to
        the students), in words, or None. The party checks its own before sending;
        without secure aggregation the server checks each party's. A `Validity` also
        says what validated sums prove on shares; a plain callable proves the bound
        alone there.
    units : int or None
        Where every value (weighted, where `weighted`) is a multiple of ``1 / units``
        (DS-FL's probabilities), validated sums prove it in those units, exactly; None:
        in their default fixed point.
    """

    name: str
    about: str
    kind: Literal["int", "float"]
    bound: Callable[[Any, int], float]
    weighted: bool = False
    valid: Callable[[Any, Any], str | None] = Validity(_anything)
    units: int | None = None

    def matches(self, name: str) -> bool:
        return fnmatchcase(name, self.name)


Field = InClear | InSum


def _nonnegative(plan: Any, values: Any) -> str | None:
    return None if (values >= 0).all() else "a negative value"


#: `InSum.valid` of counts: none negative
nonnegative = Validity(_nonnegative, nonnegative=True)


def rows_summing_to(total: Callable[[Any], float], *, at_most: bool = False,
                    check: Callable[[Any, Any], str | None] | None = None,
                    multiple_of: Callable[[Any], int] | None = None) -> Validity:
    """`InSum.valid` of votes: non-negative, each row (the last axis) summing to
    ``total(plan)`` (floats within their rounding); with `at_most`, to at most that
    (`check`, where given, is the check in the clear instead; `multiple_of`, what every
    value is a multiple of)."""

    def valid(plan: Any, values: Any) -> str | None:
        expected = total(plan)
        sums = values.sum(axis=-1)
        tolerance = 1e-6 * max(1.0, expected) if values.dtype.kind == "f" else 0
        beyond = sums - expected > tolerance if at_most else abs(sums - expected) > tolerance
        if (values < 0).any() or beyond.any():
            return (f"rows that are not non-negative and summing to "
                    f"{'at most ' if at_most else ''}{expected:g}")
        return None

    return Validity(check or valid, nonnegative=True, row_total=total, at_most=at_most,
                    multiple_of=multiple_of)


def _one_hot(plan: Any, values: Any) -> str | None:
    if not ((values == 0) | (values == 1)).all() or (values.sum(axis=-1) > 1).any():
        return "rows that are not one-hot (or empty)"
    return None


#: `InSum.valid` of labels as counts: zeros and ones, at most one one a row
one_hot_rows = rows_summing_to(lambda plan: 1.0, at_most=True, check=_one_hot)


def sum_field(fields: Sequence[Field], name: str) -> InSum | None:
    """The declaration of the sum `name` among `fields`, or None."""
    return next((field for field in fields
                 if isinstance(field, InSum) and field.matches(name)), None)


def withheld_fields(fields: Sequence[Field]) -> list[InClear]:
    """The fields in the clear that secure aggregation withholds."""
    return [field for field in fields if isinstance(field, InClear) and field.party_only]


def needed_party_by_party(fields: Sequence[Field], plan: Any) -> str | None:
    """Why `plan` cannot run on sums alone, in words that end a sentence: the first
    withheld field it needs party by party, and the setting that needs it; None where
    it can."""
    for field in withheld_fields(fields):
        need = field.needed_when(plan)
        if need is not None:
            setting, instead = need
            return (f"{setting} needs each party's {field.name}, which secure "
                    f"aggregation keeps at the party; {instead} runs under it")
    return None
