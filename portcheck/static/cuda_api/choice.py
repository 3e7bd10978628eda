"""What a CUDA probe decides (PC104): whether the code it guards, or the code its value reaches through a local
name, places anything on a device. A probe that picks the device is a porting problem (on Neuron it answers no and
the model goes to the CPU); one whose branches place nothing (a profiler's activities, a diagnostic, a flag no
device choice reads) only skips a CUDA extra that has a working fallback."""

from __future__ import annotations

import re

import libcst as cst

from portcheck.static.ancestry import ancestors, holders
from portcheck.static.check import Context
from portcheck.static.cuda_api.apis import api_entry
from portcheck.static.cuda_api.attribute_tests import attribute_reads, attribute_values
from portcheck.static.cuda_api.shown import shown_on
from portcheck.static.cuda_library.integrations import words
from portcheck.static.name_reads import bound_name, reads_in_scope
from portcheck.static.syntax import block_body, blocks, call_name, self_attribute
from portcheck.static.walk import visit

# A device named as text (`"cuda:0"`, `"cpu"`, Lightning's `"gpu"`, `"mps"`), and the keywords that place.
_DEVICE_TEXT = re.compile(r"""[rbfuRBFU]*['"](cuda(:\d*)?|cpu|gpu|mps)['"]""")
_DEVICE_KEYWORDS = frozenset({"device", "devices", "device_ids", "device_map", "accelerator", "gpus", "output_device"})
_DEVICE_ENUM = re.compile(r"(?i)(device|accelerator)\w*$")
_EXITS = (cst.Return, cst.Raise, cst.Continue, cst.Break)

# torch.cuda APIs that only query or tune the GPU: skipping them on Neuron loses nothing the port needs.
# (`synchronize` too: it only waits for the GPU, which a Neuron run has no use for where the probe skips it.)
_QUERIES = frozenset({"get_device_properties", "get_device_capability", "get_device_name", "get_arch_list",
                      "synchronize"})
# The allocator's counters and settings (`memory_summary`, `reset_peak_memory_stats`, `mem_get_info`,
# `set_per_process_memory_fraction`): they describe or tune CUDA's memory, which a Neuron run has none of.
_MEMORY = re.compile(r"memory|^mem_get_info$")
_TOOL_NAMES = re.compile(r"nvml|amdsmi|cudagraph|^_cuda|nvtx|cudart", re.IGNORECASE)
# `"self_cuda_time_total"`: a CUDA profiler column; CUDA's runtime variables, which nothing on Neuron reads.
_TOOL_TEXT = re.compile(r"nvidia-smi|nvml|amdsmi|_cuda_|CUDA_VISIBLE_DEVICES|CUDA_LAUNCH_BLOCKING|CUDA_DEVICE_ORDER")
# cuDNN and CUDA matmul settings (`torch.backends.cudnn.benchmark = True`): Neuron ignores them.
_CUDA_SETTINGS = ("torch.backends.cudnn.", "torch.backends.cuda.")


