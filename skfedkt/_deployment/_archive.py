"""Reading a file from outside within bounds: zip members, JSON, skops payloads.

Every upload, server message and model file a coordinator or a party receives is read
here first, before skops sees it: the archive must hold exactly the expected members,
once each, under plain names, stored or deflated, unencrypted; every member is inflated
in chunks and the read stops at its cap; JSON is parsed with a size and depth bound; a
skops payload's schema is counted before skops walks it. What fails is an `UploadError`
naming the file and the field.
"""

import io
import json
import struct
import zipfile
import zlib
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

_CHUNK = 1 << 20
# what is kept of a member read only to be counted: a numpy file's header fits
HEAD_BYTES = 4096
_MiB = 1 << 20


class UploadError(ValueError):
    """An upload the server refuses: unreadable, inconsistent, or with untrusted types.

    The message names the party (or the file, before its manifest is read) and the field.

    Attributes
    ----------
    party : object
        The party named in the upload's manifest, or None if it could not be read.
    field : str
        What was wrong: a manifest field, ``"file"``, ``"types"``, ``"limits"`` or a
        payload entry such as ``"students[1]"``.
    """

    def __init__(self, message, *, party=None, field="file"):
        super().__init__(message)
        self.party = party
        self.field = field


@dataclass(frozen=True)
class UploadLimits:
    """What a coordinator (or a party reading a message) reads from one file at most.

    Honest files stay far below the defaults: an upload of FedKT's defaults is 0.4-1 MB
    and its server step needs 1.3-2.9 MiB per party (``bench_deployment.py``); one of
    two random forests of 100 full-depth trees on 30,000 rows is about 5 MB and 40,000
    schema nodes. The defaults keep what a hostile file can make the server allocate
    within 256 MiB of an honest read (skops holds an array's bytes and the array, a
    stored file up to four copies). Raise a limit for larger models; a file beyond one
    is refused before its payload is loaded.

    Parameters
    ----------
    max_file_bytes : int, default=48 MiB
        Size of the file itself (read in chunks, stopped at the cap).
    max_inflated_bytes : int, default=96 MiB
        Size of the payload's members together once decompressed (read in chunks, the
        read stops at the cap: a small file that inflates to gigabytes is refused
        after reading at most this much; only the payload's schema is kept).
    max_manifest_bytes : int, default=1 MiB
        Size of the manifest (JSON) once decompressed.
    max_json_depth : int, default=64
        Nesting depth of the manifest and of the payload's schema.
    max_payload_nodes : int, default=2,000,000
        Objects the payload would create (nodes of its skops schema).
    max_schema_bytes : int, default=16 MiB
        Size of the payload's skops schema (JSON) once decompressed, read in chunks and
        refused at the cap before it is parsed: parsing holds about six times its
        size, and a schema of references to one object inflates from a few hundred kB
        to tens of MB. An honest one holds about 19 kB per tree (two forests of 100
        trees: 3.3-3.8 MB), so the default serves some 800 trees; raise it for more
        (the command line's ``--max-upload-mb`` raises it to the file's cap: FedCT's
        final model of four forests of 100 trees needs more).
    max_members : int, default=10,000
        Members of an archive, counted in its directory's last record before the
        directory is read: each costs about 600 bytes once read, and a file of empty
        members holds 12,000 of them per MiB. An honest payload has about four per
        tree.
    derivation : str, default=""
        Where the caps come from, said in every refusal they cause: empty for the
        defaults or caps set by hand; `BaseFederatedClassifier.agreed_upload_limits`
        says which agreement, margin and honest upload they follow.

    Examples
    --------
    >>> from skfedkt import UploadLimits
    >>> UploadLimits(max_file_bytes=10 * 2**20).max_file_bytes
    10485760
    """

    max_file_bytes: int = 48 * _MiB
    max_inflated_bytes: int = 96 * _MiB
    max_manifest_bytes: int = _MiB
    max_json_depth: int = 64
    max_payload_nodes: int = 2_000_000
    max_schema_bytes: int = 16 * _MiB
    max_members: int = 10_000
    derivation: str = ""

    def __post_init__(self):
        if not isinstance(self.derivation, str):
            raise ValueError(f"UploadLimits.derivation must be text, got {self.derivation!r}.")
        for name, value in vars(self).items():
            if name == "derivation":
                continue
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"UploadLimits.{name} must be a positive integer, got "
                                 f"{value!r}.")


    def source(self):
        """What a refusal says of the caps: the class, and where they come from."""
        return f"UploadLimits{'' if not self.derivation else ': ' + self.derivation}"


