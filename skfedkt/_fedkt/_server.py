"""FedKT's server step: what runs on the server (Algorithm 1, lines 14-22).

Functions of a frozen `FedKTPlan` and the parties' uploads: `server_step` pools the
students' votes and trains the final model, `privacy_report` accounts for the noisy tier.
"""

from __future__ import annotations

import warnings
from collections.abc import Mapping, Sequence
from numbers import Integral
from typing import Any

import numpy as np

from .._engine._compat import num_samples, safe_indexing
from .._deployment._received import UploadChecker
from .._engine._class_codes import ClassCodeModel
from .._engine._context import Message
from .._engine._fitting import TierJob, fit_clones, predict_votes
from .._engine._seeds import derived_random_state, draw_seeds
from .._engine._validation import (
    _MIN_CLASS_SHARE,
    SHIFTED_PUBLIC_SET_REMEDY,
    LabelCollapseWarning,
    _lost_classes,
    parties_in_words,
    warn_if_classes_lost,
)
from .._engine._voting import (
    class_shares,
    count_votes,
    prior_corrected_proba,
    share_matching_offsets,
)
from .._privacy._accounting import (
    DEFAULT_ORDERS,
    ONE_VOTE_L2,
    _largest_order_noted,
    data_independent_epsilon,
    pate_epsilon,
)
from .._privacy._gaussian import gaussian_epsilon, gnmax_epsilon
from .._privacy._mechanisms import DistributedNoise
from .._privacy._reports import guarantee_strength, PrivacyReport
from ._party import PARTY_ROWS_NOTE
from ._payloads import fedkt_upload
from ._plan import FedKTPlan, target_task
from ._sums import noise_units, party_weights, summed_votes
from ._votes import HardVotes, SoftVotes, chosen_hard_votes, hard_vote_counts

# standard errors by which the server's label shares may differ from the training's
# before it shifts them (see match_shares). Measured on random public subsets
# (benchmarks/bench_share_tolerance.py): 0 forces exact shares and costs up to 2 points
# where the votes were right; 2 gains far less under strong skew.
SHARE_TOLERANCE = 1.0


def _student_models(students: list[list[Any]],
                    codes: list[list[np.ndarray]]) -> list[ClassCodeModel]:
    """Every party's students with the class codes of their outputs, in party order.

    `students` and `codes` hold one list per party."""
    return [ClassCodeModel(student, student_codes)
            for party_students, party_codes in zip(students, codes)
            for student, student_codes in zip(party_students, party_codes)]


def check_upload(plan: FedKTPlan, checker: UploadChecker, n_queries: int,
                 bound: float | None) -> None:
    """What a FedKT upload must hold in the clear: its rows and class counts (at L2
    only where they are released with noise), as many students as agreed with their
    class shares, the agreed number of queries and, at L2, a guarantee no better than
    the data-independent bound `bound` the server computes (the students, the counts
    and the shares where secure aggregation does not withhold them)."""
    private = plan.level == "L2"
    n_rows, counts = checker.rows_and_counts(
        counts_required=not private or plan.releases_counts)
    if private and not plan.releases_counts and counts is not None:
        checker.refuse("class_counts", "sent at L2, where the agreed votes use none and no "
                       "noise covers them")
    n_teachers, agreed = checker.count("n_teachers", positive=True), plan.teachers_for(n_rows)
    if n_teachers != agreed:
        checker.refuse("n_teachers", f"{n_teachers}, the agreed n_teachers="
                       f"{plan.n_teachers!r} gives {agreed} for {n_rows} rows")
    checker.models("students", plan.n_students)
    checker.shares("student_class_shares", plan.n_students)
    if checker.count("n_queries") != n_queries:
        checker.refuse("n_queries", f"{checker.manifest('n_queries')}, the agreed "
                       f"public set gives {n_queries}")
    privacy = checker.manifest("privacy")
    if not private:
        if privacy is not None:
            checker.refuse("privacy", "a party guarantee where no party adds noise")
        return
    if not isinstance(privacy, dict):
        checker.refuse("privacy", "missing: a party at L2 reports its guarantee")
    assert bound is not None, "the server computes the bound of every upload at L2"
    claimed = checker.number("privacy.epsilon", 0, np.inf, value=privacy.get("epsilon"))
    reported = privacy.get("data_independent_epsilon")
    if not (isinstance(reported, float) and np.isclose(reported, bound, rtol=1e-9)):
        checker.refuse("privacy.data_independent_epsilon",
                       f"{reported!r}, the server computes {bound!r}")
    if claimed > bound * (1 + 1e-9):
        checker.refuse("privacy.epsilon", f"{claimed} above the data-independent bound")


