"""What the algorithm's steps are handed (see `skfedkt._base.BaseFederatedClassifier`):
one context object per side instead of a row of positional arguments, and the named
result of a party step."""

from dataclasses import dataclass, replace
from typing import Any, NamedTuple


class _Context:
    def with_message(self, message):
        """This context with the server's message `message`."""
        return replace(self, message=message)

    def with_plan(self, plan):
        """This context for another algorithm's plan (FedAvg's first round runs that
        algorithm's steps)."""
        return replace(self, plan=plan)


@dataclass(frozen=True)
class PartyContext(_Context):
    """What a party step works with: every party's in `fit`, one party's on its own
    machine (`fit_party`).

    Attributes
    ----------
    plan : Plan
        The algorithm's frozen plan (``_plan_type.of(estimator)``).
    data : FederatedData or PartyData
        The rows of the parties the step runs: ``X``, ``y`` (class codes), ``classes``,
        ``parties``, ``party_rows`` and ``X_public`` (None where there is none).
    root : int
        The root seed every derived stream starts from.
    manifests : list of dict
        Each party's manifest, aligned with ``data.parties``.
    message : PartyUpload or None
        Algorithms with rounds: the server's message of the previous round; None in
        round 0 and for one-round algorithms.
    share_model : bool
        Algorithms with rounds: whether the final round's upload carries the party's
        own model.
    """

    plan: Any
    data: Any
    root: int
    manifests: list
    message: Any = None
    share_model: bool = True

    @property
    def X_public(self):
        """The agreed public rows (None where there is none)."""
        return self.data.X_public

    def answering(self, message):
        """This context for the round the server's `message` asks for (round 0 where
        there is none): the message, and each party's manifest with that ``round``,
        which its upload answers."""
        round_ = 0 if message is None else int(message.manifest["round"])
        return replace(self, message=message,
                       manifests=[dict(manifest, round=round_) for manifest in self.manifests])


@dataclass(frozen=True)
class ServerContext(_Context):
    """What a server step (a round, the last step, an upload's checks) works with.

    Attributes
    ----------
    plan : Plan
        The algorithm's frozen plan.
    X_public : array-like or None
        The agreed public rows; None where the algorithm uses none.
    root : int
        The root seed every derived stream starts from.
    classes : ndarray or None
        The agreed classes; None before the uploads said them.
    message : PartyUpload or None
        Algorithms with rounds: the server's message of the previous round (in
        `server_round`) or its last one (in `fit_server`).
    manifest : dict or None
        In a deployed `server_round`: what every party's manifest is expected to say,
        which the round's message repeats to the parties; None in `fit`.
    deployed : bool
        Whether the uploads were read from files (`fit_server`, `server_round`), whose
        manifests are their parties' claims, rather than made in `fit` from the pooled
        rows.
    """

    plan: Any
    X_public: Any
    root: int
    classes: Any = None
    message: Any = None
    manifest: Any = None
    deployed: bool = False


class PartyStepResult(NamedTuple):
    """What a party step returns."""

    #: one `PartyUpload` per party, what each sends the server
    uploads: list
    #: what the server step may reuse in the same process (`fit`), or None
    reused: Any = None
