"""What a membership audit found: one result per attack, release and party, their
summary, and the largest AUC a differentially private release allows."""

from dataclasses import dataclass
from numbers import Real

import numpy as np
from scipy.special import expit
from sklearn.metrics import roc_auc_score, roc_curve

from ._engine._compat import Interval, Options, validate_params

# false-positive rates at which the true-positive rate is reported
LOW_FPRS = (0.01, 0.001)


@dataclass(frozen=True)
class AttackResult:
    """One attack on one release, with one party's rows as the members.

    Attributes
    ----------
    release : str
        The release's name (see `Release`).
    party : object
        The attacked party.
    attack : {"loss", "lira"}
        The attack.
    auc : float
        ROC AUC of the membership scores; 0.5 is a guess, 1 certainty.
    tpr_at_1pct_fpr, tpr_at_01pct_fpr : float
        Largest true-positive rate at a false-positive rate of at most 1% and 0.1%.
        With ``n_nonmembers`` below 100 (1000), these are the rates at no false positive.
    n_members, n_nonmembers : int
        Candidate rows of each kind.
    epsilon, delta : float
        The guarantee the accountant claims for this release (``inf``: none).
    """

    release: str
    party: object
    attack: str
    auc: float
    tpr_at_1pct_fpr: float
    tpr_at_01pct_fpr: float
    n_members: int
    n_nonmembers: int
    epsilon: float
    delta: float


@validate_params(
    {"epsilon": [Interval(Real, 0, None, closed="left"), Options(Real, {np.inf})],
     "delta": [Interval(Real, 0, 1, closed="both")]},
    prefer_skip_nested_validation=True,
)
def dp_auc_bound(epsilon, delta=0.0):
    """The largest membership-attack AUC an (epsilon, delta)-DP release allows.

    Any test of membership against such a release has, at false-positive rate ``a``, a
    true-positive rate at most ``min(1, exp(epsilon) a + delta, 1 - exp(-epsilon) (1 -
    delta - a))`` (Kairouz, Oh and Viswanath, 2015). The area under that curve is
    ``1 - (1 - delta)**2 / (1 + exp(epsilon))``.

    Parameters
    ----------
    epsilon : float
        The guarantee's epsilon (``inf`` gives 1).
    delta : float, default=0.0
        Its delta.

    Returns
    -------
    auc : float

    Examples
    --------
    >>> from skfedkt.privacy import dp_auc_bound
    >>> round(dp_auc_bound(0.0), 3), round(dp_auc_bound(1.0), 3), dp_auc_bound(float("inf"))
    (0.5, 0.731, 1.0)
    """
    return float(1 - (1 - delta) ** 2 * expit(-epsilon))


def _tpr_at(fpr, tpr, target):
    return float(tpr[fpr <= target].max())


def attack_result(release, party, attack, scores, n_members):
    is_member = np.arange(len(scores)) < n_members
    fpr, tpr, _ = roc_curve(is_member, scores)
    return AttackResult(
        release=release.name, party=party, attack=attack,
        auc=float(roc_auc_score(is_member, scores)),
        tpr_at_1pct_fpr=_tpr_at(fpr, tpr, LOW_FPRS[0]),
        tpr_at_01pct_fpr=_tpr_at(fpr, tpr, LOW_FPRS[1]),
        n_members=int(n_members), n_nonmembers=int(len(scores) - n_members),
        epsilon=float(release.epsilon), delta=float(release.delta),
    )


