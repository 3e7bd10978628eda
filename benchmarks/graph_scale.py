"""How the project's call graph (portcheck.static.semantic.graph) scales: synthetic projects of N functions
spread over files of 100, each calling the next five (a long chain with cycles back to the file's first
function), every tenth one under a CUDA guard, a probe and a forward per file. Prints the time and the peak
memory of building the graph and settling its facts, per size, so that "bounded" is a figure, not a hope.

    python benchmarks/graph_scale.py                 # 10,000, 50,000 and 100,000 functions
    python benchmarks/graph_scale.py --sizes 200000
"""

from __future__ import annotations

import argparse
import resource
import sys
import time
import tracemalloc

from portcheck.findings import FileResult
from portcheck.static.semantic.graph import MAX_FUNCTIONS, Project, facts
from portcheck.summaries import Function, Summary


def project(size: int) -> list[FileResult]:
    results = []
    per_file = 100
    for start in range(0, size, per_file):
        module = f"pkg/m{start // per_file}.py"
        functions = []
        for i in range(start, min(start + per_file, size)):
            calls = tuple((f"pkg.m{(j // per_file)}.f{j}", "cuda" if j % 10 == 0 else "")
                          for j in range(i + 1, min(i + 6, size)))
            calls += ((f":f{start}", ""),)  # a cycle back to the file's first function
            roles = ("probe",) if i == start else ("forward",) if i == start + 1 else ()
            functions.append(Function(f"f{i}", i - start + 1, i - start + 1, roles, calls, ()))
        results.append(FileResult(module, summary=Summary(tuple(functions))))
    return results


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[10_000, 50_000, 100_000])
    args = parser.parse_args(argv)
    print(f"{'functions':>10}  {'seconds':>8}  {'peak MB':>8}  device  cuda-only   (MAX_FUNCTIONS = {MAX_FUNCTIONS:,})")
    for size in args.sizes:
        results = project(size)
        started = time.perf_counter()
        found = facts(Project(results))
        elapsed = time.perf_counter() - started
        tracemalloc.start()  # a second pass for memory: tracing slows the first one down several times
        facts(Project(results))
        peak = tracemalloc.get_traced_memory()[1] / 2**20
        tracemalloc.stop()
        print(f"{size:>10,}  {elapsed:>8.2f}  {peak:>8.1f}  {len(found.device):>6,}  {len(found.cuda_only):>9,}")
    print(f"process peak RSS {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:.0f} MB")
    return 0


if __name__ == "__main__":
    sys.exit(main())
