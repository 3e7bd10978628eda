"""Baselines: the findings a codebase already has, recorded by fingerprint, so CI fails only on new ones. A
fingerprint comes from the code, the path and the flagged text, not the line, so edits above a finding keep it
baselined. Identical findings of one file share a stem: a recorded one covers the current twin nearest to the
line it was recorded at, so a copy added above an old finding is the one reported."""

from __future__ import annotations

import json
from collections import defaultdict
from pathlib import Path
from typing import Any

from portcheck import __version__
from portcheck.atomic import write_text
from portcheck.config import ConfigError
from portcheck.findings import FileTooLarge, Finding, ScanResult, read_bounded

KIND = "portcheck-baseline"
BASELINE_LIMIT = 256 * 2**20  # bytes: a baseline of a million findings is about 150 MiB


def write_baseline(path: Path, findings: list[Finding]) -> None:
    entries = [{"fingerprint": f.fingerprint, "stem": f.stem, "code": f.code, "path": f.path, "line": f.line}
               for f in sorted(findings, key=lambda f: f.sort_key)]
    document = {"kind": KIND, "version": 1, "portcheck_version": __version__, "findings": entries}
    write_text(path, json.dumps(document, indent=1) + "\n")


def read_baseline(path: Path) -> dict[str, list[int]]:
    """Stem -> the lines its findings were recorded at."""
    return _known(_entries(_document(path), path))


def _known(entries: list[dict[str, Any]]) -> dict[str, list[int]]:
    known: dict[str, list[int]] = defaultdict(list)
    for entry in entries:
        known[entry["stem"]].append(entry["line"])
    return known


def _document(path: Path) -> dict[str, Any]:
    try:
        document = json.loads(read_bounded(str(path), BASELINE_LIMIT).decode("utf-8"))
    except FileNotFoundError:
        raise ConfigError(f"{path}: no such baseline file (make one with --write-baseline)") from None
    except FileTooLarge:
        raise ConfigError(f"{path}: not a portcheck baseline (over {BASELINE_LIMIT // 2**20} MiB)") from None
    except RecursionError:
        raise ConfigError(f"{path}: not a portcheck baseline (nested too deeply)") from None
    except (OSError, ValueError) as exc:  # UnicodeDecodeError, JSONDecodeError, an integer of 5,000 digits
        raise ConfigError(f"{path}: not a portcheck baseline ({exc})") from None
    if not isinstance(document, dict) or document.get("kind") != KIND or not isinstance(
            document.get("findings"), list):
        raise ConfigError(f"{path}: not a portcheck baseline (write one with --write-baseline)")
    return document


def _entries(document: dict[str, Any], path: Path) -> list[dict[str, Any]]:
    out = []
    for number, entry in enumerate(document["findings"], 1):
        if not isinstance(entry, dict) or not entry.get("stem"):
            continue
        line = entry.get("line") or 0
        if not isinstance(entry["stem"], str) or not isinstance(line, int) or isinstance(line, bool) or line < 0:
            raise ConfigError(f"{path}: finding {number} of the baseline is malformed (its stem must be a string "
                              "and its line a number)")
        out.append({"stem": entry["stem"], "line": line, "code": str(entry.get("code", "")),
                    "path": str(entry.get("path", ""))})
    return out


def _matched(findings: list[Finding], known: dict[str, list[int]]) -> tuple[set[int], list[tuple[str, int]]]:
    """Which current findings the baseline covers (by id), and the recorded (stem, line)s that cover none."""
    groups: dict[str, list[Finding]] = defaultdict(list)
    for f in findings:
        groups[f.stem].append(f)
    covered: set[int] = set()
    unmatched = []
    for stem, recorded in known.items():
        candidates = groups.get(stem, [])
        for line in sorted(recorded):
            free = [f for f in candidates if id(f) not in covered]
            if not free:
                unmatched.append((stem, line))
                continue
            covered.add(id(min(free, key=lambda f: (abs(f.line - line), f.line))))
    return covered, unmatched


def compare_with_baseline(findings: list[Finding], path: Path) -> tuple[list[Finding], list[tuple[str, str, int]]]:
    """The findings the baseline does not hold (new), and the recorded findings no longer found (fixed): each as
    (code, path, line) as it was recorded."""
    entries = _entries(_document(path), path)
    covered, unmatched = _matched(findings, _known(entries))
    gone = set(unmatched)
    fixed = [(e["code"], e["path"], e["line"]) for e in entries if (e["stem"], e["line"]) in gone]
    return [f for f in findings if id(f) not in covered], fixed


def apply_baseline(result: ScanResult, known: dict[str, list[int]]) -> None:
    """Drop the findings the baseline holds: each recorded entry covers one current finding of its stem, the
    one nearest the line it was recorded at."""
    covered, _ = _matched(result.findings, known)
    result.baselined += len(covered)
    result.findings = [f for f in result.findings if id(f) not in covered]
