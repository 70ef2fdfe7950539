"""The coordinator's side of a validated sum in a deployment (`ValidatedCoordinator`,
the leader of its two aggregators): it checks each upload's signature and its own
shares' proofs, writes the helper's request (every report's part for the helper, its
own verifier shares, and the round's verify key sealed to the helper), then takes the
helper's answer, decides each proof from both verifier shares and adds the two totals
of the parties both accepted."""

from __future__ import annotations

import json
from collections.abc import Hashable, Mapping, Sequence
from os import PathLike
from typing import Any

import numpy as np

from .._secure_sum._primitives import digest, verify
from .._validated_sum._field import FIELD64
from .._validated_sum._prio3 import SEED_SIZE, VerifyState
from .._validated_sum._sealing import seal_to
from .._validated_sum._sums import (
    LEADER,
    Aggregator,
    Report,
    SumSpec,
    ValidatedSum,
    ValidatedSumError,
    new_verify_key,
    verifier_message,
)
from ._archive import UploadLimits, read_file
from ._channel import Layout
from ._local_files import write_atomically
from ._secure_documents import (Document, b64, dumps, is_hex32, layout_json, layout_read,
                                majority, party_and_round)
from ._secure_stages import SECURE
from ._upload import LEADER_SHARES, PartyUpload, read_upload
from ._validated_report import (
    ANSWER_FORMAT,
    KEY_INFO,
    MAX_DOCUMENT_BYTES,
    MAX_REASON,
    REPORT_FIELDS,
    REQUEST_FORMAT,
    agreement_of,
    signed_report,
    specs_digest,
    specs_json,
    specs_read,
)

_COORDINATOR_FORMAT = "skfedkt validated coordinator 1"

