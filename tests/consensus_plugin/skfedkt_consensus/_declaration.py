"""The consensus distillation on the command line: a --rounds flag, which FedCT also
declares, and its configuration in ``skfedkt run``."""

from skfedkt.algorithm import Algorithm, Flag, Method, positive, register

from ._classifier import ConsensusDistillClassifier

ALGORITHM = register(Algorithm(
    name="consensus", estimator_class=ConsensusDistillClassifier,
    title="consensus distillation (DS-FL's shape, a test)", listed=90,
    flags=(Flag("--rounds", "rounds of shared public-set probabilities",
                type=positive(int), default=2, parameter="n_rounds"),),
    methods=(Method(
        "consensus", "consensus distillation: rounds of shared public-set probabilities",
        lambda estimator, options, common: ConsensusDistillClassifier(
            estimator, **options["consensus"], **common)),),
))
