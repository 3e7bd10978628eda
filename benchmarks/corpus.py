"""The corpus the benchmarks run on: every ``transformers/models/**/modeling_*.py`` of a pinned Hugging Face
transformers release, fetched once as a wheel into a cache directory and extracted there.

Standard library only; imported by the scripts beside it (``python benchmarks/<script>.py`` puts this directory
on ``sys.path``).
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path, PurePosixPath

DEFAULT_VERSION = "5.24.0"
DEFAULT_CACHE = Path(__file__).resolve().parent / ".cache"


class Fail(Exception):
    """An error the user can act on: printed as one line, exit code 2."""


# ---- corpus -------------------------------------------------------------------------------------


def wanted(member: str) -> bool:
    """True for ``transformers/models/**/modeling_*.py`` inside the wheel."""
    parts = PurePosixPath(member).parts
    name = parts[-1] if parts else ""
    return (len(parts) >= 4 and parts[0] == "transformers" and parts[1] == "models"
            and name.startswith("modeling_") and name.endswith(".py"))


def _find_wheel(cache: Path, version: str) -> Path | None:
    wheels = sorted(cache.glob(f"transformers-{version}-*.whl"))
    return wheels[0] if wheels else None


def download(cache: Path, version: str) -> Path:
    wheel = _find_wheel(cache, version)
    if wheel is not None:
        return wheel
    cache.mkdir(parents=True, exist_ok=True)
    command = [sys.executable, "-m", "pip", "download", f"transformers=={version}", "--no-deps",
               "--only-binary=:all:", "--disable-pip-version-check", "-d", str(cache)]
    print(f"downloading transformers {version} into {cache} ...", file=sys.stderr)
    try:
        proc = subprocess.run(command, capture_output=True, text=True, check=False)
    except OSError as exc:
        raise Fail(f"cannot run pip: {exc}") from None
    wheel = _find_wheel(cache, version)
    if proc.returncode != 0 or wheel is None:
        lines = [ln.strip() for ln in (proc.stderr + proc.stdout).splitlines() if ln.strip()]
        errors = [ln for ln in lines if ln.startswith("ERROR")] or lines[-1:] or ["no output"]
        raise Fail(f"pip download transformers=={version} failed (no network, or no such release?): {errors[-1]}")
    return wheel


def extract(wheel: Path, destination: Path) -> Path:
    """Extract the modeling files once; a half-finished extraction is never taken for a finished one."""
    if destination.is_dir():
        return destination
    try:
        with zipfile.ZipFile(wheel) as archive:
            members = [m for m in archive.namelist() if wanted(m)]
            if not members:
                raise Fail(f"{wheel}: no transformers/models/**/modeling_*.py in the wheel")
            staging = Path(tempfile.mkdtemp(prefix=f".{destination.name}.", dir=destination.parent))
            try:
                for member in members:
                    target = staging.joinpath(*PurePosixPath(member).parts)
                    target.parent.mkdir(parents=True, exist_ok=True)
                    target.write_bytes(archive.read(member))
                staging.rename(destination)
            except BaseException:
                shutil.rmtree(staging, ignore_errors=True)
                raise
    except zipfile.BadZipFile:
        raise Fail(f"{wheel}: not a valid wheel (delete it and rerun)") from None
    return destination


def py_files(root: Path) -> list[Path]:
    return sorted(p for p in root.rglob("*.py") if p.is_file())




def main_of(name: str, run, args) -> int:
    """A script's `main`: `run(args)`, with a user error or an interrupt as one line and exit code 2."""
    try:
        return run(args)
    except Fail as exc:
        print(f"{name}: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(f"{name}: error: interrupted", file=sys.stderr)
        return 2


def modeling_files(cache: Path = DEFAULT_CACHE, version: str = DEFAULT_VERSION) -> Path:
    """The directory holding the release's modeling files, downloaded and extracted on first use."""
    return extract(download(cache, version), cache / f"transformers-{version}")
