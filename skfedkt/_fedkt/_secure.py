"""FedKT under secure aggregation: each party sends, in a secure sum, its students'
votes on the public rows and its class counts; the server labels the public rows from
the sums alone, and no student leaves its party.

At L1 each party sends its votes on the server's queries alone, with its share of the
mechanism's noise (`_privacy._noise_shares`): discrete Laplace noise of parameter
``gamma`` per vote, whose threshold's number of shares sum to it, so the server never
sees a noise-free vote and adds none."""

from __future__ import annotations

import secrets
from collections.abc import Sequence
from typing import Any, NamedTuple

import numpy as np

from .._declarations import SecureSums
from .._privacy._noise_shares import discrete_laplace_share
from .._engine._voting import (
    bounded_party_counts,
    prior_corrected_from_sums,
    prior_corrected_terms,
)
from ._plan import FedKTPlan
from ._votes import chosen_hard_votes, hard_vote_counts


# fixed-point units per vote of soft votes that carry the parties' noise: rounding adds
# at most one unit per class to a party's sensitivity of 2 * n_students * units
NOISY_SOFT_UNITS = 2 ** 16


def _refusal(plan: FedKTPlan) -> str | None:
    if not plan.distill:
        return ("distill=False predicts with the parties' students, which stay at their "
                "parties under it; keep distill=True")
    if plan.level == "L1" and plan.mechanism.noise != "laplace":
        return ("the parties add L1's noise in shares, which exist for Laplace noise "
                "only; use ServerNoise(noise='laplace')")
    return None


def _float_bound(plan: FedKTPlan, max_rows: int) -> float:
    """The largest float a party sums: a probability summed over its students, or a
    prior-corrected term, a log-likelihood (smoothed probabilities and class shares of
    at most `max_rows` rows: under 14 + log(rows) for up to a million classes) weighted
    by at most its rows."""
    return float(max(plan.n_students, max_rows * (14 + np.log(max_rows + 1))))


SECURE_SUMS = SecureSums(refusal=_refusal, float_bound=_float_bound)


def count_scales(n_rows: Sequence[int]) -> np.ndarray:
    """Each party's factor on its class counts: the server's bound on a party's weight
    (`bounded_party_counts`: no party above the others together, nor far above the
    median party), which each party applies itself, since the server sees only sums.
    `n_rows`: every party's rows, as the manifests say them."""
    totals = np.asarray(n_rows, dtype=float)
    return bounded_party_counts(totals[:, None])[0][:, 0] / totals


def noise_units(plan: FedKTPlan, n_classes: int) -> tuple[int, float]:
    """The units per vote in which the parties sum their noisy votes at L1 (1 for hard
    votes, `NOISY_SOFT_UNITS` for soft) and the discrete Laplace parameter per unit
    whose noise makes every query ``2 * n_students * gamma``-DP for each party, as the
    server's Laplace noise does: a party moves a row's summed units by at most
    ``2 * n_students`` votes, plus one unit per class of rounding for soft votes."""
    units = NOISY_SOFT_UNITS if plan.soft_votes else 1
    votes_moved = 2 * plan.n_students
    sensitivity = votes_moved * units + (n_classes if plan.soft_votes else 0)
    return units, plan.mechanism.gamma * votes_moved / sensitivity


class SecureVotes(NamedTuple):
    """What a party step knows under secure aggregation beyond the party's own rows."""

    #: its students' votes on the rows the tiers label: shape (n_students, n_rows) of
    #: class codes or (n_students, n_rows, n_classes) of probabilities
    student_votes: np.ndarray
    #: its factor on its class counts (`count_scales`)
    count_scale: float
    #: the rows the server labels (`FedKTPlan.tier_rows`)
    queries: np.ndarray
    #: the threshold of the sum, the fewest shares the noise is sized for
    threshold: int


