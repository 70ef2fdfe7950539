"""Membership-inference audit: what an attacker learns from each release of a fit.

An accountant states what a noise mechanism guarantees; an audit measures what a
concrete attacker learns from what actually leaves a party or the server. For every
*release* of a fitted estimator (a party's upload, the labels it shares, the final
model) and every attacked party, the attacker is given the release and a balanced set
of candidate rows: the party's own training rows (members) and as many held-out rows
of the same classes (non-members), and scores how likely each candidate is a member:

- ``"loss"``: the loss-threshold attack of Yeom et al. (2018): the release's
  confidence in the candidate's true class (for a label release: whether its label is
  right).
- ``"lira"``: the offline likelihood-ratio attack of Carlini et al. (2022) with
  reference fits: the whole fit is run again with the attacked rows replaced by other
  rows of the same classes, and the candidate's confidence is compared with the
  confidences those reference releases give it (a Gaussian per candidate, one variance
  per release). For a label release this is the difficulty-calibrated correctness of
  Watson et al. (2022).

Each attack is summarised by its ROC AUC (0.5: a guess) and its true-positive rate at
1% and 0.1% false positives. A release covered by an (epsilon, delta) guarantee cannot
allow an AUC above `dp_auc_bound`.
"""

import warnings
from dataclasses import dataclass
from numbers import Integral

import numpy as np
from sklearn.base import clone
from sklearn.utils import check_random_state
from sklearn.utils.validation import check_is_fitted

from ._engine._compat import HasMethods, Interval, num_samples, safe_indexing, validate_params
from ._audit_results import MembershipAudit, attack_result
from ._base import BaseFederatedClassifier
from ._deployment._protocol import PartyData
from ._engine._rows import stack_rows

# probabilities are clipped here before their logit: a release that gives a class 0 or 1
# gives the attacker a large, finite score
_CLIP = 1e-6


def _statistic(release, X, y):
    """The per-row statistic an attack thresholds: the logit of the release's confidence
    in the true class (proba), or its vote for the true class (labels)."""
    outputs = np.asarray(release.predict(X), dtype=float)
    confidence = outputs[np.arange(len(y)), y]
    if release.kind == "labels":
        return confidence
    confidence = np.clip(confidence, _CLIP, 1 - _CLIP)
    return np.log(confidence) - np.log1p(-confidence)


def _class_codes(labels, classes, name):
    labels = np.asarray(labels)
    codes = np.searchsorted(classes, labels)
    codes = np.clip(codes, 0, len(classes) - 1)
    unknown = labels[classes[codes] != labels]
    if unknown.size:
        raise ValueError(
            f"{name} holds labels the estimator was not fitted on: "
            f"{np.unique(unknown)[:5].tolist()!r} (classes_: {classes.tolist()!r})."
        )
    return codes


@dataclass
class _Candidates:
    """One attacked party's candidate rows: members (training rows) then non-members
    (held-out rows), class by class in equal numbers."""

    party: object
    members: np.ndarray
    nonmembers: np.ndarray
    y: np.ndarray


def _draw_candidates(y, party_codes, attacked, y_holdout, nonmember_rows, max_members, rng):
    candidates = []
    for party_index, party in attacked:
        member_parts, nonmember_parts = [], []
        for code in np.unique(y):
            own = np.flatnonzero((party_codes == party_index) & (y == code))
            held = nonmember_rows[y_holdout[nonmember_rows] == code]
            n = min(len(own), len(held))
            member_parts.append(rng.choice(own, n, replace=False))
            nonmember_parts.append(rng.choice(held, n, replace=False))
        members, nonmembers = np.concatenate(member_parts), np.concatenate(nonmember_parts)
        if len(members) > max_members:
            keep = np.sort(rng.choice(len(members), max_members, replace=False))
            members, nonmembers = members[keep], nonmembers[keep]
        candidates.append(_Candidates(party, members, nonmembers,
                                      np.concatenate([y[members], y_holdout[nonmembers]])))
    return candidates


def _replacement_rows(candidates, y, y_holdout, pool_rows, rng):
    """For one reference fit: every attacked member's row replaced by a pool row of its
    class, without replacement while the pool lasts. Returns indices into the training
    rows followed by the pool rows, and the share of pool rows drawn twice or more."""
    mapping = np.arange(len(y))
    members = np.concatenate([c.members for c in candidates])
    reused = 0
    for code in np.unique(y[members]):
        targets = members[y[members] == code]
        pool = pool_rows[y_holdout[pool_rows] == code]
        if pool.size == 0:
            continue  # no row of this class to stand in: the member stays
        repeat = len(targets) > len(pool)
        reused += max(len(targets) - len(pool), 0)
        mapping[targets] = len(y) + np.searchsorted(
            pool_rows, rng.choice(pool, len(targets), replace=repeat)
        )
    return mapping, reused / max(len(members), 1)