class DeviceWork(cst.CSTVisitor):
    """Whether a region does work a port needs (places on a device, synchronizes, selects a device) or only
    CUDA housekeeping (frees the cache, reads counters, queries the GPU, NVML, nvidia-smi, a fork-safety error)."""

    def __init__(self, ctx: Context, *, choosing: bool = False) -> None:
        super().__init__()
        self.ctx = ctx
        self.needed = False
        self.cuda_specific = False
        self.choosing = choosing  # for what a probe decides: timings and the device's RNG state count as work

    def on_visit(self, node: cst.CSTNode) -> bool:
        if self.needed:
            return False
        target = node.func if isinstance(node, cst.Call) else node
        if isinstance(target, (cst.Attribute, cst.Name)):
            qualname = self.ctx.qualname(target) or ""
            if qualname.startswith("torch.cuda."):  # judged by what the API does; its arguments with it
                rest = qualname[len("torch.cuda."):]
                api = api_entry(rest)
                self.cuda_specific = True
                last = rest.rsplit(".", 1)[-1]  # `torch.cuda.memory._dump_snapshot`: a private debugging hook
                self.needed = not (last in _QUERIES or last.startswith("_") or rest.startswith(("_", "nvtx"))
                                   or _MEMORY.search(last) is not None
                                   or (api is not None and api.behaviour != "raises"))
                self.needed |= self.choosing and (rest == "synchronize" or "rng" in rest or "seed" in rest)
                return False
            if qualname.startswith(_CUDA_SETTINGS):
                self.cuda_specific = True
                return False
            if isinstance(target, cst.Name) and _TOOL_NAMES.search(target.value):
                self.cuda_specific = True
        if isinstance(node, cst.Call):
            if (call_name(node) in ("cuda", "to") and isinstance(node.func, cst.Attribute)) or self.ctx.qualname(
                    node.func) == "torch.device" or (call_name(node) or "").endswith("DataParallel") or any(
                    a.keyword is not None and a.keyword.value in _DEVICE_KEYWORDS for a in node.args):
                self.needed = True
        elif self.choosing and isinstance(node, cst.Attribute) and node.attr.value.isupper() and bool(
                {"cuda", "gpu", "cpu", "mps"} & set(words(node.attr.value))) and _DEVICE_ENUM.search(
                self.ctx.source(node.value)):
            self.needed = True  # `Device.CUDA`, `Accelerator.GPU`: a device named by an enum member
        elif isinstance(node, cst.SimpleString):
            self.needed = bool(_DEVICE_TEXT.fullmatch(node.value))
            self.cuda_specific = self.cuda_specific or bool(_TOOL_TEXT.search(node.value))
            return False
        elif isinstance(node, cst.Raise):
            self.cuda_specific = True
        return True


def housekeeping(ctx: Context, region: list[cst.CSTNode]) -> bool:
    """The region only does CUDA housekeeping: CUDA-specific work, none a port needs."""
    work = DeviceWork(ctx)
    for part in region:
        visit(part, work)
    return work.cuda_specific and not work.needed




def _places(ctx: Context, region: list[cst.CSTNode]) -> bool:
    work = DeviceWork(ctx, choosing=True)
    for part in region:
        visit(part, work)
    return work.needed


def exits(block: cst.BaseSuite) -> bool:
    """The block's last line returns, raises, continues or breaks."""
    lines = [block] if isinstance(block, cst.SimpleStatementSuite) else list(block_body(block)[-1:])
    return any(isinstance(small, _EXITS) for line in lines
               if isinstance(line, (cst.SimpleStatementLine, cst.SimpleStatementSuite)) for small in line.body)


def _leaves(stmt: cst.If) -> bool:
    return stmt.orelse is None and exits(stmt.body)


def after_exit(ctx: Context, stmt: cst.If) -> list[cst.CSTNode]:
    """The statements after `stmt`, the statement being visited, in the block holding it: where its body always
    leaves (`if not probe: return`), what runs only where its test failed."""
    if len(ctx.statements) < 2:
        return []
    block = next((b for b in blocks(ctx.statements[-2]) if any(s is stmt for s in b)), ())
    return list(block[[id(s) for s in block].index(id(stmt)) + 1:]) if block else []


def _rest(path: list[cst.CSTNode], stmt: cst.If) -> list[cst.CSTNode]:
    """The statements after `stmt` in its block (on `path`), where its body always leaves the block (`if not
    probe: return`): what runs only where the test failed."""
    index = next((i for i, n in enumerate(path) if n is stmt), 0)
    block = path[index - 1] if index > 0 else None
    if not _leaves(stmt) or not isinstance(block, cst.IndentedBlock):
        return []
    lines: list[cst.CSTNode] = list(block.body)
    return lines[lines.index(stmt) + 1:] if stmt in lines else []


