"""What crosses in FedCT, field by field: the payloads of a party's upload and of the
server's message, typed so that every key is checked.

A payload is built as ``dict(FedCTUpload(...))``: the TypedDict checks its keys, and
`PartyUpload` holds a plain dict (skops writes it as one). It is read through
`fedct_upload` or `fedct_message`.
"""

from __future__ import annotations

from typing import Any, TypedDict, cast

import numpy as np

from .._engine._context import Message


class FedCTUpload(TypedDict):
    """What a FedCT party sends in the clear in one round: its model, in the final
    round. What it shares (its labels, or its teachers' noisy vote counts) goes in the
    sum (`_sums`)."""

    #: in the final round, if the party shares it: its model (None otherwise)
    model: Any
    #: the class codes of that model's outputs (None without a model)
    codes: np.ndarray | None


class FedCTMessage(TypedDict):
    """The server's message of a FedCT round."""

    #: the consensus codes of every public row the parties learn next (-1: none)
    consensus: np.ndarray
    #: the consensus of the round just voted, which the final model reports
    last_consensus: np.ndarray


def fedct_upload(upload: Message) -> FedCTUpload:
    """`upload`'s payload, read as a FedCT party's."""
    return cast(FedCTUpload, upload.payload)


def fedct_message(message: Message) -> FedCTMessage:
    """`message`'s payload, read as the FedCT server's."""
    return cast(FedCTMessage, message.payload)
