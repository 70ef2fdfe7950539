"""Flower apps that run skfedkt's algorithms across organisations.

A consortium that already runs Flower (its SuperLink and SuperNodes, with TLS,
authentication and deployment) gets every skfedkt algorithm without transport code:
`client_app` runs an estimator's party step on each SuperNode and `server_app` its
server step. The apps know no algorithm: they ask the estimator (`BaseFederatedClassifier`)
whether its server runs rounds, and run them the same way for every algorithm. The
message payload is the upload file of the file-based deployment
(`skfedkt.PartyUpload`), as bytes in a ``ConfigRecord``: the server checks and loads it
the same way, never with pickle; a round's weights (the averaging algorithms) travel in
that file too, checked (manifest, shapes, finite values, rows) before they are averaged.

Needs the ``flower`` extra: ``pip install ".[flower]"`` from the source tree.

Examples
--------
In-process, with Flower's simulation engine (each simulated SuperNode is a party)::

    from flwr.simulation import run_simulation
    from skfedkt.flower import client_app, server_app

    clf = ...  # the skfedkt classifier and parameters the consortium agreed on
    def party_data(context):  # on a SuperNode: read the party's own rows
        p = context.node_config["partition-id"]
        return X[groups == p], y[groups == p], p
    models = []
    run_simulation(
        server_app=server_app(clf, X_public, n_parties=3,
                              on_fit=lambda model, context: models.append(model)),
        client_app=client_app(clf, party_data, X_public, classes=[0, 1]),
        num_supernodes=3,
    )
"""

import re
import time
import warnings
from os import PathLike

try:
    from flwr.app import (
        ConfigRecord,
        Message,
        MessageType,
        RecordDict,
    )
    from flwr.clientapp import ClientApp
    from flwr.serverapp import Grid, ServerApp
except ImportError as exc:  # an optional dependency
    raise ImportError(
        "skfedkt.flower needs Flower 1.22 or newer: pip install 'flwr[simulation]>=1.22' "
        f"(or, from the source tree, pip install '.[flower]'); importing it failed: {exc}"
    ) from exc
from sklearn.base import clone

from ._config import config_context
from ._deployment._secure_coordinator import SecureCoordinator
from ._deployment._secure_stages import SecureParty
from ._deployment._identity import HelperKey, PartyIdentity
from ._deployment._local_files import step_lock
from ._deployment._validated_coordinator import ValidatedCoordinator
from ._deployment._validated_helper import HelperLedger, ValidatedHelper
from ._deployment._ledger import InputLedger
from ._deployment._upload import read_upload

_RECORD = "skfedkt"
# where a SuperNode keeps its side of the round's secure sum between messages
_SECURE_STATE = "skfedkt-secure-state"


def _payload(data=b"", secure_stage=False, helper=False):
    """A message's record: its bytes, whether it is a stage of a secure sum, and, in a
    reply, whether its node is the validated sum's helper."""
    return RecordDict({_RECORD: ConfigRecord({"data": data, "secure_stage": secure_stage,
                                              "helper": helper})})


def _bytes_of(message):
    return message.content[_RECORD]["data"]


