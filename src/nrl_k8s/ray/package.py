"""Code delivery for ``launch.codeSource: upload``: the driver's working_dir package.

What ``ray job submit --working-dir`` does, with our own packaging: the chosen source folders
(relative to the repository root) plus the final recipe as ``nrl_k8s_run.yaml`` are zipped into
``_ray_pkg_<hash>.zip``; the dashboard's package API stores it in the GCS and the job is submitted
with ``runtime_env.working_dir = gcs://<name>`` (Ray unpacks it and starts the driver there).

Content addressed: the name is a hash of every file's path, exec bit and content digest (and the
recipe), not of the zip, so an unchanged tree has the same URI and is not uploaded again. Digests
are cached per file by (path, size, mtime_ns) in a private file under ``$XDG_CACHE_HOME/nrl-k8s/``
(``~/.cache/nrl-k8s/``), so a warm re-run only stats the tree; the zip itself is built lazily by
:meth:`Package.zip_bytes`, once whatever the threads asking: only when the cluster does not
already have the package, or ahead of time when files had to be hashed (``Package.hashed``).

The zip is deterministic: entries sorted, deflated unless a sample shows the content is already
compressed (then stored), timestamps fixed (1980-01-01), permissions 0644 or 0755
(only the exec bit is kept: Ray restores the mode on unpack), no directory entries: byte for
byte what ``zipfile`` writes for them, written by :func:`_zip` from entries compressed beforehand,
on a few threads (zlib, sha256 and reads release the GIL). The deflated entries of the last
:data:`PACKS_KEPT` zips are kept by content digest in ``$XDG_CACHE_HOME/nrl-k8s/deflated-<level>/``
(one pack file per zip): after an edit only the changed files are deflated again.

Size limit: Ray's GCS refuses a package at its gRPC message limit (512 MiB) and warns from half
of it, but every upload goes through the dashboard's ``PUT /api/packages/...``, whose aiohttp
body limit (``ray_constants.DASHBOARD_CLIENT_MAX_SIZE``, 100 MiB) is lower: measured against the
Ray 2.60 dashboard in the test venv, a body of exactly 104857600 bytes is stored (GET then answers
200) and one byte more is refused with HTTP 413 "Maximum request body size 104857600 exceeded."
(``ray job submit --working-dir`` uploads through the same endpoint). That is :data:`MAX_PACKAGE_BYTES`.
"""

from __future__ import annotations

import hashlib
import io
import json
import mmap
import os
import stat
import struct
import tempfile
import threading
import time
import zlib
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any

from nrl_k8s.cache import cache_dir, private_dir
from nrl_k8s.errors import ConfigError, InfraError, NrlK8sError, dotted

__all__ = ["DEFAULT_UPLOAD_PATHS", "MAX_PACKAGE_BYTES", "RECIPE_FILE", "Package", "check_declared_paths", "repo_root",
           "stage", "upload_paths", "upload_sources"]

# NeMo-RL's layout (NVIDIA-NeMo/RL): the `nemo_rl` package and `examples/` (the run_*.py entry
# points and their configs) at the top; its submodules live in `3rdparty/<Name>-workspace/`, each a
# small uv workspace package (setup.py / pyproject.toml) around the checkout. A driver imports
# NeMo Gym from `3rdparty/Gym-workspace/Gym`, Megatron-Core from
# `3rdparty/Megatron-LM-workspace/Megatron-LM` (nemo_rl/__init__.py puts it on sys.path relative
# to itself) and Megatron-Bridge from `3rdparty/Megatron-Bridge-workspace/Megatron-Bridge`.
# Automodel, vLLM and TensorRT-LLM workspaces are left to the image (large, rarely edited).
# Missing ones are skipped: a checkout without the Gym submodule is fine.
DEFAULT_UPLOAD_PATHS = (
    "nemo_rl",
    "examples",
    "3rdparty/Gym-workspace",
    "3rdparty/Megatron-LM-workspace",
    "3rdparty/Megatron-Bridge-workspace",
)
MAX_PACKAGE_BYTES = 100 * 1024**2  # the dashboard's PUT body limit (see the module docstring)
RECIPE_FILE = "nrl_k8s_run.yaml"

