"""What a consortium agrees on before it deploys an algorithm, as the estimator's methods
make it (`ConsortiumAgreements`): the caps on its files, measured on one reference
party's honest run of the deployed steps, and the session of secure aggregation."""

from __future__ import annotations

import warnings
from numbers import Integral
from typing import Any

import numpy as np
from sklearn.base import clone

from ._engine._compat import num_samples, safe_indexing
from ._deployment._archive import UploadLimits
from ._deployment._identity import HelperKey, PartyIdentity
from ._config import config_context, get_config
from ._deployment._secure_stages import SecureSession
from ._deployment._upload import honest_limits, read_upload


class ConsortiumAgreements:
    """The methods that make what the parties and the server of a deployment agree on
    beforehand, from the estimator they agree on."""

    def agreed_upload_limits(self, X_unlabeled, classes, *, party_rows=None, margin=4.0):
        """The caps on every file of a deployment that this agreement implies.

        Runs the deployment's steps for one reference party that holds `party_rows`
        rows drawn from the public set with labels of every class (random labels:
        trees grow as large as rows allow), and caps each file at `margin` times what
        its largest honest upload needs: the file, its members inflated, its schema,
        its members and objects. The defaults of `UploadLimits` stay the upper bound;
        a refusal names the cap and this derivation. An algorithm whose upload grows
        with the party's rows (local models of unbounded depth) needs `party_rows` of
        the largest party.

        Parameters
        ----------
        X_unlabeled : {array-like, sparse matrix, DataFrame}
            The agreed public set.
        classes : array-like of shape (n_classes,)
            The agreed class labels.
        party_rows : int, default=None
            Rows of the reference party; None: as many as the public set.
        margin : float, default=4.0
            How many times an honest upload's needs the caps allow (at least 1).

        Returns
        -------
        limits : UploadLimits
            For ``fit_server``, ``server_round`` and, for a party, ``fit_party``'s
            message.

        Examples
        --------
        >>> from sklearn.datasets import load_breast_cancer
        >>> from sklearn.tree import DecisionTreeClassifier
        >>> from skfedkt import FedKTClassifier
        >>> X, y = load_breast_cancer(return_X_y=True)
        >>> clf = FedKTClassifier(DecisionTreeClassifier(max_depth=3), random_state=0)
        >>> limits = clf.agreed_upload_limits(X[:100], classes=[0, 1])
        >>> limits.max_file_bytes < 2**20
        True
        """
        return reference_party_limits(self, X_unlabeled, classes, party_rows, margin)

    def secure_session(self, parties, party_rows, *, identities, threshold=None,
                       colluding=None, helper=None):
        """The session of a deployment under secure aggregation, which every party and
        the coordinator hold before the first round (``session.save(path)``).

        Its fixed-point encoding is sized for this algorithm and the largest party.

        Parameters
        ----------
        parties : list of str or int
            The party names, at least 3.
        party_rows : list of int
            Each party's rows, aligned with `parties` (every manifest says them).
        identities : list of bytes
            Each party's public identity key, aligned with `parties`: 32 raw bytes,
            from the file each party sent (``skfedkt.PartyIdentity.load_public(path)``).
            A party's keys of each round are signed by its identity, so that no party
            accepts keys the coordinator made up.
        threshold : int, default=None
            The fewest parties that must stay to the end of each round; a majority at
            least. None: the fewest above two thirds, so that more than a third of the
            parties must collude with a coordinator that lies about who dropped.
        colluding : int, default=None
            The most parties that may collude with the coordinator, against whom noise
            the parties add in shares (`skfedkt.privacy.DistributedNoise`) is sized: the
            shares of any ``threshold - colluding`` honest parties carry its whole
            noise, and the sum of more carries more. None: ``2 * threshold - n - 1``
            (none where that is negative), the most against whom the secure sum itself
            keeps a party's input hidden from a coordinator that deviates; with more,
            noise would not help the sum it protects.
        helper : bytes, default=None
            Under ``secure_aggregation="validated"``, required: the helper's public key
            (32 raw bytes, ``skfedkt.HelperKey.load_public(path)``), the second
            aggregator, which must not collude with the coordinator. The session then
            runs validated sums (:doc:`/validated_sums`); without it, the masked sum.

        Returns
        -------
        session : SecureSession

        Examples
        --------
        >>> from skfedkt import FedKTClassifier, PartyIdentity
        >>> keys = [PartyIdentity.generate() for _ in range(5)]  # one at each party
        >>> session = FedKTClassifier().secure_session(
        ...     ["a", "b", "c", "d", "e"], [100, 120, 90, 80, 110],
        ...     identities=[key.public_bytes for key in keys], threshold=3)
        >>> session.threshold, session.colluding, len(session.session)
        (3, 0, 32)
        """
        return secure_session_for(self, parties, party_rows, threshold, identities,
                                  colluding, helper)


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
    secure = get_config()["secure_aggregation"]
    # every file as it crosses: the party's uploads and the server's messages, and under
    # secure aggregation an upload with its keys, whose payload the plain one's bounds
    with warnings.catch_warnings(), config_context(secure_aggregation=False):
        warnings.simplefilter("ignore")  # a reference party of random labels
        files = [party.fit_party(X, y, **steps).to_bytes()]
        message = None
        while estimator.runs_rounds and (message is None or not message.manifest["done"]):
            files.append(clone(estimator).server_round(
                [files[-1]], X_public, message=message, classes=classes).to_bytes())
            message = read_upload(files[-1])
            files.append(party.fit_party(X, y, message=message, **steps).to_bytes())
    if secure:
        identities = [PartyIdentity.generate() for _ in range(3)]
        helper = HelperKey.generate().public_bytes if secure == "validated" else None
        session = secure_session_for(party, ["reference", "other", "another"], [n_rows] * 3,
                                     None, [identity.public_bytes for identity in identities],
                                     helper=helper)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            files.append(party.fit_party(X, y, secure_session=session,
                                         identity=identities[0], **steps).to_bytes())
    return honest_limits(
        files, margin,
        f"{margin:g} x the largest honest file of {name}'s agreement for a party of "
        f"{n_rows} rows{' under secure aggregation' if secure else ''} ({{max_file_bytes}} "
        "bytes, {max_inflated_bytes} inflated, a schema of {max_schema_bytes} bytes)",
    )


