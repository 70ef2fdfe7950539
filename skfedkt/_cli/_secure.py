"""Command line for secure aggregation in a deployment: ``skfedkt identity``,
``secure-session``, ``secure-party`` and ``secure-coordinator``, and the secure options
of ``party`` and ``server``.

Before round 0 each party makes its identity key once (``skfedkt identity --out
h0.key``, which writes the public key beside it, ``h0.pub``) and sends the public key to
whoever writes the session (``skfedkt secure-session ... --identities h0.pub ...``). A
round runs as files: each party's ``skfedkt party ... --secure-session S --secure-state
F --identity h0.key`` writes its upload (its keys, signed by its identity, in the
manifest, its sums kept in F);
the coordinator's ``skfedkt secure-coordinator --uploads ...`` writes one roster per
party; then four times each party answers its file (``secure-party``) and the
coordinator reads the answers (``secure-coordinator --answers ...``); the server step
(``skfedkt server ... --secure-state C``) takes the sums.
"""

import math
import re
from pathlib import Path

from .._deployment._archive import UploadLimits, read_file
from .._deployment._local_files import remove_leftovers, step_lock, write_atomically
from .._config import config_context
from .._deployment._identity import HelperKey, PartyIdentity
from .._deployment._secure_coordinator import SENT_BEFORE, SecureCoordinator
from .._deployment._validated_coordinator import ValidatedCoordinator
from .._deployment._ledger import InputLedger
from .._deployment._secure_stages import SecureParty, SecureSession
from .._secure_sum import SecureSumError
from .._deployment._upload import read_upload
from ._validated import validated_coordinator_stage

# what a party answers to each of the coordinator's messages, as `secure-party` says it
_ANSWERS = {"roster": "its shares", "routed": "its masked sums",
            "survivors": "its confirmation", "request": "its unmasking shares"}
# the parties' messages of each stage, and the coordinator's, in words
_IN_WORDS = {"keys": "keys", "shares": "sealed shares", "masked": "masked sums",
             "confirm": "confirmations", "unmask": "unmasking shares",
             "roster": "roster", "routed": "routed shares", "survivors": "survivors",
             "request": "unmasking request", "uploads": "uploads", "answers": "answers"}
# a message of the largest sum a session allows: its words in base64, and room
_MESSAGE_LIMITS = UploadLimits(max_file_bytes=1 << 30)


def add_secure_options(party, server):
    """The secure options of ``skfedkt party`` and ``skfedkt server``."""
    party.add_argument("--secure-session", metavar="SESSION",
                       help="run under secure aggregation with this session "
                       "(skfedkt secure-session): the upload sends the party's keys, "
                       "and its sums wait in --secure-state; under a session that names "
                       "a helper (validated sums), the upload holds the party's signed "
                       "report, and it keeps no --secure-state")
    party.add_argument("--secure-state", metavar="FILE",
                       help="with --secure-session: the file that keeps this party's sums "
                       "and secrets for secure-party (readable by this user alone; never "
                       "send it)")
    party.add_argument("--identity", metavar="KEY",
                       help="with --secure-session: this party's private identity key "
                       "(skfedkt identity), whose public key the session names for it")
    server.add_argument("--secure-session", metavar="SESSION",
                        help="run under secure aggregation with this session: the server "
                        "takes the sums of the round's finished --secure-state")
    server.add_argument("--secure-state", metavar="FILE",
                        help="with --secure-session: the coordinator's state once "
                        "secure-coordinator says the sum is done")