def party_sums(plan: FedKTPlan, secure: SecureVotes, class_counts: np.ndarray,
               n_classes: int) -> dict[str, Any]:
    """What one party sends in sum: its students' votes as the server counts them, and
    its class counts (scaled by its factor). At L1: its votes on the server's queries
    alone, with its share (`secret_noise_source`) of the noise that the threshold's
    number of shares sum to, and no counts."""
    student_votes = secure.student_votes
    if plan.level == "L1":
        units, parameter = noise_units(plan, n_classes)
        queried = student_votes[:, secure.queries]
        votes = (queried.sum(axis=0, dtype=np.float64) if plan.soft_votes
                 # the histogram the server counts, released as is: no data-dependent
                 # fallback to every student's votes where no party is unanimous
                 else chosen_hard_votes(*hard_vote_counts(
                     queried[None], n_classes, plan.votes.consistent), warn_if_empty=False))
        return dict(noisy_votes=np.rint(votes * units).astype(np.int64) + discrete_laplace_share(
            parameter, secure.threshold, votes.shape, secret_noise_source()))
    # at L2 the counts cross only with the party's noise (`PartyNoise.counts_gamma`)
    counts = np.asarray(class_counts * secure.count_scale, dtype=np.float64)
    sums: dict[str, Any] = dict(class_counts=counts) if (
        plan.level == "L0" or plan.releases_counts) else {}
    if plan.pooling == "prior-corrected":
        terms = prior_corrected_terms(student_votes.mean(axis=0, dtype=np.float64),
                                      counts)
        del terms["class_counts"]  # summed once, above
        sums.update(terms)
    elif plan.soft_votes:
        sums["votes"] = student_votes.sum(axis=0, dtype=np.float64)
    else:
        every, consistent = hard_vote_counts(student_votes[None], n_classes,
                                             plan.votes.consistent)
        sums["votes"] = every.astype(np.int64)
        if consistent is not None:
            sums["consistent"] = consistent.astype(np.int64)
    return sums


def secret_noise_source() -> np.random.Generator:
    """A generator of the party's noise shares, seeded by the operating system: a seed
    derived from `random_state`, which the coordinator knows (it draws the queries from
    it), would let it recompute and remove the noise."""
    return np.random.default_rng(secrets.randbits(128))


def summed_votes(plan: FedKTPlan, sums: dict[str, np.ndarray], n_parties: int,
                 server_rows: np.ndarray, n_rows: int) -> np.ndarray:
    """The histogram the server labels with, of shape (`n_rows`, n_classes), from the
    `n_parties` parties' summed votes: as `server_votes` makes it from their students'
    votes (float votes differ from its by the sum's fixed point and reordered
    arithmetic, in the last digits: where its votes tie exactly, the tie may break
    otherwise). At L1, the noisy votes on `server_rows`, NaN elsewhere. Refuses sums
    no honest parties send: hard votes whose rows do not hold every student's vote."""
    if plan.level == "L1":
        units, _ = noise_units(plan, sums["noisy_votes"].shape[1])
        votes = np.full((n_rows, sums["noisy_votes"].shape[1]), np.nan)
        votes[server_rows] = sums["noisy_votes"] / units
        return votes
    if plan.pooling == "prior-corrected":
        return n_parties * plan.n_students * prior_corrected_from_sums(sums, n_parties)
    if plan.soft_votes:
        return sums["votes"]
    n_students, consistent = n_parties * plan.n_students, sums.get("consistent")
    wrong = sums["votes"].sum(axis=1) != n_students
    if consistent is not None:  # a party casts all its students' votes or none
        wrong |= ((consistent.sum(axis=1) > n_students)
                  | (consistent % plan.n_students != 0).any(axis=1))
    if wrong.any():
        raise ValueError(
            f"The summed hard votes of public row {int(np.flatnonzero(wrong)[0])} are not "
            f"those of {n_students} students ({n_parties} parties x {plan.n_students}): "
            "a party sent votes its students do not cast. Refusing the sums.")
    return chosen_hard_votes(sums["votes"], consistent)