def client_app(estimator, party_data, X_public, classes, *, party_seed=None,
               secure_session=None, identity=None, ledger=None, helper=None):
    """A Flower ClientApp that runs `estimator`'s party step on the SuperNode's data.

    Parameters
    ----------
    estimator : estimator or callable
        The agreed algorithm and parameters (the same on every node and the server):
        a skfedkt classifier (any `BaseFederatedClassifier`), or ``estimator(context) ->
        estimator`` to choose it when the run starts (e.g. from ``context.run_config``).
    party_data : callable
        ``party_data(context) -> (X, y, party)``: the party's rows, labels and name,
        read on the SuperNode (e.g. from a path in ``context.node_config``).
    X_public : array-like or callable
        The agreed public set, or ``X_public(context) -> array-like`` to read it on the
        SuperNode.
    classes : array-like
        The agreed class labels.
    party_seed : int, default=None
        Passed to ``fit_party``.
    secure_session : SecureSession or callable, default=None
        Under secure aggregation, the consortium's session (or ``secure_session(context)
        -> SecureSession``), the server's too: each round's upload sends the party's
        keys, the node keeps its sums and secrets in ``context.state``, and answers the
        server's stages of the secure sum, refusing what an honest party never gives.
    identity : PartyIdentity, path or callable, default=None
        With `secure_session`, required (read only then): the party's private
        identity key (a
        `skfedkt.PartyIdentity`, the path of its file, or ``identity(context)`` giving
        either, e.g. from a path in ``context.node_config``), whose public key the
        session names for the node's party. It signs the node's keys of every round,
        which every other node checks. It is not the SuperNode's authentication key,
        which lets the SuperLink know the node; a consortium may hand out both together.
    ledger : path or callable, default=None
        With `secure_session`, required (read only then): the file of the node's
        `skfedkt.InputLedger` (or ``ledger(context)`` giving it), kept across Flower runs
        and sessions: before the node gives its unmasking shares it refuses a second sum
        of its input with other survivors, and a round whose survivors are not the last
        round's. Under validated sums (a session that names a helper) a party's node
        keeps nothing, and needs no ledger.
    helper : callable, default=None
        Under validated sums, ``helper(context)``: on the helper's node, its private
        `skfedkt.HelperKey` (or the path of its file) and the path of its
        `skfedkt.HelperLedger`; None on the parties' nodes. The helper's node answers
        the server's request of each round (:doc:`/validated_sums`) and sends no
        upload; its data are never read.

    Returns
    -------
    app : flwr.clientapp.ClientApp
    """
    app = ClientApp()

    @app.query()
    def party_step(message: Message, context) -> Message:
        session = _read(secure_session, context)
        stage = message.content[_RECORD].get("secure_stage", False)
        helper_of = None if helper is None else helper(context)
        if helper_of is not None:  # the helper's node: a request, or no upload
            key, ledger_path = helper_of
            answer = (_helper_answer(session, key, ledger_path, _bytes_of(message)) if stage
                      else b"")
            return Message(content=_payload(answer, secure_stage=stage, helper=True),
                           reply_to=message)
        key = None if session is None else _identity(identity, context)
        masked = session is not None and session.helper is None
        if stage:
            answer = _secure_answer(session, key, _ledger(ledger, context),
                                    _bytes_of(message), context)
            return Message(content=_payload(answer, secure_stage=True), reply_to=message)
        estimator_ = _read(estimator, context)
        X, y, party = party_data(context)
        options = dict(party=party, classes=classes, X_unlabeled=_read(X_public, context),
                       party_seed=party_seed, secure_session=session, identity=key)
        server_message = _bytes_of(message)
        if estimator_.runs_rounds:  # the server's last message
            options["message"] = server_message or None
        if masked:  # each round of a session is started once
            _ledger(ledger, context)  # and no stage is answered without its ledger
            SecureParty.refuse_a_started_round(
                session, context.state[_SECURE_STATE]["state"]
                if _SECURE_STATE in context.state else None,
                read_upload(server_message).manifest.get("round", 0) if server_message
                else 0, party)
        with config_context(secure_aggregation=_mode(session)):
            upload = estimator_.fit_party(X, y, **options)
        if masked:  # kept on the node: it answers the secure sum's stages
            context.state[_SECURE_STATE] = ConfigRecord(
                {"state": upload.secure_state.to_bytes()})
        return Message(content=_payload(upload.to_bytes()), reply_to=message)

    return app


def _identity(identity, context):
    """The node's identity (`client_app`'s `identity`), its file read where a path is
    given."""
    identity = _read(identity, context)
    return PartyIdentity.load(identity) if isinstance(identity, (str, PathLike)) else identity


def _ledger(ledger, context):
    """The node's `InputLedger` (`client_app`'s `ledger`), refused where none is given."""
    path = _read(ledger, context)
    if path is None:
        raise ValueError("A stage of a secure sum reached a node without its ledger: pass "
                         "client_app ledger=, the file of what the node has helped unmask "
                         "(kept across runs).")
    return InputLedger(path)


