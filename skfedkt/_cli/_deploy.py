"""Command line for deployments: ``skfedkt split``, ``party``, ``server``, ``audit`` and
``score``.

Each party runs ``skfedkt party`` on its own machine and sends the upload file it writes;
the server runs ``skfedkt server`` on the uploads and writes the final model or, for an
algorithm with rounds, the round's message back to the parties. The algorithms they run
are the registered ones that declare themselves deployed (`skfedkt._registry`).
"""

import argparse
import io
import sys
import time
from contextlib import contextmanager, nullcontext, redirect_stdout
from pathlib import Path

import numpy as np
from tqdm import tqdm

from .._deployment._archive import DEFAULT_LIMITS, UploadLimits
from .._deployment._local_files import remove_leftovers, step_lock, write_atomically
from .._config import config_context
from .._deployment._secure_stages import SecureParty
from .._deployment._upload import read_upload
from .._engine._validation import parties_in_words
from .._model_files import load_model, save_model
from ..datasets import DATASETS, load_federated, load_local_file
from ..datasets._loaders import feature_names_of
from ..privacy import party_membership_audit
from .._registry import algorithm, algorithms
from ._estimators import ESTIMATORS
from ._progress import StageLines, on_a_terminal, shortened
from ._runner import StagesOnBar
from ._secure import (
    add_secure_commands,
    add_secure_options,
    party_identity,
    refuse_a_started_round,
    run_identity,
    run_secure_coordinator,
    run_secure_party,
    run_secure_session,
    load_coordinator,
    secure_options,
    session_mode,
)
from ._validated import add_validated_commands, run_helper_key, run_secure_helper


class HelpFormatter(argparse.ArgumentDefaultsHelpFormatter):
    """Shows an option's default once: not where there is none, where the option is
    required, or where its help already says it."""

    def _fill_text(self, text, width, indent):
        # an epilog of examples keeps its lines: a command is copied as it stands
        if "\n" in text:
            return "".join(indent + line for line in text.splitlines(keepends=True))
        return super()._fill_text(text, width, indent)

    def _get_help_string(self, action):
        if action.default is None or action.required or "default" in (action.help or ""):
            return action.help
        return super()._get_help_string(action)


def _label(text):
    """A class label or party name typed on the command line: a number if it reads as one."""
    for kind in (int, float):
        try:
            return kind(text)
        except ValueError:
            pass
    return text


_TRUST_HELP = ("types to load beyond scikit-learn's and XGBoost's, e.g. a skorch net's: "
               "loading runs their code")