def server_step(plan: FedKTPlan, uploads: Sequence[Message], X_public: Any, root: int,
                classes: np.ndarray, sums: dict[str, np.ndarray]) -> dict[str, Any]:
    """Lines 14-22: the server's (noisy) vote of the students, and the final model.

    `sums` holds the parties' summed votes on the rows of `FedKTPlan.tier_rows` (the
    public rows, then their jittered copies) and their summed class counts
    (`_sums.party_sums`); `uploads`, each party's manifest and its students (none where
    secure aggregation keeps them at their parties). Returns the fitted attributes of
    `FedKTClassifier`, stage by stage: the students, the parties' class counts, the
    pooled vote, the final model's labels, the final model, what it learned, and the
    privacy report.
    """
    n_classes, n_public = len(classes), num_samples(X_public)
    parties = np.array([upload.manifest["party"] for upload in uploads])
    payloads = [fedkt_upload(upload) for upload in uploads]
    X_labelled, _, server_rows = plan.tier_rows(X_public, root)
    n_labelled = num_samples(X_labelled)
    plan.say(f"server: the summed student votes of {parties_in_words(len(uploads))} on "
             f"{n_labelled} rows")
    votes = summed_votes(plan, sums, len(uploads), server_rows, n_labelled)
    party_counts = _party_counts(plan, uploads, parties)
    training_counts = sums.get("class_counts")
    queries = server_rows[server_rows < n_public]
    share_offsets, final_task = _final_labels(plan, votes, server_rows, queries,
                                              training_counts, root, n_labelled)
    plan.say(f"server: {plan.pooling if plan.soft_votes else 'hard'} vote of "
             f"{len(uploads) * plan.n_students} students; " + (
                 f"the final model learns {len(np.unique(final_task.y))} classes on "
                 "the public rows" if plan.distill else "they are the model"))
    fitted = dict(
        voting_=plan.votes,
        students_=[list(payload["students"]) for payload in payloads],
        # the codes, not the wrapped models: a skops file would hold every student twice
        _student_codes=[list(payload["codes"]) for payload in payloads],
        _party_counts=party_counts,  # the pooling of the students' votes needs them
        n_teachers_=np.array([upload.manifest["n_teachers"] for upload in uploads]),
        vote_counts_=votes[:n_public],
        share_offsets_=share_offsets,
    )
    if plan.distill:
        fitted.update(_final_model(plan, final_task, X_labelled, n_classes, root))
    fitted.update(_what_the_final_model_learned(final_task, uploads, party_counts,
                                                training_counts, classes, n_public,
                                                n_labelled, plan.n_students))
    n_queries = uploads[0].manifest["n_queries"] if plan.level == "L2" else len(queries)
    privacy = privacy_report(plan, [upload.manifest.get("privacy") for upload in uploads],
                             parties, votes[queries], n_queries)
    return dict(fitted, privacy_report_=privacy, epsilon_=privacy.epsilon)


def _party_counts(plan: FedKTPlan, uploads: Sequence[Message],
                  parties: np.ndarray) -> np.ndarray | None:
    """The parties' class counts as their manifests say them, each scaled by its
    weight in the sums (`_sums.party_weights`), as the pooling of their students' votes
    weighs them; None where a party sent none (at L2 without released counts, or
    under secure aggregation)."""
    counts = [upload.manifest.get("class_counts") for upload in uploads]
    if None in counts:
        return None
    rows = np.array([upload.manifest["n_rows"] for upload in uploads])
    return np.asarray(counts, dtype=float) * party_weights(plan, list(parties), rows,
                                                           claimed=False)[:, None]


