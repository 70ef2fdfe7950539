"""What a party sends to the server: a manifest and a skops payload, checked on arrival.

An upload file is a zip archive of two members: ``manifest.json`` (plain JSON, read
first) and ``payload.skops`` (the models and arrays the algorithm sends, serialised with
skops, whose loader never runs pickle). The server reads the manifest, checks it against
what it expects, checks the payload's SHA-256 and the types the payload would create,
and only then loads it.
"""

import hashlib
import io
import json
import struct
import warnings
import zipfile
from dataclasses import dataclass, field
from os import PathLike
from types import FunctionType
from typing import Any
from numbers import Integral, Real

import numpy as np
import scipy.sparse as sp
from joblib import hash as joblib_hash
from sklearn.base import BaseEstimator

from .._engine._class_codes import ClassCodeModel
from .._engine._transport import map_in_parallel
from ._archive import (
    DEFAULT_LIMITS,
    UploadError,
    UploadLimits,
    depth_and_nodes,
    check_limits,
    check_skops_payload,
    parse_json,
    read_file,
    read_members,
)
from ._local_files import write_atomically
from ._native import check_native_structures
from ._schema import HONEST_LOADERS, check_constructions

FORMAT_VERSION = 1
_MANIFEST, _PAYLOAD = "manifest.json", "payload.skops"

# Types a server loads without being told, beyond those skops trusts by default (every
# scikit-learn estimator, numpy and scipy containers): the fitted internals of
# scikit-learn's estimators that skops leaves to the user (trees, neighbour trees,
# optimiser states) and XGBoost's models, which skops rebuilds from XGBoost's own
# format; each only as skops writes an honest object of it (`_schema`). Any other type
# (a skorch net's torch module, a user's class) needs the operator's decision.
DEFAULT_TRUSTED_TYPES = frozenset(HONEST_LOADERS)


def _canonical(value):
    """A JSON-able description of a parameter value, equal for equal configurations."""
    if isinstance(value, BaseEstimator):
        return {
            "class": f"{type(value).__module__}.{type(value).__qualname__}",
            "params": {k: _canonical(v) for k, v in sorted(value.get_params(deep=False).items())},
        }
    if isinstance(value, dict):
        return {str(k): _canonical(v) for k, v in sorted(value.items(), key=lambda kv: str(kv[0]))}
    if isinstance(value, (list, tuple)):
        return [_canonical(v) for v in value]
    if isinstance(value, (set, frozenset)):
        # a set's order changes from process to process
        return sorted((_canonical(v) for v in value), key=repr)
    if value is None or isinstance(value, (bool, str)):
        return value
    if isinstance(value, Integral):
        return int(value)
    if isinstance(value, Real):
        # NaN never equals NaN: a parameter such as XGBoost's missing=nan is compared
        # by its text
        number = float(value)
        return number if np.isfinite(number) else repr(number)
    if isinstance(value, type):
        return f"{value.__module__}.{value.__qualname__}"
    if callable(value) and hasattr(value, "__qualname__"):
        return f"{getattr(value, '__module__', '')}.{value.__qualname__}"
    return repr(value)


# parameters that change how a step runs, not what it computes
_RUNTIME_PARAMS = ("n_jobs", "verbose")


def algorithm_params(estimator):
    """The meta-estimator's parameters as every party and the server must agree on them."""
    params = estimator.get_params(deep=False)
    return {k: _canonical(v) for k, v in sorted(params.items()) if k not in _RUNTIME_PARAMS}


def json_labels(values):
    """Class or party labels as JSON values (numbers, strings, booleans)."""
    labels = np.asarray(values).tolist()
    for label in labels:
        if not isinstance(label, (str, int, float, bool)):
            raise TypeError(
                f"Labels sent between parties must be numbers, strings or booleans; got "
                f"{label!r} of type {type(label).__name__}."
            )
    return labels


def fingerprint(X):
    """SHA-256 of a data matrix: shape, dtype and values (a DataFrame's columns too)."""
    digest = hashlib.sha256()
    if hasattr(X, "iloc"):
        digest.update(json.dumps([str(c) for c in X.columns]).encode())
        X = X.to_numpy()
    if sp.issparse(X):
        X = X.tocsr()
        for part in (X.data, X.indices, X.indptr):
            digest.update(np.ascontiguousarray(part).tobytes())
        digest.update(repr((X.shape, X.dtype.str)).encode())
        return digest.hexdigest()
    X = np.asarray(X)
    digest.update(repr((X.shape, X.dtype.str)).encode())
    if X.dtype == object:
        digest.update(joblib_hash(X, hash_name="sha1").encode())
    else:
        digest.update(np.ascontiguousarray(X).tobytes())
    return digest.hexdigest()


