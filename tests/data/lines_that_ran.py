"""Run a Hugging Face model from a tiny config eagerly, with `use_cache=False` as `portcheck trace` builds it, on
inputs of the shapes and dtypes a trace report gives, and print every (file, line) of transformers' code that ran:
the construction and the forward call. An independent witness for tests/test_hf_models.py (sys.settrace, not
portcheck's own recorder).

Usage: python lines_that_ran.py CONFIG_DIR INPUTS_JSON"""

from __future__ import annotations

import json
import os
import sys


def main() -> None:
    import torch
    import transformers

    config_dir, inputs = sys.argv[1], json.loads(sys.argv[2])
    root = os.path.dirname(transformers.__file__) + os.sep
    ran: set[tuple[str, int]] = set()

    def lines(frame, event, arg):
        if event == "line":
            ran.add((frame.f_code.co_filename, frame.f_lineno))
        return lines

    def calls(frame, event, arg):
        if not frame.f_code.co_filename.startswith(root):
            return None
        ran.add((frame.f_code.co_filename, frame.f_lineno))
        return lines

    torch.manual_seed(0)
    config = transformers.AutoConfig.from_pretrained(config_dir)
    config.use_cache = False
    arguments: dict[str, object] = {}
    for spec in inputs:
        if "shape" not in spec:
            continue
        dtype = getattr(torch, spec["dtype"])
        if dtype.is_floating_point:
            arguments[spec["name"]] = torch.randn(spec["shape"], dtype=dtype)
        else:
            arguments[spec["name"]] = torch.randint(spec.get("low", 0), spec.get("high", 2), spec["shape"], dtype=dtype)
    sys.settrace(calls)
    try:
        model = getattr(transformers, config.architectures[0])(config).eval()
        with torch.no_grad():
            model(**arguments, use_cache=False) if "use_cache" in {s["name"] for s in inputs} else model(**arguments)
    finally:
        sys.settrace(None)
    json.dump(sorted(ran), sys.stdout)


if __name__ == "__main__":
    main()
