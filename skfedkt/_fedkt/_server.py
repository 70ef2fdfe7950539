"""FedKT's server step: what runs on the server (Algorithm 1, lines 14-22)."""

import warnings

import numpy as np
from sklearn.utils import _safe_indexing
from sklearn.utils.validation import _num_samples

from .._deployment._protocol import (
    collect_uploads,
    require_public_set,
    server_expectations,
)
from .._engine._base import _MIN_CLASS_SHARE, LabelCollapseWarning, _lost_classes
from .._engine._fitting import ClassCodeModel, fit_clones, predict_votes
from .._engine._seeds import derived_random_state, draw_seeds, root_seed
from .._engine._voting import (
    MAX_PARTY_WEIGHT,
    bounded_party_counts,
    class_shares,
    count_votes,
    prior_corrected_proba,
    share_matching_offsets,
)
from ..privacy._accounting import (
    DEFAULT_ORDERS,
    PrivacyReport,
    _largest_order_noted,
    data_independent_epsilon,
    gaussian_epsilon,
    guarantee_strength,
    pate_epsilon,
)
from ._party import PARTY_ROWS_NOTE

# standard errors by which the server's label shares may differ from the training's
# before it shifts them (see match_shares). Measured on random public subsets
# (benchmarks/bench_share_tolerance.py): 0 forces exact shares and costs up to 3 points
# where the votes were right; 2 gains far less under strong skew.
SHARE_TOLERANCE = 1.0


def _student_models(students, codes):
    """Every party's students with the class codes of their outputs, in party order.

    `students` and `codes` hold one list per party."""
    return [ClassCodeModel(student, student_codes)
            for party_students, party_codes in zip(students, codes)
            for student, student_codes in zip(party_students, party_codes)]


