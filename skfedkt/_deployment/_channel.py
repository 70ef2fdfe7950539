"""The one channel of what the parties sum: every party step puts its sums (the fields an
algorithm declares `InSum`) under its upload's payload ``"sums"``, with secure
aggregation on or off, and the server steps read their total alone
(``ServerContext.sums``).

Without secure aggregation the server adds the parties' sums in the clear, each party's
values checked first against their declaration (`check_fields`, `summed_in_clear`);
with it, a secure sum adds them masked (`._secure`). The party's writer (`outgoing`)
withholds the fields secure aggregation keeps at the party and refuses, before anything
leaves it, sums that are not what it declared.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from .._config import get_config
from .._engine._context import Message
from ._archive import UploadError
from ._fields import Field, InClear, InSum, Validity, sum_field, withheld_fields
from ._received import UploadChecker
from ._upload import LEADER_SHARES, SUMS, PartyUpload

# each sum a party sends: its name, shape, and kind ("i": integers, "f": floats)
Layout = list[tuple[str, tuple[int, ...], str]]


@dataclass(frozen=True)
class Channel:
    """What an algorithm sends the server, as its `Uploads` declares it: its `fields`;
    ``party_weights(plan, parties, rows, claimed)``, each party's weight in the sums (in
    [0, 1], from every party's rows; None: one each), which scales the weighted sums
    before they are added (`claimed`: the rows are the parties' own claims, read from
    their manifests on a deployed server, about which the weights may warn); and how one
    party's sums hang together (`consistent`)."""

    fields: Sequence[Field]
    party_weights: Callable[[Any, Sequence[Any], np.ndarray, bool], np.ndarray] | None = None
    #: ``consistent(plan, manifest, sums)``: why one party's sums are not what an honest
    #: party of that manifest computes, across fields (None where they are)
    consistent: Callable[[Any, dict[str, Any], dict[str, Any]], str | None] | None = None

    def with_plan(self, plan: Any) -> Channel:
        """This channel reading `plan` wherever it is handed another (the fields of
        another algorithm, as FedAvg's first round sends them, with their own plan)."""
        weights, consistent = self.party_weights, self.consistent

        def own_weights(_: Any, parties: Sequence[Any], rows: np.ndarray,
                        claimed: bool) -> np.ndarray:
            assert weights is not None
            return weights(plan, parties, rows, claimed)

        def own_consistency(_: Any, manifest: dict[str, Any],
                            terms: dict[str, Any]) -> str | None:
            assert consistent is not None
            return consistent(plan, manifest, terms)

        return Channel(tuple(_with_plan(field, plan) for field in self.fields),
                       None if weights is None else own_weights,
                       None if consistent is None else own_consistency)

    @property
    def withheld(self) -> frozenset[str]:
        """The names of the fields secure aggregation keeps at the party."""
        return frozenset(field.name for field in withheld_fields(self.fields))

    def weights(self, plan: Any, parties: Sequence[Any], rows: Sequence[int],
                claimed: bool) -> np.ndarray:
        """Each of `parties`' weight in the sums, from every party's `rows`."""
        if self.party_weights is None:
            return np.ones(len(rows))
        weights = np.asarray(self.party_weights(plan, parties, np.asarray(rows), claimed),
                             dtype=float)
        assert weights.shape == (len(rows),) and ((weights >= 0) & (weights <= 1)).all(), (
            "party weights are one per party, in [0, 1]")
        return weights

    def inconsistency(self, plan: Any, manifest: dict[str, Any],
                      terms: dict[str, Any]) -> str | None:
        """Why one party's sums `terms` do not hang together with each other and its
        `manifest` (`consistent`), or None."""
        return None if self.consistent is None else self.consistent(plan, manifest, terms)

    def check_fits(self, plan: Any, n_parties: int, max_rows: int) -> None:
        """Refuse, before any work, integer sums whose largest honest total over
        `n_parties` parties of at most `max_rows` rows would not fit the secure sum's
        64-bit words (floats are scaled to fit: `float_bound`)."""
        for field in self.fields:
            if isinstance(field, InSum) and field.kind == "int":
                bound = field.bound(plan, max_rows)
                if n_parties * bound >= 2 ** 63:
                    raise ValueError(
                        f"The sum {field.name!r} of {n_parties} parties, each up to "
                        f"{bound:.4g}, would not fit a secure sum's 63 bits: fewer parties "
                        "or rows.")

    def float_bound(self, plan: Any, max_rows: int) -> float:
        """The largest magnitude of a float any party sums, where none holds more than
        `max_rows` rows (1 where none are floats): the secure sum's fixed point."""
        return max([float(field.bound(plan, max_rows)) for field in self.fields
                    if isinstance(field, InSum) and field.kind == "float"], default=1.0)


