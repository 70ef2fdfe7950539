"""FedAvg's party step: what runs on a party's machine in every round.

`party_round` trains every party's clone of a round, from the global weights the
server's message carries (the shared initialisation in round 0), in one flat parallel
batch, and returns their uploads: in the sum, the trained weights times the party's
rows, which weigh its weights in the average, and its rows. With FedProx's
`proximal_mu`, local training is pulled toward the global weights. With a one-shot
first round (`init`), round 0 is that algorithm's own party step (`first_round`).
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from functools import partial
from typing import Any

import numpy as np

from .._deployment._upload import PartyUpload
from .._engine._context import Message, PartyContext, PartyRows
from .._engine._fitting import (
    Task,
    check_tier,
    fit_in_chunks,
    report_tier,
    stacking_probe,
    tier_entry,
)
from .._engine._rows import take_rows
from .._engine._seeds import derived_random_state, draw_seeds
from .._engine._transport import in_one_thread, map_in_parallel
from .._engine._weights import model_weights, started_model, train_epoch
from ._payloads import fedavg_message
from ._plan import FedAvgPlan
from ._sums import clipped, party_sums
from ._server import model_proba

# a party's trained weights and its training accuracy
Trained = tuple[list[np.ndarray], float]


def instructions(message: Message | None) -> tuple[list[np.ndarray] | None, int]:
    """The global weights and round the server's `message` asks the parties to train
    from; round 0 from the shared initialisation without a message."""
    if message is None:
        return None, 0
    return fedavg_message(message)["weights"], int(message.manifest["round"])


class FedAvgParty:
    """A party's step of a FedAvg round: its clone, started from the global weights and
    trained for `local_epochs` epochs on its rows.

    Stateless across rounds: the draws of round ``r`` depend only on the party's stream
    and ``r`` (round 0's initialisation on the shared seed alone, so every party starts
    from the same weights), so that a party's machine can run each round as a separate
    command.
    """

    def __init__(self, plan: FedAvgPlan, party: Any, rows: np.ndarray,
                 random_state: np.random.RandomState, init_party: Any = None) -> None:
        self.plan, self.party, self.rows = plan, party, rows
        # the first round's party (a one-shot algorithm's), if any
        self.init_party = init_party
        (self.base_seed,) = draw_seeds(random_state, 1)

    def round_seed(self, round_: int, root: int) -> int:
        """The seed of the round's clone: the shared one in round 0, which draws the
        initial weights every party starts from, the party's own after."""
        stream = (derived_random_state(root, "initial weights") if round_ == 0
                  else derived_random_state(int(self.base_seed), "round", round_))
        (seed,) = draw_seeds(stream, 1)
        return int(seed)

    def upload(self, manifest: dict[str, Any],
               sums: dict[str, np.ndarray] | None) -> PartyUpload:
        """What the party sends: in the sum, its trained weights times its rows and its
        rows (`_sums.party_sums`), or nothing once the server's message said done
        (None)."""
        return PartyUpload(manifest=dict(manifest),
                           payload={} if sums is None else dict(sums=sums))


def train_party(plan: FedAvgPlan, X: Any, y: np.ndarray, n_classes: int, seed: int,
                weights: list[np.ndarray] | None) -> Trained:
    """One party's round: its clone, started from `weights` (round 0: the shared
    initial weights), trained `local_epochs` epochs; its weights and its accuracy on
    its rows."""
    model = started_model(plan.estimator, X, y, n_classes, seed, weights,
                          proximal_mu=plan.proximal_mu)
    for _ in range(plan.local_epochs):
        train_epoch(model, X, y)
    return model_weights(model), float(np.mean(model.predict(X) == y))


def _train_item(plan, item):
    return in_one_thread(train_party, plan, *item)


def train_parties(plan: FedAvgPlan, data: PartyRows, parties: Sequence[FedAvgParty],
                  seeds: list[int], weights: list[np.ndarray] | None,
                  tier: str) -> list[Trained]:
    """`train_party` of every party (its clone seeded with its seed of `seeds`, from
    `weights`): skorch nets trained together as one stacked module, in chunks, where
    the stacked path serves them (`_stacking.train_from_weights`), else one by one in
    one flat parallel batch."""
    start = time.perf_counter()
    n_classes = len(data.classes)
    tasks = [Task(plan.estimator, data.y[party.rows], party.rows, name=f"party {party.party!r}")
             for party in parties]
    items = [(take_rows(data.X, task.rows), task.y, n_classes, seed, weights)
             for task, seed in zip(tasks, seeds)]
    check_tier(tasks, tier)
    probe = stacking_probe(tasks, data.X, seeds, n_classes)
    fallbacks: list[str] = []
    if isinstance(probe, str):
        trained = map_in_parallel(partial(_train_item, plan), items, n_jobs=plan.n_jobs)
    else:
        from .._engine._stacking import train_from_weights

        block_rows = probe.block_rows(probe.chunk_size(len(items)))

        def together(chunk):
            return train_from_weights(started_model, plan.estimator,
                                      [items[i] for i in chunk], plan.local_epochs,
                                      plan.proximal_mu, block_rows, probe.graphs)

        def one_by_one(chunk):
            return [_train_item(plan, items[i]) for i in chunk]

        trained = [fit for chunk_fits in fit_in_chunks(
            probe, list(range(len(items))), plan.n_jobs, together, one_by_one, fallbacks)
            for fit in chunk_fits]
    report_tier(plan.say, tier, dict(tier_entry(probe, plan.estimator, len(items), fallbacks),
                                     clones=len(items), seconds=time.perf_counter() - start))
    return trained


def party_round(plan: FedAvgPlan, parties: Sequence[FedAvgParty], data: PartyRows, root: int,
                message: Message | None, manifests: list[dict[str, Any]]) -> list[PartyUpload]:
    """Every party's upload for the round `message` asks for (round 0 without one): in
    the sum, its trained weights times its rows, or nothing once the message says done
    (the final model is the server's average)."""
    weights, round_ = instructions(message)
    if message is not None and message.manifest["done"]:
        return [party.upload(manifest, None) for party, manifest in zip(parties, manifests)]
    trained = train_parties(plan, data, parties,
                            [party.round_seed(round_, root) for party in parties], weights,
                            f"local training, round {round_}")
    return [party.upload(manifest, round_sums(plan, party, party_trained, data))
            for party, manifest, party_trained in zip(parties, manifests, trained)]


def round_sums(plan: FedAvgPlan, party: FedAvgParty, trained: Trained,
               data: PartyRows) -> dict[str, np.ndarray]:
    """What `party` sends in the sum after its `trained` round: `_sums.party_sums`, with
    FedDF its model's class probabilities on the public rows."""
    weights, accuracy = trained
    weights = clipped(weights, plan.max_weight_norm)
    proba = (model_proba(plan, weights, data.X_public, len(data.classes))
             if plan.distill_epochs else None)
    return party_sums(party.party, len(party.rows), weights, accuracy, proba)


def first_round(context: PartyContext[FedAvgPlan],
                parties: Sequence[FedAvgParty]) -> Sequence[Message]:
    """Every party's upload of round 0 with a one-shot first round (``plan.init``): that
    algorithm's own party step, whose uploads the server's first round reads."""
    plan = context.plan
    assert plan.init is not None and plan.init_plan is not None, "a first round's plan"
    # the manifests already say round 0 (`PartyContext.answering`)
    return plan.init._party_step(context.with_plan(plan.init_plan),
                                 [party.init_party for party in parties]).uploads
