"""DS-FL's party step: what runs on a party's machine in every round.

`party_round` fits the round's models of many parties in one batch and returns their
uploads: each party's model learns its own rows and the public rows with the server's
soft labels (once per class, weighted by the class's probability), and it sends its
class probabilities of the public rows in the sum.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from .._deployment._upload import PartyUpload
from .._engine._class_codes import ClassCodeModel, soft_label_rows
from .._engine._compat import num_samples
from .._engine._context import Message, PartyRows
from .._engine._fitting import Task, TierJob, fit_clones
from .._engine._rows import StackedRows, take_rows
from .._engine._seeds import derived_random_state, draw_seeds
from ._payloads import DSFLUpload, dsfl_message
from ._plan import DSFLPlan
from ._sums import party_sums


def instructions(message: Message | None) -> tuple[np.ndarray | None, int]:
    """What the server's `message` asks the parties to fit: the soft labels of the
    public rows and the round; round 0 without soft labels where there is no
    message."""
    if message is None or int(message.manifest["round"]) == 0:
        return None, 0  # the local models of round 0 learn the party's rows alone
    return (np.asarray(dsfl_message(message)["soft_labels"], dtype=np.float64),
            int(message.manifest["round"]))


def median_rows(message: Message | None) -> float:
    """The median party's rows, as the server's `message` says them (0 before any)."""
    return 0.0 if message is None else float(message.manifest["median_rows"])


class DSFLParty:
    """A party's step of a DS-FL round: its model on its rows plus the soft-labelled
    public rows, and its class probabilities of the public set.

    Stateless across rounds: the seed of round ``r`` depends only on the party's stream
    and ``r``, so that a party's machine can run each round as a separate command.
    `DSFLClassifier.fit_party` runs one party's; ``fit`` runs every party's, their
    models of a round in one flat parallel batch (`party_round`).
    """

    def __init__(self, plan: DSFLPlan, party: Any, estimator: Any, rows: np.ndarray,
                 y: np.ndarray, random_state: np.random.RandomState) -> None:
        self.plan, self.party, self.estimator, self.rows, self.y = (
            plan, party, estimator, rows, y
        )
        (self.base_seed,) = draw_seeds(random_state, 1)
        self.model: ClassCodeModel | None = None
        self.round: int | None = None

    def round_seed(self, round_: int) -> np.ndarray:
        """The seed of the round's model."""
        return draw_seeds(derived_random_state(int(self.base_seed), "round", round_), 1)

    def task(self, soft_labels: np.ndarray | None, public_rows: np.ndarray,
             median: float = 0.0) -> Task:
        """The round's model on the party's rows (weight one each) and, after round 0,
        every public row once per class of positive soft label, weighted by it times
        the public rows' weight (`DSFLPlan.public_row_weight`, where the `median` party
        holds that many rows): the weighted log loss of these rows is the cross-entropy
        to the soft labels."""
        name = f"party {self.party!r}"
        if soft_labels is None:
            return Task(self.estimator, self.y[self.rows], self.rows, name=name)
        public, labels, weights = soft_label_rows(soft_labels)
        weights = weights * self.plan.public_row_weight(len(self.rows), len(public_rows),
                                                        median)
        return Task(self.estimator, np.concatenate([self.y[self.rows], labels]),
                    np.concatenate([self.rows, public_rows[public]]),
                    sample_weight=np.concatenate([np.ones(len(self.rows)), weights]),
                    name=name)

    def fitted(self, model: ClassCodeModel, probabilities: np.ndarray, accuracy: float,
               round_: int) -> None:
        """Keep the round's model, its probabilities of the public rows and its
        accuracy on the party's own rows."""
        self.model, self.probabilities, self.accuracy, self.round = (
            model, probabilities, accuracy, round_)

    def upload(self, manifest: dict[str, Any], done: bool, with_model: bool,
               n_classes: int) -> PartyUpload:
        """In the sum, the model's accuracy on the party's rows, the party's rows of each
        class and, unless the server's message said `done`, its probabilities of the
        public rows where the server uses them (every round but the last of `n_rounds`,
        and that one for a distilled model); in the clear, the model itself if
        `with_model`."""
        assert self.model is not None and self.round is not None, "upload before fitted"
        payload = DSFLUpload(model=self.model.estimator if with_model else None,
                             codes=self.model.codes if with_model else None)
        released = not done and (self.round < self.plan.n_rounds or self.plan.distill)
        return PartyUpload(manifest=dict(manifest), payload=dict(
            payload, sums=party_sums(self.probabilities if released else None,
                                     self.accuracy,
                                     np.bincount(self.y[self.rows], minlength=n_classes))))


def party_round(plan: DSFLPlan, parties: Sequence[DSFLParty], data: PartyRows,
                message: Message | None, manifests: list[dict[str, Any]],
                share_model: bool = True) -> list[PartyUpload]:
    """The round `message` asks for (round 0 without one): every party's model on its
    rows plus the soft-labelled public rows, in one flat parallel batch, and its
    upload, with its model in the final step (the message says done) if
    `share_model`. Parties that fit this very round already (in ``fit``, where the last
    round's models are final) are not fit again."""
    n_rows, n_public, n_classes = len(data.y), num_samples(data.X_public), len(data.classes)
    soft_labels, round_ = instructions(message)
    if any(party.round != round_ for party in parties):
        public_rows = n_rows + np.arange(n_public)
        fits = fit_clones(
            [party.task(soft_labels, public_rows, median_rows(message)) for party in parties],
            # the parties' rows, then the public rows: tasks index one matrix
            TierJob(StackedRows(data.X, data.X_public), n_classes, X_predict=data.X_public,
                    soft_votes=True),
            np.concatenate([party.round_seed(round_) for party in parties]),
            tier=f"local models, round {round_}", **plan.clone_fitting,
        )
        for party, model, probabilities in zip(parties, fits.models, fits.predictions):
            own = model.predict(take_rows(data.X, party.rows))
            party.fitted(model, probabilities, float(np.mean(own == data.y[party.rows])),
                         round_)
    done = message is not None and message.manifest["done"]
    return [party.upload(manifest, done, done and share_model, n_classes)
            for party, manifest in zip(parties, manifests)]