def _with_plan(field: Field, plan: Any) -> Field:
    """`field`, its callables reading `plan` whatever plan they are handed."""
    if isinstance(field, InSum):
        bound, valid = field.bound, field.valid
        return replace(field, bound=lambda _, rows: bound(plan, rows),
                       valid=(valid.with_plan(plan) if isinstance(valid, Validity)
                              else lambda _, values: valid(plan, values)))
    needed_when = field.needed_when
    return replace(field, needed_when=lambda _: needed_when(plan))


def outgoing(upload: Message, channel: Channel, plan: Any, secure: bool) -> PartyUpload:
    """`upload` as its party sends it: every payload field declared, every sum of a
    declared name and kind and within its bound (refused before anything leaves the
    party), and, under secure aggregation, the withheld fields replaced by their
    withheld values."""
    assert isinstance(upload, PartyUpload), "a party step's uploads are PartyUpload"
    party, fields = upload.party, channel.fields
    payload = upload.payload
    declared = {field.name for field in fields if isinstance(field, InClear)
                and field.place == "payload"}
    undeclared = sorted(set(payload) - declared - {SUMS})
    if undeclared:  # the algorithm's error, not the party's
        raise TypeError(f"The party step sent payload fields {undeclared} that the "
                        "algorithm's Uploads.fields does not declare: declare each one, "
                        "InClear or InSum.")
    terms = payload.get(SUMS) or {}
    for name, values in _in_declared_order(terms, fields):
        problem = _misfit(fields, name, values, plan, upload.manifest["n_rows"])
        if problem is not None:
            raise ValueError(f"Party {party!r} refuses to send its sum {name!r}: {problem}.")
    problem = channel.inconsistency(plan, upload.manifest, terms)
    if problem is not None:
        raise ValueError(f"Party {party!r} refuses to send its sums: {problem}.")
    if not secure:  # in the clear: integers as small as their bounds allow
        compact = {name: _compact(values, sum_field(fields, name), plan,
                                  upload.manifest["n_rows"]) for name, values in terms.items()}
        return replace(upload, payload=dict(payload, **{SUMS: compact})) if terms else upload
    manifest, payload = dict(upload.manifest), dict(payload)
    for field in withheld_fields(fields):
        where = manifest if field.place == "manifest" else payload
        if field.name in where:
            where[field.name] = field.withheld
    return replace(upload, manifest=manifest, payload=payload)


def _compact(values: np.ndarray, field: InSum | None, plan: Any, n_rows: int) -> np.ndarray:
    """Integers of `field` in the smallest integer type that holds its bound."""
    if field is None or field.kind != "int":
        return values
    bound = field.bound(plan, n_rows)
    dtype = next(dtype for dtype in (np.int8, np.int16, np.int32, np.int64)
                 if bound <= np.iinfo(dtype).max)
    return values.astype(dtype)


def check_fields(checker: UploadChecker, channel: Channel, plan: Any,
                 secure: bool) -> None:
    """The server's check of one upload's declared fields: under secure aggregation,
    no withheld field and no sum in the clear; without it, every sum declared, of its
    kind and within its bound."""
    upload, fields = checker.upload, channel.fields
    if secure:
        for field in withheld_fields(fields):
            where = upload.manifest if field.place == "manifest" else upload.payload
            value = where.get(field.name, field.withheld)
            if not _is_withheld(value, field.withheld):
                checker.refuse(field.name, "sent in the clear, where secure aggregation "
                               "keeps it at the party")
        if SUMS in upload.payload:
            checker.refuse(SUMS, "sent in the clear, where the secure sum adds them")
        if LEADER_SHARES in upload.payload and get_config()["secure_aggregation"] != (
                "validated"):
            checker.refuse(LEADER_SHARES, "a validated sum's shares, where the masked "
                           "sum runs")
        return
    if LEADER_SHARES in upload.payload:
        checker.refuse(LEADER_SHARES, "a validated sum's shares, where no secure sum runs")
    terms = upload.payload.get(SUMS, {})
    if not isinstance(terms, dict) or not all(isinstance(name, str) for name in terms):
        checker.refuse(SUMS, "not a mapping of names to arrays of numbers")
    for name, values in _in_declared_order(terms, fields):
        problem = _misfit(fields, name, values, plan, checker.count("n_rows", positive=True))
        if problem is not None:
            checker.refuse(f"{SUMS}.{name}", problem)
    problem = channel.inconsistency(plan, upload.manifest, terms)
    if problem is not None:
        checker.refuse(SUMS, problem)


def _in_declared_order(terms: dict[str, Any], fields: Sequence[Field]) -> list[tuple[str, Any]]:
    """The sums `terms`, those the algorithm declares first first (the check of what
    the others are computed from comes first), undeclared ones last."""
    def rank(name: str) -> int:
        field = sum_field(fields, name)
        return len(fields) if field is None else list(fields).index(field)
    return sorted(terms.items(), key=lambda item: rank(item[0]))


