"""Everything portcheck's static pass and advisor print, captured into one directory, so that a refactor can be
shown to change nothing: run it before and after, then `diff -r BEFORE AFTER`.

For every (chip, stack) portcheck knows, with `--select ALL --isolated --no-cache`:

- `scan --format json` of the fixtures (`fixtures/`) and of the transformers corpus (the pinned release's
  modeling files, as `benchmarks/corpus.py` fetches them);
- `scan --diff --unsafe-fixes` of the same trees (the fixes, as a unified diff);
- `scan --format sarif` of the fixtures (it carries every rule's help text);
- `portcheck rules --format json` and `portcheck rule CODE` for every code;
- `advise --format json` for a few models given as numbers;
- with `--trace`, `trace --format json` of every fixture model and `advise` of a few Hugging Face configs.

Each command runs in a child process from the repository root (so paths in the output are the same from any
checkout), with the portcheck of this checkout (`PYTHONPATH`) and the Python that runs this script.

    python benchmarks/equivalence.py /tmp/before          # on the old code
    python benchmarks/equivalence.py /tmp/after           # on the new code
    diff -r /tmp/before /tmp/after && echo identical
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

from corpus import main_of, modeling_files

ROOT = Path(__file__).resolve().parent.parent
TARGETS = (("trn2", "native"), ("trn2", "xla"), ("inf2", "xla"), ("trn1", "xla"))
ADVISE = (
    ["--params", "7e9", "--layers", "32", "--hidden", "4096", "--heads", "32", "--seq-len", "4096"],
    ["--params", "7e9", "--layers", "32", "--hidden", "4096", "--heads", "32", "--kv-heads", "8", "--batch", "4"],
    ["--params", "70e9", "--layers", "80", "--hidden", "8192", "--heads", "64", "--kv-heads", "8"],
    ["--params", "4e11", "--layers", "126", "--hidden", "16384", "--heads", "128", "--kv-heads", "8"],
    ["--params", "1.1e8", "--layers", "12", "--hidden", "768", "--heads", "12", "--kind", "encoder", "--tp", "8"],
    ["--params", "7e9", "--layers", "32", "--hidden", "4096", "--heads", "32", "--task", "training"],
)


def _run(out: Path, name: str, args: list[str], cwd: Path = ROOT) -> None:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "NO_COLOR": "1"}
    proc = subprocess.run([sys.executable, "-m", "portcheck", *args], cwd=cwd, env=env, capture_output=True,
                          check=False)
    (out / f"{name}.out").write_bytes(proc.stdout)
    (out / f"{name}.err").write_bytes(proc.stderr + f"\nexit {proc.returncode}\n".encode())


def capture(args: argparse.Namespace) -> int:
    out = Path(args.directory)
    if out.exists():
        shutil.rmtree(out)
    out.mkdir(parents=True)
    corpus = None if args.no_corpus else modeling_files()
    common = ["--select", "ALL", "--isolated", "--no-cache", "--exit-zero"]
    unignored = ["--no-respect-gitignore"]  # the cache directory is git-ignored
    for chip, stack in TARGETS:
        tag = f"{chip}-{stack}"
        target = ["--target", chip, "--stack", stack]
        _run(out, f"fixtures-json-{tag}", ["scan", "fixtures", *target, *common, "--format", "json"])
        _run(out, f"fixtures-sarif-{tag}", ["scan", "fixtures", *target, *common, "--format", "sarif"])
        _run(out, f"fixtures-diff-{tag}", ["scan", "fixtures", *target, "--select", "ALL", "--isolated",
                                           "--diff", "--unsafe-fixes", "--exit-zero"])
        if corpus is not None:
            # The corpus is scanned from its parent so that paths do not depend on where the cache is.
            _run(out, f"corpus-json-{tag}", ["scan", corpus.name, *target, *common, *unignored, "--format", "json"],
                 cwd=corpus.parent)
            _run(out, f"corpus-diff-{tag}", ["scan", corpus.name, *target, *unignored, "--select", "ALL", "--isolated",
                                             "--diff", "--unsafe-fixes", "--exit-zero"], cwd=corpus.parent)
    _run(out, "rules-json", ["rules", "--format", "json"])
    _run(out, "rules-table", ["rules"])
    codes = [r["code"] for r in json.loads((out / "rules-json.out").read_text())]
    docs = out / "rule"
    docs.mkdir()
    for code in codes:
        _run(docs, code, ["rule", code])
    for index, numbers in enumerate(ADVISE):
        for chip in ("trn2", "inf2"):
            _run(out, f"advise-{index}-{chip}", ["advise", *numbers, "--target", chip, "--isolated",
                                                 "--format", "json", "--exit-zero"])
            _run(out, f"advise-{index}-{chip}-table", ["advise", *numbers, "--target", chip, "--isolated",
                                                       "--exit-zero"])
    if args.trace:
        for model in sorted((ROOT / "fixtures" / "models").glob("*.py")):
            _run(out, f"trace-{model.stem}", ["trace", f"fixtures/models/{model.name}:build", "--isolated",
                                              "--format", "json", "--exit-zero"])
        for config in ("bert", "gpt2", "llama", "t5", "vit"):
            _run(out, f"trace-hf-{config}", ["trace", "--hf-config", f"fixtures/models/hf/{config}", "--isolated",
                                             "--format", "json", "--exit-zero"])
            _run(out, f"advise-hf-{config}", ["advise", "--hf-config", f"fixtures/models/hf/{config}",
                                              "--isolated", "--format", "json", "--exit-zero"])
    print(f"captured {sum(1 for _ in out.rglob('*.out'))} outputs into {out}")
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("directory", help="where to write the outputs (replaced)")
    parser.add_argument("--no-corpus", action="store_true", help="fixtures only (no transformers download)")
    parser.add_argument("--trace", action="store_true",
                        help="also `trace` and `advise` the fixture models (needs torch; a few minutes)")
    args = parser.parse_args(argv)
    return main_of("equivalence", capture, args)


if __name__ == "__main__":
    sys.exit(main())
