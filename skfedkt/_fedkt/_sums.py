"""What a FedKT party sends in the sum, with secure aggregation on or off, and the
server's vote from their total: its students' votes on the rows the server labels (hard
counts, summed probabilities, or the terms of the prior-corrected pooling) and its class
counts, each party weighted by its bounded rows (`party_weights`).

With `DistributedNoise` each party sends its votes on the server's queries alone, with
its share of the mechanism's noise (`_privacy._noise_shares`): discrete Laplace noise of
parameter ``gamma`` per vote, whose shares of any ``t - c`` honest parties sum to it, so
the coordinator never sees a noise-free vote and adds none."""

from __future__ import annotations

import secrets
from collections.abc import Sequence
from typing import Any

import numpy as np

from .._deployment._fields import InSum, nonnegative, rows_summing_to
from .._engine._context import SumParties
from .._engine._voting import (
    capped_rows,
    prior_corrected_from_sums,
    prior_corrected_terms,
)
from .._privacy._mechanisms import DistributedNoise
from .._privacy._noise_shares import discrete_laplace_share
from ._plan import FedKTPlan
from ._votes import chosen_hard_votes, hard_vote_counts

# fixed-point units per vote of soft votes that carry the parties' noise: rounding adds
# at most one unit per class to a party's sensitivity of 2 * n_students * units
NOISY_SOFT_UNITS = 2 ** 16
# beyond any noise share a party draws (its chance is below exp(-2**20) at any gamma
# FedKT's accountant reports): the bound of a noisy vote past the votes themselves
NOISE_SHARE_BOUND = 2 ** 40


def _students(plan: FedKTPlan, max_rows: int) -> float:
    return float(plan.n_students)


def _rows(plan: FedKTPlan, max_rows: int) -> float:
    return float(max_rows)


def _evidence(plan: FedKTPlan, max_rows: int) -> float:
    """A prior-corrected term's largest magnitude: a log-likelihood (smoothed
    probabilities and class shares of at most `max_rows` rows: under 14 + log(rows) for
    up to a million classes) weighted by at most its rows."""
    return float(max_rows * (14 + np.log(max_rows + 1)))


def _noisy(plan: FedKTPlan, max_rows: int) -> float:
    units = NOISY_SOFT_UNITS if plan.soft_votes else 1
    return float(units * plan.n_students + NOISE_SHARE_BOUND)


# the terms of the prior-corrected pooling (`prior_corrected_terms`), all but the
# probabilities weighted by the party's rows
_TERMS = {"evidence": ("its weighted log-likelihoods of each class", _evidence),
          "offset_evidence": ("their weighted spread over its classes", _evidence),
          "coupling": ("its class weights' outer product over their total", _rows),
          "class_weight": ("its class weights", _rows),
          "informative_rows": ("its rows, where it holds two classes or more", _rows)}

def _consistent(plan: FedKTPlan, values: np.ndarray) -> str | None:
    if (values % plan.n_students).any() or not np.isin(values.sum(axis=-1),
                                                         (0, plan.n_students)).all():
        return "rows that are not all its students' votes for one class, or none"
    return nonnegative(plan, values)


SUMS: tuple[InSum, ...] = (
    InSum("votes", "hard votes: its students' votes counted", "int", _students,
          valid=rows_summing_to(lambda plan: plan.n_students)),
    InSum("consistent", "hard votes: its students' votes where all agree", "int",
          _students, valid=rows_summing_to(lambda plan: plan.n_students, at_most=True,
                                           check=_consistent,
                                           multiple_of=lambda plan: plan.n_students)),
    InSum("soft_votes", "soft votes: its students' probabilities summed", "float",
          _students, valid=rows_summing_to(lambda plan: plan.n_students)),
    # the probabilities first: the terms are computed from them
    InSum("proba", "prior-corrected pooling: its students' mean probabilities", "float",
          lambda plan, max_rows: 1.0, valid=rows_summing_to(lambda plan: 1.0)),
    *(InSum(name, f"prior-corrected pooling: {about}", "float", bound, weighted=True)
      for name, (about, bound) in _TERMS.items()),
    InSum("class_counts", "its rows of each class (at L2 with noise, where released)",
          "float", _rows, weighted=True, valid=nonnegative),
    InSum("noisy_votes", "with DistributedNoise: its votes on the queries with its noise "
          "share, in units", "int", _noisy),
)


