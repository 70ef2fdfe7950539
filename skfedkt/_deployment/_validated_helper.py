"""The helper's side of a validated sum in a deployment (`ValidatedHelper`, the second
aggregator, which must not collude with the coordinator): it checks each party's
signature and each proof on its shares, with the coordinator's verifier shares, and
answers each step of a session once (its `HelperLedger`) with its share of the total of
the parties whose proofs all passed."""

from __future__ import annotations

import os
from collections.abc import Mapping
from os import PathLike
from typing import Any

import numpy as np

from .._secure_sum._primitives import digest, verify
from .._validated_sum._field import FIELD64
from .._validated_sum._prio3 import SEED_SIZE
from .._validated_sum._sealing import open_sealed_to
from .._validated_sum._sums import (
    HELPER,
    Aggregator,
    Report,
    ValidatedSumError,
    verifier_message,
)
from ._archive import UploadLimits, read_file
from ._identity import HelperKey
from ._local_files import write_atomically
from ._secure_documents import Document, b64, dumps, is_hex32
from ._validated_report import (
    ANSWER_FORMAT,
    KEY_INFO,
    MAX_DOCUMENT_BYTES,
    MAX_REASON,
    REQUEST_FORMAT,
    agreement_of,
    share_context,
    signed_report,
    specs_digest,
    specs_read,
)

_LEDGER_FORMAT = "skfedkt helper ledger 2"

class HelperLedger:
    """The steps the helper has answered, kept across sessions in one file.

    Each step of a session (a round's sums; a last step's, which shares its round
    number) is answered once: the same request again gets the same answer (it was
    lost), another request of that step is refused. And every step of a session sums
    the parties its first step accepted: a party left out once stays out, and a step
    without one of them is refused, so that no coordinator learns a party's input from
    two sums that differ by it (as each party's `InputLedger` does under the masked
    sum)."""

    def __init__(self, path: str | PathLike[str]):
        self.path = path

    def _sessions(self) -> dict[str, Any]:
        if not os.path.exists(self.path):  # a helper's first answer
            return {}
        data = read_file(self.path, f"The helper's ledger {self.path}",
                         UploadLimits(max_file_bytes=1 << 26))
        reader = Document(f"The helper's ledger refused ({self.path})")
        document = reader.parse(data, 1 << 26, _LEDGER_FORMAT)
        reader.fields(document, ("format", "sessions"))
        sessions = document["sessions"]
        if not isinstance(sessions, dict) or not all(
                isinstance(steps, dict) and all(
                    isinstance(step, dict) and set(step) == {"request", "accepted"}
                    and is_hex32(step["request"]) and isinstance(step["accepted"], list)
                    for step in steps.values())
                for steps in sessions.values()):
            raise reader.refuse("sessions", "not each session's steps, requests and "
                                "parties")
        return sessions

    def parties_before(self, session: str, step: str, request: str) -> set[int] | None:
        """The parties a step of `session` must sum (those of its first step; None for
        a first step), once the step was not answered with another request than
        `request`."""
        steps = self._sessions().get(session, {})
        earlier = steps.get(step)
        if earlier is not None and earlier["request"] != request:
            raise ValueError(f"The helper answered another request of this step (round "
                             f"{step.split('/')[0]}) of the session before: it answers each "
                             "step once, so that no two sums of one party's input with "
                             "other parties are ever given. Send the request it answered "
                             "again (its answer comes back the same), or agree on a new "
                             "secure session and have the parties upload again.")
        if earlier is not None:
            return set(earlier["accepted"])
        return set(next(iter(steps.values()))["accepted"]) if steps else None

    def record(self, session: str, step: str, request: str, accepted: list[int]) -> None:
        sessions = self._sessions()
        sessions.setdefault(session, {})[step] = dict(request=request, accepted=accepted)
        write_atomically(self.path, dumps(dict(format=_LEDGER_FORMAT, sessions=sessions)),
                         private=True)


