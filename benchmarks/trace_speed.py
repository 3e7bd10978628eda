"""`portcheck trace` against plain `torch.export` of the same models, side by side in one run.

Both sides are whole processes timed from the outside (wall time and the child's peak RSS via wait4):
  export:  python -c "build the model from its config; torch.export.export(model, inputs, strict=False)"
  trace:   portcheck trace --hf-config DIR --format json   (build + export + Dim export + checks + report)
Each row is the median of --repeat runs. Usage: python benchmarks/trace_speed.py [--repeat 3] [MODEL ...]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
HF = ROOT / "fixtures" / "models" / "hf"

EXPORT = """
import json, sys, torch, transformers
data = json.load(open(sys.argv[1])); data.setdefault("use_cache", False)
config = transformers.AutoConfig.for_model(data.pop("model_type"), **data)
cls = getattr(transformers, config.architectures[0])
meta = sys.argv[2] == "meta"
with torch.device("meta") if meta else torch.device("cpu"):
    model = cls._from_config(config).eval()
    ids = torch.randint(0, 2, (1, min(128, getattr(config, "max_position_embeddings", 128) or 128)))
name = getattr(model, "main_input_name", "input_ids")
if name == "pixel_values":
    inputs = {name: torch.randn(1, 3, config.image_size, config.image_size, device=ids.device)}
else:
    inputs = {"input_ids": ids}
    if getattr(config, "is_encoder_decoder", False):
        inputs["decoder_input_ids"] = ids[:, :64]
with torch.no_grad():
    torch.export.export(model, (), inputs, strict=False)
"""


def timed(command: list[str]) -> tuple[float, float]:
    """Wall seconds and the peak RSS (MiB) of the process tree's largest member."""
    started = time.perf_counter()
    process = subprocess.Popen(command, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    _, status, usage = os.wait4(process.pid, 0)
    wall = time.perf_counter() - started
    process.returncode = os.waitstatus_to_exitcode(status)
    if process.returncode not in (0, 1):
        raise SystemExit(f"{' '.join(command)} failed: {process.stderr.read().decode()[-500:]}")
    return wall, usage.ru_maxrss / 1024


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("models", nargs="*", default=["gpt2", "llama", "bert", "mixtral", "vit", "llama-2-7b"])
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    print("| model | device | torch.export s | portcheck trace s | ratio | export peak MiB | trace peak MiB |")
    print("|---|---|---:|---:|---:|---:|---:|")
    ratios = []
    for name in args.models:
        config = HF / name / "config.json"
        device = "meta" if name.endswith("7b") else "cpu"
        export_cmd = [sys.executable, "-c", EXPORT, str(config), device]
        trace_cmd = [sys.executable, "-m", "portcheck", "trace", "--hf-config", str(config.parent), "--format",
                     "json", "--device", device]
        exports, traces = [], []
        for _ in range(args.repeat):  # interleaved, so drift hits both sides alike
            exports.append(timed(export_cmd))
            traces.append(timed(trace_cmd))
        e = statistics.median(w for w, _ in exports)
        t = statistics.median(w for w, _ in traces)
        ratios.append(t / e)
        print(f"| {name} | {device} | {e:.2f} | {t:.2f} | {t / e:.2f}x | {max(m for _, m in exports):.0f} | "
              f"{max(m for _, m in traces):.0f} |", flush=True)
    print(f"\ngeometric mean ratio (trace / export): {statistics.geometric_mean(ratios):.2f}x")


if __name__ == "__main__":
    main()
