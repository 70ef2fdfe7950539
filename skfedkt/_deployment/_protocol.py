"""What the party and server steps of every algorithm share: data checks, uploads.

A deployment runs each party's step on its own machine and the server's step on the
uploads; the meta-estimators' ``fit`` runs the same steps in one process (the seeds
that make both give the same model are in ``_engine/_seeds.py``).
"""

import json
import warnings
from numbers import Integral
from os import PathLike
from typing import Any

import numpy as np
from sklearn.base import clone
from sklearn.utils.validation import validate_data

from .._engine._validation import (
    _keep_frame,
    check_params,
    parties_in_words,
    validate_federated_data,
)
from .._version import __version__
from ._received import UploadChecker, _file_of
from ._upload import (
    FORMAT_VERSION,
    PartyUpload,
    UploadError,
    algorithm_params,
    fingerprint,
    json_labels,
    read_upload,
)


def agreed_classes(classes):
    """The agreed class labels, sorted as ``classes_`` always is."""
    labels = np.asarray(classes)
    if labels.ndim != 1 or len(labels) < 2:
        raise ValueError(
            f"classes must list the agreed class labels, at least two; got {labels.tolist()!r}."
        )
    if len(np.unique(labels)) != len(labels):
        raise ValueError(f"classes has repeated labels: {labels.tolist()!r}.")
    json_labels(labels)
    return np.unique(labels)


def _check_party_name(party):
    if isinstance(party, (bool, np.bool_)) or not isinstance(party, (str, Integral)):
        raise TypeError(
            f"party must be the party's name, a string or an integer; got {party!r} of "
            f"type {type(party).__name__}."
        )
    return party if isinstance(party, str) else int(party)


def require_public_set(X_public, step, use):
    """The algorithm's steps need the agreed public set (`use`: what they do with it):
    refuse None before any work."""
    if X_public is None:
        raise ValueError(
            f"{step} needs the agreed public set ({use}): pass it as X_unlabeled (the "
            "same rows, in the same order, at every party and the server)."
        )


class PartyData:
    """A party's validated rows, their codes among the agreed classes, and the public set.

    Parameters
    ----------
    config : BaseFederatedClassifier
        The meta-estimator holding the algorithm's parameters (not modified).
    X, y : the party's rows and labels.
    classes : array-like
        The classes every party and the server agreed on.
    X_public : the agreed public set, or None where the algorithm needs none.
    party : str or int
        The party's name.
    """

    def __init__(self, config, X, y, classes, X_public, party):
        self.party = _check_party_name(party)
        self.classes = agreed_classes(classes)
        validator = clone(config)
        data = validate_federated_data(validator, X, y, None,
                                       None if X_public is None else X_public)
        labels = validator.classes_[data.y]
        unknown = np.setdiff1d(validator.classes_, self.classes)
        if unknown.size:
            raise ValueError(
                f"y holds labels outside the agreed classes: {unknown.tolist()!r} (classes="
                f"{self.classes.tolist()!r}). Agree on every class beforehand."
            )
        order = np.argsort(self.classes, kind="stable")
        self.y = order[np.searchsorted(self.classes, labels, sorter=order)]
        self.X, self.X_public = data.X, data.X_public
        self.n_features = validator.n_features_in_
        names = getattr(validator, "feature_names_in_", None)
        self.feature_names = None if names is None else names.tolist()
        self.public_fingerprint = None if X_public is None else fingerprint(self.X_public)

    # one party's rows on its own machine (``fit`` holds every party's: FederatedData)
    pooled = False

    @property
    def parties(self):
        return [self.party]

    @property
    def party_rows(self):
        return [np.arange(len(self.y))]

    def expectations(self, config):
        """What this party and the server must agree on (what the server checks)."""
        return dict(
            _configuration(config),
            classes=json_labels(self.classes),
            n_features=int(self.n_features),
            feature_names=self.feature_names,
            public_fingerprint=self.public_fingerprint,
        )

    def manifest(self, config):
        """The manifest of this party's upload: its expectations, its name and size."""
        return dict(self.expectations(config), party=self.party, n_rows=int(len(self.y)))