# the payload key of what a party sends in the sum (`_channel`): in the clear without
# secure aggregation, never written under it (its secure sum takes them out first)
SUMS = "sums"
# the payload key of a party's leader shares under validated sums, by sum (bytes, as
# arrays of uint8), which the coordinator reads (`_validated_coordinator`)
LEADER_SHARES = "leader_shares"


@dataclass
class PartyUpload:
    """What one party sends to the server: a manifest and the algorithm's payload.

    Write it with `save` (or `to_bytes`); the server reads it with `read_upload`. FedCT's
    server answers each round in the same container (``party="server"``, the consensus
    as payload), which every party checks the same way.

    Attributes
    ----------
    manifest : dict
        JSON-able facts the server checks: ``format``, ``package_version``,
        ``algorithm``, ``params``, ``classes``, ``n_features``, ``feature_names``,
        ``public_fingerprint``, ``party``, ``n_rows``, ``round`` and ``privacy``, plus
        what the algorithm reports (``class_counts``...).
    payload : dict
        What the algorithm sends (models, labels, scores), serialised with skops.
    """

    manifest: dict[str, Any]
    payload: dict[str, Any] = field(repr=False)
    n_bytes: int | None = None
    """Size of the file it was read from (None until written or read)."""
    local_model: Any = field(default=None, repr=False)
    """What the party keeps and does not send: FedCT's model of the round, a classifier
    of the agreed classes (None elsewhere)."""
    teachers: Any = field(default=None, repr=False)
    """What the party keeps and does not send, for the membership audit of its upload
    in `fit`: FedCT's teachers, whose noisy votes it shares (None elsewhere)."""
    source: str | None = field(default=None, repr=False)
    """The file it was read from, as errors name it (None if not read from one)."""
    secure_state: Any = field(default=None, repr=False)
    """What the party keeps and does not send under secure aggregation: its
    `SecureParty`, which answers the secure sum's stages (None elsewhere)."""

    @property
    def party(self) -> Any:
        """The party's name."""
        return self.manifest["party"]

    def model(self) -> ClassCodeModel:
        """The party's uploaded model (``payload["model"]``, one-shot and FedCT), ready
        to predict class codes among the agreed classes."""
        return ClassCodeModel(self.payload["model"], self.payload["codes"])

    def to_bytes(self) -> bytes:
        """The upload file's bytes: a zip of the manifest and the skops payload."""
        payload = _skops_bytes(self.payload)
        manifest = dict(self.manifest, payload_sha256=hashlib.sha256(payload).hexdigest())
        buffer = io.BytesIO()
        with zipfile.ZipFile(buffer, "w", zipfile.ZIP_STORED) as archive:
            archive.writestr(_MANIFEST, json.dumps(manifest, indent=1, sort_keys=True))
            archive.writestr(_PAYLOAD, payload)
        return buffer.getvalue()

    def save(self, path: str | PathLike[str]) -> int:
        """Write the upload file; returns its size in bytes."""
        self.n_bytes = write_atomically(path, self.to_bytes())
        return self.n_bytes


def _skops_bytes(payload):
    import skops.io  # two seconds to import: only where an upload is written

    return skops.io.dumps(payload, compression=zipfile.ZIP_DEFLATED)


def payload_bytes(payload):
    """The bytes `payload` takes in an upload file (skops, compressed, as `to_bytes`
    writes it); NaN, with a warning that says why, where skops cannot write it."""
    try:
        return len(_skops_bytes(payload))
    except Exception as exc:  # skops's own errors name the object it could not write
        warnings.warn(f"upload_bytes_ is unknown for a party: skops cannot write what it "
                      f"uploads ({type(exc).__name__}: {exc}), so a deployment could not "
                      "send it.", UserWarning)
        return np.nan


def payloads_bytes(payloads, n_jobs=None):
    """`payload_bytes` of every payload, in parallel: skops writes a forest's trees in
    pure Python, seconds a party."""
    return np.array(map_in_parallel(payload_bytes, payloads, n_jobs), dtype=float)


