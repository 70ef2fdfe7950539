"""The experiment runner: the papers' comparisons on one dataset, over several trials."""

import io
import re
import time
import warnings
from contextlib import redirect_stdout
from dataclasses import asdict, dataclass

import numpy as np

from .._engine._validation import AssumptionWarning, LabelCollapseWarning
from ..baselines import solo_scores
from ..datasets import load_federated
from ..privacy import membership_audit
from .._registry import algorithms as declared_algorithms
from .._registry import declaration_of, methods
from ._estimators import ESTIMATORS


@dataclass
class Result:
    """One algorithm on one trial."""

    dataset: str
    estimator: str
    algorithm: str
    trial: int
    accuracy: float
    fit_seconds: float
    upload_bytes: float
    """Mean bytes a party sent (NaN where nothing federated was sent)."""
    epsilon: float
    """Privacy budget spent (NaN without differential privacy)."""
    collapse_warned: bool = False
    """Whether fit warned that labels learned, or an ensemble's predictions, lost classes."""
    party_attack_auc: float = np.nan
    """With an audit: the largest membership-attack AUC of a party's own release (its
    upload, labels or local model; mean over parties), NaN without one."""
    final_attack_auc: float = np.nan
    """With an audit: the membership-attack AUC of the final model (mean over parties)."""
    still_changing: float = np.nan
    """Rounds stopped at their cap: the share of what the last round shares that it
    still changed (NaN when they converged, and without rounds)."""


# the baselines the runner adds to the algorithms' methods: no federated estimator
BASELINES = {
    "solo": "SOLO: each party alone, mean over parties",
    "central": "centralized: one model on all training rows (not federated)",
    "majority": "the training rows' most frequent class, predicted everywhere (no model): "
                "what a model whose labels collapsed scores",
}


def method_names():
    """Every method the runner compares, in the table's order: the algorithms'
    federated methods, SOLO, those fit with one party holding every row, centralized
    training."""
    declared = methods().values()
    return ([method.name for method in declared if not method.one_party] + ["solo"]
            + [method.name for method in declared if method.one_party]
            + ["central", "majority"])


def default_methods():
    """The methods ``skfedkt run`` compares when no ``--algorithms`` are given."""
    return [name for name in method_names() if name in BASELINES or methods()[name].by_default]


def describe(name):
    """A method's description, for ``--help`` and the table's notes."""
    return BASELINES[name] if name in BASELINES else methods()[name].description


def _attack_aucs(model, data, groups, n_reference, seed):
    """(largest AUC of a party's own release, AUC of the final model), both means over
    the parties, from a membership audit with the test rows as non-members; the first
    NaN where the parties release nothing of their own."""
    audit = membership_audit(
        model, data.X_train, data.y_train, groups=groups, X_unlabeled=data.X_public,
        X_holdout=data.X_test, y_holdout=data.y_test, n_reference=n_reference,
        random_state=seed,
    )
    attack = "lira" if n_reference else "loss"
    party_releases = {r.release for r in audit.results} - {"final model"}
    return (max((audit.auc(release, attack) for release in party_releases), default=np.nan),
            audit.auc("final model", attack))


def run_trial(data, algorithm, estimator, options, seed, n_jobs, verbose=0, audit=None):
    """Fit one algorithm on one federated split.

    Returns (accuracy, seconds, bytes, epsilon, party attack AUC, final attack AUC,
    share still changing at a round cap); the AUCs come from a membership audit with
    `audit` reference fits (NaN when `audit` is None, and for the baselines).
    `verbose` is passed to the federated estimators, which then print their stages.
    """
    start = time.perf_counter()
    if algorithm == "majority":
        labels, counts = np.unique(data.y_train, return_counts=True)
        return (float(np.mean(data.y_test == labels[counts.argmax()])),
                time.perf_counter() - start, np.nan, np.nan, *_NO_AUDIT, np.nan)
    if algorithm in ("solo", "central"):
        # centralized training is SOLO with one party holding every row
        groups = data.groups if algorithm == "solo" else np.zeros(len(data.y_train))
        scores = solo_scores(estimator, data.X_train, data.y_train, groups, data.X_test,
                             data.y_test, n_jobs=n_jobs, random_state=seed)
        upload = 0.0 if algorithm == "solo" else np.nan
        return (float(np.mean(scores)), time.perf_counter() - start, upload, np.nan,
                *_NO_AUDIT, np.nan)
    method = methods()[algorithm]
    if method.prepare is not None:
        estimator = method.prepare(estimator, data.X_public)
    model = method.make(estimator, options,
                        dict(n_jobs=n_jobs, random_state=seed, verbose=verbose))
    # e.g. PATE: one party holding every row, said explicitly, and meant
    groups = np.zeros(len(data.y_train)) if method.one_party else data.groups
    with warnings.catch_warnings():
        if method.one_party:
            warnings.filterwarnings("ignore", category=AssumptionWarning)
        model.fit(data.X_train, data.y_train, groups=groups, X_unlabeled=data.X_public)
    seconds = time.perf_counter() - start
    upload = np.nan if method.one_party else float(np.mean(model.upload_bytes_))
    # epsilon_ is inf without noise: no guarantee to report
    epsilon = float(getattr(model, "epsilon_", np.inf))
    attack_aucs = _NO_AUDIT if audit is None else _attack_aucs(model, data, groups, audit,
                                                               seed)
    return (model.score(data.X_test, data.y_test), seconds, upload,
            epsilon if np.isfinite(epsilon) else np.nan, *attack_aucs,
            _unsettled_share(model))


