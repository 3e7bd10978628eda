"""Where a file's path puts it in the data pipeline or the tooling around the model (`datasets/`,
`neighbor_sampler.py`, `plotting.py`): a prior, not a verdict. The checks treat such a file's code as host-side
code, and the project's call graph overrules that where a model's `forward` or a training step outside such paths
reaches a function of it (fairseq's `data/data_utils.py`: `lengths_to_padding_mask`, called in an encoder's
`forward`). A path says nothing a tree's functions can contradict only where no call graph is built."""

from __future__ import annotations

import re

# Folders of the data pipeline and tooling: a file below one runs on the host.
HOST_FOLDERS = frozenset({"datasets", "dataset", "io", "transforms", "metrics", "loader", "loaders", "sampler",
                          "samplers", "data", "visualization"})
# Files of the data pipeline, of metrics and of plotting wherever they are: samplers, loaders, datasets, feature and
# graph stores, metrics (`metrics.py`, `cont_metrics.py`, as a `metrics/` folder), drawing, visualisation and
# printing (`image_print.py`).
_HOST_FILES = re.compile(
    r"(^|_)(sampler|loader|dataloader|dataset|feature_store|graph_store|metric)s?\.py$"
    r"|^(draw|drawing|plot\w*|visuali[sz]\w*|(\w+_)?print(ing)?)\.py$")


def host_path_of(path: str) -> str | None:
    """The folder or file name that puts the file at `path` in the data pipeline, or None."""
    parts = path.replace("\\", "/").split("/")
    folder = next((p + "/" for p in parts[:-1] if p in HOST_FOLDERS), None)
    if folder is None and _HOST_FILES.search(parts[-1]):
        return parts[-1]
    return folder


__all__ = ["HOST_FOLDERS", "host_path_of"]