def _holdout_halves(y_holdout, n_reference, rng):
    """Half of every class's held-out rows are non-members, the other half stand in for
    the attacked members in the reference fits (all are non-members without them)."""
    nonmember_rows, pool_rows = [], []
    for code in np.unique(y_holdout):
        rows = rng.permutation(np.flatnonzero(y_holdout == code))
        split = len(rows) if n_reference == 0 else (len(rows) + 1) // 2
        nonmember_rows.append(rows[:split])
        pool_rows.append(rows[split:])
    return np.sort(np.concatenate(nonmember_rows)), np.sort(np.concatenate(pool_rows))


def _run_audit(name, fit, target_releases, X, y, party_codes, attacked, X_holdout,
               y_holdout, max_members, n_reference, rng):
    """The attacks, given the audited releases and a way to refit.

    `fit(X_reference, seed)` refits what was audited on `X_reference` (the training rows
    with the attacked members replaced, labels unchanged) and returns its releases;
    `target_releases` are the audited fit's. Releases are keyed by (name, party).
    """
    nonmember_rows, pool_rows = _holdout_halves(y_holdout, n_reference, rng)
    candidates = _draw_candidates(y, party_codes, attacked, y_holdout, nonmember_rows,
                                  max_members, rng)
    for c in candidates:
        if len(c.members) == 0:
            raise ValueError(
                f"No held-out row shares a class with party {c.party!r}'s rows: give "
                "X_holdout and y_holdout with rows of every class."
            )
    candidate_rows = [
        stack_rows(safe_indexing(X, c.members), safe_indexing(X_holdout, c.nonmembers))
        for c in candidates
    ]

    def statistics(releases):
        """{(release name, party): (release, statistic on the party's candidates)}."""
        return {
            (release_name, c.party): (release, _statistic(release, rows, c.y))
            for c, rows in zip(candidates, candidate_rows)
            for (release_name, owner), release in releases.items()
            if owner is None or owner == c.party
        }

    target = statistics(target_releases)
    references, reuse = [], []
    X_with_pool = stack_rows(X, safe_indexing(X_holdout, pool_rows))
    for seed in rng.randint(np.iinfo(np.int32).max, size=n_reference):
        mapping, reused = _replacement_rows(candidates, y, y_holdout, pool_rows, rng)
        reuse.append(reused)
        with warnings.catch_warnings():
            # the reference fits repeat the audited fit's warnings
            warnings.simplefilter("ignore")
            releases = fit(safe_indexing(X_with_pool, mapping), int(seed))
        references.append(statistics(releases))

    results = []
    for (release_name, party), (release, observed) in target.items():
        n_members = len(next(c for c in candidates if c.party == party).members)
        results.append(attack_result(release, party, "loss", observed, n_members))
        reference_stats = np.array([ref[release_name, party][1] for ref in references
                                    if (release_name, party) in ref])
        if len(reference_stats):
            # offline LiRA: a Gaussian per candidate, one variance for the release
            scale = np.sqrt(reference_stats.var(axis=0).mean()) + 1e-12
            scores = (observed - reference_stats.mean(axis=0)) / scale
            results.append(attack_result(release, party, "lira", scores, n_members))
    return MembershipAudit(
        name, results, n_reference, float(np.mean(reuse)) if reuse else 0.0,
        n_party_rows=sum(int(np.sum(party_codes == index)) for index, _ in attacked),
        n_attacked_rows=sum(len(c.members) for c in candidates))


def _keyed(releases):
    """Releases by (name, party), which the attacks pair between fits: unique."""
    keyed = {(release.name, release.party): release for release in releases}
    if len(keyed) < len(releases):
        names = [(release.name, release.party) for release in releases]
        twice = next(key for key in names if names.count(key) > 1)
        raise ValueError(f"Two releases are named {twice[0]!r} of party {twice[1]!r}: the "
                         "algorithm's Releases must name each (name, party) once.")
    return keyed


def _reseeded(estimator, seed):
    """An unfitted clone with its own seed: the attacker does not know the audited one."""
    reference = clone(estimator)
    if "random_state" in reference.get_params():
        reference.set_params(random_state=seed)
    return reference


def _check_audited(estimator):
    # every algorithm says what it lets out (its release hooks)
    if not isinstance(estimator, BaseFederatedClassifier):
        raise TypeError(
            "The membership audit covers skfedkt's federated estimators (subclasses of "
            f"BaseFederatedClassifier); got {type(estimator).__name__}."
        )


_AUDIT_PARAMS = {
    "X": ["array-like", "sparse matrix"],
    "y": ["array-like"],
    "X_holdout": ["array-like", "sparse matrix"],
    "y_holdout": ["array-like"],
    "max_members": [Interval(Integral, 1, None, closed="left")],
    "n_reference": [Interval(Integral, 0, None, closed="left")],
    "random_state": ["random_state"],
}


