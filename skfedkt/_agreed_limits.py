"""The caps on a deployment's files that an agreement implies, measured on one reference
party's honest run of the deployed steps (`BaseFederatedClassifier.agreed_upload_limits`)."""

from __future__ import annotations

import warnings
from numbers import Integral
from typing import Any

import numpy as np
from sklearn.base import clone

from ._engine._compat import num_samples, safe_indexing
from ._deployment._archive import UploadLimits
from ._deployment._upload import honest_limits, read_upload


def reference_party_limits(estimator: Any, X_unlabeled: Any, classes: Any,
                           party_rows: int | None, margin: float) -> UploadLimits:
    """`margin` times what the largest file of `estimator`'s agreement needs, for a party
    of `party_rows` rows drawn from the public set `X_unlabeled` with random labels of
    `classes` (trees grow as large as rows allow)."""
    if not margin >= 1:
        raise ValueError(f"margin must be at least 1, got {margin!r}.")
    X_public, classes = X_unlabeled, np.asarray(classes)
    n_rows = num_samples(X_public) if party_rows is None else party_rows
    if isinstance(n_rows, bool) or not isinstance(n_rows, Integral) or n_rows < len(
            classes):
        raise ValueError(f"party_rows must be an integer of at least one row per class "
                         f"({len(classes)}), got {party_rows!r}.")
    rng = np.random.RandomState(0)
    X = safe_indexing(X_public, rng.randint(num_samples(X_public), size=n_rows))
    y = rng.permutation(np.resize(classes, n_rows))
    party = clone(estimator)
    name = type(estimator).__name__.removesuffix("Classifier")
    if "verbose" in party.get_params():
        party.set_params(verbose=0)
    steps = dict(party="reference", classes=classes, X_unlabeled=X_public, party_seed=0)
    # every file as it crosses: the party's uploads and the server's messages
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # a reference party of random labels
        files = [party.fit_party(X, y, **steps).to_bytes()]
        message = None
        while estimator.runs_rounds and (message is None or not message.manifest["done"]):
            files.append(clone(estimator).server_round(
                [files[-1]], X_public, message=message, classes=classes).to_bytes())
            message = read_upload(files[-1])
            files.append(party.fit_party(X, y, message=message, **steps).to_bytes())
    return honest_limits(
        files, margin,
        f"{margin:g} x the largest honest file of {name}'s agreement for a party of "
        f"{n_rows} rows ({{max_file_bytes}} bytes, {{max_inflated_bytes}} "
        "inflated, a schema of {max_schema_bytes} bytes)",
    )
