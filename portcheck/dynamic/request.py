"""What `portcheck trace` was asked to do, as plain data that crosses into the child process as JSON."""

from __future__ import annotations

import json
import re
from dataclasses import asdict, dataclass, field
from pathlib import Path

from portcheck.errors import UserError

DTYPES = ("float32", "float16", "bfloat16", "float64", "int64", "int32", "int16", "int8", "uint8", "bool",
          "complex64")
_INPUT = re.compile(r"^(?P<name>[A-Za-z_][A-Za-z0-9_]*)=(?P<dtype>[a-z0-9]+)\[(?P<dims>[0-9, ]*)\]"
                    r"(?P<fills>(?:;[0-9]+:[0-9]+=-?[0-9.eE+-]+)*)$")
_FILL = re.compile(r";(?P<start>[0-9]+):(?P<end>[0-9]+)=(?P<value>-?[0-9.eE+-]+)")
_FILE = re.compile(r"^(?P<name>[A-Za-z_][A-Za-z0-9_]*)=@(?P<path>.+)$")
# A keyword input by name, or a positional one as reports name it: `args[0]`.
_DYNAMIC = re.compile(r"^(?P<name>[A-Za-z_][A-Za-z0-9_]*(?:\[[0-9]+\])?):(?P<axis>-?[0-9]+)(?:=(?P<label>[a-z_]+))?$")



class RequestError(UserError):
    """A trace request that cannot be carried out as given: one line for the user."""


@dataclass(frozen=True)
class InputSpec:
    """`--input name=dtype[d0,d1,...]`: one example input made up from its shape, with `;start:end=value` setting
    the positions start..end-1 of its last axis to a value (`input_ids=int64[1,384];0:256=256000`: 256 image
    tokens first); or `--input name=@file.npy` / `name=@file.json`: the input read from a NumPy array (never a
    pickle) or a JSON list of numbers (integers: int64, else float32)."""

    name: str
    dtype: str
    shape: tuple[int, ...]
    fills: tuple[tuple[int, int, float], ...] = ()
    file: str = ""  # an absolute path: the input's values

    @classmethod
    def parse(cls, text: str) -> InputSpec:
        if (given := _FILE.match(text.strip())) is not None:
            path = Path(given["path"]).expanduser().resolve()
            if path.suffix not in (".npy", ".json") or not path.is_file():
                raise RequestError(f"--input {text!r}: expected name=@file.npy or name=@file.json, an existing file")
            return cls(given["name"], "", (), file=str(path))
        match = _INPUT.match(text.replace(" ", ""))
        if not match:
            raise RequestError(f"--input {text!r}: expected name=dtype[d0,d1,...], e.g. input_ids=int64[1,128], "
                               "with ;start:end=value to set positions, or name=@file.npy")
        dtype = match["dtype"]
        if dtype not in DTYPES:
            raise RequestError(f"--input {text!r}: unknown dtype {dtype!r}; choose one of {', '.join(DTYPES)}")
        dims = tuple(int(d) for d in match["dims"].split(",") if d)
        if any(d < 0 for d in dims):
            raise RequestError(f"--input {text!r}: sizes must be 0 or more")
        fills = []
        for fill in _FILL.finditer(match["fills"]):
            start, end = int(fill["start"]), int(fill["end"])
            try:
                value = float(fill["value"])
            except ValueError:
                raise RequestError(f"--input {text!r}: {fill['value']!r} is not a number") from None
            if not dims or not start < end <= dims[-1]:
                raise RequestError(f"--input {text!r}: positions {start}:{end} are not within the last axis")
            fills.append((start, end, value))
        return cls(match["name"], dtype, dims, tuple(fills))


@dataclass(frozen=True)
class DynamicAxis:
    """`--dynamic name:axis[=batch|seq]`: an input axis whose size varies at run time."""

    name: str
    axis: int
    label: str = ""

    @classmethod
    def parse(cls, text: str) -> DynamicAxis:
        match = _DYNAMIC.match(text.strip())
        if not match:
            raise RequestError(f"--dynamic {text!r}: expected name:axis, e.g. input_ids:1 or args[0]:0")
        return cls(match["name"], int(match["axis"]), match["label"] or "")


@dataclass(frozen=True)
class TraceRequest:
    """Everything the child needs. `model` is `path/to/file.py:callable` or `package.module:callable`;
    with `hf_config` it is empty and the model is a transformers model built from that config."""

    model: str = ""
    hf_config: str = ""
    inputs: tuple[InputSpec, ...] = ()
    dynamic: tuple[DynamicAxis, ...] = ()
    device: str = "auto"  # "auto" | "cpu" | "meta"
    memory_limit: int = 0  # bytes of address space for the child; 0 = no cap
    hf_options: dict[str, str] = field(default_factory=dict)  # --hf-option key=value (attn_implementation=eager)
    neuron_analyze: bool = False
    shapes: bool = True  # export again with dynamic batch / sequence axes
    dtype: str = ""  # --dtype: float32 | bfloat16 | float16; "" = the config's, else the serving path's

    def to_json(self) -> str:
        return json.dumps(asdict(self))

    @classmethod
    def from_json(cls, text: str) -> TraceRequest:
        data = json.loads(text)
        data["inputs"] = tuple(InputSpec(i["name"], i["dtype"], tuple(i["shape"]), tuple(tuple(f) for f in i["fills"]),
                                         i["file"]) for i in data["inputs"])
        data["dynamic"] = tuple(DynamicAxis(**d) for d in data["dynamic"])
        return cls(**data)


def memory_size(text: str) -> int:
    """`--memory-limit 8G`: bytes, a positive, finite size up to 1 PiB (0, a negative number, inf or 1e30G would
    remove the cap or overflow)."""
    units = {"K": 2**10, "M": 2**20, "G": 2**30, "T": 2**40}
    cleaned = text.strip().upper().removesuffix("B").removesuffix("I")
    number, unit = (cleaned[:-1], units[cleaned[-1]]) if cleaned and cleaned[-1] in units else (cleaned, 1)
    try:
        value = float(number) * unit
    except ValueError:
        raise RequestError(f"--memory-limit {text!r}: expected a size such as 8G or 512M") from None
    if not 2**20 <= value <= 2**50:
        raise RequestError(f"--memory-limit {text!r}: expected a size from 1M to 1024T, such as 8G")
    return int(value)


def hf_option(text: str) -> tuple[str, str]:
    """`--hf-option attn_implementation=eager`: the keyword and its value."""
    key, sep, value = text.partition("=")
    if not sep or not key.strip().isidentifier():
        raise RequestError(f"--hf-option {text!r}: expected key=value, e.g. attn_implementation=eager")
    return key.strip(), value.strip()


def split_model_spec(spec: str) -> tuple[str, str]:
    """`models/net.py:build` -> ("models/net.py", "build"); `pkg.mod:build` -> ("pkg.mod", "build").
    The callable may be omitted for a file (`net.py` means `net.py:build`)."""
    location, _, attribute = spec.rpartition(":")
    if not location or "/" in attribute or "\\" in attribute or attribute.endswith(".py"):
        location, attribute = spec, "build"
    if not attribute.replace(".", "_").isidentifier():
        raise RequestError(f"{spec!r}: the part after ':' must name a callable, e.g. model.py:build")
    if not location:
        raise RequestError(f"{spec!r}: expected path/to/file.py:build or package.module:build")
    return location, attribute
