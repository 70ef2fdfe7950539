"""What crosses in DS-FL, field by field: the payloads of a party's upload and of the
server's message, typed so that every key is checked.

A payload is built as ``dict(DSFLUpload(...))``: the TypedDict checks its keys, and
`PartyUpload` holds a plain dict (skops writes it as one). It is read through
`dsfl_upload` or `dsfl_message`.
"""

from __future__ import annotations

from typing import Any, TypedDict, cast

import numpy as np

from .._engine._context import Message


class DSFLUpload(TypedDict):
    """What a DS-FL party sends in the clear: its model, in the final step. Its
    probabilities of the public rows go in the sum (`_sums`)."""

    #: in the final step, if the party shares it: its model (None otherwise)
    model: Any
    #: the class codes of that model's outputs (None without a model)
    codes: np.ndarray | None


class DSFLMessage(TypedDict):
    """The server's message of a DS-FL round."""

    #: the soft labels every party learns next: one distribution over the classes per
    #: public row
    soft_labels: np.ndarray
    #: the soft labels of the round just averaged, which a distilled model learns
    last_soft_labels: np.ndarray


def dsfl_upload(upload: Message) -> DSFLUpload:
    """`upload`'s payload, read as a DS-FL party's."""
    return cast(DSFLUpload, upload.payload)


def dsfl_message(message: Message) -> DSFLMessage:
    """`message`'s payload, read as the DS-FL server's."""
    return cast(DSFLMessage, message.payload)