def _labelled_rows(validator, classes, X, y, name):
    """`X` validated like the estimator's input, and the class codes of `y`."""
    X = validator._validate_predict_data(X)
    codes = _class_codes(y, classes, f"y{name[1:]}")
    if num_samples(X) != len(codes):
        raise ValueError(f"{name} has {num_samples(X)} rows but its labels {len(codes)}.")
    return X, codes


@validate_params(
    {
        **_AUDIT_PARAMS,
        "groups": ["array-like", None],
        "X_unlabeled": ["array-like", "sparse matrix", tuple, None],
        "parties": ["array-like", None],
    },
    prefer_skip_nested_validation=True,
)
def membership_audit(estimator, X, y, *, groups=None, X_unlabeled=None, X_holdout,
                     y_holdout, parties=None, max_members=200, n_reference=4,
                     random_state=None):
    """Attack every release of a fitted federated estimator with membership inference.

    For every release the fit let out (see `Release`: each party's upload, the labels
    it shares, the final model) and every attacked party, the party's training rows
    (members) and as many held-out rows of the same classes (non-members) are scored by
    the loss-threshold attack and, with reference fits, by offline LiRA (see
    `skfedkt.privacy`). A reference fit refits a clone of `estimator`, with a new seed,
    on the same data with the attacked members replaced by held-out rows of the same
    classes, so an audit costs ``n_reference`` fits. Half of the held-out rows of every
    class are non-members, the other half stand in for members in the reference fits.

    The attacks query the releases (black box). A release that ships a model also
    hands over its parameters, which a white-box attack may exploit further: a low AUC
    here is no proof of privacy, a high one is a proven leak.

    Parameters
    ----------
    estimator : BaseFederatedClassifier
        A skfedkt classifier (any algorithm: the audit asks it what its fit lets
        out), fitted on exactly `X`, `y`, `groups` and `X_unlabeled`.
    X : {array-like, sparse matrix, DataFrame} of shape (n_samples, n_features)
        Its training rows.
    y : array-like of shape (n_samples,)
        Their labels.
    groups : array-like of shape (n_samples,), default=None
        The party of every row, as given to ``fit``.
    X_unlabeled : array-like, sparse matrix, DataFrame or PublicSet, default=None
        The public set, as given to ``fit``.
    X_holdout : {array-like, sparse matrix, DataFrame} of shape (n_holdout, n_features)
        Rows from the same population that no party holds.
    y_holdout : array-like of shape (n_holdout,)
        Their labels.
    parties : array-like, default=None
        The parties to attack; None attacks every party.
    max_members : int, default=200
        Most member rows attacked per party (drawn at random).
    n_reference : int, default=4
        Reference fits of the ``"lira"`` attack; 0 runs the loss attack only.
    random_state : int, RandomState instance or None, default=None
        Draws of candidates, stand-ins and reference seeds.

    Returns
    -------
    audit : MembershipAudit
        ``print(audit)`` shows the table; ``audit.summary()`` gives it as dicts.

    See Also
    --------
    party_membership_audit : What an attacker learns from one party's upload, before
        the party sends it.

    References
    ----------
    .. [1] S. Yeom, I. Giacomelli, M. Fredrikson and S. Jha, "Privacy Risk in Machine
       Learning: Analyzing the Connection to Overfitting", CSF 2018.
    .. [2] N. Carlini, S. Chien, M. Nasr, S. Song, A. Terzis and F. Tramèr, "Membership
       Inference Attacks From First Principles", IEEE S&P 2022.
    .. [3] L. Watson, C. Guo, G. Cormode and A. Sablayrolles, "On the Importance of
       Difficulty Calibration in Membership Inference Attacks", ICLR 2022.

    Examples
    --------
    The module :mod:`skfedkt.privacy` attacks a one-shot ensemble of 1-nearest-neighbour
    models, whose uploads keep their rows (the audit itself names no algorithm: it asks
    the estimator what it releases).
    """
    check_is_fitted(estimator)
    _check_audited(estimator)
    classes = estimator.classes_
    X, y = _labelled_rows(estimator, classes, X, y, "X")
    X_holdout, y_holdout = _labelled_rows(estimator, classes, X_holdout, y_holdout,
                                          "X_holdout")
    group_labels = np.zeros(len(y), dtype=np.int64) if groups is None else np.asarray(groups)
    if len(group_labels) != len(y):
        raise ValueError(f"groups has {len(group_labels)} entries but X has {len(y)} rows.")
    party_names, party_codes = np.unique(group_labels, return_inverse=True)
    if not np.array_equal(party_names, estimator.parties_):
        raise ValueError(
            "groups does not name the parties the estimator was fitted on "
            f"({estimator.parties_.tolist()[:10]!r}...): pass the data given to fit."
        )
    attacked = list(enumerate(party_names.tolist()))
    if parties is not None:
        wanted = np.asarray(parties).tolist()
        unknown = [p for p in wanted if p not in party_names.tolist()]
        if unknown:
            raise ValueError(f"parties names unknown parties {unknown!r}; the estimator's "
                             f"parties are {party_names.tolist()[:10]!r}.")
        attacked = [(i, p) for i, p in attacked if p in wanted]

    def refit(X_reference, seed):
        reference = _reseeded(estimator, seed).fit(
            X_reference, classes[y], groups=groups, X_unlabeled=X_unlabeled
        )
        return _keyed(reference._releases.of_fit(reference))

    return _run_audit(
        type(estimator).__name__, refit, _keyed(estimator._releases.of_fit(estimator)), X, y,
        party_codes, attacked, X_holdout, y_holdout, max_members, n_reference,
        check_random_state(random_state),
    )


