"""One-shot ensembles on the command line: their flags, and the two configurations
``skfedkt run`` compares (models chosen by validation, and every party's model)."""

from .._registry import Algorithm, Method, positive, register
from ._classifier import OneShotEnsembleClassifier


def add_options(group):
    group.add_argument("--selection", choices=["all", "cv", "data", "random"], default="cv",
                       help="which local models form the ensemble (the runner's default "
                       "is Guha et al.'s selection by validation; the class's, all)")
    group.add_argument("--n-selected", type=positive(int), default=5,
                       help="ensemble size for cv, data and random selection (the "
                       "runner's 5 suits its few parties; the class's default is 10)")
    group.add_argument("--min-samples", type=positive(int), default=1,
                       help="parties with fewer rows send no model")


def options(args):
    return dict(selection=args.selection, n_selected=args.n_selected,
                min_samples=args.min_samples)


register(Algorithm(
    name="oneshot", estimator_class=OneShotEnsembleClassifier, title="one-shot ensemble",
    listed=30, add_options=add_options, options=options,
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
