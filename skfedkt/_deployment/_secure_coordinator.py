"""The coordinator's side of secure aggregation in a deployment (`SecureCoordinator`),
from the parties' uploads to the sums the server steps take, and the server's check of
the uploads it fits on against the sum's survivors."""

from __future__ import annotations

import json
import warnings
from collections.abc import Hashable, Mapping, Sequence
from os import PathLike
from typing import Any

import numpy as np

from .._config import get_config
from .._secure_sum import (
    Agreement,
    SecureSumCoordinator,
    SecureSumError,
    message_from_bytes,
    message_to_bytes,
)
from .._secure_sum._primitives import digest
from ._archive import read_file
from ._local_files import write_atomically
from ._channel import Layout, layout_length
from ._secure import decoded
from ._secure_documents import (
    Document,
    b64,
    dumps,
    is_hex32,
    layout_json,
    layout_read,
    majority,
    party_and_round,
    started_round,
)
from ._secure_stages import STATE_LIMITS, SECURE, SecureSession
from ._validated_coordinator import ValidatedCoordinator
from ._upload import PartyUpload

_COORDINATOR_FORMAT = "skfedkt secure coordinator 3"
# the coordinator's stages: the parties' message it reads, the one it sends, the next
_COORDINATOR_STAGES = {"shares": ("routed", "masked"), "masked": ("survivors", "confirm"),
                       "confirm": ("request", "unmask"), "unmask": (None, "done")}
# what the coordinator sent before each stage it waits at: the roster at the start,
# then what each stage sends
SENT_BEFORE = {"shares": "roster", **{following: sent for sent, following
                                      in _COORDINATOR_STAGES.values() if sent}}


