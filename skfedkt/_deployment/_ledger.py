"""One input, one sum: what a party has helped unmask, kept in a file of its own across
secure sessions, Flower runs and rounds (`InputLedger`).

Secure aggregation protects one sum. Two sums over the same input with other survivors
give away, in their difference, the inputs of the parties in one and not in the other
(So et al., "Securing Secure Aggregation", 2021): a second session or Flower run of the
same round, a round of a federation that leaves a party out, or the same message
replayed under a new round number. So before a party gives its unmasking shares it asks
its ledger, and refuses

- an input it helped unmask before with other survivors, in any session: the input is a
  digest of what the party sums (its rows, the plan, the server's message), not of the
  round number, so a replayed message is the same input;
- a round of a federation (a session) whose survivors are not those of the last round
  it helped unmask, unless the round's sums carry the parties' privacy noise, which the
  accountant counts round by round: without it, a real dropout ends the federation at
  its last complete round.

What stays open, and only noise bounds: sums over correlated inputs (the same rows
under another seed, the next round's labels) with other survivors leak approximately.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from os import PathLike
from pathlib import Path
from typing import Any

import numpy as np

from ._archive import UploadLimits, read_file
from ._local_files import write_atomically
from ._secure_documents import Document, dumps, is_hex32
from ._upload import fingerprint

_FORMAT = "skfedkt input ledger 1"
# a digest of each input, and the survivors of each: a few hundred bytes an entry
_MAX_BYTES = 1 << 28
# what of a party's manifest makes its input: the plan and the agreed data, not the
# round, its name, nor the version of the package
_INPUT_FIELDS = ("algorithm", "params", "classes", "n_features", "feature_names",
                 "public_fingerprint", "n_rows")


def input_digest(X: Any, y: np.ndarray, manifest: Mapping[str, Any],
                 message: Any) -> str:
    """A digest (hex) of what a party sums: its rows `X` and class codes `y`, its
    plan and the agreed data (`manifest`'s fields but the round and the party's name)
    and the server's `message` (its payload; None in round 0)."""
    hashed = hashlib.sha256(fingerprint(X).encode())
    hashed.update(np.ascontiguousarray(y, dtype=np.int64).tobytes())
    hashed.update(json.dumps({key: manifest.get(key) for key in _INPUT_FIELDS},
                             sort_keys=True).encode())
    _update(hashed, None if message is None else message.payload)
    return hashed.hexdigest()


def _update(hashed: Any, value: Any) -> None:
    """Feed `value` (dicts, lists, arrays, scalars) to `hashed`, one way only."""
    if isinstance(value, Mapping):
        hashed.update(b"{")
        for key in sorted(value, key=str):
            hashed.update(repr(key).encode())
            _update(hashed, value[key])
        hashed.update(b"}")
    elif isinstance(value, (list, tuple)):
        hashed.update(b"[")
        for item in value:
            _update(hashed, item)
        hashed.update(b"]")
    elif isinstance(value, np.ndarray):
        hashed.update(repr((value.shape, value.dtype.str)).encode())
        hashed.update(np.ascontiguousarray(value).tobytes())
    else:
        hashed.update(repr(value).encode())


@dataclass(frozen=True)
class InputLedger:
    """What one party has helped unmask, in the file at `path` (mode 0600, written
    atomically): each input's digest with the survivors of its sum, and each session's
    last round with its survivors. Survivors are named by their identity keys, which
    stay the same across sessions.

    Keep one file per party, in its state directory, for every session and Flower run:
    a party that forgets its ledger forgets what it gave away.
    """

    path: str | PathLike[str]

    def admit(self, session: str, round_: int, input_: str, survivors: Sequence[str],
              names: Sequence[Any], noisy: bool) -> None:
        """Record that the party helps unmask round `round_` of `session` (hex), whose
        sum holds its input `input_` (`input_digest`) and those of `survivors`
        (identity keys, hex; `names` in the session's words); refused, naming what it
        saw before, where the same input was unmasked with other survivors, or where
        the last round of `session` had other survivors and the sums carry no noise of
        the parties (`noisy`)."""
        document = self._read()
        survivors = sorted(survivors)
        before = document["inputs"].get(input_)
        if before is not None and before != survivors:
            raise ValueError(
                f"it helped unmask this very input before, in a sum of {len(before)} "
                f"survivors other than these {len(survivors)} ({_names(names)}); the "
                "difference of the two sums would give away the inputs of the parties in "
                "one and not the other. The same rows, plan and server message are one "
                "input, whatever the session or round number.")
        last = document["sessions"].get(session)
        if (last is not None and last["round"] != round_ and last["survivors"] != survivors
                and not noisy):
            raise ValueError(
                f"round {round_}'s survivors are not those of round {last['round']} of "
                f"this session ({_names(names)} now), and within a federation a round's "
                "survivors are the last round's "
                "unless its sums carry the parties' privacy noise: a party left out of one "
                "round would be given away by the two sums. The federation ends at round "
                f"{last['round']}.")
        document["inputs"][input_] = survivors
        document["sessions"][session] = dict(round=round_, survivors=survivors)
        write_atomically(self.path, dumps(document), private=True)

    def _read(self) -> dict[str, Any]:
        """The ledger's document, read as hostile; an empty one where there is no file."""
        if not Path(self.path).exists():
            return dict(format=_FORMAT, inputs={}, sessions={})
        name = f"The input ledger {self.path}"
        reader = Document(name)
        document = reader.parse(read_file(self.path, name, UploadLimits(
            max_file_bytes=_MAX_BYTES)), _MAX_BYTES, _FORMAT)
        reader.fields(document, ("format", "inputs", "sessions"))
        inputs, sessions = document["inputs"], document["sessions"]
        if not (isinstance(inputs, dict) and all(
                is_hex32(key) and _keys(value) for key, value in inputs.items())):
            raise reader.refuse("inputs", "not a mapping of digests to survivors")
        if not (isinstance(sessions, dict) and all(
                is_hex32(key) and isinstance(value, dict) and set(value) == {
                    "round", "survivors"} and type(value["round"]) is int
                and _keys(value["survivors"]) for key, value in sessions.items())):
            raise reader.refuse("sessions", "not a mapping of sessions to their last "
                                "round and its survivors")
        return document


def _keys(value: Any) -> bool:
    return isinstance(value, list) and all(map(is_hex32, value))


def _names(names: Sequence[Any]) -> str:
    shown = ", ".join(repr(name) for name in names[:10])
    return shown + (f" and {len(names) - 10} more" if len(names) > 10 else "")