DEFAULT_LIMITS = UploadLimits()


def check_limits(limits):
    """`limits` as an UploadLimits (None: the defaults)."""
    if limits is None:
        return DEFAULT_LIMITS
    if not isinstance(limits, UploadLimits):
        raise TypeError(f"limits must be an UploadLimits or None, got {type(limits).__name__}.")
    return limits


def read_file(source, who, limits):
    """The bytes of a path (read up to the size cap) or of bytes given."""
    if isinstance(source, (bytes, bytearray, memoryview)):
        data = bytes(source)
    else:
        try:
            with open(source, "rb") as file:
                # in chunks: one read of the cap would reserve the cap's bytes at once
                parts, size = [], 0
                while size <= limits.max_file_bytes and (chunk := file.read(_CHUNK)):
                    parts.append(chunk)
                    size += len(chunk)
                data = b"".join(parts)
        except OSError as exc:
            raise UploadError(f"{who}: cannot read the file: {exc}") from exc
    if len(data) > limits.max_file_bytes:
        raise UploadError(
            f"{who}: the file is larger than max_file_bytes={limits.max_file_bytes} "
            f"({limits.source()}{'' if limits.derivation else '; CLI: --max-upload-mb'}).",
            field="limits",
        )
    return data


def _plain_name(name):
    return (name and not name.startswith(("/", "\\")) and "\\" not in name
            and ".." not in name.split("/") and ":" not in name)


def read_members(data, who, *, expected=None, limits=DEFAULT_LIMITS, caps=None,
                 whole=None):
    """{name: bytes} of the zip archive `data`, refusing anything but plain members.

    Parameters
    ----------
    expected : list of str, optional
        The exact member names (each once); None accepts any plain, unique names.
    caps : dict, optional
        ``{name: limit}``: members capped on their own, by the `UploadLimits` field
        `limit` (e.g. ``"max_manifest_bytes"``); the others share
        ``limits.max_inflated_bytes``.
    whole : collection of str, optional
        The members kept whole; every other one is inflated in chunks to count it
        against the caps, keeping only its first `HEAD_BYTES` (a numpy file's
        header), so that a member no one reads costs no memory. None keeps all.
    """
    caps = caps or {}
    _check_member_count(data, who, limits)
    try:
        archive = zipfile.ZipFile(io.BytesIO(data))
        infos = archive.infolist()
    except (zipfile.BadZipFile, zipfile.LargeZipFile, ValueError, EOFError, OSError) as exc:
        raise UploadError(f"{who}: not a zip archive (truncated or corrupted?): {exc}") from exc
    names = [info.filename for info in infos]
    if len(set(names)) != len(names):
        repeated = sorted({name for name in names if names.count(name) > 1})
        raise UploadError(f"{who}: the archive holds members more than once: {repeated}.")
    if expected is not None and sorted(names) != sorted(expected):
        raise UploadError(
            f"{who}: the archive holds {names}; it must hold exactly {expected}, once each."
        )
    budget = limits.max_inflated_bytes
    members = {}
    for info in infos:
        name = info.filename
        if not _plain_name(name) or info.is_dir():
            raise UploadError(f"{who}: member {name!r} is not a plain file name.")
        if (info.external_attr >> 16) & 0o170000 not in (0, 0o100000):
            raise UploadError(f"{who}: member {name!r} is not a regular file (a link?).")
        if info.flag_bits & 0x1:
            raise UploadError(f"{who}: member {name!r} is encrypted.")
        if info.compress_type not in (zipfile.ZIP_STORED, zipfile.ZIP_DEFLATED):
            raise UploadError(
                f"{who}: member {name!r} uses compression method {info.compress_type}; "
                "only stored and deflated members are read."
            )
        if name in caps:
            cap = getattr(limits, caps[name])
            limit = f"{caps[name]}={cap}"
        else:
            cap = budget
            limit = (f"{cap} bytes, what the other members left of max_inflated_bytes="
                     f"{limits.max_inflated_bytes}")
        keep = None if whole is None or name in whole else HEAD_BYTES
        members[name], size = _inflate(archive, info, cap, f"{limit} ({limits.source()})",
                                       who, keep)
        if name not in caps:
            budget -= size
    return members