class SecureCoordinator:
    """The coordinator's side of a round's secure sum: `start` takes the parties'
    uploads (their keys and the sums' layout are in the manifests), `advance` each
    stage's answers; once done, `sums` and `survivors` are what `fit_server` and
    `server_round` take (``secure_sum=``).

    Between stages, save it (`save`) on the coordinator's machine, before sending what
    `advance` returned: it keeps the messages of its last stage and returns them again,
    byte for byte, for the same answers (a coordinator whose messages were lost in a
    crash sends them again with the same command).

    Examples
    --------
    Three parties and a coordinator, in one process (a deployment sends each message
    as a file, or over Flower):

    >>> import tempfile
    >>> import numpy as np, skfedkt
    >>> from sklearn.datasets import load_breast_cancer
    >>> from sklearn.tree import DecisionTreeClassifier
    >>> from skfedkt import FedKTClassifier, InputLedger, PartyIdentity, SecureCoordinator
    >>> X, y = load_breast_cancer(return_X_y=True)
    >>> X_public, X, y = X[:100], X[100:], y[100:]
    >>> party = np.arange(len(y)) % 3
    >>> clf = FedKTClassifier(DecisionTreeClassifier(max_depth=3), random_state=0)
    >>> identities = [PartyIdentity.generate() for _ in range(3)]  # one at each party
    >>> session = clf.secure_session(["a", "b", "c"], np.bincount(party).tolist(),
    ...                              identities=[key.public_bytes for key in identities])
    >>> with skfedkt.config_context(secure_aggregation=True):
    ...     uploads = [clf.fit_party(X[party == p], y[party == p], party=name,
    ...                              classes=[0, 1], X_unlabeled=X_public,
    ...                              secure_session=session, identity=identities[p])
    ...                for p, name in enumerate("abc")]
    ...     coordinator, sent = SecureCoordinator.start(
    ...         session, [upload.manifest for upload in uploads])
    ...     states = {upload.party: upload.secure_state for upload in uploads}
    ...     # what each party has helped unmask, kept across sessions in its own folder
    ...     ledgers = {name: InputLedger(f"{tempfile.mkdtemp()}/ledger.json")
    ...                for name in "abc"}
    ...     while coordinator.stage != "done":
    ...         sent = coordinator.advance([states[name].answer(message, ledgers[name])
    ...                                     for name, message in sent.items()])
    ...     server = clf.fit_server([upload.to_bytes() for upload in uploads], X_public,
    ...                             secure_sum=coordinator)
    >>> coordinator.survivors
    ('a', 'b', 'c')
    >>> sorted(coordinator.sums)[:2]
    ['class_counts', 'class_weight']
    >>> "students" in uploads[0].payload, len(uploads[0].payload["students"])
    (True, 0)
    """

    def __init__(self, session: SecureSession, round_: int, layout: Layout,
                 coordinator: SecureSumCoordinator, stage: str = "shares",
                 total: np.ndarray | None = None,
                 sent: tuple[str, dict[Hashable, bytes]] | None = None):
        self.session, self.round, self.layout = session, round_, layout
        self._coordinator, self.stage, self._total = coordinator, stage, total
        # the digest of the answers its last stage took (hex), and what it sent then
        self._sent = sent
        # the parties whose uploads or answers failed a check, and why (not saved)
        self.left_out: dict[Any, str] = {}
        # the parties that gave back altered shares, left out of the sum's last stage,
        # and which (not saved)
        self.refused_shares: dict[Any, str] = {}

    @property
    def agreement(self) -> Agreement:
        return self._coordinator.agreement

    @classmethod
    def start(cls, session: SecureSession, manifests: Sequence[Mapping[str, Any]], *,
              min_parties: int | None = None) -> tuple[SecureCoordinator, dict[Hashable, bytes]]:
        """The coordinator of the round the parties' upload `manifests` answer, and the
        roster to send each party whose keys arrived.

        Each manifest must name a party of the session, the round and sums of most
        uploads, this round's session and the party's own keys, signed by its identity
        in the session. A party that sent none has dropped; fewer than the threshold
        are refused, naming the parties lost. With `min_parties`, a party whose upload
        fails a check is left out (in ``left_out``, saying why) while that many remain;
        without it, the first failure is refused.
        """
        if not manifests:
            raise ValueError("No uploads: the secure sum starts from the parties' uploads.")
        left_out: dict[Any, str] = {}

        def refuse(error: SecureSumError) -> None:
            if min_parties is None:
                raise error
            left_out[error.party] = str(error)

        entries = []
        for manifest in manifests:
            try:
                entries.append(_entry(session, manifest))
            except SecureSumError as error:
                refuse(error)
        names = [party for party, _, _ in entries]
        for party in {party for party in names if names.count(party) > 1}:
            refuse(SecureSumError(None, party, "party", f"{names.count(party)} uploads: one "
                                  "party, one upload; none of them is used"))
        entries = [entry for entry in entries if names.count(entry[0]) == 1]
        if not entries:
            raise SecureSumError(None, None, "uploads", f"none passed the checks: {left_out}")
        # the round and the sums of most uploads; the odd one out is the one refused
        round_ = majority([round_ for _, round_, _ in entries])
        written = majority([json.dumps(fields["sums"]) for _, _, fields in entries])
        layout = layout_read(json.loads(written), Document("The uploads' sums"))
        agreement = session.agreement(round_, layout_length(layout))
        coordinator = SecureSumCoordinator(agreement)
        advertisements = []
        for party, party_round, fields in entries:
            try:
                if party_round != round_:
                    raise SecureSumError(None, party, "round", f"round {party_round}, where "
                                         f"most uploads answer round {round_}")
                advertisements.append(_advertisement(session, coordinator, party, fields,
                                                     written))
            except SecureSumError as error:
                refuse(error)
        if min_parties is not None and len(advertisements) < min_parties:
            raise SecureSumError(None, None, "uploads", f"{len(advertisements)} passed the "
                                 f"checks, fewer than min_parties={min_parties}; left out: "
                                 f"{left_out}")
        roster = message_to_bytes("roster", coordinator.collect_keys(advertisements),
                                  agreement)
        state = cls(session, round_, layout, coordinator)
        state.left_out = left_out
        return state, {agreement.name(index): roster for index in coordinator.roster}

    def advance(self, answers: Sequence[bytes], senders: Sequence[Hashable] | None = None,
                sources: Sequence[str] | None = None) -> dict[Hashable, bytes]:
        """The messages to send each party still in the sum, from the parties' answers
        to the last stage (a party that sent none has dropped); after the last stage,
        none, and the sums are ready.

        With `senders` (the party each answer came from, where the transport knows it,
        as Flower's nodes), an answer that is malformed or speaks for another party is
        its sender's dropping out (in ``left_out``); without, it is refused, naming its
        source (`sources`: where each answer came from, such as its file), and nothing
        changes. The answers its last stage took, in any order, return that stage's
        messages again."""
        received = _answers_digest(answers)
        if self._sent is not None and self._sent[0] == received:
            return dict(self._sent[1])
        if self.stage not in _COORDINATOR_STAGES:
            raise SecureSumError(None, None, "stage", "the round's secure sum is done")
        _, following = _COORDINATOR_STAGES[self.stage]
        messages = []
        for index, data in enumerate(answers):
            try:
                message = message_from_bytes(self.stage, data, self.agreement)
                if senders is not None and message["party"] != self.session.index_of(
                        senders[index], "an answer's sender"):
                    raise SecureSumError(None, senders[index], "party",
                                         "answers for another party")
            except (SecureSumError, ValueError) as error:
                if senders is None and sources is not None:
                    raise ValueError(f"{sources[index]}: {error}{self._stale_hint(error)}"
                                     ) from None
                if senders is None:
                    raise
                self.left_out[senders[index]] = str(error)
                continue
            messages.append(message)
        coordinator, name = self._coordinator, self.agreement.name
        if self.stage == "shares":
            routed = coordinator.route_shares(messages)
            out = {name(index): message_to_bytes("routed", box, self.agreement)
                   for index, box in routed.items()}
        elif self.stage == "masked":
            survivors = message_to_bytes("survivors", coordinator.collect_masked(messages),
                                         self.agreement)
            out = {name(index): survivors for index in coordinator.survivors}
        elif self.stage == "confirm":
            request = message_to_bytes("request", coordinator.unmask_request(messages),
                                       self.agreement)
            out = {name(message["party"]): request for message in messages}
        else:
            self._total, out = coordinator.total(messages), {}
            self.refused_shares = dict(coordinator.refused_shares)
            if self.refused_shares:
                warnings.warn(f"The secure sum of round {self.round} is exact without the "
                              "altered shares some parties gave back: " + "; ".join(
                                  f"{party!r} {why}"
                                  for party, why in self.refused_shares.items()), UserWarning)
        self.stage, self._sent = following, (received, dict(out))
        return out

    def _stale_hint(self, error: Exception) -> str:
        """What to do about an answer file of another stage: most often one left from
        the stage before, where its party has not answered this one yet."""
        if getattr(error, "field", None) != "stage":
            return ""
        sent = SENT_BEFORE[self.stage]
        return (f". The coordinator waits for the answers to the {sent} it sent last: an "
                "answer of an earlier stage, or another round, is a file left from before. "
                f"Give the party's answer to its {sent} file (secure-party --message "
                f"{sent}-<party>.json), or leave the file out if that party has dropped")

    @property
    def survivors(self) -> tuple[Hashable, ...]:
        """The parties whose inputs the sums hold."""
        self._check_done()
        return tuple(self.agreement.name(index) for index in self._coordinator.survivors)

    @property
    def sums(self) -> dict[str, np.ndarray]:
        """The sums of the survivors' inputs, by name."""
        self._check_done()
        assert self._total is not None
        return decoded(self._total, self.layout, self.session.fixed_point)

    def _check_done(self) -> None:
        if self.stage != "done":
            raise ValueError(f"The round's secure sum is at stage {self.stage!r}, not "
                             "done: advance it with the parties' answers until it is.")

    def to_bytes(self) -> bytes:
        return dumps(dict(
            format=_COORDINATOR_FORMAT, session=self.session.session.hex(),
            round=self.round, stage=self.stage, sums=layout_json(self.layout),
            secure_sum=self._coordinator.to_bytes().decode(),
            total=None if self._total is None else b64(self._total.tobytes()),
            sent=None if self._sent is None else dict(
                answers=self._sent[0],
                messages={json.dumps(party): b64(message)
                          for party, message in self._sent[1].items()})))

    def save(self, path: str | PathLike[str]) -> int:
        """Write the coordinator's state to `path` (mode 0600)."""
        return write_atomically(path, self.to_bytes(), private=True)

    @classmethod
    def from_bytes(cls, session: SecureSession, data: bytes,
                   name: str = "the coordinator's secure state") -> SecureCoordinator:
        reader = Document(f"Secure coordinator state refused ({name})")
        document = reader.parse(data, STATE_LIMITS.max_file_bytes, _COORDINATOR_FORMAT)
        reader.fields(document, ("format", "session", "round", "stage", "sums",
                                 "secure_sum", "total", "sent"))
        if document["session"] != session.session.hex():
            raise reader.refuse("session", "not this secure session's")
        round_ = reader.count(document["round"], "round", 0, 2 ** 31)
        stage = document["stage"]
        if stage not in (*_COORDINATOR_STAGES, "done"):
            raise reader.refuse("stage", f"not one of {', '.join(_COORDINATOR_STAGES)}, done")
        layout = layout_read(document["sums"], reader)
        length = layout_length(layout)
        secure_sum = document["secure_sum"]
        if not isinstance(secure_sum, str):
            raise reader.refuse("secure_sum", "not a document")
        coordinator = SecureSumCoordinator.from_bytes(session.agreement(round_, length),
                                                      secure_sum.encode())
        total = document["total"]
        if (total is None) != (stage != "done"):
            raise reader.refuse("total", "the sum is only there once done")
        total = None if total is None else np.frombuffer(
            reader.raw(total, "total", 8 * length), dtype="<u8").copy()
        return cls(session, round_, layout, coordinator, stage, total,
                   _sent(session, document["sent"], reader))

    def refuse_a_started_round(self, previous: bytes | None) -> None:
        """Refuse this round where the coordinator's saved state `previous` (None:
        none) shows it started this round of the session, or a later one: the parties,
        past their keys, would refuse the round started again."""
        started = None if previous is None else started_round(
            previous, _COORDINATOR_FORMAT, self.session.session.hex(), "The coordinator")
        if started is not None and self.round <= started:
            raise ValueError(
                f"The coordinator's state shows round {started} of this secure session "
                f"started already: a round's sum starts once, and its parties refuse a "
                f"second start. Go on with --answers, or start round {self.round} anew "
                "with a new secure session.")

    @classmethod
    def load(cls, session: SecureSession, path: str | PathLike[str]) -> SecureCoordinator:
        return cls.from_bytes(session, read_file(path, f"The secure state {path}",
                                                 STATE_LIMITS), str(path))


