"""Secure aggregation in a deployment: the secure sum's stages as files (or Flower
messages) between the parties' machines and the coordinator's.

- `SecureSession`: what the consortium agrees on beforehand (the parties, their rows,
  their public identity keys, the threshold, the fixed-point encoding), one file every
  party and the coordinator hold.
- `SecureParty`: what a party keeps between its stages (its sums and its secrets), made
  by its party step (`fit_party`), which sends its keys in the upload's manifest.
- `SecureCoordinator` (``_secure_coordinator``): the coordinator's side, from the uploads
  to the sums that `fit_server` and `server_round` take.

Every stage's message is the secure sum's own (`skfedkt._secure_sum`), bound to the
session and the round; every document read here is bounded in size and parsed
strictly, its refusals naming the field (and the party, where one sent it).
"""

from __future__ import annotations

import json
import secrets
from collections.abc import Hashable, Sequence
from dataclasses import dataclass, replace
from numbers import Integral
from os import PathLike
from typing import Any

import numpy as np

from .._config import get_config
from .._engine._context import SumParties
from .._secure_sum import (
    Agreement,
    FixedPoint,
    SecureSumError,
    SecureSumParty,
    default_colluding,
    default_threshold,
    message_from_bytes,
    message_to_bytes,
)
from .._secure_sum._primitives import Ed25519PrivateKey, digest, public_bytes
from ._archive import UploadLimits, read_file
from ._local_files import write_atomically
from ._ledger import InputLedger
from ._identity import identity_key
from ._protocol import _check_party_name
from ._secure_documents import (Document, b64, dumps, is_hex32, layout_json, layout_read,
                                started_round)
from ._channel import Layout, layout_length, sums_layout, without_sums
from ._secure import encoded, fixed_point_for
from ._validated import check_session_mode
from ._upload import SUMS, PartyUpload

# the manifest field of an upload under secure aggregation: the round's session, the
# layout of the sums, and the party's keys (the secure sum's first message)
SECURE = "secure"
_SESSION_FORMAT = "skfedkt secure session 4"
_PARTY_FORMAT = "skfedkt secure party 4"
# a session names each party once: a few hundred bytes each at most
_MAX_SESSION_BYTES = 2 ** 20
# a party's or the coordinator's state holds its words (8 bytes each, in base64)
STATE_LIMITS = UploadLimits(max_file_bytes=1 << 30)
# the stage a party answers, by the stage its secure sum is at: the coordinator's message
# it reads, and the one it answers with
_PARTY_STAGES = {"share": ("roster", "shares"), "mask": ("routed", "masked"),
                 "confirm": ("survivors", "confirm"), "unmask": ("request", "unmask")}