def _final_labels(plan, votes, server_rows, queries, training_counts, root, n_labelled):
    """Lines 14-20: the (noisy, at L1) labels of the final model on the server's rows,
    shifted to the training's class shares (of `training_counts`, the parties' summed
    class counts) where `plan.match_shares`. Returns the offsets of that shift and the
    final model's task. With `DistributedNoise` the parties added L1's noise to their
    sums, and the server adds none."""
    noise_rng, tie_rng = (
        np.random.RandomState(seed)
        for seed in draw_seeds(derived_random_state(root, "server"), 2)
    )
    query_votes = votes[server_rows]
    share_offsets = np.zeros(votes.shape[1])
    if plan.match_shares:
        training = class_shares(training_counts[None])
        # a random public set's shares differ from the training's by sampling error
        # alone: only labels outside that band are the votes' bias (the jittered copies
        # repeat the public rows and add no sample)
        sampling_error = np.sqrt(training * (1 - training) / len(queries))
        share_offsets = share_matching_offsets(
            votes[queries], training, tolerance=SHARE_TOLERANCE * sampling_error
        )
        query_votes = shifted(query_votes, share_offsets)
    (final_targets,) = plan.vote_targets(
        [query_votes], plan.server_noise_level, plan.learns_soft_labels("final"), noise_rng,
        tie_rng)
    return share_offsets, target_task(plan.final, final_targets, server_rows, n_labelled,
                                      "the final model")


def _final_model(plan, final_task, X_labelled, n_classes, root):
    """Lines 21-22: the final model, fitted to its labels."""
    (final_model,) = fit_clones(
        [final_task], TierJob(X_labelled, n_classes),
        draw_seeds(derived_random_state(root, "final"), 1), tier="final model", say=plan.say,
    ).models
    return dict(_final_model=final_model, final_estimator_=final_model.estimator)


def _what_the_final_model_learned(final_task, uploads, party_counts, training_counts,
                                  classes, n_public, n_labelled, n_students):
    """The public rows the final model learned and their labels, and the class shares
    of the training rows, of every party, of every party's students and of the final
    model's labels (NaN where the server does not know them: a party's counts at L2
    or under secure aggregation, its students' shares under secure aggregation)."""
    n_parties, n_classes = len(uploads), len(classes)
    final_rows = np.arange(n_labelled) if final_task.rows is None else final_task.rows
    learned = np.zeros((n_labelled, n_classes))
    np.add.at(learned, (final_rows, final_task.y),
              1.0 if final_task.sample_weight is None else final_task.sample_weight)
    public_mask = learned[:n_public].any(axis=1)
    unknown = np.full(n_classes, np.nan)
    return dict(
        public_mask_=public_mask,
        public_labels_=classes[learned[:n_public][public_mask].argmax(1)],
        class_shares_={
            "training": unknown if training_counts is None else class_shares(
                training_counts[None]
            ),
            "parties": np.tile(unknown, (n_parties, 1)) if party_counts is None else (
                party_counts / party_counts.sum(axis=1, keepdims=True)
            ),
            "students": np.array([
                np.tile(unknown, (n_students, 1)) if shares is None else shares
                for shares in (upload.manifest["student_class_shares"] for upload in uploads)
            ]),
            "final": class_shares(learned),
        },
    )


def server_votes(votes: SoftVotes | HardVotes, student_votes: np.ndarray, n_classes: int,
                 party_counts: np.ndarray | None = None,
                 warn_if_empty: bool = True) -> np.ndarray:
    """Vote-2 histogram of the students' votes on the public set, as `votes` (resolved
    `SoftVotes` or `HardVotes`) pool them.

    `student_votes` has shape (n_parties, n_students, n_public): class codes
    (hard voting), or (n_parties, n_students, n_public, n_classes): class
    probabilities (soft voting), summed over every student or pooled with the
    parties' class counts `party_counts` (needed for ``"prior-corrected"`` pooling
    only), then scaled to as many votes.
    """
    if student_votes.ndim == 4:
        if votes.pooling == "prior-corrected":
            n_voters = student_votes.shape[0] * student_votes.shape[1]
            return n_voters * prior_corrected_proba(
                student_votes.mean(axis=1, dtype=np.float64), party_counts
            )
        return student_votes.sum(axis=(0, 1), dtype=np.float64)
    return chosen_hard_votes(*hard_vote_counts(student_votes, n_classes, votes.consistent),
                             warn_if_empty)


