"""FedCT's party step: what runs on a party's machine in every round.

Functions of a frozen `FedCTPlan`: `party_round` fits the round's models of many
parties in one batch and returns their uploads; `share_labels` is the bit-flip mechanism.
"""

import numpy as np

from .._deployment._upload import PartyUpload
from .._engine._fitting import Task, code_dtype, fit_clones
from .._engine._seeds import derived_random_state, draw_seeds
from .._privacy._accounting import bit_flip_probability


class FedCTParty:
    """A party's step of a FedCT round: its model on its rows plus the consensus-labelled
    public rows, and its (bit-flipped) labels of the public set.

    Stateless across rounds: the draws of round ``r`` depend only on the party's stream
    and ``r``, so that a party's machine can run each round as a separate command.
    `FedCTClassifier.fit_party` runs one party's; ``fit`` runs every party's, their
    models of a round in one flat parallel batch (`party_round`).
    """

    def __init__(self, plan, party, estimator, rows, y, random_state):
        self.plan, self.party, self.estimator, self.rows, self.y = (
            plan, party, estimator, rows, y
        )
        (self.base_seed,) = draw_seeds(random_state, 1)
        self.model = None

    def round_seed(self, round_):
        """The seed of the round's model; the round's bit flips follow in its stream."""
        self._round_rng = derived_random_state(int(self.base_seed), "round", round_)
        (seed,) = draw_seeds(self._round_rng, 1)
        return seed

    def task(self, consensus, public_rows):
        labelled = consensus >= 0
        return Task(self.estimator, np.concatenate([self.y[self.rows], consensus[labelled]]),
                    np.concatenate([self.rows, public_rows[labelled]]))

    def upload(self, model, predictions, accuracy, round_, n_classes, final, manifest):
        """The round's labels and training accuracy; the model itself if `final`."""
        self.model = model
        labels = share_labels(self.plan.privacy, predictions, n_classes,
                              self.plan.sensitivity(len(predictions)), self._round_rng)
        return PartyUpload(
            manifest=dict(manifest, round=int(round_), training_accuracy=float(accuracy)),
            payload={
                "labels": labels.astype(code_dtype(n_classes)),
                "model": model.estimator if final else None,
                "codes": model.codes if final else None,
            },
        )


def party_round(plan, parties, X_all, public_rows, consensus, round_, X_public, n_classes,
                *, final, manifest=None):
    """Every party's model of `round_` (one flat parallel batch), and its upload."""
    fits = fit_clones(
        [party.task(consensus, public_rows) for party in parties],
        X_all,
        n_classes=n_classes,
        seeds=[party.round_seed(round_) for party in parties],
        X_predict=X_public,
        score_training=True,
        **plan.clone_fitting,
    )
    return [
        party.upload(model, labels, accuracy, round_, n_classes, final,
                     manifest or dict(party=party.party, n_rows=len(party.rows)))
        for party, model, labels, accuracy in zip(
            parties, fits.models, fits.predictions, fits.training_accuracy
        )
    ]


def share_labels(privacy, predictions, n_classes, sensitivity, rng):
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