@dataclass(frozen=True)
class SecureSession:
    """What the parties and the coordinator of a secure deployment agree on before its
    first round: one file (`save`) that every party and the coordinator hold.

    Make it with the estimator's ``secure_session`` method, which sizes the fixed-point
    encoding for the algorithm, from the parties' public identity keys
    (`skfedkt.PartyIdentity`). Each round's secure sum is bound to the session and the
    round, so no message of another deployment or round is accepted, and each party's
    keys of a round are signed by its identity, so no party accepts keys the coordinator
    made up.

    Attributes
    ----------
    session : bytes
        32 random bytes naming this deployment.
    parties : tuple
        The party names, in the agreed order.
    party_rows : tuple of int
        Each party's rows, as its manifests say them in the clear: a party step sizes
        its weight from every party's.
    threshold : int
        The fewest parties that must stay to the end of a round: fewer, and the round
        is refused. Above two thirds of the parties by default; a majority at least.
    float_bound : float
        The largest magnitude of a float any party sums.
    identities : tuple of bytes
        Each party's public identity key (32 raw bytes of Ed25519), aligned with
        `parties`, agreed out of band (``PartyIdentity.load_public``).
    colluding : int
        The most parties that may collude with the coordinator, against whom the
        parties' noise in shares is sized (`DistributedNoise`: the shares of any
        ``threshold - colluding`` honest parties carry its whole noise). By default
        ``2 * threshold - n - 1``, the most against whom the secure sum itself keeps a
        party's input hidden from a coordinator that deviates; at most
        ``threshold - 1``.
    helper : bytes or None
        Under validated sums, the helper's public key (32 raw bytes of X25519,
        ``HelperKey.load_public``): the second aggregator, which must not collude with
        the coordinator, to which each party seals its share. None: the masked sum.
    fixed_point : FixedPoint
        The encoding of floats: ``round(x * scale)``, each off by at most
        ``1 / (2 * scale)``.
    """

    session: bytes
    parties: tuple[Hashable, ...]
    party_rows: tuple[int, ...]
    threshold: int
    float_bound: float
    identities: tuple[bytes, ...]
    colluding: int
    helper: bytes | None = None

    def __post_init__(self):
        if len(self.party_rows) != len(self.parties):
            raise ValueError(f"party_rows gives {len(self.party_rows)} row counts for "
                             f"{len(self.parties)} parties: one per party.")
        if any(isinstance(rows, bool) or not isinstance(rows, Integral) or rows < 1
               for rows in self.party_rows):
            raise ValueError(f"party_rows must be positive integers, got "
                             f"{list(self.party_rows)!r}.")
        # at least a unit's resolution: the sum of every party's largest float fits
        if not (0 < self.float_bound <= 2.0 ** 62 / max(len(self.parties), 1)):
            raise ValueError(f"float_bound must be positive and at most 2**62 over the "
                             f"parties, got {self.float_bound!r}.")
        for party in self.parties:
            _check_party_name(party)
        # the agreement checks the parties, the threshold, the session's length and the
        # identities
        self.agreement(0, 1)
        if (isinstance(self.colluding, bool) or not isinstance(self.colluding, Integral)
                or not 0 <= self.colluding < self.threshold):
            raise ValueError(f"colluding must be an integer from 0 to the threshold less "
                             f"one, {self.threshold - 1}: the honest shares of the "
                             f"threshold's parties carry the noise; got {self.colluding!r}.")
        if self.helper is not None and not (isinstance(self.helper, bytes)
                                            and len(self.helper) == 32):
            raise ValueError("helper must be the helper's public key, 32 raw bytes "
                             "(HelperKey.load_public), or None for the masked sum.")

    @property
    def mode(self) -> str:
        """``"validated"`` where the session names a helper, ``"masked"`` otherwise: the
        value of ``secure_aggregation`` its steps run under."""
        return "masked" if self.helper is None else "validated"

    @classmethod
    def new(cls, parties: Sequence[Hashable], party_rows: Sequence[int], float_bound: float,
            threshold: int | None = None, *, identities: Sequence[bytes],
            colluding: int | None = None, helper: bytes | None = None) -> SecureSession:
        """A session of fresh random bytes (``threshold`` None: the default, the fewest
        parties above two thirds; ``colluding`` None: ``2 * threshold - n - 1``, or
        none), of the parties whose public identity keys are `identities` (32 raw bytes
        each, ``PartyIdentity.load_public``), in their order; with `helper` (its public
        key), a session of validated sums."""
        parties = tuple(_check_party_name(party) for party in parties)
        threshold = default_threshold(len(parties)) if threshold is None else threshold
        return cls(secrets.token_bytes(32), parties,
                   tuple(int(rows) for rows in party_rows), threshold, float(float_bound),
                   tuple(identities),
                   default_colluding(len(parties), threshold) if colluding is None
                   else colluding, helper)

    @property
    def fixed_point(self) -> FixedPoint:
        return fixed_point_for(len(self.parties), self.float_bound)

    def round_session(self, round_: int) -> bytes:
        """The session bytes of one round's secure sum."""
        return digest(self.session, b"round", int(round_).to_bytes(8, "big"))

    def agreement(self, round_: int, length: int) -> Agreement:
        """The secure sum of round `round_`, of `length` words."""
        return Agreement(self.round_session(round_), self.parties, self.threshold, length,
                         self.identities)

    def identity_key(self, party: Hashable, identity: Any) -> Ed25519PrivateKey:
        """The private key of `identity`, once it is the one this session names for
        `party`: refused otherwise, naming the party."""
        agreed = self.identities[self.index_of(party, f"Party {party!r}")]
        key = identity_key(identity, f"Party {party!r}")
        if public_bytes(key) != agreed:
            raise ValueError(f"Party {party!r}: its identity key is not the one the secure "
                             "session names for it: pass this party's own key (whose public "
                             "key the consortium wrote in the session).")
        return key

    def sum_parties(self) -> SumParties:
        return SumParties(self.parties, self.party_rows, self.threshold, self.colluding,
                          self.helper is not None)

    def to_bytes(self) -> bytes:
        """The session file's bytes: UTF-8 JSON."""
        return dumps(dict(format=_SESSION_FORMAT, session=self.session.hex(),
                           parties=list(self.parties), party_rows=list(self.party_rows),
                           threshold=self.threshold, float_bound=self.float_bound,
                           scale=self.fixed_point.scale,
                           identities=[key.hex() for key in self.identities],
                           colluding=self.colluding,
                           helper=None if self.helper is None else self.helper.hex()))

    def save(self, path: str | PathLike[str]) -> int:
        """Write the session file; returns its size in bytes."""
        return write_atomically(path, self.to_bytes())

    @classmethod
    def from_bytes(cls, data: bytes, name: str = "the secure session") -> SecureSession:
        """The session `data` holds, read as hostile: bounded, parsed strictly, each
        misfit refused naming the field."""
        reader = Document(f"Secure session refused ({name})")
        document = reader.parse(data, _MAX_SESSION_BYTES, _SESSION_FORMAT)
        reader.fields(document, ("format", "session", "parties", "party_rows", "threshold",
                                 "float_bound", "scale", "identities", "colluding",
                                 "helper"))
        session = document["session"]
        if not is_hex32(session):
            raise reader.refuse("session", "not 32 bytes in lowercase hexadecimal")
        parties, rows = document["parties"], document["party_rows"]
        identities = document["identities"]
        for field, value in (("parties", parties), ("party_rows", rows),
                             ("identities", identities)):
            if not isinstance(value, list):
                raise reader.refuse(field, "not a list")
        for at, key in enumerate(identities):
            if not is_hex32(key):
                raise reader.refuse(f"identities[{at}]", "not a public key of 32 bytes in "
                                    "lowercase hexadecimal")
        helper = document["helper"]
        if helper is not None and not is_hex32(helper):
            raise reader.refuse("helper", "not null or a public key of 32 bytes in "
                                "lowercase hexadecimal")
        bound = document["float_bound"]
        if type(bound) not in (int, float):
            raise reader.refuse("float_bound", "not a number")
        try:
            read = cls(bytes.fromhex(session), tuple(parties), tuple(rows),
                       reader.count(document["threshold"], "threshold", 1, len(parties)),
                       float(bound), tuple(map(bytes.fromhex, identities)),
                       document["colluding"], None if helper is None else bytes.fromhex(helper))
        except (TypeError, ValueError) as error:
            raise reader.refuse("agreement", str(error).rstrip(".")) from None
        if document["scale"] != read.fixed_point.scale:
            raise reader.refuse("scale", f"not {read.fixed_point.scale}, the scale of "
                                "float_bound for these parties")
        return read

    @classmethod
    def load(cls, path: str | PathLike[str]) -> SecureSession:
        """The session file at `path` (`from_bytes`)."""
        data = read_file(path, f"The secure session {path}",
                         UploadLimits(max_file_bytes=_MAX_SESSION_BYTES))
        return cls.from_bytes(data, str(path))

    def index_of(self, party: Hashable, who: str) -> int:
        """The index of `party`, refused naming `who` where it is none of the session's."""
        if party not in self.parties:
            raise ValueError(f"{who}: party {party!r} is not a party of the secure "
                             f"session, whose parties are {list(self.parties)!r}.")
        return self.parties.index(party)


