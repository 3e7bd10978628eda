"""Where the data is (rules/, shipped inside the package or beside it in a checkout), how a file of it is read,
and the digest of all of it that keys the results cache."""

from __future__ import annotations

import hashlib
import tomllib
from pathlib import Path
from typing import Any

from portcheck.releases import KnowledgeError


def rules_dir() -> Path:
    """rules/ ships inside the package when installed, and sits beside it in a checkout."""
    here = Path(__file__).resolve().parent.parent  # portcheck/
    for candidate in (here / "rules", here.parent / "rules"):
        if (candidate / "catalog").is_dir() and (candidate / "targets.toml").is_file():
            return candidate
    raise KnowledgeError(f"rules data not found next to {here}")


def rules_path(*parts: str) -> Path:
    """A file or folder of rules/ (looked up through rules_dir each time, which the tests point at a copy)."""
    return rules_dir().joinpath(*parts)


def read(name: str) -> dict[str, Any]:
    """A file of rules/, parsed; a KnowledgeError says why it cannot be."""
    return read_path(rules_dir() / name)


def read_path(path: Path) -> dict[str, Any]:
    try:
        return tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, tomllib.TOMLDecodeError) as exc:
        raise KnowledgeError(f"{path}: {exc}") from exc


def data_version() -> str:
    """A digest of every shipped data file: it changes whenever what the rules know changes (cache keys)."""
    digest = hashlib.sha256()
    root = rules_dir()
    for path in sorted(root.rglob("*.toml")):
        digest.update(path.relative_to(root).as_posix().encode() + b"\0" + path.read_bytes() + b"\0")
    return digest.hexdigest()[:12]


def citations(where: str, table: str, given: object, expected: set[str]) -> dict[str, str]:
    """A table of citations: exactly the `expected` keys, each a non-empty string."""
    if not isinstance(given, dict) or set(given) != expected:
        raise KnowledgeError(f"{where}: [{table}] needs exactly {', '.join(sorted(expected))}")
    for key, value in given.items():
        if not isinstance(value, str) or not value.strip():
            raise KnowledgeError(f"{where}: [{table}].{key} must be a non-empty citation")
    return given