def add_secure_commands(commands, algorithm_command, formatter, positive, label):
    """The identity, secure-session, secure-party and secure-coordinator subcommands."""
    identity = commands.add_parser(
        "identity", formatter_class=formatter,
        help="make a party's identity key for secure aggregation, once",
        description="Write a new Ed25519 identity key: the private key to --out (PEM, "
        "readable by this user alone: keep it, never send it) and the public key beside "
        "it, with the suffix .pub (send it to whoever writes the secure session). The "
        "party's keys of every round are signed by it, so that no party accepts keys "
        "the coordinator made up.",
    )
    identity.add_argument("--out", required=True,
                          help="the private key file to write (e.g. h0.key)")

    session = algorithm_command(
        "secure-session", "agree on a session of secure aggregation, before round 0",
        "Write the session every party and the coordinator hold: the parties, their "
        "rows, their public identity keys, the threshold and the fixed-point encoding "
        "the algorithm needs.",
    )
    session.add_argument("--parties", required=True, nargs="+", type=label,
                         help="every party's name, in the agreed order")
    session.add_argument("--party-rows", required=True, nargs="+", type=positive(int),
                         help="each party's rows, in the order of --parties")
    session.add_argument("--identities", required=True, nargs="+", metavar="PUBLIC_KEY",
                         help="each party's public identity key (the .pub file of "
                         "skfedkt identity), in the order of --parties")
    session.add_argument("--threshold", type=positive(int),
                         help="the fewest parties that must stay to the end of a round "
                         "(default: the fewest above two thirds)")
    session.add_argument("--colluding", type=int, metavar="C",
                         help="the most parties that may collude with the coordinator, "
                         "against whom noise in shares is sized (default: 2 x threshold "
                         "- parties - 1, the most the secure sum itself withstands)")
    session.add_argument("--helper", metavar="PUBLIC_KEY",
                         help="the helper's public key (the .pub file of skfedkt "
                         "helper-key): the session then runs validated sums, whose two "
                         "aggregators (the coordinator and this helper) check each "
                         "party's proofs; without it, the masked sum")
    session.add_argument("--out", required=True, help="the session file to write")

    party = commands.add_parser(
        "secure-party", formatter_class=formatter,
        help="answer one stage of the secure sum, at a party",
        description="Read the coordinator's file for this party, check it, and write "
        "the party's answer; the state file keeps the party's progress (a stage is "
        "answered once; a refused file changes nothing; the file answered last is "
        "answered again with the same bytes, as after a crash).",
    )
    party.add_argument("--session", required=True, help="the secure session")
    party.add_argument("--state", required=True,
                       help="this party's state (from skfedkt party --secure-state)")
    party.add_argument("--identity", required=True, metavar="KEY",
                       help="this party's private identity key (skfedkt identity)")
    party.add_argument("--message", required=True, help="the coordinator's file for this party")
    party.add_argument("--out", required=True, help="the answer to send the coordinator")
    party.add_argument("--ledger", metavar="FILE",
                       help="what this party has helped unmask, across sessions and "
                       "rounds, which refuses a second sum of its input with other "
                       "survivors (default: skfedkt-ledger-<its identity's key>.json "
                       "beside --state); keep it for every session")

    coordinator = commands.add_parser(
        "secure-coordinator", formatter_class=formatter,
        help="run one stage of the secure sum, at the coordinator",
        description="Start the round's secure sum from the parties' uploads (--uploads), "
        "or take the parties' answers to the last stage (--answers); writes one file per "
        "party still in the sum to --out-dir. A party whose answer is missing has "
        "dropped; fewer than the threshold refuse the round, naming the parties lost. "
        "Under a session that names a helper (validated sums), --uploads writes one "
        "request.json for skfedkt secure-helper, and --answers takes the helper's answer.",
    )
    coordinator.add_argument("--session", required=True, help="the secure session")
    coordinator.add_argument("--state", required=True, help="the coordinator's state file")
    given = coordinator.add_mutually_exclusive_group(required=True)
    given.add_argument("--uploads", nargs="+", help="the parties' uploads of the round")
    given.add_argument("--answers", nargs="+", help="the parties' answers to the last stage "
                       "(validated sums: the helper's answer)")
    coordinator.add_argument("--out-dir", help="the folder for the files to send "
                             "(required until the sum is done)")
    coordinator.add_argument("--trust", nargs="+", default=[], metavar="TYPE",
                             help="types to load from --uploads beyond scikit-learn's")


