"""FedCT's party step: what runs on a party's machine in every round.

Functions of a frozen `FedCTPlan`: `party_round` fits the round's models of many
parties in one batch and returns their uploads; `share_labels` is the bit-flip mechanism
(`TeacherVotes` adds Gaussian noise to the vote counts of the party's teachers).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from .._engine._compat import num_samples
from .._deployment._upload import PartyUpload
from .._engine._class_codes import ClassCodeModel
from .._engine._context import Message, PartyRows
from .._engine._class_codes import code_dtype
from .._engine._fitting import Task, TierJob, fit_clones
from .._engine._rows import StackedRows, take_rows
from .._engine._seeds import derived_random_state, draw_seeds
from .._engine._voting import count_votes
from .._privacy._bit_flips import bit_flip_probability
from .._privacy._mechanisms import BitFlips, add_noise
from ._payloads import FedCTUpload, fedct_message
from ._plan import FedCTPlan
from ._sums import party_sums


def instructions(message: Message | None, n_public: int) -> tuple[np.ndarray, int]:
    """What the server's `message` asks the parties to fit: the consensus labels (codes,
    -1 for none) and the round; round 0 without consensus where there is no message."""
    if message is None:
        return np.full(n_public, -1), 0
    return np.asarray(fedct_message(message)["consensus"]), int(message.manifest["round"])


class FedCTParty:
    """A party's step of a FedCT round: its model on its rows plus the consensus-labelled
    public rows, and its (bit-flipped) labels of the public set.

    Stateless across rounds: the draws of round ``r`` depend only on the party's stream
    and ``r``, so that a party's machine can run each round as a separate command.
    `FedCTClassifier.fit_party` runs one party's; ``fit`` runs every party's, their
    models of a round in one flat parallel batch (`party_round`).
    """

    def __init__(self, plan: FedCTPlan, party: Any, estimator: Any, rows: np.ndarray,
                 y: np.ndarray, random_state: np.random.RandomState) -> None:
        self.plan, self.party, self.estimator, self.rows, self.y = (
            plan, party, estimator, rows, y
        )
        (self.base_seed,) = draw_seeds(random_state, 1)
        votes = plan.teacher_votes
        # TeacherVotes: disjoint parts, so that one example is in one teacher
        self.teacher_rows: list[np.ndarray] = [] if votes is None else np.array_split(
            random_state.permutation(rows), min(votes.n_teachers, len(rows)))
        self.model: ClassCodeModel | None = None
        self.round: int | None = None

    def round_seeds(self, round_: int) -> np.ndarray:
        """The seeds of the round's model and teachers; the round's noise follows in
        their stream."""
        self._round_rng = derived_random_state(int(self.base_seed), "round", round_)
        return draw_seeds(self._round_rng, 1 + len(self.teacher_rows))

    def tasks(self, consensus: np.ndarray, public_rows: np.ndarray) -> list[Task]:
        """The round's model on the party's rows, and its teachers on their parts, each
        with the consensus-labelled public rows."""
        labelled = consensus >= 0
        names = [f"party {self.party!r}"] + [f"party {self.party!r}, teacher {index + 1}"
                                             for index in range(len(self.teacher_rows))]
        return [Task(self.estimator, np.concatenate([self.y[rows], consensus[labelled]]),
                     np.concatenate([rows, public_rows[labelled]]), name=name)
                for rows, name in zip([self.rows, *self.teacher_rows], names)]

    def fitted(self, models: list[ClassCodeModel], predictions: np.ndarray,
               accuracy: float, round_: int, n_classes: int) -> None:
        """Keep the round's model and training accuracy, and what the party shares: its
        labels (bit-flipped with `BitFlips`) or its teachers' noisy vote counts."""
        (self.model, *self.teachers), self.accuracy, self.round = models, accuracy, round_
        votes = self.plan.teacher_votes
        if votes is None:
            (labels,) = predictions
            self.shared = share_labels(self.plan.privacy, labels, n_classes,
                                       self.plan.sensitivity(len(labels)),
                                       self._round_rng).astype(code_dtype(n_classes))
        else:
            counts = count_votes(predictions[1:], n_classes).astype(float)
            self.shared = add_noise(counts, noise="gaussian",
                                    gamma=1 / self.plan.vote_sigma(len(counts)),
                                    random_state=self._round_rng)

    @property
    def released(self) -> np.ndarray | None:
        """What the party shares of its round: its labels (or vote counts); None in a
        round the server will not vote on (the last of `n_rounds`): what it does not use
        is not released."""
        assert self.round is not None, "upload before fitted"
        return self.shared if self.round < self.plan.n_rounds else None

    def upload(self, manifest: dict[str, Any], done: bool, with_model: bool,
               n_classes: int) -> PartyUpload:
        """In the sum, the round's training accuracy and, unless the server's message
        said `done`, its labels (or vote counts, `released`; `_sums.party_sums`); in the
        clear, the model itself if `with_model`."""
        assert self.model is not None, "upload before fitted"
        payload = FedCTUpload(model=self.model.estimator if with_model else None,
                              codes=self.model.codes if with_model else None)
        shared = None if done else self.released
        return PartyUpload(manifest=dict(manifest), payload=dict(
            payload, sums=party_sums(self.plan, shared, self.accuracy, n_classes)))


