"""Baselines: the findings a codebase already has, recorded by fingerprint, so CI fails only on new ones. A
fingerprint comes from the code, the path and the flagged text, not the line, so edits above a finding keep it
baselined; two identical findings in one file are counted, not merged."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

from portcheck import __version__
from portcheck.config import ConfigError
from portcheck.findings import Finding, ScanResult
from portcheck.report import write_atomically

KIND = "portcheck-baseline"


def write_baseline(path: Path, findings: list[Finding]) -> None:
    entries = [{"fingerprint": f.fingerprint, "code": f.code, "path": f.path, "line": f.line}
               for f in sorted(findings, key=lambda f: f.sort_key)]
    document = {"kind": KIND, "version": 1, "portcheck_version": __version__, "findings": entries}
    write_atomically(path, json.dumps(document, indent=1) + "\n")


def read_baseline(path: Path) -> Counter[str]:
    try:
        document = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ConfigError(f"{path}: no such baseline file (make one with --write-baseline)") from None
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ConfigError(f"{path}: not a portcheck baseline ({exc})") from None
    if not isinstance(document, dict) or document.get("kind") != KIND or not isinstance(
            document.get("findings"), list):
        raise ConfigError(f"{path}: not a portcheck baseline (write one with --write-baseline)")
    return Counter(str(e.get("fingerprint", "")) for e in document["findings"] if isinstance(e, dict))


def apply_baseline(result: ScanResult, known: Counter[str]) -> None:
    """Drop the findings the baseline holds (each recorded fingerprint covers one finding)."""
    left = Counter(known)
    kept = []
    for f in result.findings:
        if left[f.fingerprint] > 0:
            left[f.fingerprint] -= 1
            result.baselined += 1
        else:
            kept.append(f)
    result.findings = kept
