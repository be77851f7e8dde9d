"""The two container images real nodes need, built locally (nothing can be pulled) as
docker-archive tarballs that ``ctr images import`` accepts.

* :data:`PAUSE_IMAGE`: the pod sandbox, one static binary compiled from ``pause.c``.
* :data:`WORKLOAD_IMAGE`: Debian's ``busybox-static`` with its applets linked into ``/bin``; by
  default it sleeps until SIGTERM (and then exits at once, so pods delete quickly).

The archives are deterministic (fixed mtimes, owners and order), so the same inputs give the
same image ids; they are cached under ``$TOPOSCHED_CACHE_DIR/node-images`` (default
``~/.cache/toposched/node-images``) keyed by a hash of their inputs. Pods must use
``imagePullPolicy: Never``.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import shutil
import subprocess
import tarfile
import tempfile
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from testkit.realnode.errors import MissingToolError

IMAGE_VERSION = "1"
PAUSE_IMAGE = f"toposched.invalid/pause:{IMAGE_VERSION}"
WORKLOAD_IMAGE = f"toposched.invalid/workload:{IMAGE_VERSION}"

PAUSE_SOURCE = Path(__file__).with_name("pause.c")
BUSYBOX = Path("/bin/busybox")
_BUILDER = "toposched-docker-archive-2"  # part of every cache key: bump when the format changes
_WORKLOAD_COMMAND = ["/bin/sh", "-c", "trap 'exit 0' TERM INT; while :; do sleep 3600 & wait $!; done"]


def cache_dir() -> Path:
    base = os.environ.get("TOPOSCHED_CACHE_DIR") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "toposched"
    )
    return Path(base) / "node-images"


@dataclass(frozen=True)
class FileEntry:
    """One file, directory or symlink of a layer."""

    path: str  # without the leading slash
    data: bytes = b""
    mode: int = 0o644
    link: str | None = None  # symlink target
    directory: bool = False


def layer_tar(entries: Iterable[FileEntry]) -> bytes:
    """An uncompressed layer: parents first, sorted, owned by root, mtime 0."""
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for entry in sorted(entries, key=lambda e: e.path):
            info = tarfile.TarInfo(entry.path)
            info.mtime = 0
            info.uid = info.gid = 0
            info.uname = info.gname = ""
            info.mode = entry.mode
            if entry.directory:
                info.type = tarfile.DIRTYPE
                tar.addfile(info)
            elif entry.link is not None:
                info.type = tarfile.SYMTYPE
                info.linkname = entry.link
                tar.addfile(info)
            else:
                info.size = len(entry.data)
                tar.addfile(info, io.BytesIO(entry.data))
    return buffer.getvalue()


def docker_archive(tag: str, layer: bytes, config: dict[str, Any]) -> bytes:
    """A one-layer ``docker save`` archive (manifest.json, image config, layer) for ``tag``."""
    diff_id = hashlib.sha256(layer).hexdigest()
    image_config = {
        "architecture": "amd64",
        "os": "linux",
        "created": "1970-01-01T00:00:00Z",
        "config": config,
        "rootfs": {"type": "layers", "diff_ids": [f"sha256:{diff_id}"]},
        "history": [{"created": "1970-01-01T00:00:00Z", "created_by": "testkit.realnode.images"}],
    }
    config_bytes = json.dumps(image_config, sort_keys=True, separators=(",", ":")).encode()
    config_name = hashlib.sha256(config_bytes).hexdigest() + ".json"
    repository, _, version = tag.rpartition(":")
    manifest = [{"Config": config_name, "RepoTags": [tag], "Layers": [f"{diff_id}/layer.tar"]}]
    files = [
        (config_name, config_bytes),
        (f"{diff_id}/layer.tar", layer),
        ("manifest.json", json.dumps(manifest, sort_keys=True).encode()),
        ("repositories", json.dumps({repository: {version: diff_id}}, sort_keys=True).encode()),
    ]
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w", format=tarfile.PAX_FORMAT) as tar:
        dir_info = tarfile.TarInfo(diff_id)
        dir_info.type = tarfile.DIRTYPE
        dir_info.mode = 0o755
        dir_info.mtime = 0
        tar.addfile(dir_info)
        for name, data in files:
            info = tarfile.TarInfo(name)
            info.size = len(data)
            info.mode = 0o644
            info.mtime = 0
            tar.addfile(info, io.BytesIO(data))
    return buffer.getvalue()


def _cached(name: str, key_parts: Sequence[bytes], build: Any) -> Path:
    """The cached archive for these inputs, built by ``build() -> bytes`` when missing."""
    digest = hashlib.sha256(b"\0".join([_BUILDER.encode(), *key_parts])).hexdigest()[:16]
    path = cache_dir() / f"{name}-{digest}.tar"
    if path.is_file():
        return path
    path.parent.mkdir(parents=True, exist_ok=True)
    data: bytes = build()
    # Atomic: a concurrent builder writes the same bytes, and readers never see half a file.
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{name}-")
    with os.fdopen(fd, "wb") as out:
        out.write(data)
    os.replace(tmp, path)
    return path


def is_static_elf(data: bytes) -> bool:
    """True for a 64-bit little-endian ELF without a program interpreter (PT_INTERP)."""
    if data[:4] != b"\x7fELF" or data[4] != 2 or data[5] != 1:
        return False
    phoff = int.from_bytes(data[0x20:0x28], "little")
    phentsize = int.from_bytes(data[0x36:0x38], "little")
    phnum = int.from_bytes(data[0x38:0x3A], "little")
    for i in range(phnum):
        start = phoff + i * phentsize
        if int.from_bytes(data[start : start + 4], "little") == 3:  # PT_INTERP
            return False
    return True


def _need(tool: str, package: str) -> str:
    found = shutil.which(tool)
    if found is None:
        raise MissingToolError(tool, package)
    return found


def pause_archive() -> Path:
    """The sandbox image's archive (built with gcc -static on first use)."""
    gcc = _need("gcc", "gcc and libc6-dev")
    version = subprocess.run([gcc, "--version"], check=True, capture_output=True).stdout.splitlines()[0]
    source = PAUSE_SOURCE.read_bytes()

    def build() -> bytes:
        with tempfile.TemporaryDirectory() as tmp:
            binary = Path(tmp) / "pause"
            result = subprocess.run(
                [gcc, "-static", "-Os", "-s", "-o", str(binary), str(PAUSE_SOURCE)], capture_output=True, text=True
            )
            if result.returncode != 0:
                raise MissingToolError(
                    "a static C toolchain (gcc -static failed: " + result.stderr.strip()[-300:] + ")",
                    "gcc and libc6-dev",
                )
            layer = layer_tar([FileEntry("pause", binary.read_bytes(), 0o755)])
        return docker_archive(PAUSE_IMAGE, layer, {"Entrypoint": ["/pause"], "WorkingDir": "/"})

    return _cached("pause", [source, version], build)