class MembershipAudit:
    """The result of `membership_audit`: every attack on every release.

    Attributes
    ----------
    estimator_name : str
        The audited estimator's class.
    results : list of AttackResult
        One per release, attacked party and attack.
    n_reference : int
        Reference fits behind the ``"lira"`` attack.
    pool_reuse : float
        Share of replaced rows in the reference fits that reused a held-out row (the
        held-out set was smaller than the attacked rows); 0 is best.
    n_party_rows, n_attacked_rows : int
        The attacked parties' rows, and how many of them the attacks take as members:
        each member pairs with a held-out row of its class, so the held-out rows of a
        class (half of them with reference fits) and ``max_members`` bound them.
    """

    def __init__(self, estimator_name, results, n_reference, pool_reuse, n_party_rows,
                 n_attacked_rows):
        self.estimator_name = estimator_name
        self.results = results
        self.n_reference = n_reference
        self.pool_reuse = pool_reuse
        self.n_party_rows = n_party_rows
        self.n_attacked_rows = n_attacked_rows

    def summary(self):
        """Per release and attack, over the attacked parties.

        Returns
        -------
        rows : list of dict
            Keys ``release``, ``attack``, ``auc`` (mean over parties), ``auc_std``,
            ``auc_max``, ``tpr_at_1pct_fpr`` and ``tpr_at_01pct_fpr`` (means),
            ``n_parties``, ``n_members`` (total), ``epsilon``, ``delta`` (the largest
            over parties) and ``auc_bound`` (`dp_auc_bound` of that epsilon).
        """
        groups: dict[tuple[str, str], list[AttackResult]] = {}
        for result in self.results:
            groups.setdefault((result.release, result.attack), []).append(result)
        rows = []
        for (release, attack), results in groups.items():
            aucs = np.array([r.auc for r in results])
            epsilon = max(r.epsilon for r in results)
            delta = max(r.delta for r in results)
            rows.append(dict(
                release=release, attack=attack, auc=float(aucs.mean()),
                auc_std=float(aucs.std()), auc_max=float(aucs.max()),
                tpr_at_1pct_fpr=float(np.mean([r.tpr_at_1pct_fpr for r in results])),
                tpr_at_01pct_fpr=float(np.mean([r.tpr_at_01pct_fpr for r in results])),
                n_parties=len(results), n_members=sum(r.n_members for r in results),
                epsilon=float(epsilon), delta=float(delta),
                auc_bound=dp_auc_bound(epsilon, delta),
            ))
        return rows

    def auc(self, release, attack="lira"):
        """Mean AUC of `attack` on `release` over the attacked parties (NaN if absent)."""
        aucs = [r.auc for r in self.results if r.release == release and r.attack == attack]
        return float(np.mean(aucs)) if aucs else np.nan

    def __str__(self):
        header = (f"{'release':<12} {'attack':<6} {'AUC mean ± std (max)':>22} "
                  f"{'TPR@1%':>7} {'TPR@0.1%':>9} {'members':>8} {'epsilon':>8} "
                  f"{'AUC bound':>9}")
        lines = [
            f"Membership audit of {self.estimator_name}: AUC 0.5 is a guess; "
            f"'lira' uses {self.n_reference} reference fit(s)",
            header, "-" * len(header),
        ]
        for row in self.summary():
            auc = f"{row['auc']:.3f} ± {row['auc_std']:.3f} ({row['auc_max']:.3f})"
            lines.append(
                f"{row['release']:<12} {row['attack']:<6} {auc:>22} "
                f"{row['tpr_at_1pct_fpr']:>7.3f} {row['tpr_at_01pct_fpr']:>9.3f} "
                f"{row['n_members']:>8} {row['epsilon']:>8.3g} {row['auc_bound']:>9.3f}"
            )
        if not self.results:
            lines.append(
                f"(nothing to attack: what {self.estimator_name} let out declares no "
                "release of the parties' rows, such as a model or labels they trained; "
                "its Releases declaration says what a fit and an upload let out)")
            return "\n".join(lines)
        if self.n_attacked_rows < self.n_party_rows:
            halves = (" (half of them, the rest standing in for members in the reference "
                      "fits)" if self.n_reference else "")
            lines.append(
                f"(members: {self.n_attacked_rows} of the attacked parties' "
                f"{self.n_party_rows} rows, each paired with a non-member, a held-out row "
                f"of its class: the held-out rows of each class{halves} and max_members "
                "bound them; a larger held-out set attacks more rows)")
        if self.pool_reuse > 0:
            lines.append(f"({self.pool_reuse:.0%} of the reference fits' stand-in rows "
                         "were drawn more than once: a larger held-out set helps)")
        return "\n".join(lines)

    def __repr__(self):
        return (f"<MembershipAudit of {self.estimator_name}: {len(self.results)} attack "
                f"results, {self.n_reference} reference fit(s)>")
