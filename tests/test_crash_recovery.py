"""A deployment survives a crash: every step of the documented blocks killed right
before and right after each file it writes, then run again as written, ends in the
uninterrupted run's model, bit for bit.

The blocks are those of ``doc/secure_aggregation.rst`` (five parties, a threshold of
3, h4 dead after its upload) and ``doc/deployment.rst`` (FedCT's rounds). A kill is the
step's process ending at once (``os._exit``, which runs no ``finally`` and no
``atexit``), in a forked child, right before or right after the file is renamed into
place. The rerun's files are compared with the uninterrupted run's; where they differ
(a step that draws fresh keys or shares), the rest of the block runs on them and its
model must predict the same probabilities.

The README's command kills the first step of each kind (the first party's of each
stage, each coordinator's and server's step); ``SKFEDKT_TEST_EVERY_CRASH=1``, which
``.ci/run`` sets for its suites with torch, kills every step.
"""

import contextlib
import glob
import io
import json
import os
import re
import shutil
import warnings
import zipfile
from pathlib import Path

import numpy as np
import pytest
from numpy.testing import assert_array_equal

from skfedkt import load_model
from skfedkt._cli._main import main
from skfedkt._deployment._local_files import step_lock
from skfedkt.datasets import load_local_file

pytestmark = pytest.mark.skipif(not hasattr(os, "fork"), reason="kills a forked step")

_KILLED = 137
_PARTIES = [f"h{p}" for p in range(5)]
_SECURE = ["--session", "session.json"]


def _secure_block():
    """The steps of doc/secure_aggregation.rst's block after the session: (what, argv),
    globs expanded when the step runs, as the shell would."""
    steps = [(f"party {name}", [
        "party", "fedkt", "--estimator", "dt", "--data", f"party-{p}.csv", "--public",
        "public.csv", "--classes", "0", "1", "--name", name, "--out",
        f"upload-{name}.skfedkt", "--secure-session", "session.json", "--secure-state",
        f"state-{name}.json", "--identity", f"{name}.key"]) for p, name in enumerate(_PARTIES)]
    coordinator = ["secure-coordinator", *_SECURE, "--state", "coordinator.json"]
    steps.append(("coordinator: uploads",
                  [*coordinator, "--uploads", "upload-h*.skfedkt", "--out-dir", "to-parties"]))
    for stage in ("roster", "routed", "survivors", "request"):
        steps += [(f"{name}: {stage}", [
            "secure-party", *_SECURE, "--state", f"state-{name}.json", "--identity",
            f"{name}.key", "--message", f"to-parties/{stage}-{name}.json", "--out",
            f"answer-{stage}-{name}.json"]) for name in _PARTIES[:4]]  # h4 died
        steps.append((f"coordinator: {stage} answers", [
            *coordinator, "--answers", f"answer-{stage}-h[0-3].json", "--out-dir",
            "to-parties"]))
    steps.append(("server", [
        "server", "fedkt", "--estimator", "dt", "upload-h*.skfedkt", "--public",
        "public.csv", "--classes", "0", "1", "--secure-session", "session.json",
        "--secure-state", "coordinator.json", "--out", "model.skops"]))
    return steps


def _fedct_loop(rounds):
    """The steps of doc/deployment.rst's FedCT loop, with a decision tree for speed:
    `rounds` rounds of four parties and the server, the parties' final step and the
    server's."""
    fedct = ["fedct", "--estimator", "dt", "--rounds", str(rounds), "--public", "public.csv"]
    steps, message = [], []
    for round_ in range(rounds + 1):
        steps += [(f"round {round_}: hospital-{p}", [
            "party", *fedct, "--data", f"party-{p}.csv", "--classes", "0", "1", "--name",
            f"hospital-{p}", "--out", f"labels-{p}.skfedkt", *message]) for p in range(4)]
        if round_ < rounds:
            steps.append((f"round {round_}: server", [
                "server", *fedct, "--out", f"message-{round_}.skfedkt", "labels-*.skfedkt",
                *message]))
            message = ["--message", f"message-{round_}.skfedkt"]
    steps.append(("final server step", [
        "server", *fedct, "--out", "fedct.skops", "labels-*.skfedkt", *message]))
    return steps


def _kind(what):
    """A step's kind: what it does, whichever party does it."""
    return re.sub(r"h[0-9]|hospital-[0-9]", "party", what)


def _killed_steps(steps):
    """The indices of the steps to kill: each one's with ``SKFEDKT_TEST_EVERY_CRASH=1``,
    the first of each kind otherwise."""
    kinds = [_kind(what) for what, _ in steps]
    return [index for index, kind in enumerate(kinds)
            if os.environ.get("SKFEDKT_TEST_EVERY_CRASH") == "1"
            or kinds.index(kind) == index]


