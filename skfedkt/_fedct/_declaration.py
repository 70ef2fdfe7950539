"""FedCT on the command line: its flags and its configuration in ``skfedkt run``."""

from argparse import Namespace
from typing import Any

import numpy as np

from .._engine._context import Message
from .._privacy._mechanisms import BitFlips, TeacherVotes
from .._registry import Algorithm, Flag, Method, OptionError, positive, register
from ._classifier import FedCTClassifier
from ._payloads import fedct_upload

FLAGS = (
    Flag("--rounds", "largest number of co-training rounds", type=positive(int),
         default=20, parameter="n_rounds"),
    Flag("--dp-epsilon", "per-round epsilon of the bit flips on shared labels; with "
         "--dp-teachers, the budget of the whole fit", type=positive(float)),
    Flag("--dp-sensitivity", "bits one example may change (default: 2 x public rows)",
         type=positive(float)),
    Flag("--dp-teachers", "share the noisy votes of this many disjoint teachers per party "
         "(TeacherVotes) instead of bit-flipped labels", type=positive(int)),
    Flag("--final", "the federation's model: the parties' vote (their models sent at the "
         "end), or one model distilled on the public rows with the last consensus (what "
         "runs under secure aggregation)", choices=("vote", "distilled"), default="vote"),
)


def options(values: Namespace) -> dict[str, Any]:
    """FedCT's final model, from --final, and its privacy: bit flips from --dp-epsilon,
    or the votes of --dp-teachers."""
    return dict(_privacy(values), distill=values.final == "distilled")


def _privacy(values: Namespace) -> dict[str, Any]:
    if values.dp_sensitivity is not None and values.dp_epsilon is None:
        raise OptionError("--dp-sensitivity sets the bit flips of --dp-epsilon; give both, "
                          "or neither")
    if values.dp_teachers is not None and (values.dp_epsilon is None
                                           or values.dp_sensitivity is not None):
        raise OptionError("--dp-teachers shares noisy teacher votes within the budget "
                          "--dp-epsilon, whose sensitivity is bounded by construction: "
                          "give --dp-epsilon, and no --dp-sensitivity")
    if values.dp_epsilon is None:
        return dict(privacy=None)
    if values.dp_teachers is not None:
        return dict(privacy=TeacherVotes(values.dp_epsilon, n_teachers=values.dp_teachers))
    return dict(privacy=BitFlips(values.dp_epsilon, sensitivity=values.dp_sensitivity))


def describe_upload(upload: Message) -> str:
    """The deployment commands' words for an upload: labels, and in the last round the
    party's model when it shares it."""
    return "labels" + (" and final model" if fedct_upload(upload).get("model") is not None
                       else "")


def describe_round(message: Message) -> str:
    """What a round changed: the share of the consensus labels."""
    history = message.manifest["history"]
    return (f"{history[-1]['consensus_changed']:.1%} of the consensus labels changed; "
            if history else "")


def unsettled_share(clf: FedCTClassifier) -> float:
    """The share of consensus labels the last round changed, where the rounds stopped
    at their cap before the consensus settled."""
    if clf.n_rounds_ < clf.n_rounds or not clf.history_:
        return np.nan
    changed = clf.history_[-1]["consensus_changed"]
    return changed if changed > clf.tol else np.nan


register(Algorithm(
    name="fedct", estimator_class=FedCTClassifier, title="FedCT", listed=20,
    flags=FLAGS, options=options, describe_upload=describe_upload,
    describe_round=describe_round, unsettled_share=unsettled_share,
    accountant="FedCT the smaller of pure and RDP composition of its bit flips",
    methods=(Method(
        "fedct", "FedCT: co-training rounds on the public set, a model per party",
        lambda estimator, options, common: FedCTClassifier(estimator, **options["fedct"],
                                                           **common),
        by_default=True),),
))