IGNORED_NAMES = frozenset({
    ".git", ".hg", ".svn",  # VCS (a submodule's .git is a file)
    "__pycache__", ".pytest_cache", ".mypy_cache",  # caches
    ".venv", "venv", "node_modules",
})
IGNORED_SUFFIXES = (".pyc",)
ZIP_TIME = (1980, 1, 1, 0, 0, 0)
COMPRESS_LEVEL = 1  # deflate level: most of level 6's ratio on source code at a fraction of the time
SAMPLE_BYTES = 64 * 1024  # what decides whether a file is deflated or stored
RACY_NS = 2_000_000_000  # a file modified this recently may change within its mtime tick: not cached
CACHE_ENTRIES = 200_000  # ~25 MB of JSON at most
PACKS_KEPT = 4  # the deflated entries of the last zips built (each under MAX_PACKAGE_BYTES)
ZIP_THREADS = min(4, os.cpu_count() or 1)
_FORMAT = b"nrl-k8s-package-1\0"  # change when the zip layout changes, so names change with it
_REPO_ROOT_HINT = "pass --repo-root (the NeMo-RL checkout whose code the driver runs)"


@dataclass(frozen=True)
class _Entry:
    arcname: str
    size: int
    executable: bool
    digest: bytes
    path: str | None = None  # None: ``data`` holds the content
    data: bytes | None = field(default=None, repr=False)

    def read(self) -> bytes:
        if self.data is not None:
            return self.data
        assert self.path is not None  # one of the two is set
        try:
            with open(self.path, "rb") as handle:
                return handle.read()
        except OSError as exc:
            raise _changed(self.arcname, exc.strerror) from None


@dataclass(frozen=True)
class Package:
    """A staged working_dir package: ``name`` ``_ray_pkg_<hash>.zip``, ``uri`` ``gcs://<name>``,
    ``files`` the archive names (sorted), ``size`` their total bytes (uncompressed), ``hashed``
    how many files were read to stage it (their digests were not cached: new or changed files,
    so the package is likely new to the cluster too)."""

    name: str
    uri: str
    files: tuple[str, ...]
    size: int
    _entries: tuple[_Entry, ...] = field(repr=False, compare=False)
    hashed: int = 0
    _zipping: threading.Lock = field(default_factory=threading.Lock, init=False, repr=False, compare=False)

    def zip_bytes(self) -> bytes:
        """The zip (built on first use, once, whatever the threads asking). A file that changed
        since staging is an error."""
        with self._zipping:
            if "_zip" not in self.__dict__:
                object.__setattr__(self, "_zip", self._build_zip())
            return self.__dict__["_zip"]

    def _build_zip(self) -> bytes:
        deflated = _DeflatedCache(cache_dir() / f"deflated-{COMPRESS_LEVEL}")

        def member(entry: _Entry) -> _Member:
            data = entry.read()
            if hashlib.sha256(data).digest() != entry.digest:
                raise _changed(entry.arcname, "its content differs from when it was staged")
            payload = deflated.get(entry.digest)
            if payload is None and _compressible(data):
                compressor = zlib.compressobj(COMPRESS_LEVEL, zlib.DEFLATED, -15)  # raw deflate, as zipfile
                payload = compressor.compress(data) + compressor.flush()
            return _Member(entry.arcname, entry.executable, zlib.crc32(data), len(data), payload or data,
                           payload is not None)

        try:
            with ThreadPoolExecutor(ZIP_THREADS, thread_name_prefix="zip") as pool:
                members = list(pool.map(member, self._entries))
        finally:
            deflated.close()
        archive = _zip(members)
        deflated.save(self.name, members, [entry.digest for entry in self._entries])
        return archive


def repo_root(explicit: str | None = None, cwd: str | None = None) -> Path:
    """``--repo-root`` when given, else the git top-level of ``cwd`` (the nearest ``.git`` above it)."""
    if explicit:
        root = Path(explicit).expanduser().resolve()
        if not root.is_dir():
            raise ConfigError(f"--repo-root {explicit}: not a directory", hint=_REPO_ROOT_HINT)
        return root
    start = Path(cwd or os.getcwd()).resolve()
    for directory in (start, *start.parents):
        if (directory / ".git").exists():  # a directory, or a file in worktrees and submodules
            return directory
    raise ConfigError(f"{start} is not inside a git checkout: no repository root to upload code from",
                      hint=_REPO_ROOT_HINT)


