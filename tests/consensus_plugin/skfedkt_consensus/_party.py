"""What runs at a party: each round, its model fit on its rows and the public rows the
last consensus labels, and its class probabilities on the public set."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from skfedkt.algorithm import (
    PartyContext,
    PartyStepResult,
    PartyUpload,
    StackedRows,
    Task,
    TierJob,
    draw_seeds,
    fit_clones,
    num_samples,
    sample_weight_param,
    soft_label_rows,
)

from ._payloads import message_payload
from ._plan import ConsensusPlan


@dataclass(frozen=True)
class ConsensusParty:
    """One party: its name, its rows and one seed per round, drawn at once."""

    party: Any
    rows: np.ndarray
    seeds: np.ndarray

    def upload(self, manifest: dict[str, Any], proba: np.ndarray | None) -> PartyUpload:
        """Its probabilities on the public set, in the sum; nothing in the final step
        (None)."""
        return PartyUpload(manifest=dict(manifest),
                           payload={} if proba is None else {"sums": {"proba": proba}})


def parties(context: PartyContext[ConsensusPlan],
            random_state_of: Callable[[Any], np.random.RandomState]) -> list[ConsensusParty]:
    """Each party's state; its draws are made here, at once: one seed per round."""
    return [ConsensusParty(party, rows, draw_seeds(random_state_of(party),
                                                   context.plan.n_rounds + 1))
            for party, rows in zip(context.data.parties, context.data.party_rows)]


def consensus_rows(estimator: Any,
                   consensus: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray | None]:
    """The public rows, labels and weights `estimator` learns the consensus from: soft
    labels (each row once per class, weighted by its probability) where it takes sample
    weights, else each row's most probable class, unweighted."""
    if sample_weight_param(estimator) is None:
        return np.arange(len(consensus)), consensus.argmax(axis=1), None
    return soft_label_rows(consensus)


def party_step(context: PartyContext[ConsensusPlan],
               parties: Sequence[ConsensusParty]) -> PartyStepResult:
    """Every party's upload of the round the context's message asks for: its model's
    probabilities on the public set, the parties' models fit in one parallel batch;
    nothing after the message that says done."""
    data, plan, message = context.data, context.plan, context.message
    if message is not None and message.manifest["done"]:
        return PartyStepResult([party.upload(manifest, None)
                                for party, manifest in zip(parties, context.manifests)])
    round_ = 0 if message is None else int(message.manifest["round"])
    tasks = []
    for party in parties:
        rows, y, weights = party.rows, data.y[party.rows], None
        if message is not None:  # its rows, then the public rows the consensus labels
            public, labels, shares = consensus_rows(plan.estimator,
                                                    message_payload(message)["consensus"])
            rows = np.concatenate([rows, num_samples(data.X) + public])
            y = np.concatenate([y, labels])
            weights = None if shares is None else np.concatenate([np.ones(len(party.rows)),
                                                                  shares])
        tasks.append(Task(plan.estimator, y, rows, weights,
                          name=f"party {party.party!r}, round {round_}"))
    fits = fit_clones(
        tasks,
        # the parties' rows, then the public rows: the tasks index one matrix
        TierJob(StackedRows(data.X, context.X_public), len(data.classes),
                X_predict=context.X_public, soft_votes=True, keep_models=False),
        np.array([party.seeds[round_] for party in parties]),
        tier=f"party models, round {round_}", **plan.clone_fitting)
    assert fits.predictions is not None  # the tier votes on the public rows
    return PartyStepResult([party.upload(manifest, proba) for party, manifest, proba
                            in zip(parties, context.manifests, fits.predictions)])