def _secure_answer(session, identity, ledger, data, context):
    """The node's answer to the server's message `data` of the secure sum: its state
    loaded from ``context.state`` and saved back once it answers (a refused message
    changes nothing), its `ledger` consulted before it unmasks."""
    if session is None or _SECURE_STATE not in context.state:
        raise ValueError("A stage of a secure sum reached a node without a secure "
                         "session or an upload of this round: pass secure_session to "
                         "client_app, as to server_app.")
    state = SecureParty.from_bytes(session, context.state[_SECURE_STATE]["state"], identity)
    answer = state.answer(data, ledger)
    context.state[_SECURE_STATE] = ConfigRecord({"state": state.to_bytes()})
    return answer


def _last_line(reason):
    """The last line of a node's error (Flower sends its whole traceback), without the
    terminal's colour codes."""
    lines = [line for line in re.sub(r"\x1b\[[0-9;]*m", "", str(reason)).splitlines()
             if line.strip()]
    return lines[-1].strip() if lines else "no reason given"


def _mode(session):
    """The ``secure_aggregation`` of a step with `session` (None: none)."""
    return False if session is None else session.mode


def _helper_answer(session, key, ledger, request):
    """The helper's answer to the server's `request`, its ledger a file on its node,
    locked while it answers."""
    if session is None or session.helper is None:
        raise ValueError("client_app's helper answers validated sums: pass it the "
                         "secure_session that names the helper's public key.")
    key = HelperKey.load(key) if isinstance(key, (str, PathLike)) else key
    with step_lock(ledger, "the helper's answer"):
        return ValidatedHelper(session, key).answer(request, HelperLedger(ledger))


def _read(data, context):
    return data(context) if callable(data) else data


def _wait_for_nodes(grid, n_parties, timeout, min_parties):
    """The SuperNodes' ids, once `n_parties` of them registered, or after `timeout`
    seconds as long as `min_parties` did."""
    deadline = time.monotonic() + timeout
    while True:
        nodes = sorted(grid.get_node_ids())
        if len(nodes) >= n_parties:
            return nodes
        if time.monotonic() > deadline:
            if min_parties is not None and len(nodes) >= min_parties:
                warnings.warn(
                    f"Only {len(nodes)} of {n_parties} SuperNodes connected within "
                    f"{timeout} s; going on with them (min_parties={min_parties}).",
                    UserWarning)
                return nodes
            raise TimeoutError(
                f"Only {len(nodes)} of {n_parties} SuperNodes connected within {timeout} "
                f"s{'' if min_parties is None else f' (min_parties={min_parties})'}; no "
                "model is written."
            )
        time.sleep(0.5)