def upload_paths(paths: list[str] | None, root: Path, *, where: str | tuple) -> list[Path]:
    """The upload paths under ``root``: ``paths`` (each must exist and stay inside ``root``), or the
    :data:`DEFAULT_UPLOAD_PATHS` that exist when ``paths`` is None. ``where`` names the config key:
    as text, or as an infra key path (then problems are InfraErrors, which name the file that set it)."""
    root = Path(root)
    if paths is not None:
        return [_inside(root, path, _at(where, index)) for index, path in enumerate(paths)]
    found = [_inside(root, path, _at(where, "(default)")) for path in DEFAULT_UPLOAD_PATHS if (root / path).exists()]
    if not found:
        _refuse(where, f"is unset and none of its defaults ({', '.join(DEFAULT_UPLOAD_PATHS)}) exist under {root}",
                f"run from a NeMo-RL checkout, pass --repo-root, or set {_label(where)}", sep=" ")
    return found


def _at(where: str | tuple, part: int | str) -> str | tuple:
    if isinstance(where, tuple):
        return where if part == "(default)" else (*where, part)
    return f"{where} {part}" if part == "(default)" else f"{where}.{part}"


def _label(where: str | tuple) -> str:
    return dotted(where) if isinstance(where, tuple) else where


def _refuse(where: str | tuple, problem: str, hint: str, sep: str = ": ") -> None:
    if isinstance(where, tuple):
        raise InfraError(where, problem, hint=hint)
    raise ConfigError(f"{where}{sep}{problem}", hint=hint)


def check_declared_paths(infra: dict) -> None:
    """Every ``rayUploadPaths`` entry of the infra (``launch``'s and each daemon's) written as an
    upload path can be: relative to the repository root and inside it. Needs no checkout (every
    command checks it); :func:`upload_sources` checks the rest against the checkout."""
    declared: list[tuple[tuple, Any]] = [
        (("launch", "rayUploadPaths"), (infra.get("launch") or {}).get("rayUploadPaths"))]
    declared += [
        (("kuberay", role, "daemon", "rayUploadPaths"), ((entry or {}).get("daemon") or {}).get("rayUploadPaths"))
        for role, entry in sorted((infra.get("kuberay") or {}).items())
    ]
    for key, paths in declared:
        for index, path in enumerate(paths or []):
            problem = _outside(path)
            if problem:
                raise InfraError(
                    (*key, index),
                    f"{path!r} {problem}",
                    hint="upload paths are relative to the repository "
                    "root (--repo-root, else the git top-level of the current directory)",
                )


def upload_sources(plan, explicit_root: str | None, roles=None) -> tuple[Path, dict[str, list[Path]]]:
    """(repository root, upload paths) of what a long-lived ``plan`` uploads: the driver's ("driver",
    unless ``roles`` is given: always, it carries the recipe; none without code upload) and each daemon
    of ``roles`` (default all) that uploads code, keyed by role. What `run --raycluster` checks before
    anything is applied, and `run --dry-run` with it; no file is read. The repository root is
    looked up only when something uploads code (else the current directory: nothing is read there)."""
    codes: dict[str, tuple[Any, tuple]] = {}  # name -> (its code, the key of its upload paths)
    if roles is None:
        codes["driver"] = (plan.driver.code, ("launch", "rayUploadPaths"))
    for role, daemon in plan.daemons.items():
        if daemon.code.source == "upload" and (roles is None or role in roles):
            codes[role] = (daemon.code, ("kuberay", role, "daemon", "rayUploadPaths"))
    uploading = any(code.source == "upload" for code, _ in codes.values())
    root = repo_root(explicit_root) if uploading or explicit_root else Path.cwd()
    return root, {name: upload_paths(list(code.upload_paths) if code.upload_paths else None, root, where=where)
                  if code.source == "upload" else [] for name, (code, where) in codes.items()}