def shifted(votes, share_offsets):
    """`votes` shifted by `share_offsets`. Only the argmax or the normalised
    distribution is used, so scaling by exp(offsets) suffices."""
    return votes * np.exp(share_offsets - share_offsets.max())


def pooled_student_proba(votes, students, codes, party_counts, share_offsets, X, n_classes,
                         n_jobs=None):
    """The server's pooled, share-shifted vote of the parties' `students` (with their
    class `codes`) on `X`, normalised: what the final model learns on the public rows,
    and ``distill=False`` predicts. With hard votes, the vote shares; a row on which
    consistent voting leaves no vote counts every student's."""
    soft = votes.kind == "soft"
    student_votes = predict_votes(_student_models(students, codes), X, n_classes=n_classes,
                                  soft_votes=soft, n_jobs=n_jobs)
    student_votes = student_votes.reshape(len(students), len(students[0]),
                                          *student_votes.shape[1:])
    pooled = server_votes(votes, student_votes, n_classes, party_counts,
                          warn_if_empty=False).astype(np.float64)
    if not soft:
        # a row on which no party's students agree: every student's vote
        unvoted = pooled.sum(axis=1) == 0
        pooled[unvoted] = count_votes(student_votes.reshape(-1, len(pooled)),
                                      n_classes)[unvoted]
    pooled = shifted(pooled, share_offsets)
    return pooled / pooled.sum(axis=1, keepdims=True)


def warn_after_fit(plan: FedKTPlan, fitted: Mapping[str, Any], classes: np.ndarray,
                   parties: np.ndarray, X_public: Any, public_set_shifted: bool = False) -> None:
    """Collapse warnings from the class shares, and for a final model whose predictions
    hold one class or distort the shares of its labels (`public_set_shifted`: fit
    warned that the public set lies far from X, the likelier cause)."""
    _warn_on_collapse(plan, fitted["class_shares_"], classes, parties, public_set_shifted)
    if not plan.distill:
        return  # the vote predicts its own labels on the public rows
    learned_rows = np.flatnonzero(fitted["public_mask_"])
    name = type(plan.final).__name__
    # a leaf size above one is the usual reason a model cannot follow a small class
    params = plan.final.get_params() if hasattr(plan.final, "get_params") else {}
    leaf = params.get("min_samples_leaf")
    example = (f" ({name}'s min_samples_leaf={leaf!r}, for example)"
               if isinstance(leaf, Integral) and int(leaf) > 1 else "")
    warn_if_classes_lost(
        classes, fitted["_final_model"].predict(safe_indexing(X_public, learned_rows)),
        f"The final model {name} predicts on the {len(learned_rows)} public rows it "
        "learned", np.searchsorted(classes, fitted["public_labels_"]), "their labels",
        f"it cannot learn from so few rows with its parameters{example}. Pass a "
        "final_estimator that suits the public set's size, or a larger public set.",
    )


def _warn_on_collapse(plan, shares, classes, parties, public_set_shifted):
    """One warning per tier whose labels lost classes that its training rows hold."""
    names = classes.tolist()
    remedy = SHIFTED_PUBLIC_SET_REMEDY if public_set_shifted else (
        "Use voting='soft' (the default): it carries class probabilities through both tiers"
        if not plan.soft_votes else
        "A larger public set, fewer n_teachers (more rows per teacher) or a teacher that "
        "predicts calibrated probabilities help"
    )
    # a student's labels follow the public set, not its party's class mix, so only
    # a collapse to one class, where the party holds several, is a clear signal
    collapsed_students = [
        (party, partition, party_shares, np.flatnonzero(learned > 0))
        for party, party_shares, student_shares in zip(
            parties.tolist(), shares["parties"], shares["students"]
        )
        for partition, learned in enumerate(student_shares)
        if np.count_nonzero(learned) == 1 and np.sum(party_shares >= _MIN_CLASS_SHARE) > 1
    ]
    if collapsed_students:
        party, partition, party_shares, (c,) = collapsed_students[0]
        held = ", ".join(f"{names[k]!r} {share:.0%}" for k, share in
                         enumerate(party_shares) if share >= _MIN_CLASS_SHARE)
        warnings.warn(
            f"{len(collapsed_students)} of {shares['students'][..., 0].size} students "
            "learned a single class from a party whose rows hold several; e.g. party "
            f"{party}, student {partition} learned only {names[c]!r} from rows holding "
            f"{held} (class_shares_ has every tier's shares). {remedy}.",
            LabelCollapseWarning,
        )
    final, training = shares["final"], shares["training"]
    lost = _lost_classes(final, training)
    if lost.size:
        learned_classes = [names[c] for c in np.flatnonzero(final > 0)]
        summary = (
            f"a single class ({learned_classes[0]!r})" if len(learned_classes) == 1
            else "labels far from the training labels' class shares"
        )
        details = ", ".join(
            f"class {names[c]!r}: {training[c]:.0%} of the training rows, "
            f"{final[c]:.0%} of the server's labels"
            for c in lost
        )
        warnings.warn(
            f"The final model learned {summary} ({details}); it will under-predict "
            f"those classes. {remedy}.",
            LabelCollapseWarning,
        )