def consistent(plan: FedKTPlan, manifest: dict[str, Any],
               sums: dict[str, Any]) -> str | None:
    """Why one party's sums are not what an honest party of that `manifest` sends, each
    sum valid alone: summed class counts other than its manifest's, or, where it sends
    the prior-corrected pooling's terms, some missing or not those of its probabilities
    and counts (an honest party computes them by `prior_corrected_terms`), or None."""
    counts, summed_counts = manifest.get("class_counts"), sums.get("class_counts")
    if counts is not None and summed_counts is not None and not np.array_equal(
            summed_counts, counts):
        return "its summed class_counts are not its manifest's"
    if not any(name in sums for name in _TERMS):
        # no round of the prior-corrected pooling (FedAvg's later rounds share this check)
        return None
    missing = [name for name in ("proba", "class_counts", *_TERMS) if name not in sums]
    if missing:
        return f"it sends no {', '.join(missing)}, which the prior-corrected pooling sums"
    terms = prior_corrected_terms(sums["proba"], summed_counts)
    unlike = [name for name in _TERMS if np.shape(sums[name]) != np.shape(terms[name])
              or not np.allclose(sums[name], terms[name], rtol=1e-9, atol=1e-12)]
    return (f"its {unlike[0]} are not the prior-corrected terms of its proba and "
            "class_counts") if unlike else None


def party_weights(plan: FedKTPlan, parties: Sequence[Any], rows: np.ndarray,
                  claimed: bool) -> np.ndarray:
    """Each party's weight in the sums: its rows capped (`capped_rows`) over its rows,
    since one party's claim about its rows must not outweigh the rest; in `fit` the rows
    are the data's."""
    return capped_rows(parties, rows, claimed) / np.asarray(rows, dtype=float)


def noise_units(plan: FedKTPlan, n_classes: int) -> tuple[int, float]:
    """The units per vote in which the parties sum their noisy votes with
    `DistributedNoise` (1 for hard votes, `NOISY_SOFT_UNITS` for soft) and the discrete
    Laplace parameter per unit whose noise makes every query ``2 * n_students * gamma``-DP
    for each party, as the server's Laplace noise does: a party moves a row's summed
    units by at most ``2 * n_students`` votes, plus one unit per class of rounding for
    soft votes."""
    units = NOISY_SOFT_UNITS if plan.soft_votes else 1
    votes_moved = 2 * plan.n_students
    sensitivity = votes_moved * units + (n_classes if plan.soft_votes else 0)
    return units, plan.mechanism.gamma * votes_moved / sensitivity


def party_sums(plan: FedKTPlan, student_votes: np.ndarray, queries: np.ndarray,
               class_counts: np.ndarray, n_classes: int,
               sum_parties: SumParties | None) -> dict[str, Any]:
    """What one party sends in the sum: its students' votes (`student_votes`, of shape
    (n_students, n_rows) of class codes or (n_students, n_rows, n_classes) of
    probabilities, on the rows the tiers label) as the server counts them, and its
    class counts. With `DistributedNoise`: its votes on the server's `queries` alone,
    with its share of the noise that the honest shares of the secure sum of
    `sum_parties` sum to, and no counts."""
    if isinstance(plan.privacy, DistributedNoise):
        assert sum_parties is not None, "DistributedNoise runs under secure aggregation"
        units, parameter = noise_units(plan, n_classes)
        queried = student_votes[:, queries]
        votes = (queried.sum(axis=0, dtype=np.float64) if plan.soft_votes
                 # the histogram the server counts, released as is: no data-dependent
                 # fallback to every student's votes where no party is unanimous
                 else chosen_hard_votes(*hard_vote_counts(
                     queried[None], n_classes, plan.votes.consistent), warn_if_empty=False))
        return dict(noisy_votes=np.rint(votes * units).astype(np.int64) + discrete_laplace_share(
            parameter, sum_parties.honest_shares, votes.shape, secret_noise_source()))
    counts = np.asarray(class_counts, dtype=np.float64)
    # at L2 the counts cross only with the party's noise (`PartyNoise.counts_gamma`)
    sums: dict[str, Any] = dict(class_counts=counts) if (
        plan.level == "L0" or plan.releases_counts) else {}
    if plan.pooling == "prior-corrected":
        terms = prior_corrected_terms(student_votes.mean(axis=0, dtype=np.float64), counts)
        del terms["class_counts"]  # summed once, above
        sums.update(terms)
    elif plan.soft_votes:
        sums["soft_votes"] = student_votes.sum(axis=0, dtype=np.float64)
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
    `n_parties` parties' summed votes, as `server_votes` pools their students' votes
    (floats up to the order of the additions and, under secure aggregation, the sum's
    fixed point). With `DistributedNoise`, the noisy votes on `server_rows`, NaN
    elsewhere. Refuses sums no honest parties send: hard votes whose rows do not hold
    every student's vote."""
    if isinstance(plan.privacy, DistributedNoise):
        units, _ = noise_units(plan, sums["noisy_votes"].shape[1])
        votes = np.full((n_rows, sums["noisy_votes"].shape[1]), np.nan)
        votes[server_rows] = sums["noisy_votes"] / units
        return votes
    if plan.pooling == "prior-corrected":
        return n_parties * plan.n_students * prior_corrected_from_sums(sums, n_parties)
    if plan.soft_votes:
        return sums["soft_votes"]
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
    return chosen_hard_votes(sums["votes"], consistent, warn_if_empty=plan.level != "L1")
