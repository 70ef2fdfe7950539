"""Command line for validated sums in a deployment: ``skfedkt helper-key`` and
``secure-helper``, and ``secure-coordinator`` under a session that names a helper.

Before round 0 the helper makes its key once (``skfedkt helper-key --out helper.key``,
which writes ``helper.pub`` beside it) and sends the public key to whoever writes the
session (``skfedkt secure-session ... --helper helper.pub``). A round runs as files: each
party's ``skfedkt party ... --secure-session S --identity h0.key`` writes its upload (its
report, signed, in the manifest); the coordinator's ``skfedkt secure-coordinator
--uploads ...`` checks them and writes the helper's request; the helper's ``skfedkt
secure-helper --request ...`` writes its answer; ``secure-coordinator --answers ...``
takes it, and the server step (``skfedkt server ... --secure-state C``) takes the sums.
"""

import json
from pathlib import Path

from .._deployment._archive import UploadLimits, read_file
from .._deployment._identity import HelperKey
from .._deployment._local_files import remove_leftovers, step_lock, write_atomically
from .._deployment._secure_stages import SecureSession
from .._deployment._upload import read_upload
from .._deployment._validated_coordinator import ValidatedCoordinator
from .._deployment._validated_helper import HelperLedger, ValidatedHelper
from .._deployment._validated_report import MAX_DOCUMENT_BYTES

_LIMITS = UploadLimits(max_file_bytes=MAX_DOCUMENT_BYTES)


def add_validated_commands(commands, formatter):
    """The helper-key and secure-helper subcommands."""
    key = commands.add_parser(
        "helper-key", formatter_class=formatter,
        help="make the helper's key for validated sums, once",
        description="Write a new X25519 key for the helper of validated sums: the private "
        "key to --out (PEM, readable by this user alone: keep it at the helper) and the "
        "public key beside it, with the suffix .pub (send it to whoever writes the secure "
        "session, --helper). The parties seal their shares for the helper to it.",
    )
    key.add_argument("--out", required=True, help="the private key file to write "
                     "(e.g. helper.key)")
    helper = commands.add_parser(
        "secure-helper", formatter_class=formatter,
        help="answer the coordinator's request of a validated sum, at the helper",
        description="Check each party's report in the coordinator's request (its "
        "signature, its proofs on the helper's shares) and write the helper's answer: its "
        "verifier shares and its share of the total of the parties whose proofs passed. "
        "Each round is answered once (its ledger): the same request is answered again "
        "with the same bytes, another request of that round refused.",
    )
    helper.add_argument("--session", required=True, help="the secure session")
    helper.add_argument("--key", required=True, help="the helper's private key "
                        "(skfedkt helper-key)")
    helper.add_argument("--request", required=True, help="the coordinator's request")
    helper.add_argument("--out", required=True, help="the answer to send the coordinator")
    helper.add_argument("--ledger", metavar="FILE",
                        help="the rounds this helper has answered, across sessions "
                        "(default: skfedkt-helper-ledger.json beside --key); keep it")


def run_helper_key(args):
    key, public = Path(args.out), Path(args.out).with_suffix(".pub")
    if key == public:
        raise ValueError(f"--out {args.out} ends in .pub, the suffix of the public key "
                         "written beside it: name the private key otherwise (e.g. "
                         "helper.key).")
    for path in (key, public):
        if path.exists():  # the session names the helper's key
            raise ValueError(f"{path} exists: the helper's key is made once, and the "
                             "secure session names its public key. Keep it, or remove it "
                             "first to make a new one (the session must then be written "
                             "anew).")
    helper = HelperKey.generate()
    helper.save(key)
    helper.save_public(public)
    print(f"helper-key: wrote the private key to {key} (readable by this user alone; "
          f"keep it at the helper) and the public key to {public} (send it for the "
          f"secure session, --helper); public key {helper.public_bytes.hex()}")
    return 0


def run_secure_helper(args):
    session = SecureSession.load(args.session)
    helper = ValidatedHelper(session, HelperKey.load(args.key))
    request = read_file(args.request, str(args.request), _LIMITS)
    ledger_path = args.ledger or Path(args.key).with_name("skfedkt-helper-ledger.json")
    with step_lock(ledger_path, f"skfedkt secure-helper --ledger {ledger_path}"):
        try:
            answer = helper.answer(request, HelperLedger(ledger_path))
        except ValueError as error:
            raise ValueError(f"{args.request}: {error}") from None
        remove_leftovers(args.out)
        write_atomically(args.out, answer)
    summary = json.loads(answer)
    refused = "; ".join(f"{session.parties[int(index)]!r}: {why}"
                        for index, why in summary["refused"].items())
    print(f"helper: checked the reports of {args.request}: accepted "
          f"{len(summary['accepted'])} parties"
          + (f", refused {len(summary['refused'])} ({refused})" if refused else "")
          + f"; wrote its answer to {args.out} (send it to the coordinator)")
    return 0


def validated_coordinator_stage(args, session):
    """``secure-coordinator`` under a session of validated sums: the uploads give the
    helper's request (the same uploads, the same request again), the helper's answer
    finishes the sum."""
    previous = (ValidatedCoordinator.load(session, args.state)
                if Path(args.state).exists() else None)
    if args.uploads is not None:
        uploads = [read_upload(path, trusted=args.trust) for path in args.uploads]
        coordinator, request = ValidatedCoordinator.start(session, uploads)
        again = previous is not None and previous.round == coordinator.round and (
            previous.stage == "helper" and previous.uploads == coordinator.uploads)
        if again and previous is not None:  # the request the helper may have answered
            coordinator, request = previous, previous.request
        elif previous is not None and previous.round >= coordinator.round:
            raise ValueError(
                f"The coordinator's state shows round {previous.round} of this session "
                f"started already, on other uploads: the helper answers a round's "
                f"request once. Go on with --answers, or start round {coordinator.round} "
                "with a new secure session.")
        if args.out_dir is None:
            raise ValueError("--out-dir is required: the helper's request goes there.")
        folder = Path(args.out_dir)
        folder.mkdir(parents=True, exist_ok=True)
        if not again:  # kept before the request leaves
            coordinator.save(args.state)
        remove_leftovers(folder / "request.json")
        write_atomically(folder / "request.json", request)
        for party, why in coordinator.left_out.items():
            print(f"coordinator: left out party {party!r}: {why}")
        print(f"coordinator: round {coordinator.round}, checked {len(uploads)} uploads"
              + (" (as before)" if again else "")
              + f"; wrote the helper's request to {folder / 'request.json'}: send it to "
              "the helper (secure-helper)")
        return 0
    if previous is None:
        raise ValueError(f"--state {args.state} does not exist: start the round with "
                         "--uploads first.")
    if len(args.answers) != 1:
        raise ValueError(f"--answers takes the helper's one answer under validated sums, "
                         f"got {len(args.answers)} files.")
    coordinator = previous
    if coordinator.stage != "done":
        answer = read_file(args.answers[0], str(args.answers[0]), _LIMITS)
        try:
            coordinator.finish(answer)
        except ValueError as error:
            raise ValueError(f"{args.answers[0]}: {error}") from None
        coordinator.save(args.state)
    for party, why in coordinator.left_out.items():
        print(f"coordinator: left out party {party!r}: {why}")
    print(f"coordinator: the validated sum of round {coordinator.round} is done, over "
          f"{len(coordinator.survivors)} parties "
          f"({', '.join(map(str, coordinator.survivors))}); run the server step with "
          f"--secure-state {args.state}")
    return 0
