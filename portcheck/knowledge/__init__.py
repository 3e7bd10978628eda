"""What portcheck knows about Neuron: the data in rules/*.toml read into typed, validated values, once per process.
One module a data file, each with its loader:

| module | file |
|---|---|
| catalog | rules/catalog/*.toml |
| sdk | rules/sdk.toml |
| targets | rules/targets.toml |
| cuda_api | rules/cuda_api.toml |
| libraries | rules/libraries.toml |
| ops | rules/ops.toml |
| dtypes | rules/dtypes.toml |
| compiler | rules/compiler.toml |
| hardware | rules/hardware.toml |
| prices | rules/prices.toml |
| serving | rules/serving.toml |
| environments | rules/environments.toml |

`core.load()` puts the facts every pass reads together (the catalog, the targets, the CUDA API and the
releases); `files` finds rules/ and reads a file of it. Every loader raises KnowledgeError on inconsistent data."""

from portcheck.knowledge.catalog import CODE_PATTERN, FAMILIES, RuleInfo, load_catalog
from portcheck.knowledge.compiler import Compiler, CompilerFlag, EnvVar, FlagProblem, load_compiler
from portcheck.knowledge.core import Knowledge, load
from portcheck.knowledge.cuda_api import ApiFix, CudaApi, load_cuda_api
from portcheck.knowledge.dtypes import DTYPE_STATUSES, Dtypes, DtypeSupport, load_dtypes
from portcheck.knowledge.environments import Environments, TorchSupport, load_environments
from portcheck.knowledge.files import data_version, rules_dir
from portcheck.knowledge.hardware import ChipHardware, Hardware, Instance, ScaleOut, UltraServer, load_hardware
from portcheck.knowledge.ops import (
    OP_STATUSES,
    IntegerSort,
    NativeSdpa,
    OpLimit,
    OpSupport,
    load_integer_sort,
    load_native_sdpa,
    load_op,
    load_op_releases,
    load_ops,
)
from portcheck.knowledge.prices import Price, load_claims, load_prices
from portcheck.knowledge.sdk import Release, known_releases, load_releases
from portcheck.knowledge.targets import TASKS, Availability, Chip, Serving, Stack, load_targets
from portcheck.releases import KnowledgeError

__all__ = [
    "CODE_PATTERN", "DTYPE_STATUSES", "FAMILIES", "OP_STATUSES", "TASKS", "ApiFix", "Availability", "Chip",
    "ChipHardware", "Compiler", "CompilerFlag", "CudaApi", "DtypeSupport", "Dtypes", "EnvVar", "Environments",
    "FlagProblem", "Hardware", "Instance", "IntegerSort", "Knowledge", "KnowledgeError", "NativeSdpa", "OpLimit",
    "OpSupport", "Price", "Release", "RuleInfo", "ScaleOut", "Serving", "Stack", "TorchSupport", "UltraServer",
    "data_version",
    "known_releases", "load", "load_catalog", "load_claims", "load_compiler", "load_cuda_api", "load_dtypes",
    "load_environments", "load_hardware", "load_integer_sort", "load_native_sdpa", "load_op", "load_op_releases",
    "load_ops", "load_prices", "load_releases", "load_targets", "rules_dir",
]