@validate_params(
    {
        **_AUDIT_PARAMS,
        "classes": ["array-like"],
        "X_unlabeled": ["array-like", "sparse matrix", None],
        "upload": [HasMethods(["to_bytes"]), None],
        "party_seed": [Interval(Integral, 0, None, closed="left"), None],
    },
    prefer_skip_nested_validation=True,
)
def party_membership_audit(estimator, X, y, *, party, classes, X_unlabeled, X_holdout,
                           y_holdout, upload=None, party_seed=None, max_members=200,
                           n_reference=4, random_state=None):
    """What an attacker learns from one party's upload, checked by the party before
    it sends it.

    Runs the party step (``estimator.fit_party``) on the party's rows, or takes its
    `upload`, and attacks the models the upload carries, with the party's training rows
    as members and as many held-out rows of the same classes as non-members (see
    `membership_audit`); the reference fits rerun the party step, with new seeds, on the
    party's rows with the attacked ones replaced by held-out rows of the same classes.
    Only the party's own data is needed: no other party, no server.

    Parameters
    ----------
    estimator : BaseFederatedClassifier
        A skfedkt classifier configured as agreed (it is not fitted); the audit asks
        it what one upload lets out.
    X : {array-like, sparse matrix, DataFrame} of shape (n_samples, n_features)
        The party's rows.
    y : array-like of shape (n_samples,)
        Their labels.
    party : str or int
        The party's name.
    classes : array-like of shape (n_classes,)
        The agreed class labels.
    X_unlabeled : array-like, sparse matrix or DataFrame
        The agreed public set (None for an algorithm whose party step uses none).
    X_holdout : {array-like, sparse matrix, DataFrame} of shape (n_holdout, n_features)
        Rows of the same population that the party did not train on.
    y_holdout : array-like of shape (n_holdout,)
        Their labels.
    upload : skfedkt.PartyUpload, default=None
        The party's upload to audit (`skfedkt.read_upload` reads a file); None runs the
        party step here, with `party_seed`.
    party_seed : int, default=None
        The party's secret seed, as given to ``fit_party``.
    max_members, n_reference, random_state
        As in `membership_audit`.

    Returns
    -------
    audit : MembershipAudit
        Its releases are what the upload lets out: ``"upload"``, and ``"labels"``
        where the party shares labels.

    Examples
    --------
    The module :mod:`skfedkt.privacy` audits a hospital's upload before it is
    sent.
    """
    _check_audited(estimator)
    data = PartyData(estimator, X, y, classes, X_unlabeled, party)
    classes = data.classes
    # the held-out rows are validated against the party's features and their names
    validator = clone(estimator)
    validator.n_features_in_ = data.n_features
    if data.feature_names is not None:
        validator.feature_names_in_ = np.array(data.feature_names, dtype=object)
    X_holdout, y_holdout = _labelled_rows(validator, classes, X_holdout, y_holdout,
                                          "X_holdout")

    def releases(party_upload):
        return _keyed(estimator._releases.of_upload(estimator, party_upload, len(classes)))

    def party_step(X_reference, seed):
        return releases(_reseeded(estimator, seed).fit_party(
            X_reference, classes[data.y], party=data.party, classes=classes,
            X_unlabeled=X_unlabeled, party_seed=seed,
        ))

    if upload is None:
        upload = estimator.fit_party(X, y, party=party, classes=classes,
                                     X_unlabeled=X_unlabeled, party_seed=party_seed)
    elif upload.party != data.party:
        raise ValueError(f"upload is party {upload.party!r}'s, not {data.party!r}'s.")
    return _run_audit(
        f"{type(estimator).__name__}'s party step", party_step, releases(upload), data.X,
        data.y, np.zeros(len(data.y), dtype=np.int64), [(0, data.party)], X_holdout,
        y_holdout, max_members, n_reference, check_random_state(random_state),
    )
