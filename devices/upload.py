"""Content-addressed uploads: a dropped connection never leaves a build that looks complete.

On the device, under its workdir:
    objects/<sha256>          each file once, written to a temp name then renamed
    builds/<digest>/          one build: files copied from objects/, then the
                              marker .edgec-complete, then the directory renamed
                              into place from builds/.<digest>.partial-*
A file already in objects/ is never sent again; a build whose directory exists
with its marker is not touched at all.
"""

from __future__ import annotations

import hashlib
import json
import shlex
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from edgec.devices.transport import Transport
from edgec.files import sha256_file

MARKER = ".edgec-complete"

# progress(event, name, nbytes): event in "skip", "send", "sent"
Progress = Callable[[str, str, int], None]


@dataclass
class Manifest:
    """What one build consists of: relative path -> (local file, sha256, mode)."""

    files: dict[str, tuple[Path, str, int]] = field(default_factory=dict)

    def add(self, rel: str, path: Path, mode: int | None = None) -> None:
        if rel.startswith("/") or ".." in Path(rel).parts:
            raise ValueError(f"upload path must be relative: {rel}")
        mode = mode if mode is not None else (0o755 if path.stat().st_mode & 0o111 else 0o644)
        self.files[rel] = (Path(path), sha256_file(path), mode)

    def digest(self) -> str:
        doc = sorted((rel, sha, mode) for rel, (_, sha, mode) in self.files.items())
        return hashlib.sha256(json.dumps(doc).encode()).hexdigest()[:24]

    def total_bytes(self) -> int:
        return sum(p.stat().st_size for p, _, _ in self.files.values())


@dataclass
class UploadResult:
    dir: str            # remote build directory (complete)
    sent_files: int = 0
    sent_bytes: int = 0
    reused: bool = False  # the whole build was already there


def upload(t: Transport, manifest: Manifest, progress: Progress | None = None) -> UploadResult:
    """Make builds/<digest>/ on the device hold exactly the manifest's files."""
    progress = progress or (lambda *a: None)
    work = t.workdir()
    final = f"{work}/builds/{manifest.digest()}"
    if t.run(["test", "-f", f"{final}/{MARKER}"], timeout=30).ok:
        for rel, (path, _, _) in manifest.files.items():
            progress("skip", rel, path.stat().st_size)
        return UploadResult(final, reused=True)
    objects = f"{work}/objects"
    t.mkdir(objects)
    have = set(t.check(["ls", "-1", objects], "listing uploaded files", timeout=60).out.split())
    result = UploadResult(final)
    for rel, (path, sha, _) in sorted(manifest.files.items()):
        size = path.stat().st_size
        if sha in have:
            progress("skip", rel, size)
            continue
        progress("send", rel, size)
        tmp = f"{objects}/.{sha}.tmp-{uuid.uuid4().hex[:8]}"
        t.put(path, tmp)
        t.rename(tmp, f"{objects}/{sha}")
        have.add(sha)
        result.sent_files += 1
        result.sent_bytes += size
        progress("sent", rel, size)
    _assemble(t, manifest, objects, final)
    return result


def _assemble(t: Transport, manifest: Manifest, objects: str, final: str) -> None:
    """Copy objects into a staging dir, write the marker last, then rename into place."""
    q = shlex.quote
    builds = final.rsplit("/", 1)[0]
    name = final.rsplit("/", 1)[1]
    stage = f"{builds}/.{name}.partial-{uuid.uuid4().hex[:8]}"
    # Leftovers of interrupted uploads are removed once stale (a fresh one may be another upload's).
    steps = [f"(find {q(builds)} -maxdepth 1 -name '.*.partial-*' -mmin +60 -exec rm -rf {{}} + 2>/dev/null; true)",
             f"mkdir -p {q(stage)}"]
    dirs = sorted({str(Path(rel).parent) for rel in manifest.files} - {"."})
    steps += [f"mkdir -p {q(stage + '/' + d)}" for d in dirs]
    for rel, (_, sha, mode) in sorted(manifest.files.items()):
        dst = q(f"{stage}/{rel}")
        steps.append(f"cp {q(objects + '/' + sha)} {dst} && chmod {mode:o} {dst}")
    steps += [f"printf '%s\\n' {q(manifest.digest())} > {q(stage + '/' + MARKER)}",
              # Another upload of the same build may have finished first: keep its copy.
              f"if [ -f {q(final + '/' + MARKER)} ]; then rm -rf {q(stage)}; "
              f"else rm -rf {q(final)} && mv {q(stage)} {q(final)}; fi"]
    t.check(" && ".join(steps), "installing the uploaded build", timeout=300)


def is_complete(t: Transport, remote_dir: str) -> bool:
    return t.run(["test", "-f", f"{remote_dir}/{MARKER}"], timeout=30).ok
