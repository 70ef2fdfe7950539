"""The files a step writes on its own machine: whole or not at all, on disk before the
step goes on, and one step at a time on a state file.

An operator's first move after a crash is to run the same command again, so every file
is written through a temporary file renamed into place (a reader, or a rerun, never
sees half of one), synced to disk before the rename (a crash after a step says it sent
something cannot lose it), and named while it is written ``.<name>.<random>.part``,
hidden from the globs the docs use. A step that keeps a state (a party's or the
coordinator's secure sum) holds a lock on it while it runs (`step_lock`), so that two
starts of one step never interleave, and removes the temporary files a crash left of it.
"""

import contextlib
import glob
import os
import secrets
import sys

# what a file meant to be sent may be read as (the user's umask still applies); keys
# and states stay readable by their user alone
_SHARED_MODE = 0o644


def write_atomically(path, data, *, private=False):
    """Write `data` to `path` whole: through a temporary file in the same folder,
    synced to disk and renamed into place, so that a failed write leaves no partial
    file and a reader never sees one. `private` files (keys, states, ledgers) are
    readable by their user alone (mode 0600); others as the user's umask allows
    files meant to be sent. Returns the bytes written."""
    folder = os.path.dirname(os.path.abspath(path))
    # refused naming the path asked for, not the temporary file's name
    if not os.path.isdir(folder):
        kind = NotADirectoryError if os.path.exists(folder) else FileNotFoundError
        what = "is a file, not a folder" if os.path.exists(folder) else "does not exist"
        raise kind(f"cannot write {os.fspath(path)}: the folder {folder} {what}; create "
                   "it first, or choose another path")
    temporary = os.path.join(
        folder, f".{os.path.basename(path)}.{secrets.token_hex(8)}.part")
    try:  # the operating system applies the user's umask to a shared file's mode
        handle = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL
                         | getattr(os, "O_BINARY", 0), 0o600 if private else _SHARED_MODE)
    except OSError as exc:
        raise type(exc)(f"cannot write {os.fspath(path)}: {exc.strerror or exc} in the "
                        f"folder {folder}") from exc
    try:
        with os.fdopen(handle, "wb") as file:
            file.write(data)
            file.flush()
            os.fsync(file.fileno())
        os.replace(temporary, path)
    except BaseException:
        if os.path.exists(temporary):
            os.unlink(temporary)
        raise
    _sync_folder(folder)
    return len(data)


def _sync_folder(folder):
    """Sync the folder's entries, so that the rename survives a crash (POSIX; Windows
    has no handle on a folder to sync)."""
    if os.name != "posix":
        return
    handle = os.open(folder, os.O_RDONLY)
    try:
        os.fsync(handle)
    finally:
        os.close(handle)


def remove_leftovers(path):
    """Remove the temporary files a crash left while writing `path`; the step that
    writes `path` calls it under its lock, when no write of `path` is under way."""
    folder, name = os.path.split(os.path.abspath(path))
    for leftover in glob.glob(os.path.join(glob.escape(folder),
                                           f".{glob.escape(name)}.*.part")):
        with contextlib.suppress(FileNotFoundError):
            os.unlink(leftover)


@contextlib.contextmanager
def step_lock(path, step):
    """Hold the lock of the state file `path` while `step` (its command, in words)
    runs: a second start of a step on the same state is refused, naming the first,
    since two would interleave their reads and writes. The lock is the operating
    system's (``fcntl.flock``, ``msvcrt.locking`` on Windows) on a file beside the
    state, ``.<name>.lock``: it is released when the step ends, crashed or not. The
    temporary files a crash left of the state are removed once it is held."""
    folder, name = os.path.split(os.path.abspath(path))
    lock_path = os.path.join(folder, f".{name}.lock")
    handle = os.open(lock_path, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        if not _try_lock(handle):
            os.lseek(handle, 0, os.SEEK_SET)
            holder = os.read(handle, 200).decode(errors="replace").strip()
            raise BlockingIOError(
                f"{os.fspath(path)} is in use by another step ({holder or 'unknown'}): "
                "one step at a time on a state file. Wait for it to finish, then run "
                "this command again if it still has work to do.")
        os.ftruncate(handle, 0)
        os.lseek(handle, 0, os.SEEK_SET)
        os.write(handle, f"process {os.getpid()}: {step}".encode())
        remove_leftovers(path)
        yield
    finally:
        os.close(handle)  # closing releases the lock


def _try_lock(handle):
    """Take the exclusive lock of the open file `handle` without waiting; False where
    another process holds it."""
    try:
        if sys.platform == "win32":
            import msvcrt

            msvcrt.locking(handle, msvcrt.LK_NBLCK, 1)
        else:
            import fcntl

            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        return False
    return True