def _killed(steps):
    indices = _killed_steps(steps)
    return pytest.mark.parametrize("index", indices, ids=[steps[i][0] for i in indices])


def _expanded(argv):
    return [match for arg in argv for match in (
        sorted(glob.glob(arg)) if any(c in arg for c in "*[") else [arg])]


def _step(folder, argv):
    """Run one step in `folder`, as its command line; its exit status."""
    with (contextlib.chdir(folder), warnings.catch_warnings(),
          contextlib.redirect_stdout(io.StringIO()),
          contextlib.redirect_stderr(io.StringIO())):
        warnings.simplefilter("ignore")
        return main(_expanded(argv))


def _killed_step(folder, argv, write, before):
    """Run one step in a forked child killed right before (`before`) or right after its
    `write`-th file is renamed into place; whether the kill came (the step writes
    fewer files otherwise)."""
    pid = os.fork()
    if pid == 0:  # the child: never returns
        try:
            written, rename = 0, os.replace

            def replace(source, target):
                nonlocal written
                written += 1
                if written == write and before:
                    os._exit(_KILLED)
                rename(source, target)
                if written == write:
                    os._exit(_KILLED)
            os.replace = replace
            _step(folder, argv)
        finally:
            os._exit(0)
    _, status = os.waitpid(pid, 0)
    return os.waitstatus_to_exitcode(status) == _KILLED


def _files(folder):
    """The folder's files by relative path, but for the hidden ones (locks, and the
    temporary files of writes a kill cut short)."""
    return {str(path.relative_to(folder)): path.read_bytes()
            for path in sorted(folder.rglob("*"))
            if path.is_file() and not any(part.startswith(".")
                                          for part in path.relative_to(folder).parts)}


def _content(data):
    """What a file holds: an archive's members by name (recursively), without the
    times its zip records, nor the memory addresses skops names objects by (numbered
    in their order in its schema instead), nor the manifest's digest of such bytes;
    any other file's bytes."""
    if not zipfile.is_zipfile(io.BytesIO(data)):
        return data
    with zipfile.ZipFile(io.BytesIO(data)) as archive:
        members = {name: archive.read(name) for name in archive.namelist()}
    if "schema.json" in members:
        addresses = {}
        for address in re.findall(rb"[0-9]{9,}", members["schema.json"]):
            addresses.setdefault(address, b"#%d" % len(addresses))
        renamed = {}
        for name, member in members.items():
            for address, number in addresses.items():
                name = name.replace(address.decode(), number.decode())
                member = member.replace(address, number) if name == "schema.json" else member
            renamed[name] = member
        members = renamed
    if "manifest.json" in members:  # the digest of the payload's bytes, addresses and all
        manifest = json.loads(members["manifest.json"])
        manifest.pop("payload_sha256")
        members["manifest.json"] = manifest
    return {name: member if name == "manifest.json" else _content(member)
            for name, member in members.items()}


def _same_files(files, expected):
    return files.keys() == expected.keys() and all(
        files[path] == data or _content(files[path]) == _content(data)
        for path, data in expected.items())


class _Reference:
    """The uninterrupted run of `steps` from `setup`'s folder: the folder's files after
    each step, and the final model's probabilities on the test set."""

    def __init__(self, root, setup, steps, model):
        self.steps, self.model = steps, model
        kinds = [_kind(what) for what, _ in steps]
        self.first_of_kind = {kinds.index(kind) for kind in kinds}
        self.start = root / "start"
        setup(self.start)
        run = root / "reference"
        shutil.copytree(self.start, run)
        self.after = []
        for _, argv in steps:
            assert _step(run, argv) == 0, argv
            self.after.append(_files(run))
        self.proba = self.probabilities(run)

    def probabilities(self, folder):
        X, _ = load_local_file(folder / "test.csv")
        return load_model(folder / self.model).predict_proba(X)

    def before(self, index, folder):
        """A folder as the uninterrupted run left it before step `index`."""
        shutil.copytree(self.start, folder)
        state = self.after[index - 1] if index else _files(self.start)
        for path in set(_files(folder)) - set(state):
            (folder / path).unlink()
        for path, data in state.items():
            (folder / path).parent.mkdir(parents=True, exist_ok=True)
            (folder / path).write_bytes(data)