def privacy_report(plan: FedKTPlan, party_privacy: list[dict[str, Any] | None],
                   parties: np.ndarray, query_votes: np.ndarray,
                   n_queries: int) -> PrivacyReport:
    """Account the noisy tier (FedKT's Section 4 and Appendix A): the parties'
    guarantees `party_privacy` (at L2), the server's votes on its queries `query_votes`
    (at L1), and the number of releases per noisy histogram `n_queries`.

    Every vote, a class code or a probability vector, has L1 mass one, so one model
    moves a histogram by at most 2 either way. With soft labels the whole noisy
    histogram is released, not its argmax: only the data-independent bounds hold. So
    they do with `DistributedNoise`, where the votes carry the parties' discrete Laplace
    noise, whose every query is ``gamma * sensitivity``-DP as the Laplace mechanism's,
    and no one sees the noise-free votes that the data-dependent analysis reads.
    """
    level = plan.level
    soft_labels = plan.learns_soft_labels("students" if level == "L2" else "final")
    uploads = (f" {PARTY_ROWS_NOTE}" if plan.student_data == "party+public" else
               " The uploads' students learned the public set's labels only.")
    if level == "L0":
        return PrivacyReport(
            level="L0", unit=None, gamma=None, delta=None, sensitivity=None,
            n_queries=n_queries, data_dependent_epsilon=np.inf,
            data_independent_epsilon=np.inf, epsilon=np.inf,
            statement="FedKT-L0 adds no noise: no differential privacy (epsilon = "
            f"inf).{uploads}",
        )
    summed_noise = isinstance(plan.privacy, DistributedNoise)
    data_dependent, data_independent, party_epsilons, sensitivity, largest_order = (
        _account(plan, party_privacy, parties,
                 None if summed_noise or soft_labels else query_votes, n_queries)
    )
    gaussian = plan.mechanism.noise == "gaussian"
    if level == "L2":
        # parallel composition over parties (Theorem 4)
        epsilon = max(party_epsilons.values())
    elif soft_labels or gaussian or summed_noise:
        epsilon = data_independent
    else:
        epsilon = min(data_dependent, data_independent)
    protects = (
        "for each party (whether it took part, with all its rows): the final model and "
        "the server's labels" if level == "L1" else
        "for each training example of each party, even towards the server: every "
        "student, hence the final model"
    )
    release = "noisy histograms (soft labels)" if soft_labels else "noisy-argmax queries"
    if gaussian:
        bounds = ("Gaussian-DP queries composed exactly: data-independent, so it may be "
                  "published")
        if data_dependent < epsilon:  # the votes agreed enough to cost less
            bounds += (
                f". The votes' agreement gives a data-dependent epsilon of "
                f"{data_dependent:.4g} (Renyi DP of GNMax, Papernot et al. 2018"
                + (f", still decreasing at the largest moment order {DEFAULT_ORDERS[-1]}"
                   if largest_order else "")
                + "), itself computed from private votes, so not published"
            )
    elif summed_noise:
        units, parameter = noise_units(plan, query_votes.shape[1])
        bounds = (
            f"data-independent epsilon {data_independent:.4g}. The parties added the "
            f"noise in shares of their secure sum: discrete Laplace of parameter "
            f"{parameter:.4g} per 1/{units} vote, sized so that the shares of the sum's "
            "threshold less the parties that may collude with the coordinator carry all "
            "of it (more honest survivors add more), and a party moves a query's summed "
            "units by at most gamma * sensitivity / parameter; the data-dependent "
            "analysis reads the noise-free votes, which no one sees")
    elif soft_labels:
        bounds = (f"data-independent epsilon {data_independent:.4g} (the data-dependent "
                  "moments accountant covers argmax releases only)")
    else:
        bounds = (
            f"data-dependent epsilon {data_dependent:.4g} (moments accountant"
            + (f", still decreasing at the largest moment order {DEFAULT_ORDERS[-1]}"
               if largest_order else "")
            + f"); data-independent epsilon {data_independent:.4g}. The data-dependent "
            "value is itself computed from private votes, so publishing it leaks "
            "information; only the data-independent value may be published as is"
        )
    statement = (
        f"FedKT-{level} is ({epsilon:.4g}, {plan.mechanism.delta:g})-differentially private "
        f"{protects}; {guarantee_strength(epsilon)}. {n_queries} {release} per noisy "
        f"histogram tier, {'Gaussian standard deviation' if gaussian else 'Laplace scale'}"
        f" 1/gamma = {1 / plan.mechanism.gamma:.4g}, {'L2' if gaussian else 'L1'} sensitivity "
        f"{sensitivity:.4g}; {bounds}." + (uploads if level == "L1" else "")
        + (f" Each party also releases its class counts with noise of scale 1/counts_gamma "
           f"= {1 / plan.counts_gamma:.4g}, composed into its epsilon."
           if plan.releases_counts else "")
    )
    return PrivacyReport(
        level=level, unit="party" if level == "L1" else "example", gamma=plan.mechanism.gamma,
        delta=plan.mechanism.delta, sensitivity=sensitivity, n_queries=n_queries,
        data_dependent_epsilon=data_dependent, data_independent_epsilon=data_independent,
        epsilon=epsilon, party_epsilons=party_epsilons, orders=DEFAULT_ORDERS,
        statement=statement, mechanism=plan.mechanism.noise,
    )


