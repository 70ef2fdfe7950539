"""What crosses in FedAvg, field by field: the payloads of a party's upload and of the
server's message, typed so that every key is checked.

A payload is built as ``dict(FedAvgUpload(...))``: the TypedDict checks its keys, and
`PartyUpload` holds a plain dict (skops writes it as one). It is read through
`fedavg_upload` or `fedavg_message`. With a one-shot first round, round 0's uploads
are that algorithm's.
"""

from __future__ import annotations

from typing import TypedDict, cast

import numpy as np

from .._engine._context import Message


class FedAvgUpload(TypedDict):
    """A FedAvg party's upload of one round."""

    #: the party's trained weights, one float array per layer's coefficients and
    #: intercepts; None once the server's message said done
    weights: list[np.ndarray] | None


class FedAvgMessage(TypedDict):
    """The server's message of a FedAvg round."""

    #: the global weights every party starts the next round from (the model once done)
    weights: list[np.ndarray]


def fedavg_upload(upload: Message) -> FedAvgUpload:
    """`upload`'s payload, read as a FedAvg party's."""
    return cast(FedAvgUpload, upload.payload)


def fedavg_message(message: Message) -> FedAvgMessage:
    """`message`'s payload, read as the FedAvg server's."""
    return cast(FedAvgMessage, message.payload)
