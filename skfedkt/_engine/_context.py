"""What the algorithm's steps are handed (see `skfedkt._base.BaseFederatedClassifier`):
one context object per side instead of a row of positional arguments, and the named
result of a party step."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from collections.abc import Sequence
from typing import Any, Generic, NamedTuple, Protocol, TypeVar

import numpy as np

from ._plan import Plan

PlanT = TypeVar("PlanT", bound=Plan)
_PlanT_co = TypeVar("_PlanT_co", bound=Plan, covariant=True)
_ContextT = TypeVar("_ContextT", bound="_Context")


class Message(Protocol):
    """What crosses between a party and the server (``skfedkt.PartyUpload``): a manifest
    of plain values and the algorithm's payload."""

    @property
    def manifest(self) -> dict[str, Any]: ...

    @property
    def payload(self) -> dict[str, Any]: ...


class Party(Protocol):
    """The state of one party that an algorithm's ``_parties`` hook makes and its party
    step turns into an upload: whatever else it holds, it can make the party's
    `Message` (each algorithm's ``upload`` takes the arguments its step has)."""

    def upload(self, *args: Any, **kwargs: Any) -> Message: ...


class CheckContext(Protocol[_PlanT_co]):
    """What the checks of what crosses read, on either side: the server checks each
    party's upload with its `ServerContext`, a party the server's message with its
    `PartyContext` (``Uploads.check``, ``Uploads.message_check``)."""

    @property
    def plan(self) -> _PlanT_co: ...

    @property
    def X_public(self) -> Any: ...

    @property
    def root(self) -> int: ...

    @property
    def classes(self) -> np.ndarray | None: ...


class PartyRows(Protocol):
    """The rows a party step runs on: every party's in `fit` (`FederatedData`), one
    party's on its own machine (the protocol's ``PartyData``)."""

    @property
    def X(self) -> Any: ...

    @property
    def y(self) -> np.ndarray: ...

    @property
    def classes(self) -> np.ndarray: ...

    @property
    def parties(self) -> list[Any]: ...

    @property
    def party_rows(self) -> list[np.ndarray]: ...

    @property
    def X_public(self) -> Any: ...

    @property
    def pooled(self) -> bool: ...


class _Context:
    def with_message(self: _ContextT, message: Message | None) -> _ContextT:
        """This context with the server's message `message`."""
        return replace(self, message=message)  # type: ignore[type-var]

    def with_plan(self: _ContextT, plan: Plan) -> _ContextT:
        """This context for another algorithm's plan (FedAvg's first round runs that
        algorithm's steps)."""
        return replace(self, plan=plan)  # type: ignore[type-var]


class SumParties(NamedTuple):
    """The parties of a secure sum, as a party step sizes what it sends in it."""

    #: every party of the sum, in the agreed order
    parties: tuple[Any, ...]
    #: each party's rows, aligned with `parties` (manifests say them in the clear)
    party_rows: tuple[int, ...]
    #: the fewest parties whose inputs the sum holds
    threshold: int
    #: the most parties that may collude with the coordinator, against whom the
    #: parties' noise in shares is sized (`DistributedNoise`)
    colluding: int = 0
    #: whether the sum is validated (two aggregators check each party's proofs) rather
    #: than masked
    validated: bool = False

    @property
    def honest_shares(self) -> int:
        """The fewest shares of honest parties a sum holds: `threshold` less
        `colluding`, whose noise shares must carry a mechanism's whole noise."""
        return self.threshold - self.colluding


@dataclass(frozen=True)
class PartyContext(_Context, Generic[PlanT]):
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
    secure : SumParties or None
        Under secure aggregation, the parties of the sum, whose threshold and colluding
        parties size the noise the parties add in shares (`DistributedNoise`); None
        otherwise. The step writes the same uploads either way.
    """

    plan: PlanT
    data: PartyRows
    root: int
    manifests: list[dict[str, Any]]
    message: Message | None = None
    share_model: bool = True
    secure: SumParties | None = None

    @property
    def X_public(self) -> Any:
        """The agreed public rows (None where there is none)."""
        return self.data.X_public

    @property
    def classes(self) -> np.ndarray:
        """The agreed classes."""
        return self.data.classes

    def answering(self, message: Message | None) -> PartyContext[PlanT]:
        """This context for the round the server's `message` asks for (round 0 where
        there is none): the message, and each party's manifest with that ``round``,
        which its upload answers."""
        round_ = 0 if message is None else int(message.manifest["round"])
        return replace(self, message=message,
                       manifests=[dict(manifest, round=round_) for manifest in self.manifests])


@dataclass(frozen=True)
class ServerContext(_Context, Generic[PlanT]):
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
    rounds : tuple of PartyUpload
        In `fit`'s last step: the server's message of every round, which a deployed
        server does not keep (it has its last, `message`); empty elsewhere.
    last_round_uploads : tuple of PartyUpload
        In `fit`'s last step: the parties' uploads that the last message was made from,
        which a deployed server does not keep; empty elsewhere.
    deployed : bool
        Whether the uploads were read from files (`fit_server`, `server_round`), whose
        manifests are their parties' claims, rather than made in `fit` from the pooled
        rows.
    sums : dict
        In each round and the last step: the total over the parties of what their
        uploads of that round held under ``"sums"``, by name, added in the clear or, under
        secure aggregation, by a secure sum (empty before the uploads are read).
    """

    plan: PlanT
    X_public: Any
    root: int
    classes: np.ndarray | None = None
    message: Message | None = None
    manifest: dict[str, Any] | None = None
    rounds: tuple[Message, ...] = ()
    last_round_uploads: tuple[Message, ...] = ()
    deployed: bool = False
    sums: dict[str, np.ndarray] = field(default_factory=dict)

    @property
    def known_classes(self) -> np.ndarray:
        """The agreed classes, which a round and the last step always know (the
        uploads said them)."""
        if self.classes is None:
            raise RuntimeError("The agreed classes are not known before the uploads are "
                               "read.")
        return self.classes


class PartyStepResult(NamedTuple):
    """What a party step returns."""

    #: one `PartyUpload` per party, what each sends the server
    uploads: Sequence[Message]