def stage(root: Path, paths: list[Path], recipe_text: str, *, limit: int = MAX_PACKAGE_BYTES) -> Package:
    """Stage ``paths`` (as :func:`upload_paths` returns them, or relative to ``root``) plus
    ``recipe_text`` as ``nrl_k8s_run.yaml``; archive names are relative to ``root``.

    Hashes the tree (cached digests), never zips it unless it might exceed ``limit``: then the zip
    is built to measure it, and a package over ``limit`` bytes is a ConfigError naming the largest files.
    """
    root = Path(root)
    recipe = recipe_text.encode("utf-8")
    entries = {RECIPE_FILE: _Entry(RECIPE_FILE, len(recipe), False, hashlib.sha256(recipe).digest(), data=recipe)}
    with _DigestCache.open() as cache:
        for path in paths:
            for arcname, file, info in _walk(root, Path(path)):
                if arcname not in entries:  # the recipe wins over a tree's own nrl_k8s_run.yaml
                    entries[arcname] = _Entry(arcname, info.st_size, bool(info.st_mode & stat.S_IXUSR),
                                              cache.digest(file, info), path=file)
    ordered = tuple(entries[name] for name in sorted(entries))
    content = hashlib.sha256(_FORMAT)
    for entry in ordered:
        content.update(b"%s\0%d\0%s" % (entry.arcname.encode(), entry.executable, entry.digest))
    name = f"_ray_pkg_{content.hexdigest()[:32]}.zip"
    package = Package(name, f"gcs://{name}", tuple(e.arcname for e in ordered), sum(e.size for e in ordered), ordered,
                      hashed=cache.hashed)
    if _zip_bound(ordered) > limit and len(package.zip_bytes()) > limit:
        largest = sorted(ordered, key=lambda e: (-e.size, e.arcname))[:5]
        raise ConfigError(
            f"the code package is {_human(len(package.zip_bytes()))} zipped, over the {_human(limit)} a Ray dashboard "
            f"accepts; largest files: " + ", ".join(f"{e.arcname} ({_human(e.size)})" for e in largest),
            hint="narrow the upload paths (rayUploadPaths) or move data out of the tree "
                 "(or use launch.codeSource: image / lustre for large trees)",
        )
    return package


# -- walking the tree -------------------------------------------------------------------------

def _outside(path: str) -> str | None:
    """Why ``path`` (as written) cannot be an upload path, else None."""
    pure = PurePosixPath(path)
    if pure.is_absolute() or ".." in pure.parts:
        return "must be a path relative to the repository root, inside it"
    return None


def _inside(root: Path, path: str, where: str | tuple) -> Path:
    problem = _outside(path)
    if problem:
        _refuse(where, f"{path!r} {problem} ({root})", _REPO_ROOT_HINT)
    pure = PurePosixPath(path)
    full = root.joinpath(*pure.parts)
    if not full.exists():
        _refuse(where, f"{path!r} does not exist under the repository root {root}",
                f"upload paths are relative to the repository root; {_REPO_ROOT_HINT}")
    if not full.resolve().is_relative_to(root.resolve()):
        _refuse(where, f"{path!r} leads outside the repository root {root} (to {full.resolve()})",
                "upload only files inside the repository root")
    return full


def _walk(root: Path, path: Path):
    """(archive name, file path, stat) of every file under ``path`` (itself when a file), sorted, ignored
    names left out. Symlinks are followed when they stay inside ``root`` (a link back to an enclosing
    folder, a loop, is skipped); one leading outside is an error: nothing outside the repository is
    ever uploaded. Strings and ``os.scandir`` rather than Path objects: this runs per file, every run."""
    real_root = os.path.realpath(root)

    def follow(full: str, arcname: str) -> tuple[os.stat_result, str] | None:
        real = os.path.realpath(full)
        if real != real_root and not real.startswith(real_root + os.sep):
            raise ConfigError(f"{arcname} is a symlink leading outside the repository root {root} (to {real})",
                              hint="remove the link or upload its target from inside the repository")
        try:
            return os.stat(full), real
        except OSError:
            return None  # a dangling link

    def visit(full: str, arcname: str, info: os.stat_result, real: str, parents: frozenset[str]):
        if stat.S_ISREG(info.st_mode):
            if not arcname.endswith(IGNORED_SUFFIXES):
                yield arcname, full, info
            return
        if not stat.S_ISDIR(info.st_mode) or real in parents:
            return
        with os.scandir(full) as listing:
            children = sorted(listing, key=lambda child: child.name)
        if any(child.name == "pyvenv.cfg" for child in children):
            return  # a virtualenv, whatever its name
        parents = parents | {real}
        for child in children:
            if child.name in IGNORED_NAMES:
                continue
            name = f"{arcname}/{child.name}" if arcname else child.name
            if child.is_symlink():
                followed = follow(child.path, name)
                if followed is not None:
                    yield from visit(child.path, name, *followed, parents)
            else:
                yield from visit(child.path, name, child.stat(follow_symlinks=False),
                                 os.path.join(real, child.name), parents)

    relative = next((path.relative_to(base) for base in (root, root.absolute()) if path.is_relative_to(base)), path)
    arcname = relative.as_posix() if relative.parts else ""
    full = os.path.join(root.absolute(), arcname) if arcname else str(root.absolute())
    followed = follow(full, arcname or ".")
    if followed is not None:
        yield from visit(full, arcname, *followed, frozenset())