def add_deploy_commands(commands, add_algorithm_arguments, positive):
    """The split, party, server, audit and score subcommands."""
    formatter = HelpFormatter
    split = commands.add_parser(
        "split", formatter_class=formatter,
        help="write a dataset as CSV files: one per party, a public set, a test set",
        description="Write a built-in dataset as a consortium's files: party-<k>.csv "
        "(features, label last), public.csv (features only) and test.csv, to try the "
        "party and server commands.",
    )
    # a file of one's own is already its parties' rows: split writes built-in data
    split.add_argument("dataset", choices=[name for name in DATASETS if name != "file"],
                       help="the dataset to write as a consortium's files")
    split.add_argument("--parties", type=positive(int), default=4,
                       help="the number of parties, one CSV file each")
    split.add_argument("--beta", type=positive(float), default=0.5,
                       help="Dirichlet concentration of the label skew")
    split.add_argument("--iid", action="store_true", help="split rows evenly at random")
    split.add_argument("--random-state", type=int, default=0,
                       help="the seed of the split and the partition")
    split.add_argument("--out-dir", required=True, help="folder for the CSV files")

    def algorithm_command(name, help_text, description):
        command = commands.add_parser(name, formatter_class=formatter, help=help_text,
                                      description=description)
        command.add_argument("algorithm", choices=[a.name for a in algorithms(deployed=True)],
                             help="the algorithm every party and the server agreed on")
        add_algorithm_arguments(command, deployed=True)
        shared = command.add_argument_group("agreed by every party and the server")
        shared.add_argument("--random-state", type=int, default=0,
                            help="the agreed seed: with the same uploads the server's "
                            "model is the one fit() gives")
        shared.add_argument("--public", help="the agreed public set: a CSV of features "
                            "only, or LIBSVM (required where the algorithm uses it)")
        command.add_argument("--n-jobs", type=int, default=None,
                             help="parallel jobs on this machine")
        return command

    party = algorithm_command(
        "party", "run a party's step on its own data, write its upload",
        "Run an algorithm's party step on this party's rows (a CSV with the label in "
        "the last column, or LIBSVM) and write the upload file to send to the server.",
    )
    party.add_argument("--data", required=True, help="this party's labelled rows")
    party.add_argument("--name", required=True, type=_label, help="this party's name")
    party.add_argument("--classes", required=True, nargs="+", type=_label,
                       help="the agreed class labels")
    party.add_argument("--out", required=True, help="the upload file to write")
    party.add_argument("--message", help="algorithms with rounds: the server's message of "
                       "the last round")
    party.add_argument("--keep-model", action="store_true",
                       help="algorithms with rounds: do not send the final model to the "
                       "server")
    party.add_argument("--party-seed", type=int,
                       help="a secret seed for this party's noise (L2, bit flips)")

    server = algorithm_command(
        "server", "combine the parties' uploads into the final model",
        "Check the parties' uploads and run the server step, which writes the final "
        "model; an algorithm with rounds writes the round's message to send to every "
        "party, or, given the message that said done and the parties' final uploads, "
        "the model.",
    )
    server.add_argument("uploads", nargs="+", help="the parties' upload files")
    server.add_argument("--out", required=True, help="the model (or the round's message) to write")
    server.add_argument("--classes", nargs="+", type=_label,
                        help="the agreed class labels (default: those of most uploads)")
    server.add_argument("--message", help="algorithms with rounds: this server's message "
                        "of the last round")
    server.add_argument("--min-parties", type=positive(int),
                        help="go on without uploads that fail a check while this many "
                        "remain (default: every upload must pass)")
    server.add_argument("--trust", nargs="+", default=[], metavar="TYPE", help=_TRUST_HELP)
    caps = server.add_mutually_exclusive_group()
    _add_size_limit(caps)
    caps.add_argument("--agreed-limits", action="store_true",
                      help="cap every file at 4 times what an honest upload of this "
                      "agreement needs (a reference party's steps, run here first; "
                      "needs --classes); the defaults stay the upper bound")
    server.add_argument("--party-rows", type=positive(int),
                        help="with --agreed-limits: the rows of the largest party "
                        "(default: as many as the public set)")
    add_secure_options(party, server)
    add_secure_commands(commands, algorithm_command, formatter, positive, _label)
    add_validated_commands(commands, formatter)

    audit = algorithm_command(
        "audit", "attack a party's upload by membership inference, before sending it",
        "Run the party step on this party's rows (or read its --upload) and attack what "
        "the upload carries: the party's rows as members, as many rows of --holdout "
        "(labelled rows the party did not train on) of the same classes as non-members; "
        "the loss attack and LiRA with --references reference runs of the party step. "
        "Prints the attacks' AUC (0.5 is a guess).",
    )
    audit.epilog = (
        "example, in the folder that 'skfedkt split breast_cancer --out-dir consortium' "
        "writes:\n"
        f"  skfedkt audit {algorithms(deployed=True)[0].name} --data party-2.csv --holdout "
        "test.csv --public public.csv "
        "--classes 0 1 --name hospital-2\n"
    )
    audit.add_argument("--data", required=True, help="this party's labelled rows")
    audit.add_argument("--holdout", required=True,
                       help="labelled rows of the same population the party did not train on")
    audit.add_argument("--name", required=True, type=_label, help="this party's name")
    audit.add_argument("--classes", required=True, nargs="+", type=_label,
                       help="the agreed class labels")
    audit.add_argument("--upload", help="an upload file to audit instead of running the "
                       "party step")
    audit.add_argument("--trust", nargs="+", default=[], metavar="TYPE",
                       help="types to load from --upload beyond scikit-learn's and XGBoost's")
    audit.add_argument("--references", type=int, default=4,
                       help="reference runs of the party step for LiRA (0: the loss attack "
                       "only)")
    audit.add_argument("--party-seed", type=int, help="the party's secret seed (L2, bit flips)")

    score = commands.add_parser(
        "score", formatter_class=formatter, help="accuracy of a model file on labelled data",
        description="Load a model written by 'skfedkt server' and print its accuracy on "
        "labelled rows.",
    )
    score.add_argument("--model", required=True,
                       help="a model file written by 'skfedkt server'")
    score.add_argument("--data", required=True, help="labelled rows (CSV or LIBSVM)")
    score.add_argument("--trust", nargs="+", default=[], metavar="TYPE", help=_TRUST_HELP)
    _add_size_limit(score)