class ValidatedHelper:
    """The helper's side of a validated sum: the second aggregator, which must not
    collude with the coordinator. It answers the coordinator's request of a round
    (`answer`) with its verifier shares and its share of the total of the parties whose
    every proof passed; see `ValidatedCoordinator` for a whole round.

    Parameters
    ----------
    session : SecureSession
        The consortium's session, which names this helper's public key.
    key : HelperKey
        The helper's private key.
    """

    def __init__(self, session: Any, key: HelperKey):
        if not isinstance(key, HelperKey):
            raise TypeError(f"key is the helper's private key (skfedkt.HelperKey.load("
                            f"path)), got {type(key).__name__}.")
        if session.helper != key.public_bytes:
            raise ValueError("The helper's key is not the one the secure session names "
                             "(its helper): pass the key whose public key the consortium "
                             "wrote in the session.")
        self.session, self._key = session, key

    def answer(self, request: bytes, ledger: HelperLedger) -> bytes:
        """The answer to the coordinator's `request`: each party checked (its signature
        by its identity, its proofs on this helper's shares with the coordinator's
        verifier shares), and the total of the accepted parties' shares. Refused where
        fewer than the session's threshold pass, or where `ledger` shows another
        request of the round answered."""
        session = self.session
        reader = Document("The coordinator's request refused")
        document = reader.parse(request, MAX_DOCUMENT_BYTES, REQUEST_FORMAT)
        reader.fields(document, ("format", "session", "round", "specs", "reports",
                                 "verify_key"))
        round_ = reader.count(document["round"], "round", 0, 2 ** 31 - 1)
        round_session = session.round_session(round_)
        if document["session"] != round_session.hex():
            raise reader.refuse("session", "not a round of this secure session")
        specs = specs_read(document["specs"], reader, len(session.parties))
        request_digest = digest(request).hex()
        step = f"{round_}/{specs_digest(specs).hex()}"
        parties = ledger.parties_before(session.session.hex(), step, request_digest)
        verify_key = open_sealed_to(self._key.private_bytes, KEY_INFO + round_session,
                                    reader.raw(document["verify_key"], "verify_key"), b"")
        if verify_key is None or len(verify_key) != SEED_SIZE:
            raise reader.refuse("verify_key", "not sealed to this helper for this round")
        reports = document["reports"]
        if not isinstance(reports, list) or len(reports) > len(session.parties):
            raise reader.refuse("reports", "not a list of at most one report per party")
        helper = Aggregator(agreement_of(session, round_, specs), HELPER, verify_key)
        outputs, refused, verifiers, seen = {}, {}, {}, set()
        for at, report in enumerate(reports):
            index = report.get("party") if isinstance(report, dict) else None
            if type(index) is not int or not 0 <= index < len(session.parties) or (
                    index in seen):
                raise reader.refuse(f"reports[{at}].party", "not a party of the session "
                                    "named once")
            seen.add(index)
            try:
                outputs[index], verifiers[index] = _helper_checked(
                    helper, session.identities[index], self._key.private_bytes, index,
                    report)
            except ValidatedSumError as error:
                refused[str(index)] = f"{error.sum_name}: {error.reason}"[:MAX_REASON]
        for index in sorted(set(outputs) - (set(outputs) if parties is None else parties)):
            del outputs[index], verifiers[index]
            refused[str(index)] = ("left out of this session's first step: a party left "
                                   "out once stays out")
        missing = set() if parties is None else parties - set(outputs)
        if missing:
            raise ValueError(
                f"The helper gives no sum of round {round_} without parties "
                f"{[session.parties[i] for i in sorted(missing)]}, whose inputs the "
                "session's first step summed: two sums that differ by a party would give "
                f"its input away. Refused: {refused}")
        if len(outputs) < session.threshold:
            raise ValueError(f"The helper accepts {len(outputs)} parties' reports of round "
                             f"{round_}, fewer than the threshold, {session.threshold}: it "
                             f"gives no total. Refused: {refused}")
        totals = helper.aggregate(outputs)
        answer = dumps(dict(
            format=ANSWER_FORMAT, session=round_session.hex(), round=round_,
            request=request_digest, accepted=sorted(outputs), refused=refused,
            verifiers={str(index): {name: b64(share) for name, share in shares.items()}
                       for index, shares in verifiers.items()},
            totals={name: b64(FIELD64.encode(total)) for name, total in totals.items()}))
        # recorded before the answer leaves: no other request of the round is answered
        ledger.record(session.session.hex(), step, request_digest, sorted(outputs))
        return answer


def _helper_checked(helper: Aggregator, identity: bytes, private: bytes, index: int,
                    report: Mapping[str, Any],
                    ) -> tuple[dict[str, np.ndarray], dict[str, bytes]]:
    """One party's output shares at the helper and its verifier shares, once its
    signature (by its `identity`), its shares sealed to the helper (whose key is
    `private`) and every proof passed; refused (`ValidatedSumError`) otherwise."""
    agreement, reader = helper.agreement, Document("report")
    party = agreement.parties[index]
    names = [spec.name for spec in agreement.specs]
    if set(report) != {"party", "parts", "leader", "helper", "signature", "verifier"} or (
            not all(isinstance(report[field], dict) and set(report[field]) == set(names)
                    for field in ("parts", "leader", "verifier"))):
        raise ValidatedSumError(party, "report", "not the parts, leader digests and "
                                "verifier shares of each sum")
    try:
        parts = [reader.raw(report["parts"][name], "parts") for name in names]
        leader = [bytes.fromhex(report["leader"][name]) if is_hex32(report["leader"][name])
                  else b"" for name in names]
        sealed = reader.raw(report["helper"], "helper")
        signature = reader.raw(report["signature"], "signature", 64)
        leader_verifiers = {name: reader.raw(report["verifier"][name], "verifier")
                            for name in names}
    except ValueError as error:
        raise ValidatedSumError(party, "report", str(error).split(", ", 1)[-1].rstrip(".")
                                ) from None
    specs = specs_digest(agreement.specs)
    if not verify(identity, signature,
                  signed_report(agreement.session, index, specs, parts, leader, sealed)):
        raise ValidatedSumError(party, "signature", "not the party's signature of its "
                                "report, by the identity the session names")
    info, associated = share_context(agreement.session, index, specs)
    opened = open_sealed_to(private, info, sealed, associated)
    sizes = [SEED_SIZE * (2 if agreement.prio3(spec, index).uses_joint_rand else 1)
             for spec in agreement.specs]
    if opened is None or len(opened) != sum(sizes):
        raise ValidatedSumError(party, "helper", "not the helper's shares, sealed to it")
    starts = np.cumsum([0, *sizes])
    reports = {name: Report(part, opened[start:end]) for name, part, start, end
               in zip(names, parts, starts[:-1], starts[1:])}
    states, shares = helper.checked(index, reports)
    outputs = {}
    for name in names:
        message = verifier_message(agreement, index, name, leader_verifiers[name],
                                   shares[name])
        outputs[name] = helper.output_share(states[name], index, name, message)
    return outputs, shares