# -- the digest cache ---------------------------------------------------------------------------

class _DigestCache:
    """Per-file sha256 digests keyed by absolute path, valid while (size, mtime_ns) match."""

    def __init__(self, path: Path):
        self.path = path
        self.started_ns = time.time_ns()
        try:
            self.entries: dict[str, list] = json.loads(path.read_text())
        except (OSError, ValueError):
            self.entries = {}
        if not isinstance(self.entries, dict):
            self.entries = {}
        self.seen: set[str] = set()
        self.dirty = False
        self.hashed = 0  # files read because their digest was not cached

    @classmethod
    def open(cls) -> _DigestCache:
        return cls(cache_dir() / "package-digests.json")

    def __enter__(self) -> _DigestCache:
        return self

    def __exit__(self, exc_type, *_: object) -> None:
        if self.dirty and exc_type is None:
            self._save()

    def digest(self, key: str, info: os.stat_result) -> bytes:
        self.seen.add(key)
        cached = self.entries.get(key)
        if isinstance(cached, list) and cached[:2] == [info.st_size, info.st_mtime_ns]:
            return bytes.fromhex(cached[2])
        try:
            with open(key, "rb") as handle:
                digest = hashlib.file_digest(handle, "sha256").digest()
        except OSError as exc:
            raise _changed(key, exc.strerror) from None
        self.hashed += 1
        if info.st_mtime_ns < self.started_ns - RACY_NS:  # else it may still change within its mtime tick
            self.entries[key] = [info.st_size, info.st_mtime_ns, digest.hex()]
            self.dirty = True
        return digest

    def _save(self) -> None:
        if len(self.entries) > CACHE_ENTRIES:  # forget files no longer staged (other trees, deleted files)
            self.entries = {key: value for key, value in self.entries.items() if key in self.seen}
        try:
            private_dir(self.path.parent)
            fd, tmp = tempfile.mkstemp(dir=self.path.parent, prefix=".digests-")  # created 0600
            with os.fdopen(fd, "w") as handle:
                json.dump(self.entries, handle, separators=(",", ":"))
            os.replace(tmp, self.path)
        except OSError:
            pass  # a cache: the next run hashes again


# -- the zip ------------------------------------------------------------------------------------

@dataclass(frozen=True)
class _Member:
    arcname: str
    executable: bool
    crc: int
    size: int
    payload: bytes  # as stored in the archive
    deflated: bool


_LOCAL, _CENTRAL = struct.Struct("<4s2B4HL2L2H"), struct.Struct("<4s4B4HL2L5H2L")
_END64, _LOCATOR, _END = struct.Struct("<4sQ2H2L4Q"), struct.Struct("<4sLQL"), struct.Struct("<4s4H2LH")
_DOS_DATE = (ZIP_TIME[0] - 1980) << 9 | ZIP_TIME[1] << 5 | ZIP_TIME[2]
_DOS_TIME = ZIP_TIME[3] << 11 | ZIP_TIME[4] << 5 | ZIP_TIME[5] // 2


def _zip(members: list[_Member]) -> bytes:
    """The archive ``zipfile`` writes for these members (version 2.0, unix mode bits, UTF-8 flag on
    non-ASCII names, zip64 end records past 65535 entries); no member nears 4 GiB (MAX_PACKAGE_BYTES)."""
    out, directory = io.BytesIO(), []
    for m in members:
        name = m.arcname.encode("utf-8")
        flags = 0 if m.arcname.isascii() else 0x800
        head = (20, 0, flags, 8 if m.deflated else 0, _DOS_TIME, _DOS_DATE, m.crc, len(m.payload), m.size, len(name))
        mode = 0o100755 if m.executable else 0o100644
        directory.append(_CENTRAL.pack(b"PK\x01\x02", 20, 3, *head, 0, 0, 0, 0, mode << 16, out.tell()) + name)
        out.write(_LOCAL.pack(b"PK\x03\x04", *head, 0) + name)
        out.write(m.payload)
    start, count = out.tell(), len(members)
    out.write(b"".join(directory))
    end = out.tell()
    if count > 0xFFFF:
        out.write(_END64.pack(b"PK\x06\x06", 44, 45, 45, 0, 0, count, count, end - start, start))
        out.write(_LOCATOR.pack(b"PK\x06\x07", 0, end, 1))
    out.write(_END.pack(b"PK\x05\x06", 0, 0, min(count, 0xFFFF), min(count, 0xFFFF), end - start, start, 0))
    return out.getvalue()