def run_identity(args):
    key, public = Path(args.out), Path(args.out).with_suffix(".pub")
    if key == public:
        raise ValueError(f"--out {args.out} ends in .pub, the suffix of the public key "
                         "written beside it: name the private key otherwise (e.g. h0.key).")
    for path in (key, public):
        if path.exists():  # a party's identity is made once: the session names it
            raise ValueError(f"{path} exists: an identity is made once, and the secure "
                             "session names its public key. Keep it, or remove it first "
                             "to make a new one (the session must then be written anew).")
    identity = PartyIdentity.generate()
    identity.save(key)
    identity.save_public(public)
    print(f"identity: wrote the private key to {key} (readable by this user alone; never "
          f"send it) and the public key to {public} (send it for the secure session); "
          f"public key {identity.public_bytes.hex()}")
    return 0


def run_secure_session(args, estimator):
    if len(args.identities) != len(args.parties):
        raise ValueError(f"--identities gives {len(args.identities)} public keys for "
                         f"{len(args.parties)} parties: one per party, in the order of "
                         "--parties.")
    helper = None if args.helper is None else HelperKey.load_public(args.helper)
    with config_context(secure_aggregation="masked" if helper is None else "validated"):
        session = estimator(args).secure_session(
            args.parties, args.party_rows, threshold=args.threshold,
            colluding=args.colluding, helper=helper,
            identities=[PartyIdentity.load_public(path) for path in args.identities])
    size = session.save(args.out)
    encoding = (f"floats up to {session.float_bound:.4g} in steps of 2^"
                f"{-int(math.log2(session.fixed_point.scale))}" if session.helper is None
                else "the helper's public key "
                f"{session.helper.hex()[:16]}..., what each sum proves set by the "
                "algorithm's flags at every step")
    print(f"secure session ({session.mode} sums): {len(session.parties)} parties, "
          f"threshold {session.threshold}, {session.colluding} may collude, {encoding}; "
          f"wrote {args.out} ({size} bytes)")
    return 0


def secure_options(args, at_party=False):
    """The session of ``party --secure-session`` or ``server --secure-session``, and the
    state file; None for both without it, and for the state of a party under validated
    sums, which keeps none."""
    if args.secure_session is None:
        if args.secure_state is not None:
            raise ValueError("--secure-state belongs to --secure-session: add it, or "
                             "leave --secure-state out.")
        return None, None
    session = SecureSession.load(args.secure_session)
    if at_party and session.helper is not None:
        if args.secure_state is not None:
            raise ValueError("--secure-state: under the session's validated sums a party "
                             "keeps nothing (its upload holds its report, and it answers "
                             "no later stage); leave --secure-state out.")
        return session, None
    if args.secure_state is None:
        raise ValueError("--secure-session needs --secure-state: the file of this side's "
                         "secure sum.")
    return session, args.secure_state


def session_mode(session):
    """The ``secure_aggregation`` a step with `session` (None: none) runs under."""
    return False if session is None else session.mode


def load_coordinator(session, path):
    """The coordinator's state at `path`: of the masked sum, or of the validated sum
    where the session names a helper."""
    kind = SecureCoordinator if session.helper is None else ValidatedCoordinator
    return kind.load(session, path)


def party_identity(args, session):
    """The identity key of ``party --identity``, which --secure-session needs; None
    without the session."""
    if session is None:
        if args.identity is not None:
            raise ValueError("--identity belongs to --secure-session: add it, or leave "
                             "--identity out.")
        return None
    if args.identity is None:
        raise ValueError("--secure-session needs --identity: this party's private identity "
                         "key (skfedkt identity), whose public key the session names for it.")
    return PartyIdentity.load(args.identity)


def refuse_a_started_round(session, state_path, party, message):
    """``skfedkt party --secure-state``: refuse a round this party's state file shows it
    started already (`SecureParty.refuse_a_started_round`), before any work; the saved
    state (None: none), which a step run again after a crash resumes
    (`SecureParty.resumed`)."""
    previous = (read_file(state_path, str(state_path), _MESSAGE_LIMITS)
                if Path(state_path).exists() else None)
    round_ = 0 if message is None else read_upload(message).manifest.get("round", 0)
    SecureParty.refuse_a_started_round(session, previous, round_, party)
    return previous


