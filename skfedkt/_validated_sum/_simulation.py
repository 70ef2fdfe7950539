"""A validated sum run in one process: every party's reports and both aggregators'
checks of them (one flat parallel batch, party by party, as parties and aggregators run
side by side in a deployment), the leader's decisions, and the total of the parties that
passed."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import partial
from typing import Any

import numpy as np

from .._engine._transport import map_in_parallel
from ._sums import (
    HELPER,
    LEADER,
    Aggregator,
    ValidatedSum,
    ValidatedSumError,
    decoded_totals,
    new_verify_key,
    party_reports,
    verifier_message,
)


@dataclass(frozen=True)
class ValidatedRun:
    """What a run gives: the total of the accepted parties' arrays by name, the
    accepted parties' indices, each refused party's refusal by index, and the bytes each
    party sent the two aggregators."""

    totals: dict[str, np.ndarray]
    accepted: tuple[int, ...]
    refused: dict[int, ValidatedSumError]
    sent: np.ndarray


def run_validated_sum(agreement: ValidatedSum, inputs: Sequence[Mapping[str, np.ndarray]],
                      n_jobs: int | None = None) -> ValidatedRun:
    """The validated sum of `inputs` (each party's arrays, in the agreement's order)."""
    verify_key = new_verify_key()  # both aggregators' alone: one process holds both here
    aggregators = (Aggregator(agreement, LEADER, verify_key),
                   Aggregator(agreement, HELPER, verify_key))
    # a party's reports go to the aggregators' checks in the same worker: megabytes a
    # party that would cross between processes twice
    rounds = map_in_parallel(partial(_reported_and_checked, aggregators),
                             list(enumerate(inputs)), n_jobs=n_jobs)
    sent = np.array([sent for sent, _ in rounds], dtype=np.int64)
    checks = [checked for _, checked in rounds]
    outputs: tuple[dict[int, Any], dict[int, Any]] = ({}, {})
    refused = {}
    for index, checked in enumerate(checks):
        try:
            shares = _output_shares(aggregators, index, checked)
        except ValidatedSumError as refusal:
            refused[index] = refusal
            continue
        for side, side_shares in zip(outputs, shares):
            side[index] = side_shares
    accepted = tuple(sorted(outputs[LEADER]))
    totals = decoded_totals(agreement, aggregators[LEADER].aggregate(outputs[LEADER]),
                            aggregators[HELPER].aggregate(outputs[HELPER]), len(accepted))
    return ValidatedRun(totals, accepted, refused, sent)


def _reported_and_checked(aggregators: tuple[Aggregator, Aggregator],
                          item: tuple[int, Mapping[str, np.ndarray]]) -> tuple[int, Any]:
    """A party's step, its reports to the leader and the helper, then each aggregator's
    check of its own: the bytes the party sent them, and the checks (`_checked`)."""
    index, values = item
    reports = party_reports(aggregators[LEADER].agreement, index, values)
    sent = sum(len(report.parts) + len(report.share) for side in reports
               for report in side.values())
    return sent, _checked(aggregators, (index, reports))


def _checked(aggregators: tuple[Aggregator, Aggregator], item: tuple[int, Any]) -> Any:
    """Each aggregator's states and verifier shares of one party's reports, or the sum
    and the reason of a report refused as no share (plain values: they cross from a
    worker process)."""
    index, reports = item
    try:
        return [aggregator.checked(index, side)
                for aggregator, side in zip(aggregators, reports)]
    except ValidatedSumError as refusal:
        return refusal.sum_name, refusal.reason


def _output_shares(aggregators: tuple[Aggregator, Aggregator], index: int,
                   checked: Any) -> tuple[dict[str, Any], dict[str, Any]]:
    """One party's output shares at each aggregator, once every proof passed: the
    leader decides from both verifier shares, and both finish with its message."""
    leader, helper = aggregators
    if isinstance(checked, tuple):
        raise ValidatedSumError(leader.agreement.parties[index], *checked)
    (leader_states, leader_shares), (helper_states, helper_shares) = checked
    messages = {name: verifier_message(leader.agreement, index, name, leader_shares[name],
                                       helper_shares[name]) for name in leader_shares}
    return ({name: leader.output_share(leader_states[name], index, name, message)
             for name, message in messages.items()},
            {name: helper.output_share(helper_states[name], index, name, message)
             for name, message in messages.items()})
