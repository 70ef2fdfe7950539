"""What runs at the server: each round, the parties' probabilities averaged and
sharpened into the next consensus; after the last, a final model of the consensus."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any


from skfedkt.algorithm import (
    Message,
    PartyUpload,
    ServerContext,
    Task,
    TierJob,
    derived_random_state,
    draw_seeds,
    fit_clones,
)

from ._party import consensus_rows
from ._payloads import ConsensusMessage, message_payload
from ._plan import ConsensusPlan


def server_round(context: ServerContext[ConsensusPlan],
                 uploads: Sequence[Message]) -> PartyUpload:
    """The next round's message: DS-FL's entropy reduction, the mean probabilities
    (from their sum) sharpened by the plan's temperature."""
    mean = context.sums["proba"] / len(uploads)
    sharpened = mean ** (1 / context.plan.temperature)
    consensus = sharpened / sharpened.sum(axis=1, keepdims=True)
    fitted = 0 if context.message is None else int(context.message.manifest["round"])
    return PartyUpload(manifest=dict(round=fitted + 1,
                                     done=fitted + 1 == context.plan.n_rounds),
                       payload=dict(ConsensusMessage(consensus=consensus)))


def server_step(context: ServerContext[ConsensusPlan]) -> dict[str, Any]:
    """The fitted attributes: a final model of the last consensus on the public set."""
    assert context.message is not None  # an algorithm with rounds ends on a message
    consensus = message_payload(context.message)["consensus"]
    public, labels, shares = consensus_rows(context.plan.estimator, consensus)
    seeds = draw_seeds(derived_random_state(context.root, "final model"), 1)
    fits = fit_clones([Task(context.plan.estimator, labels, public, shares,
                            name="the final model")],
                      TierJob(context.X_public, len(context.known_classes)), seeds,
                      tier="final model", **context.plan.clone_fitting)
    return {"_final_model": fits.models[0], "_consensus": consensus,
            "n_rounds_": int(context.message.manifest["round"])}