def _answers_digest(answers: Sequence[bytes]) -> str:
    """The digest of a stage's answers (hex), in any order."""
    return digest(*sorted(digest(answer) for answer in answers)).hex()


def _sent(session: SecureSession, value: Any, reader: Document,
          ) -> tuple[str, dict[Hashable, bytes]] | None:
    """A coordinator state's last stage (`SecureCoordinator`), checked: None, or the
    digest of the answers it took and the messages it sent, by party."""
    if value is None:
        return None
    if not isinstance(value, dict) or set(value) != {"answers", "messages"}:
        raise reader.refuse("sent", "not the answers taken last and the messages sent")
    if not is_hex32(value["answers"]) or not isinstance(value["messages"], dict):
        raise reader.refuse("sent", "not a digest of the answers and a mapping of messages")
    messages = {}
    for name, message in value["messages"].items():
        try:
            party = json.loads(name)
        except ValueError:
            party = None
        session.index_of(party, "The coordinator's secure state, sent.messages")
        messages[party] = reader.raw(message, "sent.messages")
    return value["answers"], messages


def _entry(session: SecureSession, manifest: Any) -> tuple[Any, int, dict[str, Any]]:
    """A manifest's party (of the session), its round and its secure field, checked."""
    party, round_, problem = party_and_round(session.parties, manifest)
    if problem is not None:
        raise SecureSumError(None, party, *problem)
    return party, round_, _secure_field(manifest)


