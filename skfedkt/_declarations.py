"""What an algorithm class declares beyond its hooks: how what crosses is checked
(`Uploads`), what it lets out (`Releases`), and the constructor parameters the base reads."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Generic

import numpy as np

from ._deployment._received import UploadChecker
from ._deployment._upload import PartyUpload
from ._engine._context import CheckContext, PlanT, ServerContext
from ._privacy._release import Release


@dataclass(frozen=True)
class Uploads(Generic[PlanT]):
    """What crosses between an algorithm's parties and its server, as its class declares
    it (``_uploads = Uploads(check=..., sent_bytes=...)``): how the receiving side checks
    each file's algorithm fields, and what a party sent in `fit`.

    Each check is a function of the receiving side's `CheckContext` that returns a
    function of one upload's `UploadChecker` (``skfedkt/_deployment/_received.py``):
    the file is read, bounded and unpacked below the algorithm, and the check reads its
    fields through the checker, whose every refusal names the party, the file and the
    field."""

    check: Callable[[ServerContext[PlanT], bool], Callable[[UploadChecker], Any]]
    """``check(context, final)``: the check of a party's upload, on the server as each
    is read; `final`: whether it is the upload of the last step (`fit_server`)."""
    sent_bytes: Callable[[Any], np.ndarray]
    """``sent_bytes(estimator)``: what each party sent in `fit`, aligned with
    ``parties_``, from the fitted attributes (when ``upload_bytes_`` is first read)."""
    message_check: Callable[[CheckContext[PlanT]], Callable[[UploadChecker], Any]] | None = None
    """With rounds: ``message_check(context)``, the check of the server's message as a
    party reads it."""


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


@dataclass(frozen=True)
class SecureSums(Generic[PlanT]):
    """How an algorithm runs under secure aggregation, as its class declares it
    (``_secure_sums = SecureSums(...)``; None, the default: it does not).

    Under ``skfedkt.set_config(secure_aggregation=True)`` its party step (whose
    context says ``secure``) puts what the server needs only in sum into each upload's
    payload under ``"sums"``: named arrays, the same names and shapes at every party,
    of integers or of floats within `float_bound`. The base replaces them, before any
    server step, by their secure sum (``ServerContext.sums``), and hands the server
    step no ``reused``."""

    refusal: Callable[[PlanT], str | None]
    """``refusal(plan)``: why the plan cannot run on sums alone, in words that end a
    sentence, or None where it can."""
    float_bound: Callable[[PlanT, int], float] = lambda plan, max_rows: 1.0
    """``float_bound(plan, max_rows)``: the largest magnitude of any float a party
    sums, where no party holds more than `max_rows` rows."""


def refuse_insecure(name: str, secure_sums: SecureSums[Any] | None, plan: Any) -> None:
    """Under secure aggregation, refuse the class `name` where it cannot run on sums:
    an algorithm or option that needs more than sums."""
    why = ("it declares no secure sums" if secure_sums is None
           else secure_sums.refusal(plan))
    if why is not None:
        raise ValueError(f"{name} cannot run under secure_aggregation: {why}. Or turn it off "
                         "(skfedkt.set_config(secure_aggregation=False)).")


# what a concrete algorithm class declares beyond its hooks
_DECLARATIONS = ("_plan_type", "_uploads", "_releases")
# the constructor parameters the base class, the command line and the Flower apps read
# (the command line passes the base model first, and n_jobs, random_state, verbose)
_COMMON_PARAMETERS = ("estimator", "n_jobs", "random_state", "verbose")