class SecureParty:
    """What one party keeps between the stages of a round's secure sum: its sums, as
    words, and its side of the sum (its secrets among them).

    `fit_party` makes it under secure aggregation (``upload.secure_state``) and sends
    the party's keys, signed by its identity, in the upload's manifest; `answer` then
    answers each of the coordinator's messages. Save it (`save`, a file only this user
    can read) after each stage it answers, before sending the answer: it is never sent.
    It holds no identity key: `load` takes it again. It keeps its last answer, which it
    gives again, byte for byte, for the same message: a party whose answer was lost
    in a crash answers again with the same command.
    """

    def __init__(self, session: SecureSession, round_: int, party: Hashable,
                 layout: Layout, words: np.ndarray, sum_party: SecureSumParty,
                 input_: str, noisy: bool, answered: tuple[str, bytes] | None = None):
        self.session, self.round, self.party = session, round_, party
        self.layout, self.words, self._sum_party = layout, words, sum_party
        # what its ledger knows this sum by (`InputLedger`)
        self.input, self.noisy = input_, noisy
        # the digest of the last message it answered (hex), and its answer
        self._answered = answered

    @classmethod
    def start(cls, session: SecureSession, upload: Any, identity: Any, *, input_: str,
              noisy: bool) -> tuple[PartyUpload, SecureParty]:
        """The upload to send (without its sums, with the party's keys, signed by its
        `identity` (a `PartyIdentity`, the session's for this party), and the sums'
        layout in its manifest) and the party's state, from its party step's `upload`
        (its weighted sums scaled by its weight already), whose input is `input_`
        (`input_digest`) and whose sums carry privacy noise of the parties where
        `noisy`."""
        party, round_ = upload.party, upload.manifest.get("round", 0)
        index = session.index_of(party, f"Party {party!r}")
        key = session.identity_key(party, identity)
        terms = upload.payload.get(SUMS) or {}
        layout = sums_layout(terms)
        agreement = session.agreement(round_, layout_length(layout))
        state = cls(session, round_, party, layout,
                    encoded(terms, layout, session.fixed_point),
                    SecureSumParty(agreement, index, key), input_, noisy)
        keys = message_to_bytes("keys", state._sum_party.advertise(), agreement)
        manifest = dict(upload.manifest, **{SECURE: dict(
            session=agreement.session.hex(), sums=layout_json(layout),
            keys=keys.decode())})
        return replace(without_sums(upload), manifest=manifest), state

    @staticmethod
    def resumed(upload: PartyUpload, previous: bytes | None, identity: Any) -> PartyUpload:
        """`upload`, of a party step under secure aggregation, with the keys and the
        state of the party's saved state `previous` (None: none) where that state
        started this very round on the same sums and answered nothing yet: the step run
        again after a crash then writes the upload and the state it wrote before. With
        any other state, `upload` as it is."""
        state = upload.secure_state
        if previous is None or json.loads(previous).get("session") != (
                state.session.session.hex()):
            return upload
        kept = SecureParty.from_bytes(state.session, previous, identity)
        if (kept.round, kept.input, kept.noisy, kept.layout, kept._answered) != (
                state.round, state.input, state.noisy, state.layout, None) or not (
                np.array_equal(kept.words, state.words)):
            return upload
        keys = message_to_bytes("keys", kept._sum_party.advertised(),
                                kept._sum_party.agreement)
        manifest = dict(upload.manifest, **{SECURE: dict(upload.manifest[SECURE],
                                                         keys=keys.decode())})
        return replace(upload, manifest=manifest, secure_state=kept)

    @property
    def stage(self) -> str:
        """The coordinator's message this party answers next: ``roster``, ``routed``,
        ``survivors`` or ``request``; ``done`` once it answered all."""
        return _PARTY_STAGES.get(self._sum_party.stage, ("done",))[0]

    def answer(self, data: bytes, ledger: InputLedger) -> bytes:
        """This party's answer to the coordinator's message of the stage it is at,
        refused (a `SecureSumError` naming the field) where the message is malformed,
        out of order, or asks what an honest party never gives (both shares of one
        party, survivors other than those it confirmed); before it gives its unmasking
        shares, its `ledger` (an `InputLedger`, kept across sessions) refuses a second
        sum of its input with other survivors, or a round whose survivors are not the
        last round's. A refused message changes nothing: the intact message is then
        answered. The message it answered last is answered again with the same bytes
        (its answer was lost). Save the state after it answers, before sending."""
        received = digest(data).hex()
        if self._answered is not None and self._answered[0] == received:
            return self._answered[1]
        if self._sum_party.stage not in _PARTY_STAGES:
            raise SecureSumError(self.party, None, "stage", "this party is done with the "
                                 "round's secure sum: it answered its last stage")
        reads, answers = _PARTY_STAGES[self._sum_party.stage]
        agreement = self._sum_party.agreement
        try:
            message = message_from_bytes(reads, data, agreement,
                                         reader=self._sum_party.index)
        except SecureSumError as error:
            if error.field != "stage":
                raise
            raise SecureSumError(self.party, None, "stage", f"not the {reads} this party "
                                 "waits for: it answered each stage before once, and "
                                 "gives its last answer again only for the message it "
                                 "answered last") from None
        sum_party = self._sum_party
        if reads == "request":
            survivors = message["survivors"]
            try:
                ledger.admit(self.session.session.hex(), self.round, self.input,
                             [self.session.identities[i].hex() for i in survivors],
                             [self.session.parties[i] for i in survivors], self.noisy)
            except ValueError as error:
                raise SecureSumError(self.party, None, "survivors", str(error)) from None
        answer = message_to_bytes(answers, (
            sum_party.share_keys(message) if reads == "roster"
            else sum_party.masked_input(message, self.words) if reads == "routed"
            else sum_party.confirm(message) if reads == "survivors"
            else sum_party.unmask(**message)), agreement)
        self._answered = (received, answer)
        return answer

    def to_bytes(self) -> bytes:
        """The state's bytes: UTF-8 JSON holding the party's secrets."""
        return dumps(dict(
            format=_PARTY_FORMAT, session=self.session.session.hex(), round=self.round,
            party=self.party, sums=layout_json(self.layout),
            words=b64(self.words.tobytes()), input=self.input, noisy=self.noisy,
            secure_sum=self._sum_party.to_bytes().decode(),
            answered=None if self._answered is None else dict(
                message=self._answered[0], answer=b64(self._answered[1]))))

    def save(self, path: str | PathLike[str]) -> int:
        """Write the state to `path`, readable by this user alone (mode 0600)."""
        return write_atomically(path, self.to_bytes(), private=True)

    @classmethod
    def from_bytes(cls, session: SecureSession, data: bytes, identity: Any,
                   name: str = "the party's secure state") -> SecureParty:
        """The state `data` holds, of a party of `session` whose identity is `identity`
        (a `PartyIdentity`, the session's for that party)."""
        reader = Document(f"Secure party state refused ({name})")
        document = reader.parse(data, STATE_LIMITS.max_file_bytes, _PARTY_FORMAT)
        reader.fields(document, ("format", "session", "round", "party", "sums", "words",
                                 "input", "noisy", "secure_sum", "answered"))
        if not is_hex32(document["input"]):
            raise reader.refuse("input", "not a digest of 32 bytes in hexadecimal")
        if not isinstance(document["noisy"], bool):
            raise reader.refuse("noisy", "not true or false")
        if document["session"] != session.session.hex():
            raise reader.refuse("session", "not this secure session's")
        round_ = reader.count(document["round"], "round", 0, 2 ** 31)
        party = document["party"]
        index = session.index_of(party, name)
        key = session.identity_key(party, identity)
        layout = layout_read(document["sums"], reader)
        length = layout_length(layout)
        words = np.frombuffer(reader.raw(document["words"], "words", 8 * length),
                              dtype="<u8").copy()
        secure_sum = document["secure_sum"]
        if not isinstance(secure_sum, str):
            raise reader.refuse("secure_sum", "not a document")
        sum_party = SecureSumParty.from_bytes(session.agreement(round_, length), index,
                                              secure_sum.encode(), key)
        return cls(session, round_, party, layout, words, sum_party, document["input"],
                   document["noisy"], _answered(document["answered"], reader))

    @classmethod
    def load(cls, session: SecureSession, path: str | PathLike[str], identity: Any,
             ) -> SecureParty:
        """The state saved at `path` (`from_bytes`)."""
        return cls.from_bytes(session, read_file(path, f"The secure state {path}",
                                                 STATE_LIMITS), identity, str(path))

    @staticmethod
    def refuse_a_started_round(session: SecureSession, previous: bytes | None,
                               round_: int, party: Hashable) -> None:
        """Refuse, before any work, a party step of round `round_` where the party's
        saved state `previous` (None: none) shows it already started that round of
        `session`, or a later one: its sums would come out the same, and a coordinator
        that ran two sums of them with other survivors would learn them from the
        difference. Each round of a session is started once, in order; a round whose
        state answered no stage yet may start again (a step rerun after a crash: only
        its keys may have left, and the new state answers for new ones)."""
        if type(round_) is not int:
            raise ValueError(f"Party {party!r} refuses a step of round {round_!r}: the "
                             "server's message names no round.")
        started = None if previous is None else started_round(
            previous, _PARTY_FORMAT, session.session.hex(), f"Party {party!r}")
        if started == round_ and previous is not None and json.loads(previous).get(
                "answered") is None:
            return
        if started is not None and round_ <= started:
            raise ValueError(
                f"Party {party!r} already started round {started} of this secure session, "
                "and answered the coordinator: "
                f"a party starts each round once, in order, so it refuses round {round_}. "
                "Two sums of the same input with other survivors would give it away. A new "
                "deployment needs a new secure session.")


