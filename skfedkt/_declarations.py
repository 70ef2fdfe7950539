"""What an algorithm class declares beyond its hooks: what crosses and how it is checked
(`Uploads`, with its fields, `InClear` and `InSum`), what it lets out (`Releases`), and
the constructor parameters the base reads."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Generic

import numpy as np

from ._deployment._channel import Channel
from ._deployment._fields import Field, InClear, InSum, needed_party_by_party
from ._deployment._received import UploadChecker
from ._deployment._upload import PartyUpload
from ._engine._context import CheckContext, PlanT, ServerContext
from ._privacy._release import Release

__all__ = ["InClear", "InSum", "Releases", "Uploads"]


@dataclass(frozen=True)
class Uploads(Generic[PlanT]):
    """What crosses between an algorithm's parties and its server, as its class declares
    it (``_uploads = Uploads(check=..., sent_bytes=..., fields=...)``): every field a
    party sends, in the clear or in the sum; how the receiving side checks each file's
    algorithm fields; and what a party sent in `fit`.

    Each check is a function of the receiving side's `CheckContext` that returns a
    function of one upload's `UploadChecker` (``skfedkt/_deployment/_received.py``):
    the file is read, bounded and unpacked below the algorithm, and the check reads its
    fields through the checker, whose every refusal names the party, the file and the
    field. The base checks the declared `fields` itself: a withheld one sent in the
    clear under secure aggregation, and every sum (its name, kind and bound)."""

    check: Callable[[ServerContext[PlanT], bool], Callable[[UploadChecker], Any]]
    """``check(context, final)``: the check of a party's upload, on the server as each
    is read; `final`: whether it is the upload of the last step (`fit_server`)."""
    sent_bytes: Callable[[Any], np.ndarray]
    """``sent_bytes(estimator)``: what each party sent in `fit`, aligned with
    ``parties_``, from the fitted attributes (when ``upload_bytes_`` is first read)."""
    message_check: Callable[[CheckContext[PlanT]], Callable[[UploadChecker], Any]] | None = None
    """With rounds: ``message_check(context)``, the check of the server's message as a
    party reads it."""
    fields: tuple[Field, ...] = ()
    """Every field a party step writes beyond the manifest's agreed ones, declared once:
    `InClear` (its manifest or its payload) or `InSum` (under the payload's
    ``"sums"``, which the server receives only as their total). An algorithm that
    declares no `InSum` runs without secure aggregation only."""
    party_weights: Callable[[PlanT, Sequence[Any], np.ndarray, bool], np.ndarray] | None = None
    """``party_weights(plan, parties, rows, claimed)``: each party's weight in the sums,
    in [0, 1], from every party's rows (`claimed`: read from their manifests, where
    the weights may warn naming `parties`); the weighted `InSum` fields are scaled by
    it before they are added (None: one each)."""
    consistent: Callable[[PlanT, dict[str, Any], dict[str, Any]], str | None] | None = None
    """``consistent(plan, manifest, sums)``: why one party's sums, each valid alone, are
    not what an honest party of that manifest computes (a term that is not a function
    of its others, counts other than its manifest's), or None. The party checks its own
    before sending, and the server each party's where it sees them."""
    refusal: Callable[[PlanT, bool], str | None] = lambda plan, secure: None
    """``refusal(plan, secure)``: why the plan cannot run with secure aggregation on
    (`secure`) or off, beyond the withheld fields it needs, in words that end a
    sentence; None where it can."""

    channel_of: Callable[[PlanT], Channel] | None = None
    """For an algorithm whose fields depend on its plan (FedAvg, whose first round may
    be another algorithm's: its fields too): ``channel_of(plan)``; None: the channel of
    `fields` and `party_weights`."""

    def channel(self, plan: PlanT) -> Channel:
        """What the parties send under `plan`: its fields and the parties' weights."""
        if self.channel_of is not None:
            return self.channel_of(plan)
        return Channel(tuple(self.fields), self.party_weights, self.consistent)

    def why_not(self, plan: PlanT, secure: bool) -> str | None:
        """Why `plan` cannot run with secure aggregation on (`secure`) or off, in words
        that end a sentence (`refusal`, then under it a withheld field the plan needs,
        or no field in the sum at all); None where it can."""
        why = self.refusal(plan, secure)
        if why is not None or not secure:
            return why
        fields = self.channel(plan).fields
        if not any(isinstance(field, InSum) for field in fields):
            return "it declares no fields in the sum"
        return needed_party_by_party(fields, plan)

    def refuse_in_mode(self, name: str, plan: PlanT, secure: bool) -> None:
        """Refuse the class `name`'s `plan`, before any work, where it cannot run with
        secure aggregation on (`secure`) or off (`why_not`): the secure fit gives the
        plain fit's model, or is refused, naming the parameter setting."""
        why = self.why_not(plan, secure)
        if why is None:
            return
        mode = "under" if secure else "without"
        remedy = ("Or turn it off (skfedkt.set_config(secure_aggregation=False))" if secure
                  else "Or turn it on (skfedkt.set_config(secure_aggregation=True))")
        raise ValueError(f"{name} cannot run {mode} secure_aggregation: {why}. {remedy}.")


@dataclass(frozen=True)
class Releases:
    """What an algorithm lets out, as its class declares it (``_releases =
    Releases(...)``), for `skfedkt.privacy.membership_audit` and
    `skfedkt.privacy.party_membership_audit`: lists of `Release`."""

    of_fit: Callable[[Any], list[Release]]
    """``of_fit(estimator)``: what the fitted model lets out (each party's upload, the
    final model)."""
    of_upload: Callable[[Any, PartyUpload, int], list[Release]]
    """``of_upload(estimator, upload, n_classes)``: what one party's upload lets out."""


# what a concrete algorithm class declares beyond its hooks
_DECLARATIONS = ("_plan_type", "_uploads", "_releases")
# the constructor parameters the base class, the command line and the Flower apps read
# (the command line passes the base model first, and n_jobs, random_state, verbose)
_COMMON_PARAMETERS = ("estimator", "n_jobs", "random_state", "verbose")