def _is_withheld(value: Any, withheld: Any) -> bool:
    return value is None or (isinstance(withheld, list) and isinstance(value, list)
                             and not value)


def _misfit(fields: Sequence[Field], name: str, values: Any, plan: Any,
            n_rows: int) -> str | None:
    """Why the sum `name` of a party of `n_rows` rows is not what `fields` declare,
    or None."""
    field = sum_field(fields, name)
    if field is None:
        return "not a sum the algorithm declares"
    if isinstance(values, np.generic):  # a 0-d array, as skops reads one back
        values = np.asarray(values)
    if not isinstance(values, np.ndarray) or values.dtype.kind not in (
            "iu" if field.kind == "int" else "f"):
        return f"not an array of {'integers' if field.kind == 'int' else 'floats'}"
    if not np.isfinite(values).all():
        return "values must be finite"
    bound = float(field.bound(plan, n_rows))
    largest = float(np.abs(values).max(initial=0))
    if largest > bound:
        return f"a value of magnitude {largest:.4g}, beyond the bound {bound:.4g}"
    norm = field.valid.norm_of(plan, n_rows) if isinstance(field.valid, Validity) else None
    if norm is not None and np.linalg.norm(values) > norm * (1 + 1e-9):
        return (f"an L2 norm of {np.linalg.norm(values):.6g}, beyond the bound "
                f"{norm:.6g}")
    return field.valid(plan, values)


def sums_layout(terms: dict[str, Any]) -> Layout:
    """The names, shapes and kinds of the sums `terms`, sorted by name."""
    return [(name, np.shape(terms[name]),
             "f" if np.asarray(terms[name]).dtype.kind == "f" else "i")
            for name in sorted(terms)]


def layout_length(layout: Layout) -> int:
    """The numbers a sum of `layout` adds (one at least: an empty sum adds a zero)."""
    return max(sum(math.prod(shape) for _, shape, _ in layout), 1)


def weighted_terms(terms: dict[str, np.ndarray], fields: Sequence[Field],
                   weight: float) -> dict[str, np.ndarray]:
    """A party's sums with the weighted ones scaled by its `weight`."""
    if weight == 1:
        return terms
    return {name: values * weight if _weighted(fields, name) else values
            for name, values in terms.items()}


def _weighted(fields: Sequence[Field], name: str) -> bool:
    field = sum_field(fields, name)
    return field is not None and field.weighted


def without_sums(upload: PartyUpload) -> PartyUpload:
    """`upload` without what it sends in the sum."""
    return replace(upload, payload={key: value for key, value in upload.payload.items()
                                    if key != SUMS})


def summed_in_clear(uploads: Sequence[PartyUpload], channel: Channel, plan: Any,
                    claimed: bool,
                    ) -> tuple[list[PartyUpload], dict[str, np.ndarray], dict[Hashable, str]]:
    """The uploads without their sums, and the sums' totals by name, added in the
    clear in the uploads' order (each party's weighted sums scaled by its weight), once
    every party's sums have the layout of most parties'. Returns the parties whose
    layout differs too, with why: the caller refuses them, or leaves them out."""
    terms = [upload.payload.get(SUMS) or {} for upload in uploads]
    layouts = [repr(sums_layout(party_terms)) for party_terms in terms]
    agreed = max(layouts, key=layouts.count)
    odd = {upload.party: "its sums are not the names, shapes and kinds of most parties' "
           f"({agreed})" for upload, layout in zip(uploads, layouts) if layout != agreed}
    kept = [index for index, layout in enumerate(layouts) if layout == agreed]
    weights = channel.weights(plan, [uploads[i].party for i in kept],
                              [uploads[i].manifest["n_rows"] for i in kept], claimed)
    sums: dict[str, np.ndarray] = {}
    for index, weight in zip(kept, weights):
        for name, values in weighted_terms(terms[index], channel.fields, weight).items():
            values = np.asarray(values, dtype=np.int64 if values.dtype.kind in "iu"
                                else np.float64)
            sums[name] = values.copy() if name not in sums else sums[name] + values
    return [without_sums(uploads[i]) for i in kept], sums, odd


def refuse_odd_layouts(odd: dict[Hashable, str], min_parties: int | None,
                       n_kept: int) -> None:
    """Refuse parties whose sums differ from most parties', unless `min_parties` lets
    the server go on without them."""
    if not odd:
        return
    if min_parties is None or n_kept < min_parties:
        party, why = next(iter(odd.items()))
        raise UploadError(f"Party {party!r} refused: {SUMS}: {why}.", party=party,
                          field=SUMS)