def _add_size_limit(command):
    command.add_argument(
        "--max-upload-mb", type=float, default=DEFAULT_LIMITS.max_file_bytes / 2**20,
        help="the largest file read, in MiB; its members may inflate to twice that, "
        "and its skops schema to as much",
    )


def _agreed_limits(args, clf, X_public):
    if args.classes is None:
        raise ValueError("--agreed-limits derives the caps from the agreement, whose "
                         "classes it needs: pass --classes.")
    if X_public is None:
        raise ValueError("--agreed-limits draws its reference party from the public set: "
                         "pass --public.")
    limits = clf.agreed_upload_limits(X_public, args.classes, party_rows=args.party_rows)
    print(f"server: caps of {limits.max_file_bytes / 1000:.1f} kB a file, "
          f"{limits.max_inflated_bytes / 1000:.1f} kB inflated, a schema of "
          f"{limits.max_schema_bytes / 1000:.1f} kB ({limits.derivation})")
    return limits


def _limits(args):
    size = int(args.max_upload_mb * 2**20)
    if size < 1:
        raise ValueError(f"--max-upload-mb must be positive, got {args.max_upload_mb}.")
    return UploadLimits(max_file_bytes=size,
                        max_inflated_bytes=max(2 * size, DEFAULT_LIMITS.max_manifest_bytes),
                        max_schema_bytes=max(size, DEFAULT_LIMITS.max_schema_bytes))


def _csv(path, X, y=None):
    header = [f"x{j}" for j in range(X.shape[1])] + ([] if y is None else ["label"])
    table = X if y is None else np.column_stack([X, y])
    text = io.StringIO()
    np.savetxt(text, table, delimiter=",", header=",".join(header), comments="", fmt="%.10g")
    write_atomically(path, text.getvalue().encode())


def run_split(args):
    data = load_federated(args.dataset, n_parties=args.parties, beta=args.beta,
                          partition="iid" if args.iid else "dirichlet",
                          random_state=args.random_state)
    out = Path(args.out_dir)
    out.mkdir(parents=True, exist_ok=True)
    for party in np.unique(data.groups):
        rows = data.groups == party
        _csv(out / f"party-{party}.csv", data.X_train[rows], data.y_train[rows])
        labels, counts = np.unique(data.y_train[rows], return_counts=True)
        print(f"{out / f'party-{party}.csv'}: {rows.sum()} rows, "
              + ", ".join(f"{n} of class {c}" for c, n in zip(labels.tolist(), counts.tolist())))
    _csv(out / "public.csv", data.X_public)
    _csv(out / "test.csv", data.X_test, data.y_test)
    print(f"{out / 'public.csv'}: {len(data.X_public)} unlabelled rows; "
          f"{out / 'test.csv'}: {len(data.X_test)} rows; classes: "
          f"{' '.join(str(c) for c in np.unique(data.y_train))}")
    return 0


def _estimator(args):
    # verbose: its stages are shown on the command's progress line (`_showing_stages`)
    return algorithm(args.algorithm).estimator_class(
        ESTIMATORS[args.estimator](), **args.options[args.algorithm],
        n_jobs=args.n_jobs, random_state=args.random_state, verbose=1)


class _StageLine:
    """A progress line on stderr saying `what` runs, the time it has taken and the
    estimator's current stage, or, where stderr is no terminal, a plain line per stage
    (`StageLines`); shown from the first stage on, so that a command refused before
    any work prints its error alone."""

    def __init__(self, what):
        self.what, self.line = what, None

    def set_postfix_str(self, stage):
        if self.line is None:
            self.line = (tqdm(total=None, desc=self.what, file=sys.stderr,
                              bar_format="{desc}: {elapsed}{postfix}")
                         if on_a_terminal(sys.stderr) else StageLines(self.what))
        self.line.set_postfix_str(shortened(stage) if isinstance(self.line, tqdm) else stage)

    def close(self):
        if self.line is not None:
            self.line.close()