def _configuration(config):
    """The format, package version, algorithm and parameters of a step."""
    return dict(format=FORMAT_VERSION, package_version=__version__,
                algorithm=type(config).__name__, params=algorithm_params(config))


def server_expectations(config, X_public, classes):
    """What every upload's manifest must say, from the server's own configuration, and
    the validated public set (None if not given).

    Sets ``n_features_in_`` (and ``feature_names_in_``) on `config` from the public set.
    """
    expected = _configuration(config)
    if classes is not None:
        expected["classes"] = json_labels(agreed_classes(classes))
    if X_public is None:
        return expected, None
    X_valid = validate_data(config, X_public, reset=True, **check_params(config))
    X_public = _keep_frame(X_public, X_valid)
    expected["n_features"] = int(config.n_features_in_)
    names = getattr(config, "feature_names_in_", None)
    expected["feature_names"] = None if names is None else names.tolist()
    expected["public_fingerprint"] = fingerprint(X_public)
    return expected, X_public


def _differences(theirs, ours, path=""):
    """(path, their value, our value) of every leaf where two canonical parameter
    descriptions differ, e.g. ``estimator.max_depth``."""
    if isinstance(theirs, dict) and isinstance(ours, dict):
        for key in sorted(set(theirs) | set(ours)):
            # an estimator's description nests its parameters under "params"
            name = path if key == "params" else f"{path}.{key}" if path else key
            yield from _differences(theirs.get(key), ours.get(key), name)
    elif (isinstance(theirs, list) and isinstance(ours, list)
          and len(theirs) == len(ours)):
        for index, (a, b) in enumerate(zip(theirs, ours)):
            yield from _differences(a, b, f"{path}[{index}]")
    elif theirs != ours:
        yield path, theirs, ours


# how an operator fixes a field the server otherwise takes from the uploads' majority
_SET_AT_THE_SERVER = {
    "classes": " (the server takes the majority's; set them with classes=, --classes on "
               "the command line)",
}
# what the server takes from the uploads where it was not given: the majority's value
_INFERRED = ("classes", "n_features", "feature_names")


def _majority(uploads, key):
    """The value of manifest field `key` that most uploads share (the first seen among
    equals), and how many share it."""
    counts: dict[str, int] = {}
    first: dict[str, Any] = {}
    for upload in uploads:
        value = upload.manifest.get(key)
        text = json.dumps(value, sort_keys=True, default=str)
        counts[text] = counts.get(text, 0) + 1
        first.setdefault(text, value)
    text = max(counts, key=counts.__getitem__)
    return first[text], counts[text]


def _mismatch(manifest, expected, inferred=()):
    """The first manifest field that differs from `expected`, with a readable reason;
    `inferred` maps the fields the server took from the uploads' majority to how many
    of how many uploads agreed on it."""
    for key, value in expected.items():
        if manifest.get(key) != value:
            if key in inferred:
                agreed, readable = inferred[key]
                return key, (
                    f"{key} is {manifest.get(key)!r}, but {agreed} of the {readable} "
                    f"uploads have {value!r}" + _SET_AT_THE_SERVER.get(key, "")
                )
            if key == "params":
                differences = list(_differences(manifest.get("params") or {}, value))
                shown = "; ".join(f"{path}: the party has {theirs!r}, the server {ours!r}"
                                  for path, theirs, ours in differences[:3])
                more = f" and {len(differences) - 3} more" if len(differences) > 3 else ""
                return key, f"algorithm parameters (params) differ: {shown}{more}"
            return key, f"{key} is {manifest.get(key)!r}, the server expects {value!r}"
    return None