def secure_session_for(estimator: Any, parties: Any, party_rows: Any,
                       threshold: int | None, identities: Any,
                       colluding: int | None = None,
                       helper: bytes | None = None) -> SecureSession:
    """`estimator`'s secure session of `parties` (`ConsortiumAgreements.secure_session`),
    refused where the algorithm cannot run under secure aggregation; under validated
    sums, with the `helper`'s public key."""
    validated = get_config()["secure_aggregation"] == "validated"
    if validated != (helper is not None):
        raise ValueError(
            "helper is the validated sum's second aggregator: give its public key "
            "(skfedkt.HelperKey.load_public(path)) under secure_aggregation='validated', "
            "and leave it out otherwise (the masked sum)." if validated else
            "helper is given, but secure_aggregation is not 'validated': write the "
            "session under skfedkt.config_context(secure_aggregation='validated'), or "
            "leave helper out for the masked sum.")
    plan = estimator._plan()
    estimator._uploads.refuse_in_mode(type(estimator).__name__, plan, True)
    rows = list(party_rows)
    if len(rows) != len(list(parties)) or not rows:
        raise ValueError(f"party_rows must give one row count per party: {len(rows)} for "
                         f"{len(list(parties))} parties.")
    if any(isinstance(n, bool) or not isinstance(n, Integral) or n < 1 for n in rows):
        raise ValueError(f"party_rows must be positive integers, got {rows!r}.")
    channel = estimator._uploads.channel(plan)
    channel.check_fits(plan, len(rows), max(rows))
    return SecureSession.new(parties, rows, channel.float_bound(plan, max(rows)), threshold,
                             identities=identities, colluding=colluding, helper=helper)
