"""How many parameters each estimator takes, and how many of FedKT's discrete option
combinations it accepts: every value of every discrete switch (the privacy mechanism,
the votes and their parts, the students' data and labels, distillation), each
combination checked as `fit` checks it before any work.

    python benchmarks/count_options.py

Produces: doc/architecture.rst, "Parameters" (the counts, from its stored results).
"""

import inspect
import itertools

from _common import parser, print_table

from skfedkt import (
    FedCTClassifier,
    FedKTClassifier,
    HardVotes,
    OneShotEnsembleClassifier,
    SoftVotes,
)
from skfedkt._fedkt._plan import FedKTPlan
from skfedkt.privacy import PartyNoise, ServerNoise


def votes():
    for pooling, match_shares, min_public_rows in itertools.product(
            ["auto", "sum", "prior-corrected"], ["auto", True, False], [2000, 0]):
        yield SoftVotes(pooling=pooling, match_shares=match_shares,
                        min_public_rows=min_public_rows)
    for consistent, min_public_rows in itertools.product([True, False], [0, 2000]):
        yield HardVotes(consistent=consistent, min_public_rows=min_public_rows)


def main(argv=None):
    parser(__doc__).parse_args(argv)
    print_table(["estimator", "parameters"], [
        [estimator.__name__, len(inspect.signature(estimator).parameters)]
        for estimator in (FedKTClassifier, FedCTClassifier, OneShotEnsembleClassifier)])
    combinations = list(itertools.product(
        list(votes()), ["public", "party+public"], [None, "students", "all"], [True, False],
        [None, ServerNoise(), PartyNoise()]))
    accepted = 0
    for voting, student_data, soft_labels, distill, privacy in combinations:
        clf = FedKTClassifier(voting=voting, student_data=student_data,
                              soft_labels=soft_labels, distill=distill, privacy=privacy)
        try:
            clf._validate_params()
            FedKTPlan.of(clf)
        except ValueError:
            continue
        accepted += 1
    refused = len(combinations) - accepted
    print_table(["estimator", "discrete combinations", "refused", "refused share",
                 "accepted"],
                [["FedKTClassifier", len(combinations), refused,
                  f"{refused / len(combinations):.0%}", accepted]])


if __name__ == "__main__":
    main()