def _answered(value: Any, reader: Document) -> tuple[str, bytes] | None:
    """A party state's last answer (`SecureParty`), checked: None, or the digest of
    the message it answered and the answer."""
    if value is None:
        return None
    if not isinstance(value, dict) or set(value) != {"message", "answer"}:
        raise reader.refuse("answered", "not the message answered last and its answer")
    if not is_hex32(value["message"]):
        raise reader.refuse("answered.message", "not a digest of 32 bytes in hexadecimal")
    return value["message"], reader.raw(value["answer"], "answered.answer")


def session_parties(session: SecureSession | None, party: Hashable, n_rows: int,
                    identity: Any = None) -> SumParties | None:
    """The parties of a deployed party step's secure sum: under secure aggregation,
    those of `session`, which must name `party` with its `n_rows` and its `identity`;
    None otherwise (and no identity)."""
    if not get_config()["secure_aggregation"]:
        for given, name in ((session, "secure_session"), (identity, "identity")):
            if given is not None:
                raise ValueError(f"{name} is given, but secure_aggregation is off: run the "
                                 "step under skfedkt.config_context(secure_aggregation="
                                 f"True), or leave {name} out.")
        return None
    if not isinstance(session, SecureSession):
        raise TypeError("secure_aggregation is on: pass the consortium's secure_session "
                        "(SecureSession.load(path), made by the estimator's "
                        f"secure_session method); got {type(session).__name__}.")
    check_session_mode(session)
    if identity is None:
        raise TypeError(f"secure_session needs identity: the private identity key of "
                        f"party {party!r} (skfedkt.PartyIdentity.load(path)), whose public "
                        "key the session names for it.")
    agreed = session.party_rows[session.index_of(party, "secure_session")]
    if agreed != n_rows:
        raise ValueError(f"Party {party!r} holds {n_rows} rows, the secure session says "
                         f"{agreed}: every party's rows are agreed in the session.")
    session.identity_key(party, identity)
    return session.sum_parties()