def workload_archive() -> Path:
    """The workload image's archive: busybox-static, a shell and its applets, sleeping by default."""
    if not BUSYBOX.is_file():
        raise MissingToolError(str(BUSYBOX), "busybox-static")
    binary = BUSYBOX.read_bytes()
    listing = subprocess.run([str(BUSYBOX), "--list"], capture_output=True, text=True)
    if listing.returncode != 0 or not is_static_elf(binary):
        # The dynamic busybox package installs the same path; the image has no libc to load.
        raise MissingToolError(f"a static {BUSYBOX}", "busybox-static")
    applets = sorted({a for a in listing.stdout.split() if a and "/" not in a and a != "busybox"})

    def build() -> bytes:
        entries = [
            FileEntry("bin", directory=True, mode=0o755),
            FileEntry("etc", directory=True, mode=0o755),
            FileEntry("tmp", directory=True, mode=0o1777),
            FileEntry("bin/busybox", binary, 0o755),
            FileEntry("etc/passwd", b"root:x:0:0:root:/:/bin/sh\nnobody:x:65534:65534:nobody:/:/bin/false\n"),
            FileEntry("etc/group", b"root:x:0:\nnogroup:x:65534:\n"),
        ]
        entries += [FileEntry(f"bin/{a}", link="busybox", mode=0o777) for a in applets]
        config = {
            "Env": ["PATH=/bin:/usr/bin:/sbin:/usr/sbin"],
            "Cmd": _WORKLOAD_COMMAND,
            "WorkingDir": "/",
        }
        return docker_archive(WORKLOAD_IMAGE, layer_tar(entries), config)

    return _cached("workload", [binary, "\n".join(applets).encode()], build)


def archives() -> dict[str, Path]:
    """Image reference -> archive, building what is not cached yet."""
    return {PAUSE_IMAGE: pause_archive(), WORKLOAD_IMAGE: workload_archive()}