def _crash_every_write(reference, index, tmp_path):
    """Step `index` of the reference killed before and after each file it writes, run
    again as written; returns how many files it writes.

    After the rerun, every file the killed step had written is as it was (nothing a
    party may have sent changes) and the folder is the uninterrupted run's. A step that
    draws fresh keys or shares writes other bytes than the reference's: on them, the
    rest of the block runs after the first step of each kind (the first party's), and
    its model must predict the reference's probabilities."""
    what, argv = reference.steps[index]
    write = 0
    while True:
        write += 1
        for before in (True, False):
            folder = tmp_path / f"write-{write}-{'before' if before else 'after'}"
            reference.before(index, folder)
            start = _files(folder)
            if not _killed_step(folder, argv, write, before):
                return write - 1
            written = {path: data for path, data in _files(folder).items()
                       if start.get(path) != data}
            assert _step(folder, argv) == 0, f"{what}: the rerun after a kill failed"
            files = _files(folder)
            assert _same_files({path: files.get(path) for path in written}, written), (
                f"{what}: the rerun changed a file the killed step had written")
            # a secure step, under its state's lock, removes what a kill left of its files
            locked = argv[0].startswith("secure-") or (
                argv[0] == "party" and "--secure-state" in argv)
            assert not (locked and list(folder.rglob(".*.part"))), what
            if _same_files(files, reference.after[index]) or (
                    index not in reference.first_of_kind):
                continue
            for later, later_argv in reference.steps[index + 1:]:
                assert _step(folder, later_argv) == 0, f"{what}, then {later}"
            assert_array_equal(reference.probabilities(folder), reference.proba)


def _consortium(folder):
    assert main(["split", "breast_cancer", "--parties", "5", "--iid", "--out-dir",
                 str(folder)]) == 0


def _secure_setup(folder):
    _consortium(folder)
    with contextlib.chdir(folder), contextlib.redirect_stdout(io.StringIO()):
        for name in _PARTIES:
            assert main(["identity", "--out", f"{name}.key"]) == 0
        rows = [str(len(load_local_file(f"party-{p}.csv")[1])) for p in range(5)]
        assert main(["secure-session", "fedkt", "--estimator", "dt", "--parties",
                     *_PARTIES, "--threshold", "3", "--party-rows", *rows,
                     "--identities", *[f"{name}.pub" for name in _PARTIES], "--out",
                     "session.json"]) == 0


@pytest.fixture(scope="module")
def secure_block(tmp_path_factory):
    return _Reference(tmp_path_factory.mktemp("secure"), _secure_setup, _secure_block(),
                      "model.skops")


@pytest.fixture(scope="module")
def fedct_loop(tmp_path_factory):
    return _Reference(tmp_path_factory.mktemp("fedct"), _consortium, _fedct_loop(2),
                      "fedct.skops")


@_killed(_secure_block())
def test_each_secure_step_killed_at_each_write_reruns_to_the_same_model(
        secure_block, index, tmp_path):
    assert _crash_every_write(secure_block, index, tmp_path) >= 1


@_killed(_fedct_loop(2))
def test_each_fedct_step_killed_at_each_write_reruns_to_the_same_model(
        fedct_loop, index, tmp_path):
    assert _crash_every_write(fedct_loop, index, tmp_path) >= 1


def _step_printed(folder, argv, capsys):
    with contextlib.chdir(folder), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        status = main(_expanded(argv))
    return status, capsys.readouterr().err


def _index(reference, what):
    return [name for name, _ in reference.steps].index(what)


def test_two_starts_of_one_step_at_once_the_second_is_refused_naming_the_first(
        secure_block, tmp_path, capsys):
    index = _index(secure_block, "h0: routed")
    folder = tmp_path / "run"
    secure_block.before(index, folder)
    argv = secure_block.steps[index][1]
    with step_lock(folder / "state-h0.json", "skfedkt secure-party (the first)"):
        status, printed = _step_printed(folder, argv, capsys)
        assert status == 1 and not (folder / "answer-routed-h0.json").exists()
        assert (f"state-h0.json is in use by another step (process {os.getpid()}: "
                "skfedkt secure-party (the first)): one step at a time") in printed
    assert _step_printed(folder, argv, capsys)[0] == 0


@pytest.mark.parametrize("what, message", [
    ("h1: routed", "to-parties/routed-h1.json"),
    ("coordinator: routed answers", "answer-routed-h2.json")])
def test_a_message_with_one_byte_changed_is_refused_and_its_intact_copy_accepted(
        secure_block, what, message, tmp_path, capsys):
    index = _index(secure_block, what)
    folder = tmp_path / "run"
    secure_block.before(index, folder)
    intact = (folder / message).read_bytes()
    # a byte in the middle of the message's largest field: a sealed share, masked words
    at = len(intact) // 2
    changed = intact[:at] + bytes([intact[at] ^ 0x01]) + intact[at + 1:]
    (folder / message).write_bytes(changed)
    state = "state-h1.json" if what.startswith("h1") else "coordinator.json"
    saved = (folder / state).read_bytes()
    status, printed = _step_printed(folder, secure_block.steps[index][1], capsys)
    assert status == 1 and "refused" in printed
    assert (folder / state).read_bytes() == saved
    (folder / message).write_bytes(intact)
    assert _step_printed(folder, secure_block.steps[index][1], capsys)[0] == 0
    assert _same_files(_files(folder), secure_block.after[index]) or what.startswith("h1")
