"""FedKT on the command line: its flags, and the configurations ``skfedkt run``
compares (the default, without the final model, the paper's, and PATE)."""

from argparse import Namespace
from collections.abc import Callable
from typing import Any

from .._privacy._reports import PrivacyReport
from .._privacy._mechanisms import PartyNoise, ServerNoise
from .._registry import Algorithm, Flag, Method, OptionError, fraction, positive, register
from ._classifier import FedKTClassifier

# the noise flags' defaults: at L0 a flag given another value means nothing
NOISE_FLAGS = {"gamma": 0.05, "noise": "laplace", "query_fraction": 1.0}
_NOISE_AT = {"L1": ServerNoise, "L2": PartyNoise}


def _teachers(text: str) -> int | str:
    if text == "auto":
        return text
    try:
        return positive(int)(text)
    except ValueError:
        raise ValueError(f"must be 'auto' or a number > 0, got {text!r}") from None


FLAGS = (
    Flag("--students", "students per party (the paper's s: partitions of its rows)",
         type=positive(int), default=2, parameter="n_students"),
    Flag("--teachers", "teachers per student, each on a disjoint subset of the party's "
         "rows (the paper's t), or 'auto': from 3 to 5 by the party's rows (5 with hard "
         "votes or privacy)", type=_teachers, default="auto", parameter="n_teachers"),
    Flag("--voting", "FedKT's votes: class probabilities (soft) or the paper's hard votes",
         choices=("soft", "hard"), default="soft", parameter="voting"),
    Flag("--privacy-level", "L1: Laplace noise at the server (party-level DP); L2: in the "
         "parties' teacher votes (example-level DP)", choices=("L0", "L1", "L2"),
         default="L0"),
    Flag("--gamma", "inverse noise scale (Laplace scale, Gaussian std: 1/gamma): larger "
         "is less noise, larger epsilon", type=positive(float),
         default=NOISE_FLAGS["gamma"]),
    Flag("--noise", "noise on the counts at L1/L2: the paper's Laplace, or Gaussian "
         "(GNMax) with exact composition", choices=("laplace", "gaussian"),
         default=NOISE_FLAGS["noise"]),
    Flag("--query-fraction", "share of the public set the noisy tier labels",
         type=fraction(closed=True), default=NOISE_FLAGS["query_fraction"]),
)


def options(values: Namespace) -> dict[str, Any]:
    """FedKT's privacy, from --privacy-level and its noise flags."""
    if values.privacy_level == "L0":
        pointless = ["--" + name.replace("_", "-") for name, default in NOISE_FLAGS.items()
                     if getattr(values, name) != default]
        if pointless:
            raise OptionError(f"{', '.join(pointless)} set the noise of --privacy-level L1 "
                              "or L2; at L0 no noise is added")
        return dict(privacy=None)
    return dict(privacy=_NOISE_AT[values.privacy_level](
        gamma=values.gamma, noise=values.noise, query_fraction=values.query_fraction))


def _fedkt(distill: bool = True,
           voting: str | None = None) -> Callable[..., FedKTClassifier]:
    def make(estimator: Any, options: dict[str, dict[str, Any]],
             common: dict[str, Any]) -> FedKTClassifier:
        own = dict(options["fedkt"], **({} if voting is None else {"voting": voting}))
        return FedKTClassifier(estimator, **own, distill=distill, **common)

    return make


register(Algorithm(
    name="fedkt", estimator_class=FedKTClassifier, title="FedKT", listed=10,
    flags=FLAGS, options=options,
    accountant="FedKT the smaller of the data-dependent moments accountant and the "
    "data-independent bounds",
    model_types=(PrivacyReport,),  # every fit reports, L0 too
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
