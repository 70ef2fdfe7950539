"""DS-FL on the command line: its flags and its configuration in ``skfedkt run``."""

from argparse import Namespace
from typing import Any

import numpy as np

from .._engine._context import Message
from .._registry import Algorithm, Flag, Method, positive, register
from ._classifier import DSFLClassifier
from ._payloads import dsfl_upload

FLAGS = (
    Flag("--rounds", "largest number of rounds of soft labels", type=positive(int),
         default=5, parameter="n_rounds"),
    Flag("--temperature", "the soft labels are the parties' averaged probabilities "
         "raised to 1/temperature (1: as they are; below 1 sharpens them)",
         type=positive(float), default=1.0, parameter="temperature"),
    Flag("--final", "the federation's model: the parties' vote (their models sent at the "
         "end), or one model distilled on the public rows with the last soft labels (what "
         "runs under secure aggregation)", choices=("vote", "distilled"), default="vote"),
)


def options(values: Namespace) -> dict[str, Any]:
    """DS-FL's final model, from --final."""
    return dict(distill=values.final == "distilled")


def describe_upload(upload: Message) -> str:
    """The deployment commands' words for an upload: probabilities, and in the final
    step the party's model when it shares it."""
    return "probabilities" + (" and final model"
                              if dsfl_upload(upload).get("model") is not None else "")


def describe_round(message: Message) -> str:
    """What a round changed: how far the soft labels moved."""
    history = message.manifest["history"]
    return (f"the soft labels moved {history[-1]['soft_labels_changed']:.4f}; "
            if history else "")


def unsettled_share(clf: DSFLClassifier) -> float:
    """How far the last round moved the soft labels, where the rounds stopped at their
    cap before they settled."""
    if clf.n_rounds_ < clf.n_rounds or not clf.history_:
        return np.nan
    changed = clf.history_[-1]["soft_labels_changed"]
    return changed if changed > clf.tol else np.nan


register(Algorithm(
    name="dsfl", estimator_class=DSFLClassifier, title="DS-FL", listed=25,
    flags=FLAGS, options=options, describe_upload=describe_upload,
    describe_round=describe_round, unsettled_share=unsettled_share,
    unsettled_what="its soft labels' probability mass",
    accountant="DS-FL none: it has no private level",
    methods=(Method(
        "dsfl", "DS-FL: rounds of soft labels on the public set, a model per party",
        lambda estimator, options, common: DSFLClassifier(estimator, **options["dsfl"],
                                                          **common),
        by_default=True),),
))