_NO_AUDIT = (np.nan, np.nan)


def _unsettled_what(name):
    """What the method `name`'s algorithm reports a share of still changing."""
    owner = next(declared for declared in declared_algorithms()
                 if name in {method.name for method in declared.methods})
    return owner.unsettled_what


def _unsettled_share(model):
    """What the last of rounds stopped at their cap still changed, as the model's
    algorithm declares it; NaN by default."""
    declared = declaration_of(model)
    if declared is None or declared.unsettled_share is None:
        return np.nan
    return declared.unsettled_share(model)


class StagesOnBar(io.TextIOBase):
    """Stdout that shows each line an estimator prints as the progress bar's postfix."""

    def __init__(self, progress):
        self.progress = progress

    def write(self, text):
        stage = text.strip()
        if stage and hasattr(self.progress, "set_postfix_str"):
            # the stage's first clause, whole: what runs, without its details (a bar
            # on a terminal shortens it to its width, a log keeps it)
            self.progress.set_postfix_str(re.split(r" \(|; ", stage.split("] ", 1)[-1])[0])
        return len(text)


def run_experiment(*, dataset, estimator, algorithms, n_trials, dataset_options,
                   algorithm_options, n_jobs=None, make_progress=None, audit=None,
                   estimator_params=None):
    """Run every algorithm on `n_trials` random federated splits of `dataset`.

    Trial ``i`` uses ``random_state=i`` for the split, the partition and the models, so
    every algorithm sees the same parties in a trial. With `audit` (a number of
    reference fits), every federated fit is also attacked by membership inference
    (`skfedkt.privacy.membership_audit`, the test rows as non-members).
    ``make_progress(total)``, called
    once the first split has loaded, returns an object whose ``set_description`` is
    called with the algorithm and trial about to be fit, and ``update(1)`` after every
    fit (a tqdm bar does both); the fits' stages go to its ``set_postfix_str`` when it
    has one. `estimator_params` are set on the base estimator (``--trees``: a forest's
    ``n_estimators``).

    Returns
    -------
    results : list of Result
    """
    results = []
    progress = None
    for trial in range(n_trials):
        data = load_federated(dataset, random_state=trial, **dataset_options)
        if progress is None and make_progress is not None:
            progress = make_progress(n_trials * len(algorithms))
        for algorithm in algorithms:
            if progress is not None:
                if hasattr(progress, "set_postfix_str"):  # the last method's stage goes
                    progress.set_postfix_str("")
                progress.set_description(f"trial {trial + 1}/{n_trials}: {algorithm}")
            # warnings are counted in the table, and the fit's stages (teachers,
            # students, server; rounds) shown on the bar, rather than printed
            with warnings.catch_warnings(record=True) as caught, redirect_stdout(
                StagesOnBar(progress)
            ):
                warnings.simplefilter("always", LabelCollapseWarning)
                accuracy, seconds, upload, epsilon, *others = run_trial(
                    data, algorithm,
                    ESTIMATORS[estimator]().set_params(**(estimator_params or {})),
                    algorithm_options, trial,
                    n_jobs, verbose=int(progress is not None), audit=audit,
                )
            collapse = [w for w in caught if issubclass(w.category, LabelCollapseWarning)]
            for other in caught:
                if other not in collapse:
                    warnings.showwarning(other.message, other.category, other.filename,
                                         other.lineno)
            results.append(Result(dataset, estimator, algorithm, trial, float(accuracy),
                                  seconds, upload, epsilon, bool(collapse), *others))
            if progress is not None:
                progress.update(1)
    return results


def _mean_std(values, digits, unit=""):
    values = np.asarray(values, dtype=float)
    values = values[~np.isnan(values)]
    if values.size == 0:
        return "-"
    if values.size == 1:  # one trial has no spread to show
        return f"{values[0]:.{digits}f}{unit}"
    return f"{values.mean():.{digits}f} ± {values.std():.{digits}f}{unit}"