def honest_limits(files, margin, derivation, floor=16 * 1024):
    """Caps `margin` times what the largest of the honest `files` (the bytes of one
    agreement's uploads and messages) needs: its file, its members inflated, its skops
    schema, its members and the schema's objects; each at least `floor` bytes (or 64
    members, 1,000 objects) and at most the default, which stays the upper bound."""
    need = {"max_file_bytes": 0, "max_inflated_bytes": 0, "max_schema_bytes": 0,
            "max_members": 0, "max_payload_nodes": 0}
    for data in files:
        with zipfile.ZipFile(io.BytesIO(data)) as outer:
            payload = outer.read(_PAYLOAD)
        with zipfile.ZipFile(io.BytesIO(payload)) as inner:
            infos = inner.infolist()
            schema = inner.read("schema.json")
        found = {
            "max_file_bytes": len(data),
            "max_inflated_bytes": sum(info.file_size for info in infos),
            "max_schema_bytes": len(schema),
            "max_members": len(infos),
            "max_payload_nodes": depth_and_nodes(json.loads(schema), float("inf"),
                                                  float("inf"), "", ""),
        }
        need = {name: max(need[name], found[name]) for name in need}
    least = {"max_members": 64, "max_payload_nodes": 1000}
    caps = {name: min(getattr(DEFAULT_LIMITS, name),
                      max(least.get(name, floor), int(np.ceil(margin * value))))
            for name, value in need.items()}
    return UploadLimits(**caps, derivation=derivation.format(**need))


def check_uploadable(estimator, what, step):
    """Refuse, before any training, an estimator whose fitted clones a party uploads but
    a server could not load: skops saves functions by name, and a lambda or a function
    defined inside another has none the server can import."""
    unnamed = [
        f"{name}={value.__qualname__}"
        for name, value in (estimator.get_params(deep=True).items()
                            if hasattr(estimator, "get_params") else ())
        if isinstance(value, FunctionType)
        and ("<lambda>" in value.__qualname__ or "<locals>" in value.__qualname__)
    ]
    if unnamed:
        raise ValueError(
            f"{step} uploads its {what} with skops, which saves a function by its module "
            f"and name, and {', '.join(unnamed)} has no name a server can import. Define it "
            "at "
            "module level (def to_float32(X): return X.astype('float32')) and pass that."
        )


def _trusted(type_name, trusted):
    return type_name in DEFAULT_TRUSTED_TYPES or type_name in trusted


def _type_names(trusted):
    """`trusted` as a set of type names (one name alone is one name, not its letters)."""
    return {trusted} if isinstance(trusted, str) else set(trusted)


def _party_of_damaged(data):
    """The party named in a damaged file's manifest, if its first member survived.

    The manifest is the archive's first member, stored uncompressed: a file cut short
    (which loses the zip's directory, at its end) still starts with it.
    """
    header = struct.Struct("<4s5H3I2H")
    if len(data) < header.size or not data.startswith(b"PK\x03\x04"):
        return None
    *_, size, _, name_length, extra_length = header.unpack_from(data)
    start = header.size + name_length + extra_length
    if data[header.size : header.size + name_length] != _MANIFEST.encode():
        return None
    try:
        party = json.loads(data[start : start + size]).get("party")
    except (ValueError, AttributeError):
        return None
    return party if isinstance(party, (str, int)) else None