def _advertisement(session: SecureSession, coordinator: SecureSumCoordinator, party: Any,
                   fields: dict[str, Any], layout: str) -> dict[str, Any]:
    """The keys a party's upload advertises, once its session and its sums are the
    round's, and the keys are its own, signed by its identity."""
    agreement = coordinator.agreement
    if fields["session"] != agreement.session.hex():
        raise SecureSumError(None, party, f"{SECURE}.session", "not the secure session's "
                             "round of most uploads")
    if json.dumps(fields["sums"]) != layout:
        raise SecureSumError(None, party, f"{SECURE}.sums", "not the sums the other "
                             "parties send")
    try:
        data = fields["keys"].encode()
    except UnicodeEncodeError:
        raise SecureSumError(None, party, f"{SECURE}.keys", "not UTF-8 text") from None
    keys = message_from_bytes("keys", data, agreement)
    if keys["party"] != session.parties.index(party):
        raise SecureSumError(None, party, f"{SECURE}.keys.party", "the keys of another party")
    coordinator.checked_advertisement(keys)
    return keys


def _secure_field(manifest: Mapping[str, Any]) -> dict[str, Any]:
    """The manifest's secure-aggregation field, of its exact shape."""
    party = manifest.get("party")
    fields = manifest.get(SECURE)
    if not isinstance(fields, dict) or set(fields) != {"session", "sums", "keys"}:
        raise SecureSumError(None, party, SECURE, "not the secure sum's session, sums "
                             "and keys: this upload was not made under secure "
                             "aggregation with the session")
    if not (isinstance(fields["session"], str) and isinstance(fields["keys"], str)):
        raise SecureSumError(None, party, SECURE, "its session and keys are not text")
    return fields