class ValidatedCoordinator:
    """The coordinator's side of a round's validated sum (the leader of its two
    aggregators): `start` takes the parties' uploads and gives the helper's request,
    `finish` the helper's answer; then `sums` and `survivors` are what `fit_server` and
    `server_round` take (``secure_sum=``).

    Save it (`save`, on the coordinator's machine) after `start`, before sending the
    request: the same uploads then give the same request again (a coordinator whose
    request was lost in a crash sends it again with the same command), and the helper
    answers each round's request once.

    Examples
    --------
    Three parties, a coordinator and a helper, in one process (a deployment sends each
    upload, the request and the answer as a file):

    >>> import tempfile
    >>> import numpy as np, skfedkt
    >>> from sklearn.datasets import load_breast_cancer
    >>> from sklearn.tree import DecisionTreeClassifier
    >>> from skfedkt import (FedKTClassifier, HelperKey, HelperLedger, PartyIdentity,
    ...                      ValidatedCoordinator, ValidatedHelper)
    >>> X, y = load_breast_cancer(return_X_y=True)
    >>> X_public, X, y = X[:100], X[100:], y[100:]
    >>> party = np.arange(len(y)) % 3
    >>> clf = FedKTClassifier(DecisionTreeClassifier(max_depth=3), random_state=0)
    >>> identities = [PartyIdentity.generate() for _ in range(3)]  # one at each party
    >>> helper_key = HelperKey.generate()  # at the helper
    >>> with skfedkt.config_context(secure_aggregation="validated"):
    ...     session = clf.secure_session(
    ...         ["a", "b", "c"], np.bincount(party).tolist(),
    ...         identities=[key.public_bytes for key in identities],
    ...         helper=helper_key.public_bytes)
    ...     uploads = [clf.fit_party(X[party == p], y[party == p], party=name,
    ...                              classes=[0, 1], X_unlabeled=X_public,
    ...                              secure_session=session, identity=identities[p])
    ...                for p, name in enumerate("abc")]
    ...     coordinator, request = ValidatedCoordinator.start(session, uploads)
    ...     helper = ValidatedHelper(session, helper_key)
    ...     answer = helper.answer(request, HelperLedger(f"{tempfile.mkdtemp()}/l.json"))
    ...     coordinator.finish(answer)
    ...     server = clf.fit_server([upload.to_bytes() for upload in uploads], X_public,
    ...                             secure_sum=coordinator)
    >>> coordinator.survivors
    ('a', 'b', 'c')
    >>> int(coordinator.sums["class_counts"].sum()) == len(y)
    True
    """

    def __init__(self, session: Any, round_: int, layout: Layout,
                 specs: tuple[SumSpec, ...], verify_key: bytes, request: bytes,
                 leader: dict[int, dict[str, tuple[VerifyState, bytes]]],
                 left_out: dict[Any, str], uploads: str,
                 totals: dict[str, np.ndarray] | None = None, accepted: tuple[int, ...] = ()):
        self.session, self.round, self.layout, self.specs = session, round_, layout, specs
        # the digest of the uploads' reports it started from (hex)
        self.uploads = uploads
        self._verify_key, self.request = verify_key, request
        # each checked party's state and verifier share of each sum, by its index
        self._leader = leader
        # the parties whose uploads or proofs failed a check, and why
        self.left_out = left_out
        self._totals, self._accepted = totals, accepted

    @property
    def agreement(self) -> ValidatedSum:
        return agreement_of(self.session, self.round, self.specs)

    @property
    def round_session(self) -> str:
        """The round's session (hex), which its uploads' manifests name."""
        return self.session.round_session(self.round).hex()

    @property
    def stage(self) -> str:
        """``"helper"`` until the helper's answer is taken, then ``"done"``."""
        return "helper" if self._totals is None else "done"

    @classmethod
    def start(cls, session: Any, uploads: Sequence[Any],
              ) -> tuple[ValidatedCoordinator, bytes]:
        """The coordinator of the round the parties' `uploads` (`PartyUpload`, or their
        files' bytes or paths) answer, and the request to send the helper.

        Each upload must name a party of the session, the round, sums and specs of most
        uploads, this round's session, and a report of the specs' shape signed by the
        party's identity, whose proofs pass the coordinator's check; a party whose
        upload fails is left out (``left_out``, saying why). Fewer than the threshold
        left are refused, naming the parties lost.
        """
        if session.helper is None:
            raise ValueError("The secure session names no helper: it runs the masked sum "
                             "(SecureCoordinator). A validated sum's session names the "
                             "helper's public key (secure_session(..., helper=...)).")
        if not uploads:
            raise ValueError("No uploads: the validated sum starts from the parties' "
                             "uploads.")
        left_out: dict[Any, str] = {}
        entries, shares_of = [], {}
        # a file's bytes or path read as any upload is
        uploads = [upload if isinstance(upload, PartyUpload) else read_upload(upload)
                   for upload in uploads]
        for upload in uploads:
            try:
                entries.append(_entry(session, upload.manifest))
                shares_of[upload.party] = upload.payload.get(LEADER_SHARES)
            except ValidatedSumError as error:
                left_out[error.party] = error.reason
        names = [party for party, _, _ in entries]
        for party in {party for party in names if names.count(party) > 1}:
            left_out[party] = f"{names.count(party)} uploads: one party, one upload"
        entries = [entry for entry in entries if names.count(entry[0]) == 1]
        if not entries:
            raise ValueError(f"Validated sum: no upload passed the checks: {left_out}")
        round_ = majority([round_ for _, round_, _ in entries])
        written = majority([json.dumps([fields["sums"], fields["specs"]])
                             for _, _, fields in entries])
        reader = Document("The uploads' validated sums")
        sums, specs_value = json.loads(written)
        layout = layout_read(sums, reader)
        specs = specs_read(specs_value, reader, len(session.parties))
        if [(name, shape) for name, shape, _ in layout] != [(spec.name, spec.shape)
                                                            for spec in specs]:
            raise reader.refuse("specs", "not the sums' names and shapes")
        verify_key = new_verify_key()
        leader = Aggregator(agreement_of(session, round_, specs), LEADER, verify_key)
        checked: dict[int, dict[str, tuple[VerifyState, bytes]]] = {}
        reports = []
        for party, party_round, fields in entries:
            index = session.parties.index(party)
            try:
                if party_round != round_:
                    raise ValidatedSumError(party, "round", f"round {party_round}, where "
                                            f"most uploads answer round {round_}")
                if json.dumps([fields["sums"], fields["specs"]]) != written:
                    raise ValidatedSumError(party, "specs", "not the sums and specs the "
                                            "other parties prove")
                report, leader_reports = _checked_report(session, leader.agreement, index,
                                                         fields, shares_of[party])
                states, shares = leader.checked(index, leader_reports)
            except ValidatedSumError as error:
                left_out[party] = f"{error.sum_name}: {error.reason}"
                continue
            checked[index] = {name: (states[name], shares[name]) for name in states}
            reports.append(dict(report, verifier={name: b64(share)
                                                  for name, share in shares.items()}))
        if len(checked) < session.threshold:
            raise ValueError(f"Validated sum of round {round_}: {len(checked)} uploads "
                             f"passed the checks, fewer than the threshold, "
                             f"{session.threshold}; left out: {left_out}")
        request = dumps(dict(
            format=REQUEST_FORMAT, session=leader.agreement.session.hex(), round=round_,
            specs=specs_json(specs), reports=reports,
            verify_key=b64(seal_to(session.helper, KEY_INFO + leader.agreement.session,
                                   verify_key, b""))))
        given = digest(*sorted(digest(json.dumps(upload.manifest.get(SECURE), sort_keys=True)
                                      .encode()) for upload in uploads)).hex()
        return cls(session, round_, layout, specs, verify_key, request, checked,
                   left_out, given), request

    def finish(self, answer: bytes) -> None:
        """Take the helper's `answer` to this round's request: decide each party's
        proofs from both aggregators' verifier shares, and add both totals of the
        parties accepted. A party the helper refused is left out, with the helper's
        reason; an answer in which the two aggregators disagree is refused."""
        if self._totals is not None:
            raise ValueError("This round's validated sum is done: its helper's answer "
                             "was taken.")
        reader = Document("The helper's answer refused")
        document = reader.parse(answer, MAX_DOCUMENT_BYTES, ANSWER_FORMAT)
        reader.fields(document, ("format", "session", "round", "request", "accepted",
                                 "refused", "verifiers", "totals"))
        if (document["session"], document["round"], document["request"]) != (
                self.round_session, self.round, digest(self.request).hex()):
            raise reader.refuse("request", "not the answer to this round's request")
        agreement, asked = self.agreement, set(self._leader)
        leader = Aggregator(agreement, LEADER, self._verify_key)
        accepted, refused = document["accepted"], document["refused"]
        if not (isinstance(accepted, list) and all(type(i) is int for i in accepted)
                and isinstance(refused, dict) and all(isinstance(why, str)
                                                      for why in refused.values())):
            raise reader.refuse("accepted", "not a list of parties and a mapping of "
                                "refusals")
        if (len(set(accepted)) != len(accepted) or set(accepted) | {
                _index_key(key) for key in refused} != asked
                or set(accepted) & {_index_key(key) for key in refused}):
            raise reader.refuse("accepted", "not the request's parties, each accepted or "
                                "refused once")
        verifiers = document["verifiers"]
        if not isinstance(verifiers, dict) or set(verifiers) != set(map(str, accepted)):
            raise reader.refuse("verifiers", "not one set of verifier shares per party "
                                "accepted")
        outputs = {}
        for index in sorted(accepted):
            shares = verifiers[str(index)]
            if not isinstance(shares, dict) or set(shares) != {s.name for s in self.specs}:
                raise reader.refuse(f"verifiers.{index}", "not one share per sum")
            party_outputs = {}
            for name, (state, leader_share) in self._leader[index].items():
                helper_share = reader.raw(shares[name], f"verifiers.{index}.{name}")
                try:
                    message = verifier_message(agreement, index, name, leader_share,
                                               helper_share)
                    party_outputs[name] = leader.output_share(state, index, name, message)
                except ValidatedSumError as error:
                    raise ValueError(f"The helper accepted party {error.party!r}, whose "
                                     f"proof the coordinator refuses ({error.reason}): the "
                                     "two aggregators disagree, and the round's sum is "
                                     "refused.") from None
            outputs[index] = party_outputs
        if len(accepted) < self.session.threshold:
            raise reader.refuse("accepted", f"{len(accepted)} parties, fewer than the "
                                f"threshold, {self.session.threshold}")
        totals = document["totals"]
        if not isinstance(totals, dict) or set(totals) != {s.name for s in self.specs}:
            raise reader.refuse("totals", "not one total per sum")
        leader_totals = leader.aggregate(outputs)
        helper_totals = {name: FIELD64.decode(reader.raw(
            totals[name], f"totals.{name}",
            8 * len(leader_totals[name]))) for name in leader_totals}
        for key, why in refused.items():
            self.left_out[self.session.parties[_index_key(key)]] = (
                "the helper refused it: " + why[:MAX_REASON])
        self._accepted = tuple(sorted(accepted))
        self._totals = {name: FIELD64.add(leader_totals[name], helper_totals[name])
                        for name in leader_totals}

    @property
    def survivors(self) -> tuple[Hashable, ...]:
        """The parties whose inputs the sums hold: those whose every proof passed."""
        self._check_done()
        return tuple(self.session.parties[index] for index in self._accepted)

    @property
    def sums(self) -> dict[str, np.ndarray]:
        """The sums of the survivors' inputs, by name."""
        self._check_done()
        assert self._totals is not None
        kinds = {name: kind for name, _, kind in self.layout}
        sums = {}
        for spec in self.specs:
            values = spec.decoded(self._totals[spec.name], len(self._accepted))
            sums[spec.name] = (np.rint(values).astype(np.int64) if kinds[spec.name] == "i"
                               else values)
        return sums

    def _check_done(self) -> None:
        if self._totals is None:
            raise ValueError("The round's validated sum waits for the helper's answer: "
                             "give it to finish.")

    def to_bytes(self) -> bytes:
        """The state's bytes: UTF-8 JSON, holding the round's verify key."""
        return dumps(dict(
            format=_COORDINATOR_FORMAT, session=self.session.session.hex(),
            round=self.round, sums=layout_json(self.layout), specs=specs_json(self.specs),
            verify_key=b64(self._verify_key), request=b64(self.request),
            leader={str(index): {name: [b64(FIELD64.encode(state.out_share)),
                                        None if state.corrected_joint_rand_seed is None
                                        else b64(state.corrected_joint_rand_seed),
                                        b64(share)]
                                 for name, (state, share) in sums.items()}
                    for index, sums in self._leader.items()},
            left_out={json.dumps(party): why for party, why in self.left_out.items()},
            uploads=self.uploads, totals=None if self._totals is None else {
                name: b64(FIELD64.encode(total)) for name, total in self._totals.items()},
            accepted=list(self._accepted)))

    def save(self, path: str | PathLike[str]) -> int:
        """Write the coordinator's state to `path` (mode 0600: it holds the verify key)."""
        return write_atomically(path, self.to_bytes(), private=True)

    @classmethod
    def from_bytes(cls, session: Any, data: bytes,
                   name: str = "the coordinator's validated state") -> ValidatedCoordinator:
        reader = Document(f"Validated coordinator state refused ({name})")
        document = reader.parse(data, MAX_DOCUMENT_BYTES, _COORDINATOR_FORMAT)
        reader.fields(document, ("format", "session", "round", "sums", "specs",
                                 "verify_key", "request", "leader", "left_out", "uploads",
                                 "totals", "accepted"))
        if document["session"] != session.session.hex():
            raise reader.refuse("session", "not this secure session's")
        round_ = reader.count(document["round"], "round", 0, 2 ** 31)
        layout = layout_read(document["sums"], reader)
        specs = specs_read(document["specs"], reader, len(session.parties))
        agreement = agreement_of(session, round_, specs)
        leader = document["leader"]
        if not isinstance(leader, dict):
            raise reader.refuse("leader", "not a mapping of parties")
        checked: dict[int, dict[str, tuple[VerifyState, bytes]]] = {}
        for key, sums in leader.items():
            index = _index_key(key)
            if not 0 <= index < len(session.parties) or not isinstance(sums, dict) or (
                    set(sums) != {spec.name for spec in specs}):
                raise reader.refuse("leader", "not each party's state of each sum")
            checked[index] = {}
            for spec in specs:
                entry = sums[spec.name]
                prio = agreement.prio3(spec, index)
                if not (isinstance(entry, list) and len(entry) == 3):
                    raise reader.refuse(f"leader.{key}", "not a state and a verifier share")
                out = FIELD64.decode(reader.raw(entry[0], f"leader.{key}",
                                                8 * prio.circuit.output_len))
                seed = None if entry[1] is None else reader.raw(entry[1], f"leader.{key}",
                                                                SEED_SIZE)
                checked[index][spec.name] = (VerifyState(out, seed),
                                             reader.raw(entry[2], f"leader.{key}"))
        left_out = document["left_out"]
        if not isinstance(left_out, dict) or not all(isinstance(why, str)
                                                     for why in left_out.values()):
            raise reader.refuse("left_out", "not a mapping of parties to reasons")
        totals, accepted = document["totals"], document["accepted"]
        if totals is not None:
            if not isinstance(totals, dict) or set(totals) != {s.name for s in specs}:
                raise reader.refuse("totals", "not one total per sum")
            totals = {spec.name: FIELD64.decode(reader.raw(
                totals[spec.name], "totals",
                8 * agreement.prio3(spec, 0).circuit.output_len)) for spec in specs}
        if not isinstance(accepted, list) or not set(accepted) <= set(checked):
            raise reader.refuse("accepted", "not parties the coordinator checked")
        return cls(session, round_, layout, specs,
                   reader.raw(document["verify_key"], "verify_key", SEED_SIZE),
                   reader.raw(document["request"], "request"), checked,
                   {_party_key(key): why for key, why in left_out.items()},
                   reader.digest(document["uploads"], "uploads"), totals,
                   tuple(accepted))

    @classmethod
    def load(cls, session: Any, path: str | PathLike[str]) -> ValidatedCoordinator:
        return cls.from_bytes(session, read_file(path, f"The validated state {path}",
                                                 UploadLimits(max_file_bytes=MAX_DOCUMENT_BYTES)),
                              str(path))

    def check_specs(self, expected: Sequence[SumSpec]) -> None:
        """Refuse sums proved by other specs than `expected`, the server's plan's."""
        if tuple(expected) != self.specs:
            raise ValueError("The validated sum's specs (what each party's proofs show) "
                             "are not those of this server's estimator and session: run "
                             "the server step with the parties' estimator and session.")


