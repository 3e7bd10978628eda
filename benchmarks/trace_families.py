"""Thirty model families the tests do not trace, as `benchmarks/trace_models.py --families` traces them.

Each config is transformers' own config class with its default values, which transformers' documentation gives
as a reference checkpoint's ("instantiating a configuration with the defaults will yield a similar configuration
to that of ..."), plus the values a shipped checkpoint sets that the class leaves out (a classification head's
labels, a CTC vocabulary, gpt-oss's quantization_config). Nothing is downloaded. Where the whole model would not
fit in this machine's memory (over 2 B parameters), its layers are cut to LAYERS_WHEN_LARGE and the table says
so: such a model is traced on the meta device either way, and every layer is the same.

The configs are written by a child process (this script uses only the standard library): `write_configs(DIR)`.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

LAYERS_WHEN_LARGE = 4
LARGE = 2e9  # parameters

# name -> (model_type, architecture, values a shipped checkpoint sets beyond the class defaults)
FAMILIES: dict[str, tuple[str, str, dict[str, object]]] = {
    "bert": ("bert", "BertForMaskedLM", {}),
    "deberta-v2": ("deberta-v2", "DebertaV2ForSequenceClassification", {"num_labels": 2}),
    "electra": ("electra", "ElectraForPreTraining", {}),
    "xlm-roberta": ("xlm-roberta", "XLMRobertaForMaskedLM", {"max_position_embeddings": 514, "vocab_size": 250002}),
    "gpt2": ("gpt2", "GPT2LMHeadModel", {}),
    "gpt-neox": ("gpt_neox", "GPTNeoXForCausalLM", {}),
    "falcon": ("falcon", "FalconForCausalLM", {}),
    "bloom": ("bloom", "BloomForCausalLM", {}),
    "opt": ("opt", "OPTForCausalLM", {}),
    "mpt": ("mpt", "MptForCausalLM", {}),
    "llama": ("llama", "LlamaForCausalLM", {}),
    "mistral": ("mistral", "MistralForCausalLM", {}),
    "phi": ("phi", "PhiForCausalLM", {}),
    "cohere": ("cohere", "CohereForCausalLM", {}),
    "mixtral": ("mixtral", "MixtralForCausalLM", {}),
    "gpt-oss": ("gpt_oss", "GptOssForCausalLM", {"quantization_config": {"quant_method": "mxfp4"}}),
    "jamba": ("jamba", "JambaForCausalLM", {}),
    "mamba2": ("mamba2", "Mamba2ForCausalLM", {}),
    "mbart": ("mbart", "MBartForConditionalGeneration", {}),
    "pegasus": ("pegasus", "PegasusForConditionalGeneration", {}),
    "marian": ("marian", "MarianMTModel", {}),
    "m2m100": ("m2m_100", "M2M100ForConditionalGeneration", {}),
    "wav2vec2-conformer": ("wav2vec2-conformer", "Wav2Vec2ConformerForCTC", {"vocab_size": 32}),
    "beit": ("beit", "BeitForImageClassification", {}),
    "convnext": ("convnext", "ConvNextForImageClassification", {}),
    "efficientnet": ("efficientnet", "EfficientNetForImageClassification", {}),
    "swinv2": ("swinv2", "Swinv2ForImageClassification", {}),
    "owlvit": ("owlvit", "OwlViTForObjectDetection", {}),
    # Salesforce/blip2-opt-2.7b's config.json (https://huggingface.co/Salesforce/blip2-opt-2.7b/blob/main/config.json)
    # sets the image token its processor adds; the class leaves it null
    "blip-2": ("blip-2", "Blip2ForConditionalGeneration", {"image_token_index": 50265}),
    "paligemma": ("paligemma", "PaliGemmaForConditionalGeneration", {}),
}

_WRITER = """
import json, sys, torch, transformers
families, out = json.loads(sys.argv[1]), sys.argv[2]
notes = {}
for name, (model_type, architecture, values) in families.items():
    config = transformers.AutoConfig.for_model(model_type, **values)
    with torch.device("meta"):
        model = getattr(transformers, architecture)._from_config(config)
    parameters = sum(p.numel() for p in model.parameters())
    data = config.to_dict()
    data["architectures"] = [architecture]
    note = ""
    if parameters > float(sys.argv[3]):
        for part in [data, *(v for v in data.values() if isinstance(v, dict) and "num_hidden_layers" in v)]:
            for key in ("num_hidden_layers", "n_layer", "num_layers"):
                if isinstance(part.get(key), int) and part[key] > int(sys.argv[4]):
                    note = f"layers {part[key]} -> {sys.argv[4]} ({parameters / 1e9:.1f} B parameters)"
                    part[key] = int(sys.argv[4])
    for key in ("layer_types", "layers_block_type"):  # per-layer lists follow the layer count
        if isinstance(data.get(key), list) and note:
            data[key] = data[key][:int(sys.argv[4])]
    directory = f"{out}/{name}"
    import os
    os.makedirs(directory, exist_ok=True)
    with open(f"{directory}/config.json", "w") as handle:
        json.dump(data, handle, default=str)
    notes[name] = note
print(json.dumps(notes))
"""


def write_configs(directory: Path, names: list[str]) -> dict[str, str]:
    """Write each family's config.json under DIRECTORY/NAME; the layer note of each ("" where nothing was cut)."""
    chosen = {name: FAMILIES[name] for name in names}
    done = subprocess.run([sys.executable, "-c", _WRITER, json.dumps(chosen), str(directory), str(LARGE),
                           str(LAYERS_WHEN_LARGE)], capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise SystemExit(f"writing the configs failed: {done.stderr[-800:]}")
    notes: dict[str, str] = json.loads(done.stdout.strip().splitlines()[-1])
    return notes
