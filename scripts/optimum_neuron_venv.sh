#!/usr/bin/env bash
# Builds .cache/optimum-neuron: optimum-neuron's own CLI parser, for tests/test_serving.py to check the
# `optimum-cli export neuron` commands `portcheck advise` writes (the test is skipped without it).
# optimum-neuron 0.4.5 pins transformers 4.57; torch (and numpy, ...) come from the project's venv through a .pth
# file, so pip never downloads a torch: every package here is installed with --no-deps.
set -euo pipefail
here="$(cd "$(dirname "$0")/.." && pwd)"
python="${1:-$here/.venv/bin/python}"
site="$("$python" -c 'import site; print(site.getsitepackages()[0])')"
base="$("$python" -c 'import sys; print(sys.base_prefix)')/bin/python3"
venv="$here/.cache/optimum-neuron"
rm -rf "$venv"
"$base" -m venv "$venv"
"$venv/bin/python" -m pip install -q --no-deps "optimum-neuron==0.4.5" "optimum~=2.0.0" "transformers~=4.57.1" \
    "tokenizers>=0.22.0,<=0.23.0" "huggingface_hub>=0.35.3,<1.0"
echo "$site" > "$("$venv/bin/python" -c 'import site; print(site.getsitepackages()[0])')/zz_project_venv.pth"
"$venv/bin/python" -c "from optimum.commands.export.neuronx import parse_args_neuronx" 2>/dev/null
echo "built $venv"