def collect_uploads(sources, expected, *, trusted=(), min_parties=None, limits=None,
                    check=None, withheld=frozenset()):
    """Read and check the uploads; the accepted ones sorted by party, and the left-out.

    Every upload must match `expected` field by field; where the server gave no
    classes (or feature count, or names), those of most readable uploads; then
    ``check(checker)`` checks the algorithm's fields with an `UploadChecker` whose
    fields named in `withheld` (kept at the party under secure aggregation) are not
    read. With
    `min_parties`, uploads that fail are left out (with a warning naming them and why)
    as long as at least `min_parties` remain; without it, the first failure raises.

    Returns
    -------
    uploads : list of PartyUpload
    left_out : dict
        ``{party or file: reason}``.
    """
    if isinstance(sources, (str, bytes, bytearray, PathLike, PartyUpload)):
        raise TypeError(
            "uploads must be a list of upload files (paths or bytes) or PartyUpload "
            f"objects, one per party; got a single {type(sources).__name__}. Wrap it in "
            "a list."
        )
    accepted: dict[Any, PartyUpload] = {}
    left_out: dict[Any, str] = {}
    files_of: dict[Any, list[str]] = {}

    def refuse(error, key):
        if min_parties is None:
            raise error
        left_out[key] = str(error)

    readable = []
    for index, source in enumerate(sources):
        name = (f"upload {index}" if isinstance(source, (bytes, bytearray))
                else getattr(source, "source", None) or str(source))
        try:
            upload = source if isinstance(source, PartyUpload) else read_upload(
                source, trusted=trusted, limits=limits, name=name,
            )
        except UploadError as error:
            refuse(error, error.party if error.party is not None else name)
            continue
        files_of.setdefault(upload.party, []).append(name)
        readable.append(upload)
    # what the server did not fix, the majority of the readable uploads does, so that
    # the odd one out is the one refused, whatever the order of arrival
    inferred = {}
    for key in _INFERRED:
        if key not in expected and readable:
            value, agreed = _majority(readable, key)
            expected = dict(expected, **{key: value})
            inferred[key] = (agreed, len(readable))
    for upload in readable:
        party = upload.party
        mismatch = _mismatch(upload.manifest, expected, inferred)
        if mismatch is not None:
            field, reason = mismatch
            refuse(UploadError(f"Party {party!r}{_file_of(upload)} refused: {reason}.",
                               party=party, field=field), party)
            continue
        if check is not None:
            try:
                check(UploadChecker(upload, len(expected["classes"]),
                                    expected.get("n_features"), withheld))
            except UploadError as error:
                refuse(error, party)
                continue
        if upload.n_bytes is None:
            upload.n_bytes = len(upload.to_bytes())
        accepted.setdefault(party, upload)
    for party, files in files_of.items():
        # which of two files is the real party cannot be told: neither is used
        if len(files) > 1:
            accepted.pop(party, None)
            refuse(UploadError(
                f"Party {party!r} sent {len(files)} uploads ({', '.join(files)}): one "
                "party, one upload; neither is used.", party=party, field="party"), party)
    if min_parties is not None and len(accepted) < min_parties:
        raise UploadError(
            f"Only {len(accepted)} upload(s) passed the checks, fewer than "
            f"min_parties={min_parties}; left out: {left_out}."
        )
    if not accepted:
        raise UploadError("No uploads to combine.")
    if left_out:
        warnings.warn(
            f"Proceeding with {parties_in_words(len(accepted))}; left out {len(left_out)}: "
            + "; ".join(f"{party!r}: {reason}" for party, reason in left_out.items()),
            UserWarning,
        )
    kinds = {isinstance(p, str) for p in accepted}
    if len(kinds) > 1:
        raise UploadError(
            f"Party names mix strings and numbers: {list(accepted)}; name every party "
            "the same way.", field="party",
        )
    order = np.unique(np.array(list(accepted)))
    return [accepted[p] for p in order.tolist()], left_out


def checked_message(message, expected, limits=None, check=None):
    """The server's message of a round, read and checked like an upload."""
    if not isinstance(message, PartyUpload):
        message = read_upload(message, name="the server's message", limits=limits)
    (message,), _ = collect_uploads([message], dict(expected, party="server"), check=check)
    return message