class _FedKTServerStep:
    """FedKTClassifier's server side: the server step of Algorithm 1 (lines 14-22),
    run by `fit_server` on the parties' uploads and by `fit` in one process."""

    def fit_server(self, uploads, X_unlabeled, *, classes=None, trusted=(),
                   min_parties=None, limits=None):
        """FedKT's server step: the parties' students vote, the final model learns.

        Checks every upload (algorithm parameters, classes, features, public-set
        fingerprint, the types it holds) before loading it, then runs lines 14-22 of
        Algorithm 1. With the uploads of `fit_party` and the same `random_state`, the
        fitted estimator equals the one `fit` gives on the parties' pooled rows.

        Parameters
        ----------
        uploads : list of str, path-like, bytes or PartyUpload
            The parties' upload files.
        X_unlabeled : {array-like, sparse matrix, DataFrame} of shape (n_public, n_features)
            The agreed public unlabelled data.
        classes : array-like, default=None
            The agreed classes; ``None`` takes those of most uploads, and refuses the
            others naming them.
        trusted : sequence of str, default=()
            Type names to load beyond scikit-learn's and XGBoost's (see
            `skfedkt.read_upload`).
        limits : skfedkt.UploadLimits, default=None
            Bounds on every file read (size, inflated size, manifest, payload objects);
            None means ``UploadLimits()``.
        min_parties : int, default=None
            If given, uploads that fail a check are left out (with a warning, and in
            ``left_out_parties_``) as long as this many parties remain; if None, any
            failure raises.

        Returns
        -------
        self : object
            The fitted classifier.
        """
        self._validate_params()
        self._clear_fitted_state()
        self._check_options()
        require_public_set(X_unlabeled, "FedKT's server step")
        expected, X_unlabeled = server_expectations(self, X_unlabeled, classes)
        root = root_seed(self.random_state)
        X_labelled, party_rows, server_rows = self._tier_rows(X_unlabeled, root)
        # the data-independent bound of a party at L2, computed once for every upload
        bound = (self._party_privacy(np.zeros(len(DEFAULT_ORDERS)), len(party_rows))
                 ["data_independent_epsilon"] if self._level() == "L2" else None)
        uploads, self.left_out_parties_ = collect_uploads(
            uploads, expected, trusted=trusted, min_parties=min_parties, limits=limits,
            check=lambda checker: self._check_upload(checker, len(party_rows), bound),
        )
        self.classes_ = np.array(uploads[0].manifest["classes"])
        self.parties_ = np.array([upload.party for upload in uploads])
        self.upload_bytes_ = np.array([upload.n_bytes for upload in uploads])
        n_classes = len(self.classes_)
        models = _student_models([upload.payload["students"] for upload in uploads],
                                 [upload.payload["codes"] for upload in uploads])
        self._say(f"server: {len(uploads)} parties sent {len(models)} students")
        student_votes = predict_votes(models, X_labelled, n_classes=n_classes,
                                      soft_votes=self._soft_votes(), n_jobs=self.n_jobs)
        self._server_step(uploads, student_votes, X_labelled, server_rows, root,
                          _num_samples(X_unlabeled))
        self._warn_after_fit(X_unlabeled)
        return self

    def _check_upload(self, checker, n_queries, bound):
        """What a FedKT upload must hold: its rows and class counts (none at L2), as many
        students as agreed with their class shares, the agreed number of queries and, at
        L2, a guarantee no better than the data-independent bound the server computes."""
        private = self._level() == "L2"
        checker.rows_and_counts(counts_required=not private)
        checker.models("students", self.n_partitions)
        checker.shares("student_class_shares", self.n_partitions)
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
        claimed = checker.number("privacy.epsilon", 0, np.inf, value=privacy.get("epsilon"))
        reported = privacy.get("data_independent_epsilon")
        if not (isinstance(reported, float) and np.isclose(reported, bound, rtol=1e-9)):
            checker.refuse("privacy.data_independent_epsilon",
                           f"{reported!r}, the server computes {bound!r}")
        if claimed > bound * (1 + 1e-9):
            checker.refuse("privacy.epsilon", f"{claimed} above the data-independent bound")

    def _bounded_counts(self, counts, claimed):
        """The parties' class counts, no party weighing more than `MAX_PARTY_WEIGHT`
        times the median party nor more than the others together: an uploaded count is
        its party's own claim. `fit` bounds them alike, so that it gives the deployed
        model, but says nothing: there the counts are the data's."""
        bounded, capped = bounded_party_counts(counts)
        if capped.size and claimed:
            warnings.warn(
                f"Parties {self.parties_[capped].tolist()} claim more rows than "
                f"{MAX_PARTY_WEIGHT:g} times the median party or than all the other "
                "parties together; the server weighs each as the smaller of the two "
                "when it pools votes and sets the class shares, so that no party's "
                "claim can outweigh the rest.", UserWarning,
            )
        return bounded

    def _server_step(self, uploads, student_votes, X_labelled, server_rows, root, n_public,
                     claimed=True):
        """Lines 14-22: the server's (noisy) vote of the students, and the final model.

        `uploads` hold each party's students and manifest, `student_votes` the students'
        votes on `X_labelled` (the `n_public` public rows, then their jittered copies;
        stacked as `_party_tier` returns them), `server_rows` the rows this tier labels;
        `claimed` is False where the uploads were made in this process (`fit`).
        """
        self.voting_ = self._votes()
        n_parties, n_classes = len(uploads), len(self.classes_)
        n_labelled = _num_samples(X_labelled)
        soft_labels, soft_votes = self._soft_labels("final"), self._soft_votes()
        self.students_ = [list(upload.payload["students"]) for upload in uploads]
        # the codes, not the wrapped models: a skops file would hold every student twice
        self._student_codes = [list(upload.payload["codes"]) for upload in uploads]
        counts = [upload.manifest.get("class_counts") for upload in uploads]
        party_counts = None if None in counts else self._bounded_counts(counts, claimed)
        noise_rng, tie_rng = (
            np.random.RandomState(seed)
            for seed in draw_seeds(derived_random_state(root, "server"), 2)
        )
        votes = self._server_votes(
            student_votes.reshape(n_parties, self.n_partitions, *student_votes.shape[1:]),
            n_classes, party_counts,
        )
        self.vote_counts_ = votes[:n_public]
        query_votes = votes[server_rows]
        queries = server_rows[server_rows < n_public]
        self.share_offsets_ = np.zeros(n_classes)
        if self._match_shares():
            training = class_shares(party_counts.sum(axis=0)[None])
            # a random public set's shares differ from the training's by sampling
            # error alone: only labels outside that band are the votes' bias (the
            # jittered copies repeat the public rows and add no sample)
            sampling_error = np.sqrt(training * (1 - training) / len(queries))
            self.share_offsets_ = share_matching_offsets(
                votes[queries], training, tolerance=SHARE_TOLERANCE * sampling_error
            )
            query_votes = self._shifted(query_votes)
        (final_targets,) = self._vote_targets(
            [query_votes], "L1", soft_labels, noise_rng, tie_rng
        )
        final_task = self._target_task(self._final_template(), final_targets, server_rows,
                                       n_labelled)
        self._say(f"server: {self._pooling() if soft_votes else 'hard'} vote of "
                  f"{n_parties * self.n_partitions} students; " + (
                      f"the final model learns {len(np.unique(final_task.y))} classes on "
                      "the public rows" if self.distill else "they are the model"))
        self._party_counts = party_counts  # the pooling of the students' votes needs them
        if self.distill:
            (self._final_model,), _, _ = fit_clones(
                [final_task], X_labelled, n_classes=n_classes,
                seeds=draw_seeds(derived_random_state(root, "final"), 1),
            )
            self.final_estimator_ = self._final_model.estimator
        final_rows = np.arange(n_labelled) if final_task.rows is None else final_task.rows
        learned = np.zeros((n_labelled, n_classes))
        np.add.at(learned, (final_rows, final_task.y),
                  1.0 if final_task.sample_weight is None else final_task.sample_weight)
        self.public_mask_ = learned[:n_public].any(axis=1)
        self.public_labels_ = self.classes_[learned[:n_public][self.public_mask_].argmax(1)]
        unknown = np.full(n_classes, np.nan)
        self.class_shares_ = {
            "training": unknown if party_counts is None else class_shares(
                party_counts.sum(axis=0)[None]
            ),
            "parties": np.tile(unknown, (n_parties, 1)) if party_counts is None else (
                party_counts / party_counts.sum(axis=1, keepdims=True)
            ),
            "students": np.array(
                [upload.manifest["student_class_shares"] for upload in uploads]
            ),
            "final": class_shares(learned),
        }
        self.privacy_report_ = self._privacy_report(
            [upload.manifest.get("privacy") for upload in uploads], queries,
            uploads[0].manifest["n_queries"] if self._level() == "L2" else len(queries),
        )
        self.epsilon_ = self.privacy_report_.epsilon

    def _server_votes(self, student_votes, n_classes, party_counts=None):
        """Vote-2 histogram of the students' votes on the public set.

        `student_votes` has shape (n_parties, n_partitions, n_public): class codes
        (hard voting), or (n_parties, n_partitions, n_public, n_classes): class
        probabilities (soft voting), summed over every student or pooled with the
        parties' class counts `party_counts` (needed for ``"prior-corrected"`` pooling
        only), then scaled to as many votes.
        """
        if student_votes.ndim == 4:
            if self._pooling() == "prior-corrected":
                n_students = student_votes.shape[0] * student_votes.shape[1]
                return n_students * prior_corrected_proba(
                    student_votes.mean(axis=1, dtype=np.float64), party_counts
                )
            return student_votes.sum(axis=(0, 1), dtype=np.float64)
        every_student_votes = count_votes(
            student_votes.reshape(-1, student_votes.shape[-1]), n_classes
        )
        if not self._votes().consistent:
            return every_student_votes
        first = student_votes[:, 0]
        unanimous = (student_votes == first[:, None]).all(axis=1)
        votes = count_votes(
            np.where(unanimous, first, -1), n_classes, weights=self.n_partitions
        )
        if not votes.any() and self._level() != "L1":
            # at L1 the histogram is released as is: a data-dependent switch would leak
            warnings.warn(
                "No party's students agree on any public example, so consistent voting "
                "leaves nothing to learn from; counting every student's vote instead. "
                "More public data, more rows per teacher or fewer n_partitions avoid this.",
                UserWarning,
            )
            return every_student_votes
        return votes

    def _shifted(self, votes):
        """`votes` shifted by the share offsets. Only the argmax or the normalised
        distribution is used, so scaling by exp(offsets) suffices."""
        return votes * np.exp(self.share_offsets_ - self.share_offsets_.max())

    def _student_vote_proba(self, X):
        """The server's pooled, share-shifted vote of the students on `X`, normalised:
        what the final model learns on the public rows, and ``distill=False`` predicts."""
        n_parties, n_classes = len(self.parties_), len(self.classes_)
        votes = predict_votes(_student_models(self.students_, self._student_codes), X,
                              n_classes=n_classes, soft_votes=True, n_jobs=self.n_jobs)
        pooled = self._shifted(self._server_votes(
            votes.reshape(n_parties, self.n_partitions, *votes.shape[1:]), n_classes,
            self._party_counts,
        ))
        return pooled / pooled.sum(axis=1, keepdims=True)

    def _warn_after_fit(self, X_public):
        """Collapse warnings from the class shares, and for a final model whose
        predictions hold one class or distort the shares of its labels."""
        self._warn_on_collapse()
        if not self.distill:
            return  # the vote predicts its own labels on the public rows
        learned_rows = np.flatnonzero(self.public_mask_)
        self._warn_if_classes_lost(
            self._final_model.predict(_safe_indexing(X_public, learned_rows)),
            f"The final model {type(self._final_template()).__name__} predicts on the "
            f"{len(learned_rows)} public rows it learned",
            np.searchsorted(self.classes_, self.public_labels_), "their labels",
            "it cannot learn from so few rows with its parameters (for "
            "example HistGradientBoostingClassifier's min_samples_leaf=20). Pass a "
            "final_estimator that suits the public set's size, or more public data.",
        )

    def _warn_on_collapse(self):
        """One warning per tier whose labels lost classes that its training rows hold."""
        shares, names = self.class_shares_, self.classes_.tolist()
        remedy = (
            "Use voting='soft' (the default): it carries class probabilities through both tiers"
            if not self._soft_votes() else
            "More public data, fewer n_subsets (more rows per teacher) or a teacher that "
            "predicts calibrated probabilities help"
        )
        # a student's labels follow the public data, not its party's class mix, so only
        # a collapse to one class, where the party holds several, is a clear signal
        collapsed_students = [
            (party, partition, party_shares, np.flatnonzero(learned > 0))
            for party, party_shares, student_shares in zip(
                self.parties_.tolist(), shares["parties"], shares["students"]
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

    def _privacy_report(self, party_privacy, server_queries, n_queries):
        """Account the noisy tier (FedKT's Section 4 and Appendix A).

        Every vote, a class code or a probability vector, has L1 mass one, so one model
        moves a histogram by at most 2 either way. With soft labels the whole noisy
        histogram is released, not its argmax: only the data-independent bounds hold.
        """
        level = self._level()
        soft_labels = self._soft_labels("students" if level == "L2" else "final")
        uploads = (f" {PARTY_ROWS_NOTE}" if self.student_data == "party+public" else
                   " The uploads' students learned the public set's labels only.")
        if level == "L0":
            return PrivacyReport(
                level="L0", unit=None, gamma=None, delta=None, sensitivity=None,
                n_queries=n_queries, data_dependent_epsilon=np.inf,
                data_independent_epsilon=np.inf, epsilon=np.inf,
                statement="FedKT-L0 adds no noise: no differential privacy (epsilon = "
                f"inf).{uploads}",
            )
        data_dependent, data_independent, party_epsilons, sensitivity, largest_order = (
            self._account(party_privacy, server_queries, n_queries)
        )
        gaussian = self.privacy.noise == "gaussian"
        if level == "L2":
            # parallel composition over parties (Theorem 4)
            epsilon = max(party_epsilons.values())
        elif soft_labels or gaussian:
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
            f"FedKT-{level} is ({epsilon:.4g}, {self.privacy.delta:g})-differentially private "
            f"{protects}; {guarantee_strength(epsilon)}. {n_queries} {release} per noisy "
            f"histogram tier, {'Gaussian standard deviation' if gaussian else 'Laplace scale'}"
            f" 1/gamma = {1 / self.privacy.gamma:.4g}, {'L2' if gaussian else 'L1'} sensitivity "
            f"{sensitivity:.4g}; {bounds}." + (uploads if level == "L1" else "")
        )
        return PrivacyReport(
            level=level, unit="party" if level == "L1" else "example", gamma=self.privacy.gamma,
            delta=self.privacy.delta, sensitivity=sensitivity, n_queries=n_queries,
            data_dependent_epsilon=data_dependent, data_independent_epsilon=data_independent,
            epsilon=epsilon, party_epsilons=party_epsilons, orders=DEFAULT_ORDERS,
            statement=statement, mechanism=self.privacy.noise,
        )

    def _account(self, party_privacy, server_queries, n_queries):
        """(data-dependent, data-independent, per-party epsilons, sensitivity, whether the
        moments bound still decreased at the largest order)."""
        if self._level() == "L1" and self.privacy.noise == "gaussian":
            # one party moves all s of its students' votes: sqrt(2) s in L2 norm
            sensitivity = np.sqrt(2) * self.n_partitions
            epsilon = gaussian_epsilon(n_queries, sigma=1 / self.privacy.gamma,
                                       delta=self.privacy.delta, sensitivity=sensitivity)
            return np.nan, epsilon, None, sensitivity, False
        if self._level() == "L1":
            # one party moves all s of its students: a count moves by s (Theorem 1)
            sensitivity = 2.0 * self.n_partitions
            accountant = dict(gamma=self.privacy.gamma, delta=self.privacy.delta,
                              orders=DEFAULT_ORDERS)
            with _largest_order_noted() as largest_order:
                data_dependent = np.nan if self._soft_labels("final") else pate_epsilon(
                    self.vote_counts_[server_queries], sensitivity=sensitivity, **accountant
                )
                data_independent = data_independent_epsilon(
                    n_queries, sensitivity=sensitivity, **accountant
                )
            return data_dependent, data_independent, None, sensitivity, bool(largest_order)
        party_epsilons = {
            party: report["epsilon"]
            for party, report in zip(self.parties_.tolist(), party_privacy)
        }
        data_dependent = max(report["data_dependent_epsilon"] for report in party_privacy)
        data_independent = party_privacy[0]["data_independent_epsilon"]
        largest_order = any(report["largest_order"] for report in party_privacy)
        sensitivity = np.sqrt(2) if self.privacy.noise == "gaussian" else 2.0
        return data_dependent, data_independent, party_epsilons, sensitivity, largest_order