def _index_key(key: Any) -> int:
    """A party's index written as a document's key."""
    return int(key) if isinstance(key, str) and key.isdigit() and len(key) < 10 else -1


def _party_key(key: str) -> Any:
    try:
        return json.loads(key)
    except ValueError:
        return key


def _entry(session: Any, manifest: Any) -> tuple[Any, int, dict[str, Any]]:
    """A manifest's party (of the session), its round and its secure field, checked."""
    party, round_, problem = party_and_round(session.parties, manifest)
    if problem is not None:
        raise ValidatedSumError(party, *problem)
    fields = manifest.get(SECURE)
    if not isinstance(fields, dict) or set(fields) != set(REPORT_FIELDS):
        raise ValidatedSumError(party, SECURE, "not a validated report: this upload was not "
                                "made under the session's validated sums")
    return party, round_, fields


def _checked_report(session: Any, agreement: ValidatedSum, index: int,
                    fields: Mapping[str, Any], shares: Any,
                    ) -> tuple[dict[str, Any], dict[str, Report]]:
    """A party's report as the coordinator passes it to the helper (its parts, the
    digests of its leader shares, its sealed helper shares and signature) and its
    leader reports (its `shares` with their parts), once it is of the round's session
    and signed by the party."""
    party, reader = session.parties[index], Document("report")

    def refuse(field: str, reason: str) -> ValidatedSumError:
        return ValidatedSumError(party, f"{SECURE}.{field}", reason)

    if fields["session"] != agreement.session.hex():
        raise refuse("session", "not this round's secure session")
    names = [spec.name for spec in agreement.specs]
    parts = fields["parts"]
    if not isinstance(parts, dict) or set(parts) != set(names):
        raise refuse("parts", "not one sum's joint randomness parts per sum")
    if not isinstance(shares, dict) or set(shares) != set(names) or not all(
            isinstance(share, np.ndarray) and share.dtype == np.uint8 and share.ndim == 1
            for share in shares.values()):
        raise ValidatedSumError(party, LEADER_SHARES, "not one leader share per sum, as "
                                "bytes (an array of uint8)")
    try:
        leader = {name: Report(reader.raw(parts[name], "parts"), shares[name].tobytes())
                  for name in names}
        sealed = reader.raw(fields["helper"], "helper")
        signature = reader.raw(fields["signature"], "signature", 64)
    except ValueError as error:
        raise refuse("parts", str(error).split(", ", 1)[-1].rstrip(".")) from None
    digests = [digest(leader[name].share) for name in names]
    specs = specs_digest(agreement.specs)
    if not verify(session.identities[index], signature, signed_report(
            agreement.session, index, specs, [leader[name].parts for name in names],
            digests, sealed)):
        raise refuse("signature", "not the party's signature of its report, by the "
                     "identity the session names")
    return dict(party=index, parts={name: b64(leader[name].parts) for name in names},
                leader={name: value.hex() for name, value in zip(names, digests)},
                helper=fields["helper"], signature=fields["signature"]), leader