def read_upload(source, *, trusted=(), name=None, limits=None):
    """Read an upload file without running pickle, refusing untrusted types.

    Parameters
    ----------
    source : str, path-like or bytes
        The file, or its bytes.
    trusted : sequence of str, default=()
        Type names (``"module.Class"``) the server's operator trusts beyond scikit-learn's
        and XGBoost's, e.g. a skorch net's classes. Loading such a type runs its code:
        trust only types whose code you trust, from parties you trust.
    name : str, default=None
        What to call the upload in errors before its manifest is read (the path by
        default).
    limits : UploadLimits, default=None
        Bounds on the file's size, its inflated members, its manifest and the objects
        its payload creates; None means ``UploadLimits()``.

    Returns
    -------
    upload : PartyUpload

    Raises
    ------
    UploadError
        For a file that is not an upload (exactly a manifest and a payload, plain
        members, within `limits`), is truncated or corrupted, whose payload does not
        match its manifest's checksum, that holds untrusted types, or whose trees or
        boosters are malformed (children out of range or cyclic, features out of range,
        non-finite values): they are checked before anything runs them.

    Examples
    --------
    >>> from sklearn.datasets import load_iris
    >>> from skfedkt import OneShotEnsembleClassifier, read_upload
    >>> X, y = load_iris(return_X_y=True)
    >>> upload = OneShotEnsembleClassifier(random_state=0).fit_party(
    ...     X, y, party="lab-a", classes=[0, 1, 2])
    >>> received = read_upload(upload.to_bytes())
    >>> received.party, received.manifest["n_rows"], received.manifest["classes"]
    ('lab-a', 150, [0, 1, 2])
    >>> type(received.payload["model"]).__name__
    'DecisionTreeClassifier'
    >>> read_upload(upload.to_bytes()[:1000])
    Traceback (most recent call last):
    ...
    skfedkt._deployment._archive.UploadError: Party 'lab-a' (the upload): not a readable skfedkt upload...
    """
    trusted = _type_names(trusted)
    limits = check_limits(limits)
    if isinstance(source, (bytes, bytearray)):
        name = name or "the upload"
    else:
        name = name or str(source)
    data = read_file(source, name, limits)
    try:
        members = read_members(data, name, expected=[_MANIFEST, _PAYLOAD], limits=limits,
                               caps={_MANIFEST: "max_manifest_bytes"})
        manifest = parse_json(members[_MANIFEST], name, "manifest", limits)
    except UploadError as exc:
        if exc.field == "limits":
            raise
        party = _party_of_damaged(data)
        who = name if party is None else f"Party {party!r} ({name})"
        # the reader's own words, without the file's name again or their full stop
        reason = str(exc).removeprefix(f"{name}: ").rstrip(".")
        raise UploadError(
            f"{who}: not a readable skfedkt upload (truncated or corrupted?): {reason}. "
            "Ask the party to send it again.", party=party,
        ) from exc
    party, who = _check_manifest(manifest, name)
    payload = members[_PAYLOAD]
    if hashlib.sha256(payload).hexdigest() != manifest.get("payload_sha256"):
        raise UploadError(
            f"{who}: the payload does not match the SHA-256 in the manifest; the "
            "file was altered or damaged on its way. Ask the party to send it again.",
            party=party, field="payload_sha256",
        )
    loaded = _load_skops(payload, who, trusted, limits, party)
    return PartyUpload(manifest=manifest, payload=loaded, n_bytes=len(data), source=name)


def _check_manifest(manifest, name):
    """The party that a parsed manifest names, and how errors name it; refuses a
    manifest without a party's name or of another format."""
    if not isinstance(manifest, dict) or "party" not in manifest:
        raise UploadError(f"{name} has no party in its manifest; it is not a skfedkt upload.",
                          field="party")
    party = manifest["party"]
    if isinstance(party, bool) or not isinstance(party, (str, int)):
        raise UploadError(
            f"{name}: the manifest's party must be a name (a string or an integer), got "
            f"{type(party).__name__}.", field="party",
        )
    who = f"Party {party!r} ({name})"
    if manifest.get("format") != FORMAT_VERSION:
        raise UploadError(
            f"{who}: upload format {manifest.get('format')!r}, this server reads "
            f"format {FORMAT_VERSION}; both sides need the same skfedkt version.",
            party=party, field="format",
        )
    return party, who


def _named_briefly(names, n_shown=10, length=100):
    """The file's own names, as a refusal quotes them: at most `n_shown`, each cut to
    `length` characters (a hostile file may name a type with megabytes)."""
    shown = [repr(name if len(name) <= length else name[:length] + "…")
             for name in names[:n_shown]]
    more = f" and {len(names) - n_shown} more" if len(names) > n_shown else ""
    return f"[{', '.join(shown)}]{more}"


def _load_skops(data, who, trusted, limits, party=None, allowed=frozenset()):
    """Load a skops archive, within `limits`, whose every type is trusted by default,
    by the operator (`trusted`) or `allowed` by the caller, built only as skops builds
    honest objects, and check its native structures before anything uses them."""
    import skops.io

    try:
        schema, members = check_skops_payload(data, who, limits)
        check_constructions(schema, members, who, trusted)
    except UploadError as exc:
        exc.party = party
        raise
    try:
        types = skops.io.get_untrusted_types(data=data)
    except Exception as exc:  # skops raises various errors on a damaged payload
        raise UploadError(f"{who}: unreadable payload: {exc}", party=party,
                          field="payload") from exc
    untrusted = [t for t in types if t not in allowed and not _trusted(t, trusted)]
    if untrusted:
        raise UploadError(
            f"{who}: the file holds types this reader does not trust: "
            f"{_named_briefly(untrusted)}. "
            "Loading them would run their code. If you trust its sender and these types' "
            "code, pass them in trusted= (CLI: --trust).",
            party=party, field="types",
        )
    try:
        loaded = skops.io.loads(data, trusted=types)
    except Exception as exc:
        raise UploadError(f"{who}: unreadable payload: {exc}", party=party,
                          field="payload") from exc
    try:
        check_native_structures(loaded, who)
    except UploadError as exc:
        exc.party = party
        raise
    return loaded