def _decision(ctx: Context, path: list[cst.CSTNode], node: cst.CSTNode,
              rest: list[cst.CSTNode] | None = None) -> bool | None:
    """What the value at `node` (its holders `path`, outermost first) decides: True where it picks a device or
    refuses to run (an `assert`), False where it decides only things that place nothing, or is only shown; None
    where it goes somewhere this cannot follow (returned, stored, passed on). `rest`: what follows the statement
    `path` starts with, where that is an `if` whose body leaves its block."""
    pairs = list(zip(path, [*path[1:], node], strict=True))
    for holder, inner in reversed(pairs):
        if isinstance(holder, cst.IfExp) and inner is holder.test:
            return _places(ctx, [holder.body, holder.orelse])
        if isinstance(holder, cst.If) and inner is holder.test:
            after = rest if holder is path[0] and rest is not None else _rest(path, holder)
            return _places(ctx, [holder.body, *([holder.orelse] if holder.orelse is not None else []), *after])
        if isinstance(holder, cst.For) and inner is holder.iter:
            return _places(ctx, [holder.body])
        if isinstance(holder, cst.Assert):
            return True
        if isinstance(holder, cst.Arg) and holder.keyword is not None:
            return holder.keyword.value in _DEVICE_KEYWORDS or None
        if isinstance(holder, (cst.Comparison, cst.ComparisonTarget, cst.BooleanOperation, cst.UnaryOperation,
                               cst.Arg)) or (isinstance(holder, cst.Call) and (
                holder.func is inner or call_name(holder) in ("bool", "int", "len"))):
            continue  # `probe() > 1`, `a and probe()`, `not probe()`, `bool(probe())`: the test goes on
        return False if shown_on(path, node) else None
    return None


def picks_nothing(ctx: Context, node: cst.CSTNode, stmt: cst.CSTNode | None) -> str | None:
    """Why the probe at `node` picks no device, or None: the local name its statement binds is never read, or every
    branch it decides, directly or through a local name bound to it once, places nothing on a device, and nothing
    else reads it."""
    if stmt is None:
        return None
    rest = after_exit(ctx, stmt) if isinstance(stmt, cst.If) and _leaves(stmt) else []
    path = ancestors(ctx, node)
    bound = bound_name(stmt, [*path, node])
    if ctx.functions and bound is not None and not reads_in_scope(ctx, bound[0]).paths:
        # `device = "cuda" if probe() else "cpu"`, never used
        return f"here its value is bound to `{bound[0]}`, which nothing in the function reads: it decides nothing"
    decided = _decision(ctx, path, node, rest)
    if decided is None and bound is not None and _holds_probe(bound[1], node):
        reads = reads_in_scope(ctx, bound[0])
        if reads.bindings == 1 and reads.paths:
            verdicts = [_decision(ctx, read[:-1], read[-1]) for read in reads.paths]
            decided = None if None in verdicts else any(verdicts)
    if decided is None:
        decided = _flag_decision(ctx, stmt, node)
    if decided is False:
        return ("here it picks no device: what it decides places nothing on one, so on Neuron the code takes its "
                "working path without the CUDA extra")
    return None


def _flag_decision(ctx: Context, stmt: cst.CSTNode, node: cst.CSTNode) -> bool | None:
    """What the probe decides through a flag the class sets from it once (`self.use_flash =
    torch.cuda.is_available() and ...`): what every `self.use_flash` read of the class's methods decides."""
    if not (isinstance(stmt, cst.SimpleStatementLine) and len(stmt.body) == 1 and isinstance(stmt.body[0], cst.Assign)
            and len(stmt.body[0].targets) == 1 and _holds_probe(stmt.body[0].value, node)):
        return None
    target = stmt.body[0].targets[0].target
    name = self_attribute(target)
    values = attribute_values(ctx, target) if name is not None else None
    reads = attribute_reads(ctx, name) if name is not None and values is not None and len(values) == 1 else None
    if not reads:
        return None
    verdicts = []
    for statement, read, rest in reads:
        path = holders(ctx, statement, read)
        leaves = isinstance(statement, cst.If) and _leaves(statement)
        verdicts.append(_decision(ctx, path, read, rest if leaves else None) if path else None)
    return None if None in verdicts else any(verdicts)


def _holds_probe(value: cst.BaseExpression, node: cst.CSTNode) -> bool:
    """`value`, bound to a name, is the probe's answer (`torch.cuda.is_available()`), or an `and` / `or` of it with
    other tests (`use_fused = fused_cls is not None and torch.cuda.is_available()`): what the name decides, the
    probe decides with them."""
    parts = [value]
    while parts:
        part = parts.pop()
        if part is node or (isinstance(part, cst.Call) and part.func is node):
            return True
        if isinstance(part, cst.BooleanOperation):
            parts += [part.left, part.right]
        elif isinstance(part, cst.UnaryOperation) and isinstance(part.operator, cst.Not):
            parts.append(part.expression)
    return False