class _Federation:
    """The SuperNodes still in a run: a node that replies with an error, or not within
    `timeout` seconds, is dropped from the run (warned, naming it and why) as long as
    `min_parties` nodes remain; otherwise the run stops with no model. Without
    `min_parties` every node must answer every message."""

    def __init__(self, grid, nodes, timeout, min_parties):
        self.grid, self.nodes, self.timeout = grid, list(nodes), timeout
        self.min_parties = min_parties
        self.dropped = {}  # {"SuperNode <id>": why}
        self.helper = None  # under validated sums, the helper's node

    def drop(self, failures, what, tolerated=False):
        """Drop the nodes of `failures` ({node: why}); a RuntimeError if too few stay
        (unless `tolerated`: the secure sum's threshold decides)."""
        if not failures:
            return
        left = [node for node in self.nodes if node not in failures]
        reasons = "; ".join(f"SuperNode {node}: {why}" for node, why in failures.items())
        if not tolerated and (self.min_parties is None or len(left) < self.min_parties):
            raise RuntimeError(
                f"{len(failures)} of {len(self.nodes)} SuperNodes failed {what} ({reasons})"
                + ("" if self.min_parties is None else
                   f"; {len(left)} left, below min_parties={self.min_parties}")
                + "; no model is written."
            )
        warnings.warn(f"Going on with {len(left)} SuperNodes after {what}; dropped "
                      f"{reasons}.", UserWarning)
        self.nodes = left
        self.dropped.update({f"SuperNode {node}": why for node, why in failures.items()})

    def ask(self, data, what):
        """Every remaining node's reply (bytes) to `data`, in node order."""
        return self.ask_each(dict.fromkeys(self.nodes, data), what)

    def ask_each(self, data, what, secure_stage=False):
        """The replies (bytes), in node order, of the nodes of `data` ({node: bytes}) to
        their bytes; in a secure sum's stage, a node that fails leaves the run, and the
        sum's threshold decides whether it goes on."""
        messages = {node: Message(content=_payload(sent, secure_stage), dst_node_id=node,
                                  message_type=MessageType.QUERY)
                    for node, sent in data.items()}
        answers = self.grid.send_and_receive(list(messages.values()), timeout=self.timeout)
        # a reply names the message it answers (the grid set its id on sending): the
        # SuperLink itself answers for a node that stopped sending heartbeats
        sent_to = {message.metadata.message_id: node for node, message in messages.items()}
        replies = {sent_to[reply.metadata.reply_to_message_id]: reply for reply in answers
                   if reply.metadata.reply_to_message_id in sent_to}
        failed = {node: (f"replied with an error: {_last_line(replies[node].error.reason)}"
                         if node in replies else f"did not answer within {self.timeout} s")
                  for node in data if node not in replies or replies[node].has_error()}
        if self.helper in failed:
            raise RuntimeError(f"The validated sum's helper (SuperNode {self.helper}) "
                               f"{failed[self.helper]} in {what}; no model is written.")
        helpers = [node for node, reply in replies.items()
                   if node not in failed and reply.content[_RECORD].get("helper", False)]
        if helpers and self.helper is None:  # the first step finds the helper's node
            if len(helpers) > 1:
                raise RuntimeError(f"SuperNodes {helpers} each answer as the validated "
                                   "sum's helper: one node is; no model is written.")
            self.helper, = helpers
            self.nodes.remove(self.helper)
        self.drop(failed, what, tolerated=secure_stage)
        asked = [self.helper] if set(data) == {self.helper} else self.nodes
        return [_bytes_of(replies[node]) for node in asked if node in data]

    def securely_summed(self, session, uploads, what, trusted):
        """The finished secure sum of the round whose `uploads` (bytes, in node order)
        the nodes sent, its stages run with the nodes that sent them (under validated
        sums: the request to the helper's node)."""
        if session.helper is not None:
            if self.helper is None:
                raise RuntimeError("The session names a helper, but no SuperNode answered "
                                   "as the helper (client_app's helper=): no model is "
                                   "written.")
            validated, request = ValidatedCoordinator.start(
                session, [read_upload(data, trusted=trusted) for data in uploads])
            (answer,) = self.ask_each({self.helper: request},
                                      f"{what}'s validated sum (the helper)",
                                      secure_stage=True)
            validated.finish(answer)  # the server step warns of the parties left out
            return validated
        manifests = [read_upload(data, trusted=trusted).manifest for data in uploads]
        node_of = {manifest["party"]: node for manifest, node in zip(manifests, self.nodes)}
        coordinator, out = SecureCoordinator.start(session, manifests,
                                                   min_parties=self.min_parties)
        while coordinator.stage != "done":
            nodes = {node_of[party]: data for party, data in out.items()}
            answers = self.ask_each(nodes, f"{what}'s secure sum ({coordinator.stage})",
                                    secure_stage=True)
            # each answer is its node's party's: one that speaks for another is dropped
            party_of = {node: party for party, node in node_of.items()}
            out = coordinator.advance(answers, [party_of[node] for node in self.nodes
                                                if node in nodes])
        return coordinator

    def fitted(self, model):
        """`model` with the dropped nodes among its left-out parties."""
        model.left_out_parties_ = {**model.left_out_parties_, **self.dropped}
        return model