def run_secure_party(args):
    session = SecureSession.load(args.session)
    identity = PartyIdentity.load(args.identity)
    message = _message(args.message)
    # one ledger per identity, wherever the party keeps its states, read and written by
    # one step at a time too
    ledger_path = args.ledger or Path(args.state).with_name(
        f"skfedkt-ledger-{identity.public_bytes.hex()[:16]}.json")
    step = f"skfedkt secure-party --state {args.state}"
    with step_lock(args.state, step), step_lock(ledger_path, step):
        state = SecureParty.load(session, args.state, identity)
        ledger = InputLedger(ledger_path)
        reads = state.stage
        # a refused message changes nothing; an answer is kept before it leaves, so that
        # the same command after a crash writes it again
        try:
            answer = state.answer(message, ledger)
        except SecureSumError as error:
            raise ValueError(f"{args.message}: {error}") from None
        again = state.stage == reads
        if not again:
            state.save(args.state)
        remove_leftovers(args.out)
        write_atomically(args.out, answer)
    if again:
        print(f"party {state.party!r}: answered this message of round {state.round} "
              f"before; wrote the same answer again to {args.out}")
    else:
        print(f"party {state.party!r}: read the {_IN_WORDS[reads]} of round "
              f"{state.round}, wrote {_ANSWERS[reads]} to {args.out}")
    return 0


def run_secure_coordinator(args):
    session = SecureSession.load(args.session)
    with step_lock(args.state, f"skfedkt secure-coordinator --state {args.state}"):
        if session.helper is not None:
            return validated_coordinator_stage(args, session)
        return _coordinator_stage(args, session)


def _coordinator_stage(args, session):
    previous = _message(args.state) if Path(args.state).exists() else None
    if args.uploads is not None:
        read = "keys"
        uploads = [read_upload(path, trusted=args.trust) for path in args.uploads]
        coordinator, out = SecureCoordinator.start(session, [u.manifest for u in uploads])
        # the same uploads again start the same sum: a rerun after a crash
        again = previous == coordinator.to_bytes()
        if not again:
            coordinator.refuse_a_started_round(previous)
    else:
        coordinator = SecureCoordinator.load(session, args.state)
        read = coordinator.stage
        out = coordinator.advance([_message(path) for path in args.answers],
                                  sources=args.answers)
        again = coordinator.stage == read
    kind = SENT_BEFORE.get(coordinator.stage)  # None once the sum is done
    paths = {} if kind is None else _message_paths(args.out_dir, kind, out)
    if not again:  # kept before its messages leave: the same command sends them again
        coordinator.save(args.state)
    else:  # what it read is the stage before the one its state is at
        read = "uploads" if args.uploads is not None else "answers"
        print(f"coordinator: took these {read} of round {coordinator.round} before; "
              "what it sent then is written again")
    if kind is None:
        print(f"coordinator: the secure sum of round {coordinator.round} is done, over "
              f"{len(coordinator.survivors)} parties "
              f"({', '.join(map(str, coordinator.survivors))}); run the server step with "
              f"--secure-state {args.state}")
        for party, why in coordinator.refused_shares.items():
            print(f"coordinator: party {party!r} {why}")
        return 0
    for party, data in out.items():
        remove_leftovers(paths[party])
        write_atomically(paths[party], data)
    print(f"coordinator: round {coordinator.round}, read the {_IN_WORDS[read]}; wrote the "
          f"{_IN_WORDS[kind]} for {len(out)} parties to {args.out_dir}: send each its file "
          f"({kind}-<party>.json)")
    return 0


def _message_paths(out_dir, kind, out):
    """The file of the coordinator's message `kind` for each party of `out`, in
    `out_dir` (made where missing)."""
    if out_dir is None:
        raise ValueError("--out-dir is required: the files of the next stage go there.")
    folder = Path(out_dir)
    folder.mkdir(parents=True, exist_ok=True)
    paths = {party: folder / f"{kind}-{re.sub(r'[^A-Za-z0-9._-]', '_', str(party))}.json"
             for party in out}
    if len(set(paths.values())) < len(paths):
        raise ValueError("Two party names give one file name: name the parties with "
                         "letters, digits, '.', '_' and '-'.")
    return paths


def _message(path):
    """A file of the secure sum's stages: bounded here, then read as its stage's
    message (`skfedkt._secure_sum.message_from_bytes`)."""
    return read_file(path, str(path), _MESSAGE_LIMITS)