def _bytes(values):
    """Mean ± std of byte counts in the unit that fits their mean (B, KiB or MiB)."""
    values = np.asarray(values, dtype=float)
    mean = np.nanmean(values) if not np.isnan(values).all() else 0.0
    for unit, size in (("MiB", 2**20), ("KiB", 2**10)):
        if mean >= size:
            return _mean_std(values / size, 1, f" {unit}")
    return _mean_std(values, 0, " B")


def summary_table(results, algorithms):
    """The paper's Table 1 layout: one row per algorithm, mean ± std over trials.

    The column ``collapse`` counts the trials whose fit warned that labels collapsed
    (`LabelCollapseWarning`; ``class_shares_`` of the estimator has the details). With
    an audit, two more give the membership-attack AUC of the parties' releases and of
    the final model.
    """
    width = max(12, *(len(algorithm) + 1 for algorithm in algorithms))
    audited = any(np.isfinite(r.final_attack_auc) for r in results)
    header = (f"{'algorithm':<{width}}{'accuracy':>16}{'fit time (s)':>16}"
              f"{'upload/party':>22}{'epsilon':>16}{'collapse':>10}"
              + (f"{'attack party':>16}{'attack final':>16}" if audited else ""))
    lines = [header, "-" * len(header)]
    for algorithm in algorithms:
        rows = [r for r in results if r.algorithm == algorithm]
        lines.append(
            f"{algorithm:<{width}}{_mean_std([r.accuracy for r in rows], 3):>16}"
            f"{_mean_std([r.fit_seconds for r in rows], 2):>16}"
            f"{_bytes([r.upload_bytes for r in rows]):>22}"
            f"{_mean_std([r.epsilon for r in rows], 2):>16}"
            f"{f'{sum(r.collapse_warned for r in rows)}/{len(rows)}':>10}"
            + (f"{_mean_std([r.party_attack_auc for r in rows], 2):>16}"
               f"{_mean_std([r.final_attack_auc for r in rows], 2):>16}" if audited else "")
        )
    lines += ["", "methods:"] + [f"  {algorithm:<{width}}{describe(algorithm)}"
                                  for algorithm in algorithms]
    private = {r.algorithm for r in results if np.isfinite(r.epsilon)}
    accountants = [owner.accountant for owner in declared_algorithms()
                   if owner.accountant and private & {m.name for m in owner.methods}]
    if accountants:
        lines.append(f"epsilon at delta = 1e-05: {', '.join(accountants)} "
                     "(privacy_report_ states each).")
    if audited:
        lines.append(
            "attack: membership-inference AUC (0.5 is a guess; skfedkt.privacy."
            "membership_audit, the test rows as non-members), mean over parties: 'party' "
            "the most revealing of a party's own releases (its upload, its shared labels "
            "or probabilities, or its local model), 'final' the final model."
        )
        lines += [f"{algorithm}: its parties release nothing of their own, so there is no "
                  "party release to attack ('-')." for algorithm in algorithms
                  if any(r.algorithm == algorithm and np.isfinite(r.final_attack_auc)
                         and np.isnan(r.party_attack_auc) for r in results)]
    for algorithm in algorithms:
        capped = [r.still_changing for r in results
                  if r.algorithm == algorithm and np.isfinite(r.still_changing)]
        if capped:
            lines.append(
                f"{algorithm} stopped at its round cap in {len(capped)} of "
                f"{sum(r.algorithm == algorithm for r in results)} trials with "
                f"{np.mean(capped):.1%} of {_unsettled_what(algorithm)} still changing: "
                "more rounds may change its result."
            )
    if any(r.collapse_warned for r in results):
        lines.append(
            "collapse: trials whose fit warned that the labels a model learned, or an "
            "ensemble's predictions on the public set, lost classes (LabelCollapseWarning)."
        )
    return "\n".join(lines)


def write_csv(results, path):
    """One line per algorithm and trial."""
    import csv

    rows = [asdict(r) for r in results]
    with open(path, "w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)


def plot_results(results, algorithms, path):
    """Bar chart of test accuracy per algorithm (mean and std over trials)."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError as exc:
        raise ValueError("--plot needs matplotlib: pip install matplotlib") from exc
    means = [np.mean([r.accuracy for r in results if r.algorithm == a]) for a in algorithms]
    stds = [np.std([r.accuracy for r in results if r.algorithm == a]) for a in algorithms]
    fig, ax = plt.subplots(figsize=(1.2 * len(algorithms) + 2, 4))
    ax.bar(algorithms, means, yerr=stds, capsize=4, color="tab:blue")
    ax.set_ylabel("test accuracy")
    n_trials = len({r.trial for r in results})
    ax.set_title(f"{results[0].dataset}, {results[0].estimator}: mean ± std over "
                 f"{n_trials} trial(s)")
    ax.set_ylim(0, 1)
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)