class _DeflatedCache:
    """Deflated content by sha256 digest, from the packs of the last :data:`PACKS_KEPT` zips built:
    one file each (``<package>.pack``: an 8-byte index length, a JSON index of digest -> offset,
    length and CRC-32 of the deflated bytes, then those bytes), written whole and renamed into
    place. A cache, so every failure (a damaged pack, an entry whose CRC does not match) is a miss."""

    def __init__(self, path: Path):
        self.path, self._found, self._maps = path, {}, []
        try:
            packs = sorted(path.glob("*.pack"), key=lambda pack: pack.stat().st_mtime_ns, reverse=True)
        except OSError:
            packs = []
        for pack in reversed(packs[:PACKS_KEPT]):  # the newest last: its entries win
            try:
                with open(pack, "rb") as handle:
                    view = mmap.mmap(handle.fileno(), 0, access=mmap.ACCESS_READ)
                size = int.from_bytes(view[:8], "little")
                index = json.loads(view[8:8 + size])
                self._maps.append(view)
                base = 8 + size
                self._found.update(
                    {digest: (view, base + at, length, crc) for digest, (at, length, crc) in index.items()}
                )
            except (OSError, ValueError, TypeError, AttributeError):
                continue

    def get(self, digest: bytes) -> bytes | None:
        try:
            view, at, length, crc = self._found[digest.hex()]
            payload = view[at:at + length]
        except (KeyError, ValueError, TypeError):
            return None
        return payload if len(payload) == length and zlib.crc32(payload) == crc else None

    def save(self, name: str, members: list[_Member], digests: list[bytes]) -> None:
        """This zip's deflated entries as a pack (the oldest beyond PACKS_KEPT removed)."""
        index, offset = {}, 0
        for member, digest in zip(members, digests, strict=True):
            if member.deflated:
                index[digest.hex()] = (offset, len(member.payload), zlib.crc32(member.payload))
                offset += len(member.payload)
        head = json.dumps(index, separators=(",", ":")).encode()
        try:
            private_dir(self.path)
            fd, tmp = tempfile.mkstemp(dir=self.path, prefix=".pack-")  # 0600
            with os.fdopen(fd, "wb") as handle:
                handle.write(len(head).to_bytes(8, "little") + head)
                for member in members:
                    if member.deflated:
                        handle.write(member.payload)
            os.replace(tmp, self.path / f"{name}.pack")
            packs = sorted(self.path.glob("*.pack"), key=lambda pack: pack.stat().st_mtime_ns, reverse=True)
            for old in packs[PACKS_KEPT:]:
                old.unlink()
        except OSError:
            pass

    def close(self) -> None:
        for view in self._maps:
            view.close()


def _compressible(data: bytes) -> bool:
    """Whether deflate is worth its time: a sample of already-compressed content (weights, archives,
    images) shrinks by under a tenth, and deflating it is the slowest step of a package for nothing."""
    sample = data[:SAMPLE_BYTES]
    return len(zlib.compress(sample, COMPRESS_LEVEL)) < 0.9 * len(sample)


def _zip_bound(entries: tuple[_Entry, ...]) -> int:
    """An upper bound of the zip's size: deflate's worst-case growth plus every header."""
    per_entry = 30 + 46 + 64  # local header + central directory record + room for extra fields
    return 22 + sum(e.size + e.size // 1000 + 64 + per_entry + 2 * len(e.arcname.encode()) for e in entries)


def _changed(name: str, why: str | None) -> NrlK8sError:
    return NrlK8sError(f"{name} changed while the code package was being staged ({why})", hint="run again")


def _human(size: int) -> str:
    for unit, scale in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if size >= scale:
            return f"{size / scale:.1f} {unit}"
    return f"{size} B"
