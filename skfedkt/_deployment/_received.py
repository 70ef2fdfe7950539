"""What a received upload must hold, field by field, before a server step uses it.

The manifest's numbers steer the server (a party's rows and class counts weigh its
votes), and its payload's models run in the server's process: every refusal here is an
`UploadError` naming the party, the file and the field.
"""

from __future__ import annotations

from collections.abc import Sequence
from numbers import Integral, Real
from typing import TYPE_CHECKING, Any, Literal, NoReturn, overload

import numpy as np

from ._archive import UploadError

if TYPE_CHECKING:
    from ._upload import PartyUpload


class UploadChecker:
    """Checks one upload's fields; ``refuse`` raises naming party, file and field.

    The fields named in `withheld` (kept at the party under secure aggregation, and
    refused in the clear before this check runs) are not read: a method that checks one
    returns as it would for a field the party does not send."""

    def __init__(self, upload: PartyUpload, n_classes: int,
                 n_features: int | None = None,
                 withheld: frozenset[str] = frozenset()) -> None:
        self.upload = upload
        self.n_classes = n_classes
        self.n_features = n_features
        self.withheld = withheld

    def refuse(self, field: str, reason: str) -> NoReturn:
        """Raise an `UploadError` naming the party, the file and `field`."""
        upload = self.upload
        raise UploadError(f"Party {upload.party!r}{_file_of(upload)} refused: {field}: "
                          f"{reason}.", party=upload.party, field=field)

    def manifest(self, key: str) -> Any:
        """A manifest field's value, None when missing."""
        return self.upload.manifest.get(key)

    def count(self, key: str, *, positive: bool = False, at_most: int | None = None,
              value: Any = None) -> int:
        """A manifest field that must be an integer count."""
        value = self.manifest(key) if value is None else value
        low = 1 if positive else 0
        if (isinstance(value, bool) or not isinstance(value, Integral) or int(value) < low
                or (at_most is not None and int(value) > at_most)):
            bound = "" if at_most is None else f" and at most {at_most}"
            self.refuse(key, f"{value!r} is not an integer of at least {low}{bound}")
        return int(value)

    @overload
    def number(self, key: str, low: float, high: float, *, value: Any = None,
               optional: Literal[False] = False) -> float: ...

    @overload
    def number(self, key: str, low: float, high: float, *, value: Any = None,
               optional: bool) -> float | None: ...

    def number(self, key: str, low: float, high: float, *, value: Any = None,
               optional: bool = False) -> float | None:
        """A finite number within [low, high] (None where `optional` and missing)."""
        value = self.manifest(key) if value is None else value
        if optional and value is None:
            return None
        # typeshed's numbers.Real declares neither comparisons nor numpy's ufunc input
        if (isinstance(value, bool) or not isinstance(value, Real)
                or not np.isfinite(value)  # type: ignore[call-overload]
                or not low <= value <= high):  # type: ignore[operator]
            self.refuse(key, f"{value!r} is not a finite number in [{low}, {high}]")
        return float(value)

    def rows_and_counts(self, *, counts_required: bool = True,
                        ) -> tuple[int, list[int] | None]:
        """``n_rows``, a positive integer, and ``class_counts``, one non-negative integer
        per agreed class summing to it (None allowed where the algorithm sends none)."""
        n_rows = self.count("n_rows", positive=True)
        counts = self.manifest("class_counts")
        if counts is None and not counts_required or "class_counts" in self.withheld:
            return n_rows, None
        if not isinstance(counts, list) or len(counts) != self.n_classes:
            self.refuse("class_counts", f"expected {self.n_classes} counts, one per class")
        for count in counts:
            self.count("class_counts", value=count)
        if sum(counts) != n_rows:
            self.refuse("class_counts", f"they sum to {sum(counts)}, not to n_rows={n_rows}")
        return n_rows, counts

    def shares(self, key: str, n_rows_expected: int) -> np.ndarray | None:
        """A matrix of class shares: rows of n_classes finite values in [0, 1]."""
        if key in self.withheld:
            return None
        value = self.manifest(key)
        try:
            shares = np.asarray(value, dtype=float)
        except (TypeError, ValueError):
            self.refuse(key, "not a matrix of numbers")
        if shares.shape != (n_rows_expected, self.n_classes):
            self.refuse(key, f"shape {shares.shape}, expected "
                        f"{(n_rows_expected, self.n_classes)}")
        if not (np.isfinite(shares).all() and (shares >= 0).all() and (shares <= 1).all()):
            self.refuse(key, "shares must be finite and within [0, 1]")
        return shares

    def labels(self, key: str, n_public: int, *, low: int = 0) -> np.ndarray:
        """A payload vector of class codes, one per public row, in [low, n_classes)."""
        labels = self.upload.payload.get(key)
        if (not isinstance(labels, np.ndarray) or labels.ndim != 1
                or labels.dtype.kind not in "iu"):
            self.refuse(key, "not a vector of integer class codes")
        if len(labels) != n_public:
            self.refuse(key, f"{len(labels)} labels for {n_public} public rows")
        if labels.size and (labels.min() < low or labels.max() >= self.n_classes):
            self.refuse(key, f"codes outside [{low}, {self.n_classes})")
        return labels

    def floats(self, key: str, shape: Sequence[int], *, bound: float | None = None,
               value: Any = None) -> np.ndarray:
        """A payload array of finite floating-point numbers of `shape`, none beyond
        `bound` in magnitude where one is given; `value`: the array to check where it
        is not the payload's `key` (one of a list, say), `key` naming it."""
        array = self.upload.payload.get(key) if value is None else value
        if not isinstance(array, np.ndarray) or array.dtype.kind != "f":
            self.refuse(key, "not an array of floating-point numbers")
        if array.shape != tuple(shape):
            self.refuse(key, f"shape {array.shape}, expected {tuple(shape)}")
        if not np.isfinite(array).all():
            self.refuse(key, "values must be finite")
        if bound is not None and np.abs(array).max(initial=0.0) > bound:
            self.refuse(key, f"values must be within [-{bound:.4g}, {bound:.4g}]")
        return array

    def probabilities(self, key: str, n_rows_expected: int) -> np.ndarray:
        """A payload matrix of class probabilities: one row of n_classes values in
        [0, 1] summing to one (within float32's rounding) per expected row."""
        proba = self.floats(key, (n_rows_expected, self.n_classes), bound=1.0)
        if (proba < 0).any():
            self.refuse(key, "probabilities must not be negative")
        if not np.allclose(proba.sum(axis=1), 1.0, rtol=0, atol=1e-4):
            self.refuse(key, "each row of probabilities must sum to one")
        return proba

    def vote_counts(self, key: str, n_rows_expected: int, bound: float) -> np.ndarray:
        """A payload matrix of noisy vote counts: one row of n_classes finite numbers
        per queried public row, none beyond `bound` in magnitude (a count plus any
        plausible noise), so that no party outweighs the others."""
        return self.floats(key, (n_rows_expected, self.n_classes), bound=bound)

    def model(self, model: Any, codes: Any, field: str) -> None:
        """A fitted model of some of the agreed classes: it predicts, its class codes
        are sorted distinct codes of the agreed classes, as many as its own classes,
        and it takes the agreed feature count."""
        if not (hasattr(model, "predict") and callable(model.predict)):
            self.refuse(field, f"a {type(model).__name__} is not a fitted model")
        if (not isinstance(codes, np.ndarray) or codes.ndim != 1 or codes.dtype.kind not in "iu"
                or codes.size < 1 or codes.size > self.n_classes
                or np.any(np.diff(codes) <= 0) or codes[0] < 0
                or codes[-1] >= self.n_classes):
            self.refuse(f"{field} codes", "not sorted distinct codes of the agreed classes")
        own = getattr(model, "classes_", None)
        if own is not None and len(own) != len(codes) and len(own) != self.n_classes:
            self.refuse(field, f"the model knows {len(own)} classes, its codes "
                        f"{len(codes)}")
        n_features = getattr(model, "n_features_in_", None)
        if (self.n_features is not None and n_features is not None
                and n_features != self.n_features):
            self.refuse(field, f"the model takes {n_features} features, the agreed data "
                        f"{self.n_features}")

    def optional_model(self, required: bool | None = None) -> Any:
        """A payload's ``model`` and ``codes``: both None, or a checked model; with
        `required` True, a model; with False, none."""
        model, codes = self.upload.payload.get("model"), self.upload.payload.get("codes")
        if "model" in self.withheld:
            return None
        if model is None and codes is None:
            if required:
                self.refuse("model", "missing: a party with these rows trains one")
            return None
        if model is None:
            self.refuse("model", "codes without a model")
        if required is False:
            self.refuse("model", "a model from a party whose rows train none")
        self.model(model, codes, "model")
        return model

    def models(self, key: str, count: int) -> None:
        """Exactly `count` models under payload `key` with their codes."""
        if key in self.withheld:
            return
        models, codes = self.upload.payload.get(key), self.upload.payload.get("codes")
        if (not isinstance(models, list) or not isinstance(codes, list)
                or len(models) != count or len(codes) != count):
            self.refuse(key, f"expected exactly {count} models and their codes, as agreed")
        for index, (model, model_codes) in enumerate(zip(models, codes)):
            self.model(model, model_codes, f"{key}[{index}]")


def _file_of(upload: PartyUpload) -> str:
    source = getattr(upload, "source", None)
    return "" if source is None else f" ({source})"