# the end of central directory record, and zip64's locator and record
_END = b"PK\x05\x06"
_END64_LOCATOR = b"PK\x06\x07"
_END64 = b"PK\x06\x06"


def _check_member_count(data, who, limits):
    """Refuse an archive whose directory lists more than `max_members` members, from
    the count in its last record, before `zipfile` reads the directory (it holds every
    member's record at once). What is not a zip archive is left for `zipfile` to name."""
    end = data.rfind(_END, max(0, len(data) - 22 - 0xFFFF))
    if end < 0 or len(data) < end + 22:
        return
    (count,) = struct.unpack("<H", data[end + 10:end + 12])
    locator = end - 20
    if count == 0xFFFF and locator >= 0 and data[locator:locator + 4] == _END64_LOCATOR:
        (record,) = struct.unpack("<Q", data[locator + 8:locator + 16])
        if data[record:record + 4] == _END64 and len(data) >= record + 40:
            (count,) = struct.unpack("<Q", data[record + 32:record + 40])
    if count > limits.max_members:
        raise UploadError(
            f"{who}: the archive lists {count} members, more than max_members="
            f"{limits.max_members} ({limits.source()}).", field="limits",
        )


def _inflate(archive, info, cap, limit, who, keep=None):
    """A member's bytes (its first `keep` only, unless None) and its size, read in
    chunks; refused as soon as it passes `cap` (what is left of `limit`, named in the
    refusal)."""
    parts, size = [], 0
    try:
        with archive.open(info) as member:
            while chunk := member.read(min(_CHUNK, cap + 1 - size)):
                size += len(chunk)
                if size > cap:
                    raise UploadError(
                        f"{who}: member {info.filename!r} inflates beyond {limit}.",
                        field="limits",
                    )
                if keep is None or size - len(chunk) < keep:
                    parts.append(chunk)
    except UploadError:
        raise
    except (zipfile.BadZipFile, zlib.error, EOFError, OSError, ValueError, RuntimeError,
            NotImplementedError) as exc:
        raise UploadError(f"{who}: member {info.filename!r} is damaged: {exc}") from exc
    kept = b"".join(parts)
    return (kept if keep is None else kept[:keep]), size


def depth_and_nodes(value, max_depth, max_nodes, who, what, source="UploadLimits"):
    """Walk parsed JSON without recursion; refuse it past `max_depth` or `max_nodes`."""
    stack, nodes = [(value, 1)], 0
    while stack:
        value, depth = stack.pop()
        children: Iterable[Any]
        if isinstance(value, dict):
            children = value.values()
        elif isinstance(value, list):
            children = value
        else:
            continue
        nodes += 1
        if depth > max_depth or nodes > max_nodes:
            bound = (f"nests deeper than max_json_depth={max_depth}" if depth > max_depth
                     else f"holds more than max_payload_nodes={max_nodes} objects")
            raise UploadError(f"{who}: the {what} {bound} ({source}).", field="limits")
        stack.extend((child, depth + 1) for child in children)
    return nodes


def parse_json(raw, who, what, limits, max_nodes=None):
    """Parsed JSON of bounded depth (and node count)."""
    try:
        value = json.loads(raw)
    except RecursionError as exc:
        raise UploadError(f"{who}: the {what} nests too deeply.", field="limits") from exc
    except (ValueError, UnicodeDecodeError) as exc:
        raise UploadError(f"{who}: the {what} is not valid JSON: {exc}") from exc
    depth_and_nodes(value, limits.max_json_depth,
                     max_nodes if max_nodes is not None else float("inf"), who, what,
                     limits.source())
    return value


def check_skops_payload(payload, who, limits):
    """Refuse a skops payload that is not a plain archive within the limits, before
    skops walks it (its type audit follows every node of the schema); its parsed
    schema and its members."""
    members = read_members(payload, who, limits=limits, whole={"schema.json"},
                           caps={"schema.json": "max_schema_bytes"})
    if "schema.json" not in members:
        raise UploadError(f"{who}: the payload has no skops schema.", field="payload")
    return parse_json(members["schema.json"], who, "payload's schema", limits,
                      max_nodes=limits.max_payload_nodes), members