def party_round(plan: FedCTPlan, parties: Sequence[FedCTParty], data: PartyRows, root: int,
                message: Message | None, manifests: list[dict[str, Any]],
                share_model: bool = True) -> list[PartyUpload]:
    """The round `message` asks for (round 0 without one): every party's model, and
    teachers with `TeacherVotes`, on its rows plus the consensus-labelled public rows,
    in one flat parallel batch, and its upload, with its model in the final round (the
    message says done) if `share_model`.

    Parties that fit this very round already (in ``fit``, where the last round's models
    are final) are not fit again.
    """
    n_rows, n_public, n_classes = len(data.y), num_samples(data.X_public), len(data.classes)
    consensus, round_ = instructions(message, n_public)
    if any(party.round != round_ for party in parties):
        public_rows = n_rows + np.arange(n_public)
        tasks = [party.tasks(consensus, public_rows) for party in parties]
        # the teachers vote on the queries only; without them, every model labels all
        X_predict = (data.X_public if plan.teacher_votes is None
                     else take_rows(data.X_public, plan.queries(n_public, root)))
        fits = fit_clones(
            [task for party_tasks in tasks for task in party_tasks],
            # the parties' rows, then the public rows: tasks index one matrix
            TierJob(StackedRows(data.X, data.X_public), n_classes, X_predict=X_predict,
                    score_training=True),
            np.concatenate([party.round_seeds(round_) for party in parties]),
            tier=f"local models, round {round_}",
            **plan.clone_fitting,
        )
        start = 0
        for party, party_tasks in zip(parties, tasks):
            group = slice(start, start + len(party_tasks))
            start = group.stop
            party.fitted(fits.models[group], fits.predictions[group],
                         fits.training_accuracy[group.start], round_, n_classes)
    done = message is not None and message.manifest["done"]
    return [party.upload(manifest, done, done and share_model, n_classes)
            for party, manifest in zip(parties, manifests)]


def share_labels(privacy: BitFlips | None, predictions: np.ndarray, n_classes: int,
                 sensitivity: float | None, rng: np.random.RandomState) -> np.ndarray:
    """What a party sends: its labels, through bit-flip noise with `privacy`
    (`BitFlips`, or None for none).

    Returns class codes of shape (n_public,); ``-1`` where a noisy one-hot row does
    not hold exactly one 1 (an abstention).
    """
    if privacy is None:
        return predictions
    one_hot = predictions[..., None] == np.arange(n_classes)
    flip = rng.random_sample(one_hot.shape) < bit_flip_probability(privacy.epsilon,
                                                                   sensitivity)
    noisy = one_hot ^ flip
    return np.where(noisy.sum(axis=-1) == 1, noisy.argmax(axis=-1), -1)
