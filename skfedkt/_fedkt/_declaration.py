"""FedKT on the command line: its flags, and the configurations ``skfedkt run``
compares (the default, without the final model, the paper's, and PATE)."""

import argparse

from .._privacy._mechanisms import PartyNoise, ServerNoise
from .._registry import Algorithm, Method, OptionError, fraction, positive, register
from ._classifier import FedKTClassifier

# the noise flags' defaults: at L0 a flag given another value means nothing
NOISE_FLAGS = {"gamma": 0.05, "noise": "laplace", "query_fraction": 1.0}
_NOISE_AT = {"L1": ServerNoise, "L2": PartyNoise}


def _teachers(text):
    if text == "auto":
        return text
    try:
        return positive(int)(text)
    except argparse.ArgumentTypeError:
        raise argparse.ArgumentTypeError(f"must be 'auto' or a number > 0, got {text!r}") \
            from None


def add_options(group):
    group.add_argument("--students", type=positive(int), default=2,
                       help="students per party (the paper's s: partitions of its rows)")
    group.add_argument("--teachers", type=_teachers, default="auto",
                       help="teachers per student, each on a disjoint subset of the party's "
                       "rows (the paper's t), or 'auto': from 3 to 5 by the party's rows "
                       "(5 with hard votes or privacy)")
    group.add_argument("--voting", choices=["soft", "hard"], default="soft",
                       help="FedKT's votes: class probabilities (soft) or the paper's "
                       "hard votes")
    group.add_argument("--privacy-level", choices=["L0", "L1", "L2"], default="L0",
                       help="L1: Laplace noise at the server (party-level DP); L2: in the "
                       "parties' teacher votes (example-level DP)")
    group.add_argument("--gamma", type=positive(float), default=NOISE_FLAGS["gamma"],
                       help="inverse noise scale (Laplace scale, Gaussian std: 1/gamma): "
                       "larger is less noise, larger epsilon")
    group.add_argument("--noise", choices=["laplace", "gaussian"],
                       default=NOISE_FLAGS["noise"],
                       help="noise on the counts at L1/L2: the paper's Laplace, or Gaussian "
                       "(GNMax) with exact composition")
    group.add_argument("--query-fraction", type=fraction(closed=True),
                       default=NOISE_FLAGS["query_fraction"],
                       help="share of the public set the noisy tier labels")


def options(args):
    if args.privacy_level == "L0":
        pointless = ["--" + name.replace("_", "-") for name, default in NOISE_FLAGS.items()
                     if getattr(args, name) != default]
        if pointless:
            raise OptionError(f"{', '.join(pointless)} set the noise of --privacy-level L1 "
                              "or L2; at L0 no noise is added")
        privacy = None
    else:
        privacy = _NOISE_AT[args.privacy_level](gamma=args.gamma, noise=args.noise,
                                                query_fraction=args.query_fraction)
    return dict(n_students=args.students, n_teachers=args.teachers, voting=args.voting,
                privacy=privacy)


def _fedkt(distill=True, voting=None):
    def make(estimator, options, common):
        own = dict(options["fedkt"], **({} if voting is None else {"voting": voting}))
        return FedKTClassifier(estimator, **own, distill=distill, **common)

    return make


register(Algorithm(
    name="fedkt", estimator_class=FedKTClassifier, title="FedKT", listed=10,
    add_options=add_options, options=options,
    accountant="FedKT the smaller of the data-dependent moments accountant and the "
    "data-independent bounds",
    flags={"n_teachers": "--teachers"},
    methods=(
        Method("fedkt", "FedKT, skfedkt's default (one round, two-tier knowledge transfer, "
               "soft votes)", _fedkt(), by_default=True),
        Method("fedkt-undistilled", "FedKT without the final model: the server's pooled "
               "vote of the students predicts (distill=False)", _fedkt(distill=False)),
        Method("fedkt-paper", "FedKT exactly as in the paper (hard votes, 5 teachers per "
               "partition)", _fedkt(voting="hard"), by_default=True),
        Method("pate", "PATE: the paper's FedKT with one party holding every row (not "
               "federated)", _fedkt(voting="hard"), by_default=True, one_party=True),
    ),
))