@contextmanager
def _showing_stages(what):
    """The estimator's stages on a progress line saying `what` runs (`_StageLine`)."""
    line = _StageLine(what)
    try:
        with redirect_stdout(StagesOnBar(line)):
            yield
    finally:
        line.close()


def _public(args, required):
    if args.public is None:
        if required:
            raise ValueError(f"{args.algorithm} needs the agreed public set: pass --public.")
        return None
    return load_local_file(args.public, labelled=False)[0]


def _check_same_columns(data_path, X, public_path, X_public):
    """A party's rows and the public set must have the same features: say which file
    has which, and the columns one names and the other lacks."""
    if X_public is None or X.shape[1] == X_public.shape[1]:
        return
    message = (f"{data_path} has {X.shape[1]} feature columns (besides the label), the "
               f"public set {public_path} has {X_public.shape[1]}")
    names = feature_names_of(data_path), feature_names_of(public_path, labelled=False)
    if None not in names:
        only_data = [name for name in names[0] if name not in names[1]]
        only_public = [name for name in names[1] if name not in names[0]]
        message += "".join(
            f"; only {where} has {', '.join(map(repr, columns))}"
            for where, columns in ((data_path, only_data), (public_path, only_public))
            if columns
        )
    raise ValueError(f"{message}. Every party's file and the public set need the same "
                     "feature columns, in the same order.")


def _refuse_overwriting_inputs(out, *inputs):
    """An --out that names one of the command's inputs would destroy it: refuse."""
    target = Path(out).resolve()
    for given in inputs:
        if given is not None and Path(given).resolve() == target:
            raise ValueError(f"--out {out} is one of this command's inputs ({given}); "
                             "write the result to another file.")


def _uses_public_set(clf):
    """Whether the estimator's steps need the agreed public set (its plan says)."""
    return clf._plan().public_set_use is not None


def _describe_upload(args, clf, upload):
    """What the upload holds in a few words, as the algorithm declares them."""
    describe = algorithm(args.algorithm).describe_upload
    return clf._plan().upload_kind if describe is None else describe(upload)


def run_party(args):
    _refuse_overwriting_inputs(args.out, args.data, args.public, args.message,
                               args.secure_session, args.secure_state, args.identity)
    session, state_path = secure_options(args, at_party=True)
    identity = party_identity(args, session)
    clf = _estimator(args)
    X, y = load_local_file(args.data)
    X_public = _public(args, required=_uses_public_set(clf))
    _check_same_columns(args.data, X, args.public, X_public)
    options = dict(party=args.name, classes=args.classes, X_unlabeled=X_public,
                   party_seed=args.party_seed)
    if clf.runs_rounds:  # the server's last message
        options.update(message=args.message, share_model=False if args.keep_model else None)
    elif args.message is not None:
        raise ValueError(f"--message is for algorithms with rounds; {args.algorithm} runs "
                         "one.")
    # one step at a time on a party's secure state
    with (nullcontext() if state_path is None
          else step_lock(state_path, f"skfedkt party --secure-state {state_path}")):
        previous = (None if state_path is None else
                    refuse_a_started_round(session, state_path, args.name, args.message))
        start = time.perf_counter()
        with (_showing_stages(f"party {args.name!r}: {args.algorithm}'s party step"),
              config_context(secure_aggregation=session_mode(session))):
            upload = clf.fit_party(X, y, secure_session=session, identity=identity,
                                   **options)
        seconds = time.perf_counter() - start
        if state_path is not None:  # kept before the upload leaves: it answers the next stages
            upload = SecureParty.resumed(upload, previous, identity)
            upload.secure_state.save(state_path)
            remove_leftovers(args.out)
        size = upload.save(args.out)
    round_ = upload.manifest.get("round")
    print(f"party {args.name!r}: {len(y)} rows, {_describe_upload(args, clf, upload)}"
          + ("" if round_ is None else f" of round {round_}")
          + f" in {seconds:.1f} s; wrote {args.out} ({size / 1000:.1f} kB)"
          + ("" if session is None else f"; its sums wait in {state_path} for the "
             "secure sum" if state_path is not None else "; its sums are in it as a "
             "validated report"))
    return 0