def round_sums(coordinator: Any) -> dict[str, np.ndarray] | None:
    """Under secure aggregation, the sums of the finished `coordinator` (a
    `SecureCoordinator`, or a `ValidatedCoordinator` under validated sums; a server step
    without it is refused); None otherwise."""
    mode = get_config()["secure_aggregation"]
    if not mode:
        if coordinator is not None:
            raise ValueError("secure_sum is given, but secure_aggregation is off: run the "
                             "step under skfedkt.config_context(secure_aggregation=True), "
                             "or leave secure_sum out.")
        return None
    kind = ValidatedCoordinator if mode == "validated" else SecureCoordinator
    if not isinstance(coordinator, kind):
        raise TypeError(f"secure_aggregation is {mode!r}: pass the round's finished "
                        f"{kind.__name__} as secure_sum; got {type(coordinator).__name__}.")
    return coordinator.sums


def surviving_uploads(collected: tuple[list[PartyUpload], dict[Any, str]],
                      coordinator: SecureCoordinator | ValidatedCoordinator | None,
                      ) -> tuple[list[PartyUpload], dict[Any, str]]:
    """Of the uploads and the left-out parties `collected` (`collect_uploads`), the
    uploads of the secure sum's survivors (all, without one), each refused unless made
    for the round's session; the others left out, saying why."""
    uploads, left_out = collected
    if coordinator is None:
        return list(uploads), left_out
    session, survivors = coordinator.agreement.session.hex(), coordinator.survivors
    for upload in uploads:
        fields = upload.manifest.get(SECURE)
        if upload.party in survivors and (not isinstance(fields, dict)
                                          or fields.get("session") != session):
            raise ValueError(
                f"Party {upload.party!r}'s upload is not of the round of the secure sum "
                f"given (round {coordinator.round}): run the secure sum's stages on this "
                "round's uploads first, and give the server step their finished state.")
    lost = {upload.party: coordinator.left_out.get(
                upload.party, "left the secure sum before its end: the sums hold none of it")
            for upload in uploads if upload.party not in survivors}
    if lost:
        warnings.warn(f"Proceeding with the {len(survivors)} parties of the secure sum; left "
                      f"out {len(lost)}: " + "; ".join(f"{party!r}: {why}"
                                                      for party, why in lost.items()),
                      UserWarning)
    left_out = {**left_out, **lost}
    kept = [upload for upload in uploads if upload.party in survivors]
    missing = sorted(set(map(str, survivors)) - {str(upload.party) for upload in kept})
    if missing:
        raise ValueError(f"The secure sum holds the inputs of parties {missing}, whose "
                         "uploads are not among those given: pass every survivor's upload.")
    return kept, left_out
