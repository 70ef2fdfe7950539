"""What the FedAvg server sends back, typed so that every key is checked: the payload of
its message, built as ``dict(FedAvgMessage(...))`` and read through `fedavg_message`. A
party sends nothing in the clear: its weights go in the sum (`_sums`); with a one-shot
first round, round 0's uploads are that algorithm's.
"""

from __future__ import annotations

from typing import TypedDict, cast

import numpy as np

from .._engine._context import Message


class FedAvgMessage(TypedDict):
    """The server's message of a FedAvg round."""

    #: the global weights every party starts the next round from (the model once done)
    weights: list[np.ndarray]


def fedavg_message(message: Message) -> FedAvgMessage:
    """`message`'s payload, read as the FedAvg server's."""
    return cast(FedAvgMessage, message.payload)