def run_server(args):
    _refuse_overwriting_inputs(args.out, *args.uploads, args.public, args.message,
                               args.secure_session, args.secure_state)
    session, state_path = secure_options(args)
    clf = _estimator(args)
    X_public = _public(args, required=_uses_public_set(clf))
    if args.party_rows is not None and not args.agreed_limits:
        raise ValueError("--party-rows sizes the reference party of --agreed-limits: "
                         "add --agreed-limits, or leave --party-rows out.")
    with config_context(secure_aggregation=session_mode(session)):
        limits = (_agreed_limits(args, clf, X_public) if args.agreed_limits
                  else _limits(args))
    checks = dict(classes=args.classes, trusted=args.trust, min_parties=args.min_parties,
                  limits=limits,
                  secure_sum=None if session is None
                  else load_coordinator(session, state_path))
    start = time.perf_counter()
    if clf.runs_rounds:  # rounds until the server's message says done
        done = args.message is not None and read_upload(
            args.message, limits=checks["limits"]).manifest.get("done")
        if not done:
            with (_showing_stages(f"server: {args.algorithm}'s round"),
                  config_context(secure_aggregation=session_mode(session))):
                message = clf.server_round(args.uploads, X_public, message=args.message,
                                           **checks)
            message.save(args.out)
            describe_round = algorithm(args.algorithm).describe_round
            change = "" if describe_round is None else describe_round(message)
            summed = ("" if session is None else
                      ", the secure sum's stages run on those uploads, and the server "
                      "takes their finished --secure-state")
            next_step = (
                "done: every party runs its final step with --message "
                f"{args.out}{summed}, then the server combines those uploads with the "
                "same message" if message.manifest["done"] else
                f"every party runs round {message.manifest['round']} with --message "
                f"{args.out}{summed}"
            )
            print(f"server: {len(args.uploads)} uploads in {time.perf_counter() - start:.1f} "
                  f"s; {change}{next_step}")
            return 0
        checks["message"] = args.message
    with (_showing_stages(f"server: {args.algorithm}'s server step"),
          config_context(secure_aggregation=session_mode(session))):
        clf.fit_server(args.uploads, X_public, **checks)
    seconds = time.perf_counter() - start
    size = save_model(clf.set_params(verbose=0), args.out)
    print(f"server: final model of {parties_in_words(len(clf.parties_))} "
          f"({', '.join(str(p) for p in clf.parties_)}) in {seconds:.1f} s; wrote {args.out} "
          f"({size / 1000:.1f} kB)")
    left_out = getattr(clf, "left_out_parties_", {})
    if left_out:
        print(f"left out: {', '.join(str(p) for p in left_out)}")
    if np.isfinite(getattr(clf, "epsilon_", np.inf)):
        print(clf.privacy_report_.statement)
    return 0


def run_audit(args):
    if args.references < 0:
        raise ValueError(f"--references must be 0 or more, got {args.references}.")
    X, y = load_local_file(args.data)
    X_holdout, y_holdout = load_local_file(args.holdout)
    upload = None if args.upload is None else read_upload(args.upload, trusted=args.trust)
    clf = _estimator(args)
    with _showing_stages(f"audit of party {args.name!r}: its party step and "
                         f"{args.references} reference runs"):
        audit = party_membership_audit(
            clf, X, y, party=args.name, classes=args.classes,
            X_unlabeled=_public(args, required=_uses_public_set(clf)),
            X_holdout=X_holdout, y_holdout=y_holdout, upload=upload,
            party_seed=args.party_seed, n_reference=args.references,
            random_state=args.random_state,
        )
    print(audit)
    return 0


def run_score(args):
    model = load_model(args.model, trusted=args.trust, limits=_limits(args))
    X, y = load_local_file(args.data)
    print(f"accuracy {model.score(X, y):.4f} on {len(y)} rows of {args.data}")
    return 0


HANDLERS = {"split": run_split, "party": run_party, "server": run_server, "audit": run_audit,
            "score": run_score, "identity": run_identity, "secure-party": run_secure_party,
            "secure-coordinator": run_secure_coordinator,
            "secure-session": lambda args: run_secure_session(args, _estimator),
            "helper-key": run_helper_key, "secure-helper": run_secure_helper}