def server_app(estimator, X_public, n_parties, on_fit, *, classes=None, trusted=(),
               min_parties=None, limits=None, timeout=600.0, secure_session=None):
    """A Flower ServerApp that runs `estimator`'s server step on the parties' uploads.

    An algorithm without rounds takes one; one with rounds (``runs_rounds``) runs them
    until the server's message says done, then asks every party for its final upload.

    Parameters
    ----------
    estimator : estimator or callable
        The agreed algorithm and parameters, or ``estimator(context) -> estimator``
        (as in `client_app`).
    X_public : array-like or callable
        The agreed public set, or ``X_public(context) -> array-like`` to read it when
        the run starts (e.g. from a path in ``context.run_config``).
    n_parties : int
        SuperNodes to wait for; every one of them is a party.
    on_fit : callable
        ``on_fit(estimator, context)``: receives the fitted estimator, e.g. to save it
        with `skfedkt.save_model` at a path of ``context.run_config``.
    classes, trusted, limits
        As in ``fit_server``.
    min_parties : int, default=None
        As in ``fit_server``, and for the SuperNodes too: one that replies with an
        error, or not within `timeout`, is dropped from the run (a warning names it and
        why; the model lists it in ``left_out_parties_``), and after `timeout` the run
        starts with the SuperNodes connected, as long as `min_parties` remain;
        otherwise the run stops and `on_fit` is not called. None: every one of the
        `n_parties` SuperNodes must answer every message.
    timeout : float, default=600
        Seconds to wait for the SuperNodes and for each round's replies.
    secure_session : SecureSession or callable, default=None
        Under secure aggregation, the consortium's session (or ``secure_session(context)
        -> SecureSession``), the nodes' too: after each round's uploads, the server runs
        the stages of their secure sum with the nodes that sent them, and its steps take
        the sums alone. A node that fails a stage leaves the run; below the session's
        threshold the round is refused, naming the parties lost. A session that names a
        helper runs validated sums: the server waits for one more SuperNode, the
        helper's (`client_app`'s ``helper``), and sends it each round's request.

    Returns
    -------
    app : flwr.serverapp.ServerApp
    """
    app = ServerApp()
    checks = dict(classes=classes, trusted=trusted, min_parties=min_parties, limits=limits)

    @app.main()
    def server_step(grid: Grid, context) -> None:
        session = _read(secure_session, context)
        with config_context(secure_aggregation=_mode(session)):
            _serve(grid, context, session)

    def _serve(grid, context, session):
        server, public = clone(_read(estimator, context)), _read(X_public, context)
        # under validated sums one more node: the helper
        helper = session is not None and session.helper is not None
        nodes = _wait_for_nodes(grid, n_parties + helper, timeout,
                                None if min_parties is None else min_parties + helper)
        federation = _Federation(grid, nodes, timeout, min_parties)
        if len(nodes) < n_parties + helper:
            missing = n_parties + helper - len(nodes)
            federation.dropped[f"{missing} SuperNode{'s' * (missing > 1)}"] = (
                f"did not connect within {timeout} s")
        def uploads_and_sums(data, what):
            uploads = federation.ask(data, what)
            return uploads, dict(checks, secure_sum=None if session is None else
                                 federation.securely_summed(session, uploads, what, trusted))

        if not server.runs_rounds:
            uploads, options = uploads_and_sums(b"", "the party step")
            on_fit(federation.fitted(server.fit_server(uploads, public, **options)), context)
            return
        message = None
        round_ = 0
        while message is None or not message.manifest["done"]:
            round_ += 1
            uploads, options = uploads_and_sums(
                b"" if message is None else message.to_bytes(), f"round {round_}")
            message = read_upload(
                server.server_round(uploads, public, message=message, **options).to_bytes()
            )
        uploads, options = uploads_and_sums(message.to_bytes(), "the final step")
        on_fit(federation.fitted(server.fit_server(uploads, public, message=message,
                                                   **options)), context)

    return app