def _account(plan, party_privacy, parties, query_votes, n_queries):
    """(data-dependent, data-independent, per-party epsilons, sensitivity, whether the
    moments bound still decreased at the largest order); at L1 no data-dependent
    epsilon (NaN) without noise-free `query_votes` (None)."""
    if plan.level == "L1" and plan.mechanism.noise == "gaussian":
        # one party moves all s of its students' votes: sqrt(2) s in L2 norm
        sensitivity = ONE_VOTE_L2 * plan.n_students
        noise = {"sigma": 1 / plan.mechanism.gamma, "delta": plan.mechanism.delta,
                 "sensitivity": sensitivity}
        with _largest_order_noted() as largest_order:
            data_dependent = np.nan if query_votes is None else gnmax_epsilon(
                query_votes, **noise)
        return (data_dependent, gaussian_epsilon(n_queries, **noise), None, sensitivity,
                bool(largest_order))
    if plan.level == "L1":
        # one party moves all s of its students: a count moves by s (Theorem 1)
        sensitivity = 2.0 * plan.n_students
        accountant = dict(gamma=plan.mechanism.gamma, delta=plan.mechanism.delta,
                          orders=DEFAULT_ORDERS)
        with _largest_order_noted() as largest_order:
            data_dependent = np.nan if query_votes is None else pate_epsilon(
                query_votes, sensitivity=sensitivity, **accountant
            )
            data_independent = data_independent_epsilon(
                n_queries, sensitivity=sensitivity, **accountant
            )
        return data_dependent, data_independent, None, sensitivity, bool(largest_order)
    party_epsilons = {
        party: report["epsilon"]
        for party, report in zip(parties.tolist(), party_privacy)
    }
    data_dependent = max(report["data_dependent_epsilon"] for report in party_privacy)
    data_independent = party_privacy[0]["data_independent_epsilon"]
    largest_order = any(report["largest_order"] for report in party_privacy)
    sensitivity = ONE_VOTE_L2 if plan.mechanism.noise == "gaussian" else 2.0
    return data_dependent, data_independent, party_epsilons, sensitivity, largest_order
