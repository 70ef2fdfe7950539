"""One-shot ensembles on the command line: their flags, and the two configurations
``skfedkt run`` compares (models chosen by validation, and every party's model)."""

from .._registry import Algorithm, Flag, Method, positive, register
from ._classifier import OneShotEnsembleClassifier

FLAGS = (
    Flag("--selection", "which local models form the ensemble (the runner's default is "
         "Guha et al.'s selection by validation; the class's, all)",
         choices=("all", "cv", "data", "random"), default="cv", parameter="selection"),
    Flag("--n-selected", "ensemble size for cv, data and random selection (the runner's 5 "
         "suits its few parties; the class's default is 10)", type=positive(int),
         default=5, parameter="n_selected"),
    Flag("--min-samples", "parties with fewer rows send no model", type=positive(int),
         default=1, parameter="min_samples"),
)


register(Algorithm(
    name="oneshot", estimator_class=OneShotEnsembleClassifier, title="one-shot ensemble",
    listed=30, flags=FLAGS,
    methods=(
        Method("oneshot", "one-shot ensemble: the local models of the parties chosen by "
               "validation score",
               lambda estimator, options, common: OneShotEnsembleClassifier(
                   estimator, **options["oneshot"], **common),
               by_default=True),
        Method("ensemble", "every party's own model, their probabilities averaged (no "
               "distillation)",
               lambda estimator, options, common: OneShotEnsembleClassifier(
                   estimator, selection="all", **common),
               by_default=True),
    ),
))
