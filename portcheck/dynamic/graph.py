"""Child side: read an exported ATen graph — the op inventory, what Neuron restricts in it (dtypes and
arguments), data-dependent shapes, and attention — each mapped back to the user's source line."""

from __future__ import annotations

import functools
import operator
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import torch
from torch.fx.experimental.symbolic_shapes import free_unbacked_symbols

from portcheck.dynamic.rules import AttentionKernelFit, CustomOp, custom_op
from portcheck.dynamic.sourcemap import node_place
from portcheck.findings import Severity
from portcheck.knowledge import DtypeSupport, load_dtypes, load_op, load_ops
from portcheck.rules import Rule, TracedFinding
from portcheck.static.custom_attention.handwritten import HandWrittenAttention
from portcheck.static.dtype.integer_math import IntegerMatmul, IntegerScatterReduce
from portcheck.static.dtype.references import ComplexDtype, Float64, UnsupportedFp8
from portcheck.static.dynamic_shape.data_sized import (
    BincountUnbounded,
    MaskedSelect,
    Nonzero,
    RepeatInterleaveTensor,
    Unique,
    WhereSingleArgument,
)
from portcheck.static.dynamic_shape.mask_index import BooleanMaskIndex
from portcheck.static.dynamic_shape.nms import UnbackedSize
from portcheck.static.host_sync.reads import HostValueRead
from portcheck.static.unsupported_op.fft import Fft
from portcheck.static.unsupported_op.layers import DilatedPooling, DilatedTransposedConv, OneHot, TriangularSolve
from portcheck.static.unsupported_op.sort import IntegerSortInput, TopkLimit
from portcheck.traced import AttentionShape, Place

# Export bookkeeping and symbolic-size plumbing: not computation, never sent to the compiler as work.
BOOKKEEPING = frozenset({
    "aten::_assert_tensor_metadata", "aten::_assert_scalar", "aten::_assert_async", "aten::sym_size",
    "aten::sym_numel", "aten::sym_stride", "aten::sym_storage_offset", "aten::sym_constrain_range",
    "aten::sym_constrain_range_for_size", "aten::_check_is_size",
    # a tensor literal (`torch.tensor([...])`) lifted into the graph as a constant: data, not an op to run
    "aten::lift_fresh_copy",
})
MATMULS = frozenset({"aten::matmul", "aten::bmm", "aten::mm", "aten::baddbmm", "aten::einsum"})
SOFTMAXES = frozenset({"aten::softmax", "aten::_softmax", "aten::_safe_softmax"})
SDPA = frozenset({
    "aten::scaled_dot_product_attention", "aten::_scaled_dot_product_flash_attention_for_cpu",
    "aten::_scaled_dot_product_attention_math", "aten::_scaled_dot_product_efficient_attention",
    "aten::_scaled_dot_product_flash_attention", "aten::_scaled_dot_product_cudnn_attention",
})
# The CPU kernel SDPA dispatches to when torch.compile captures the graph on the CPU: judged as SDPA itself.
SDPA_CPU = "aten::_scaled_dot_product_flash_attention_for_cpu"
# Between q @ kᵀ and the softmax (scale, mask, cast), and between the softmax and the @ v (dropout, cast).
_SCORE_STEPS = frozenset({
    "aten::add", "aten::sub", "aten::mul", "aten::div", "aten::masked_fill", "aten::where", "aten::to",
    "aten::_to_copy", "aten::type_as", "aten::clamp", "aten::tanh", "aten::view", "aten::reshape",
    "aten::contiguous", "aten::clone", "aten::alias", "aten::_unsafe_view", "aten::expand",
})
_WEIGHT_STEPS = frozenset({"aten::dropout", "aten::native_dropout", "aten::to", "aten::_to_copy", "aten::type_as",
                           "aten::view", "aten::reshape", "aten::contiguous", "aten::clone", "aten::alias",
                           "aten::expand", "aten::_unsafe_view"})
# Ops whose output size depends on the input's values, and the rule each one is (UnbackedSize, PC210, for one
# without a rule of its own).
DATA_DEPENDENT: dict[str, type[Rule]] = {
    "aten::nonzero": Nonzero, "aten::nonzero_static": UnbackedSize, "aten::argwhere": Nonzero,
    "aten::where": WhereSingleArgument, "aten::masked_select": MaskedSelect, "aten::index": BooleanMaskIndex,
    "aten::_unique2": Unique, "aten::unique_dim": Unique, "aten::unique_consecutive": Unique,
    "aten::_unique": Unique, "aten::repeat_interleave": RepeatInterleaveTensor, "aten::bincount": BincountUnbounded,
    "aten::item": HostValueRead, "aten::_local_scalar_dense": HostValueRead,
}
_INTEGER = frozenset({torch.int8, torch.int16, torch.int32, torch.int64, torch.uint8, torch.bool})


@functools.cache
def _reported_by(rule: type[Rule]) -> dict[torch.dtype, DtypeSupport]:
    """The dtypes rules/dtypes.toml has `rule` report, those this torch has, with their entries."""
    return {getattr(torch, name): entry for entry in load_dtypes().reported_by(rule.code) for name in entry.names
            if isinstance(getattr(torch, name, None), torch.dtype)}


@dataclass
class OpUse:
    op: str
    count: int = 0
    dtypes: set[str] = field(default_factory=set)
    place: Place | None = None
    example: torch.fx.Node | None = None
    operand_dtypes: set[str] = field(default_factory=set)  # of the first tensor operand
    over_limit: bool = False  # a call exceeded an argument limit of rules/ops.toml
    overloads: set[str] = field(default_factory=set)  # torch's overload names of its calls: "Scalar", "default"


@dataclass
class GraphReport:
    ops: dict[str, OpUse] = field(default_factory=dict)
    findings: list[TracedFinding] = field(default_factory=list)

    def add(self, rule: type[Rule], place: Place | None, message: str, op: str, *, severity: Severity | None = None,
            shape: list[int | str] | None = None, attention: AttentionShape | None = None,
            chips: tuple[str, ...] = ()) -> None:
        self.findings.append(TracedFinding(rule, place, message, severity, op, tuple(shape or ()),
                                           attention=attention, chips=chips))


def op_name(node: torch.fx.Node) -> str:
    target = node.target
    if isinstance(target, torch._ops.OpOverload):
        return target._schema.name
    if isinstance(target, torch._ops.OpOverloadPacket):
        return target._qualified_op_name
    return ""


def _val(x: object) -> Any:
    return x.meta.get("val") if isinstance(x, torch.fx.Node) else None


def _tensor_inputs(node: torch.fx.Node) -> list[torch.Tensor]:
    found = []
    for arg in [*node.args, *node.kwargs.values()]:
        for item in arg if isinstance(arg, (list, tuple)) else [arg]:
            value = _val(item)
            if isinstance(value, torch.Tensor):
                found.append(value)
    return found


def _outputs(node: torch.fx.Node) -> list[torch.Tensor]:
    value = node.meta.get("val")
    if isinstance(value, torch.Tensor):
        return [value]
    if isinstance(value, (list, tuple)):
        return [v for v in value if isinstance(v, torch.Tensor)]
    return []


def _dtype_name(dtype: torch.dtype) -> str:
    return str(dtype).removeprefix("torch.")


def _shape(t: torch.Tensor) -> list[int | str]:
    sizes: Sequence[int | torch.SymInt] = t.shape  # symbolic sizes too, where torch.Size says int
    return [int(s) if isinstance(s, int) or str(s).isdigit() else str(s) for s in sizes]


def analyse_graph(graph: torch.fx.Graph) -> GraphReport:
    report = GraphReport()
    for node in graph.nodes:
        if node.op != "call_function":
            continue
        name = op_name(node)
        if not name or name in BOOKKEEPING:
            continue
        use = report.ops.setdefault(name, OpUse(name))
        use.count += 1
        if isinstance(node.target, torch._ops.OpOverload):
            use.overloads.add(node.target._overloadname)
        inputs = _tensor_inputs(node)
        use.dtypes |= {_dtype_name(t.dtype) for t in inputs}
        if inputs:
            use.operand_dtypes.add(_dtype_name(inputs[0].dtype))
        place = node_place(node)
        if use.place is None and place is not None:
            use.place, use.example = place, node
        elif use.example is None:
            use.example = node
        if custom_op(name):
            report.add(CustomOp, place, "", name)
        elif _check_node(node, name, inputs, place, report):
            use.over_limit = True
    _match_attention(graph, report)
    return report


def _check_node(node: torch.fx.Node, name: str, inputs: list[torch.Tensor], place: Place | None,
                report: GraphReport) -> bool:
    """Report what Neuron refuses or restricts in this call; True when an argument is over its ops.toml limit."""
    over_limit = False
    outputs = _outputs(node)
    in_dtypes = {t.dtype for t in inputs}
    out_dtypes = {t.dtype for t in outputs}
    short = name.removeprefix("aten::")
    # Where float64 / complex enters the graph: an op whose output has it and whose inputs do not.
    float64, complex_ = _reported_by(Float64), _reported_by(ComplexDtype)
    if out_dtypes & float64.keys() and not in_dtypes & float64.keys() and short not in ("_local_scalar_dense",):
        report.add(Float64, place, f"`{name}` makes a float64 tensor: no NeuronCore has an FP64 type, so it is "
                   "narrowed or refused; make it float32", name)
    elif any(_val(a) is not None and getattr(_val(a), "dtype", None) in float64
             for a in node.all_input_nodes if a.op == "placeholder"):
        report.add(Float64, place, f"`{name}` takes a float64 input, parameter or buffer: no NeuronCore has an FP64 "
                   "type, so it is narrowed or refused; make it float32", name)
    if out_dtypes & complex_.keys() and not in_dtypes & complex_.keys():
        made = complex_[min(out_dtypes & complex_.keys(), key=str)]
        report.add(ComplexDtype, place, f"`{name}` makes a complex tensor: complex dtypes are not supported on a "
                   f"NeuronCore ({made.error_code}); split into real and imaginary parts or run this part on the CPU",
                   name)
    unsupported = _reported_by(UnsupportedFp8)
    used = sorted((unsupported[d] for d in (in_dtypes | out_dtypes) if d in unsupported), key=lambda e: e.name)
    for kind, error, chips in dict.fromkeys((e.kind, e.error_code, e.chips) for e in used):
        on = f" for {', '.join(chips)} (natively from Trn3)" if chips else ""
        report.add(UnsupportedFp8, place, f"`{name}` uses an {kind} type, which neuronx-cc rejects{on} ({error})",
                   name, chips=chips)
    if short.startswith("fft_") or short in ("stft", "istft", "_fft_r2c", "_fft_c2r", "_fft_c2c"):
        report.add(Fft, place, f"`{name}`: FFT does not compile for a NeuronCore "
                   f"({load_op('aten::fft_fft').error_code}); run it on the CPU or emulate it with real arithmetic",
                   name)
    elif short in ("triangular_solve", "linalg_solve_triangular"):
        report.add(TriangularSolve, place, f"`{name}` is not supported by neuronx-cc "
                   f"({load_op('aten::triangular_solve').error_code}); use `torch.inverse(A) @ b`", name)
    elif short == "topk":
        k = node.args[1] if len(node.args) > 1 else node.kwargs.get("k")
        topk = load_op("aten::topk")
        if inputs and inputs[0].dtype in _INTEGER:
            report.add(IntegerSortInput, place, f"`topk` on a {_dtype_name(inputs[0].dtype)} tensor: TopK cannot "
                       f"take integer inputs ({topk.error_code}); cast to float first", name)
        limit = topk.limit("k")
        if isinstance(k, int) and k > limit.max:
            over_limit = True
            report.add(TopkLimit, place, f"`topk` with k={k}: neuronx-cc allows k <= {limit.max} ({limit.error_code})",
                       name)
    elif short in ("sort", "argsort"):
        if inputs and inputs[0].dtype in _INTEGER:
            report.add(IntegerSortInput, place, f"`{short}` on a {_dtype_name(inputs[0].dtype)} tensor: integer sorts "
                       "have failed to compile on some neuronx-cc versions; sort a float copy", name,
                       severity=Severity.WARNING)
        over_limit = _sort_over_limit(node, name, inputs, place, report)
    elif name in MATMULS | {"aten::addmm", "aten::linear", "aten::addbmm", "aten::dot", "aten::mv"} and \
            inputs and all(t.dtype in _INTEGER for t in inputs[:2]):
        report.add(IntegerMatmul, place, f"`{name}` on integer tensors: Neuron has no integer matmul, it computes in "
                   f"FP32 and loses precision above 2^24 ({load_op('aten::matmul').error_code}); cast to float "
                   "explicitly", name)
    elif short in ("scatter_add", "index_add", "scatter_reduce", "index_put") and inputs and \
            inputs[0].dtype in _INTEGER and (short != "index_put" or _accumulates(node)):
        report.add(IntegerScatterReduce, place, f"`{name}` accumulating into a {_dtype_name(inputs[0].dtype)} tensor: "
                   f"Neuron computes integer scatter-with-compute in FP32 ({load_op('aten::scatter_add').error_code})",
                   name)
    elif short in ("max_pool2d", "max_pool1d", "max_pool3d", "max_pool2d_with_indices") and _dilated(node, 4):
        report.add(DilatedPooling, place, f"`{name}` with dilation: neuronx-cc does not support dilated pooling "
                   f"({load_op('aten::max_pool2d').error_code})", name)
    elif short in ("convolution", "conv_transpose1d", "conv_transpose2d", "conv_transpose3d"):
        if short == "convolution" and len(node.args) > 6 and node.args[6] and _dilated(node, 5):
            # aten::convolution's codes: input with kernel dilation, then a strided convolution of a dilated input
            _, dilated_input = load_op("aten::convolution").error_codes
            report.add(DilatedTransposedConv, place, f"`{name}`: a transposed convolution with dilation lowers to a "
                       f"strided convolution of a dilated input, which neuronx-cc rejects ({dilated_input})", name)
    elif short == "one_hot":
        report.add(OneHot, place, "`one_hot`: older torch-neuronx releases failed on it in training; a "
                   "comparison with `arange` is the portable spelling", name)
    if (name in DATA_DEPENDENT and any(free_unbacked_symbols(t) for t in outputs)) or \
            short in ("item", "_local_scalar_dense"):
        rule = DATA_DEPENDENT.get(name, UnbackedSize)
        if rule is BooleanMaskIndex and not any(t.dtype == torch.bool for t in inputs[1:]):
            rule = UnbackedSize
        shape = _shape(outputs[0]) if outputs else []
        report.add(rule, place, data_dependent_message(name, rule, shape), name, shape=shape)
    elif name not in DATA_DEPENDENT and any(free_unbacked_symbols(t) for t in outputs) and \
            not any(free_unbacked_symbols(t) for t in inputs):
        shape = _shape(outputs[0])
        report.add(UnbackedSize, place, data_dependent_message(name, UnbackedSize, shape), name, shape=shape)
    return over_limit


def _argument(node: torch.fx.Node, index: int, name: str, default: Any) -> Any:
    return node.args[index] if len(node.args) > index else node.kwargs.get(name, default)


def _sort_over_limit(node: torch.fx.Node, name: str, inputs: list[torch.Tensor], place: Place | None,
                     report: GraphReport) -> bool:
    """A sort over a dimension longer than TopK's k limit: neuronx-cc can rewrite the sort (a sampler's sort of the
    logits) into its TopK with k = that length, which it rejects (aws-neuron-sdk#1339)."""
    if not inputs or inputs[0].dim() == 0:
        return False
    stable = "stable" in str(node.target)  # sort.stable(self, *, stable, dim, descending)
    dim = node.kwargs.get("dim", -1) if stable else _argument(node, 1, "dim", -1)
    descending = node.kwargs.get("descending", False) if stable else _argument(node, 2, "descending", False)
    size = _int(inputs[0].shape[dim]) if isinstance(dim, int) and -inputs[0].dim() <= dim < inputs[0].dim() else None
    limit = load_op("aten::sort").limit("size")
    if size is None or size <= limit.max:
        return False
    short, order = name.removeprefix("aten::"), "a descending " if descending else "a "
    report.add(TopkLimit, place, f"`{short}`: {order}sort over a dimension of {size}; neuronx-cc rewrites a sort over "
               f"logits into its TopK with k = the dimension (aws-neuron-sdk#1339), and TopK takes k <= {limit.max} "
               f"({limit.error_code}); take `topk` with the k you need, or sort on the CPU", name)
    return True


def _accumulates(node: torch.fx.Node) -> bool:
    return bool(node.args[3] if len(node.args) > 3 else node.kwargs.get("accumulate", False))


def _dilated(node: torch.fx.Node, index: int) -> bool:
    value = node.args[index] if len(node.args) > index else node.kwargs.get("dilation")
    values = value if isinstance(value, (list, tuple)) else [value]
    return any(isinstance(v, int) and v > 1 for v in values)


def data_dependent_message(name: str, rule: type[Rule], shape: list[int | str]) -> str:
    if rule is HostValueRead:
        return (f"`{name}` reads a tensor's value into Python inside the traced code: on Neuron that stops the "
                "graph and waits for the device; keep the value on the device")
    sizes = f" ({'x'.join(str(s) for s in shape)})" if shape else ""
    # aten::nonzero's code is the compiler's for any data-dependent shape
    return (f"`{name}` returns a tensor whose size depends on the data{sizes}: Neuron compiles static shapes "
            f"only ({load_op('aten::nonzero').error_code}); use a fixed-size form (a mask, `torch.where(c, a, b)`, "
            "a padded index)")


def _match_attention(graph: torch.fx.Graph, report: GraphReport) -> None:
    for node in graph.nodes:
        if node.op != "call_function":
            continue
        name = op_name(node)
        if name in SDPA:
            _report_sdpa(node, name, report)
        elif name in SOFTMAXES:
            _report_handwritten(node, report)


def _report_sdpa(node: torch.fx.Node, name: str, report: GraphReport) -> None:
    q, k = _val(node.args[0]), _val(node.args[1]) if len(node.args) > 1 else None
    if not isinstance(q, torch.Tensor) or not isinstance(k, torch.Tensor) or q.dim() < 2:
        return
    head_dim, seq_q, seq_k = q.shape[-1], q.shape[-2], k.shape[-2]
    causal = bool(_argument(node, 4 if name == SDPA_CPU else 5, "is_causal", False))
    report.add(AttentionKernelFit, node_place(node), "", name, attention=AttentionShape(
        _int(q.shape[-3]) if q.dim() > 2 else 1, _int(head_dim), _int(seq_q), _int(seq_k), causal))


def _report_handwritten(softmax: torch.fx.Node, report: GraphReport) -> None:
    scores = _walk_back(softmax.args[0], _SCORE_STEPS)
    if scores is None or op_name(scores) not in MATMULS:
        return
    weights_out = _walk_forward(softmax, _WEIGHT_STEPS)
    if weights_out is None:
        return
    q = _val(scores.args[0]) if op_name(scores) != "aten::einsum" else None
    # the softmax's input has the scores' shape with the heads axis (an AOT graph's bmm is 3-D: batch x heads)
    s = _val(softmax.args[0])
    if not isinstance(s, torch.Tensor) or s.dim() < 2:
        return
    head_dim = _int(q.shape[-1]) if isinstance(q, torch.Tensor) else None
    # Reported as a warning, not the rule's info: the graph confirms the score matrix the static check suspects.
    # Placed where the static finding starts: the construct's first line, the q @ kᵀ that makes the scores.
    place = node_place(scores) or node_place(weights_out) or node_place(softmax)
    report.add(HandWrittenAttention, place, "", op_name(softmax),
               severity=Severity.WARNING, attention=AttentionShape(
                   _int(s.shape[-3]) if s.dim() > 2 else 1, head_dim, _int(s.shape[-2]), _int(s.shape[-1])))


def _walk_back(node: object, steps: frozenset[str]) -> torch.fx.Node | None:
    for _ in range(8):
        if not isinstance(node, torch.fx.Node) or node.op != "call_function":
            return None
        name = op_name(node)
        if name in MATMULS:
            return node
        if name not in steps:
            return None
        # Follow the operand that carries the scores: the first tensor argument.
        node = next((a for a in node.args if isinstance(a, torch.fx.Node)), None)
    return None


def _walk_forward(node: torch.fx.Node, steps: frozenset[str]) -> torch.fx.Node | None:
    frontier = [node]
    for _ in range(6):
        following = []
        for current in frontier:
            for user in current.users:
                if user.target is operator.getitem:
                    following.append(user)
                    continue
                name = op_name(user)
                if name in MATMULS and user.args and user.args[0] is current:
                    return user
                if name in steps:
                    following.append(user)
        if not following:
            return None
        frontier = following
    return None


def _int(value: Any) -> int | None:
    try:
        return int(value)
    except (TypeError, ValueError):
        return None



def decomposition(use: OpUse) -> list[str] | None:
    """The ops a CompositeImplicitAutograd op (`aten::linear`, `aten::scaled_dot_product_attention`, ...)
    turns into before a backend sees it, traced once on meta tensors of the first call's shapes; likewise, by
    torch's reference decompositions (torch._decomp), a CompositeExplicitAutograd op rules/ops.toml has no status
    for on some stack (`aten::zeros`, `aten::new_ones`), and the CPU kernel of SDPA (as SDPA). [] for an op that
    does nothing (eval-mode dropout, `to` the same dtype). None for any other op, or where tracing failed."""
    node = use.example
    if node is None:
        return None
    target = node.target
    if not isinstance(target, torch._ops.OpOverload):
        return None
    table = _expandable()
    if use.op == SDPA_CPU:
        target, args, kwargs = _as_sdpa(node)
    elif torch._C._dispatch_has_kernel_for_dispatch_key(target.name(), "CompositeImplicitAutograd") or \
            target in table:
        args, kwargs = tuple(node.args), dict(node.kwargs)
    else:
        return None
    from torch.fx.experimental.proxy_tensor import make_fx
    from torch.utils._pytree import tree_map

    def on_meta(arg: object) -> object:
        value = _val(arg) if isinstance(arg, torch.fx.Node) else arg
        if isinstance(value, torch.Tensor):
            try:
                shape = [int(s) for s in value.shape]
            except (TypeError, ValueError):
                raise _Symbolic from None
            return torch.empty(shape, dtype=value.dtype, device="meta")
        if isinstance(value, torch.SymInt):
            raise _Symbolic
        if isinstance(value, torch.device):  # factories: build on meta, whatever device the graph named
            return torch.device("meta")
        return value

    try:
        meta_args, meta_kwargs = tree_map(on_meta, (args, kwargs))
        # make_fx traces positional inputs only: keyword arguments (`scale=`, `dtype=`) are bound here
        traced = make_fx(functools.partial(_call, target, meta_kwargs), decomposition_table=table)(*meta_args)
    except Exception:
        return None
    names = []
    for inner in traced.graph.nodes:
        name = op_name(inner) if inner.op == "call_function" else ""
        if name and name not in BOOKKEEPING and name not in names:
            names.append(name)
    return names


def _call(target: Any, kwargs: dict[str, Any], *args: Any) -> Any:
    return target(*args, **kwargs)


def _as_sdpa(node: torch.fx.Node) -> tuple[Any, tuple[Any, ...], dict[str, Any]]:
    """`_scaled_dot_product_flash_attention_for_cpu(q, k, v, dropout_p, is_causal, *, attn_mask, scale)` as the
    `scaled_dot_product_attention` call it came from."""
    q, k, v = node.args[:3]
    kwargs = {"attn_mask": node.kwargs.get("attn_mask"), "dropout_p": _argument(node, 3, "dropout_p", 0.0),
              "is_causal": _argument(node, 4, "is_causal", False), "scale": node.kwargs.get("scale")}
    return torch.ops.aten.scaled_dot_product_attention.default, (q, k, v), kwargs


_EXPANDABLE: dict[Any, Callable[..., object]] = {}


# The kernels every backend runs when it has none of its own (torch's dispatcher): on the neuron device and on
# torch-xla alike, such an op is computed by the ops its composite kernel calls. Any other op runs its own kernel, or
# falls back to the CPU (TorchNeuron's catch-all; torch-xla forwards an op it has no lowering for to the CPU): a
# reference decomposition in torch._decomp is not what either stack runs.
_COMPOSITE_KERNELS = ("CompositeExplicitAutograd", "CompositeExplicitAutogradNonFunctional")


def _composite(op: torch._ops.OpOverload) -> bool:
    return any(torch._C._dispatch_has_kernel_for_dispatch_key(op.name(), key) for key in _COMPOSITE_KERNELS)


def _expandable() -> dict[Any, Callable[..., object]]:
    """torch's reference decompositions of the CompositeExplicitAutograd ops rules/ops.toml lacks a status for on
    some stack (built once)."""
    if not _EXPANDABLE:
        from torch._decomp import decomposition_table

        ops = load_ops()

        def statuses(op: torch._ops.OpOverload) -> dict[str, str]:
            name = op._schema.name
            entry = ops.get(f"{name}.{op._overloadname}") or ops.get(name)
            return entry.status if entry is not None else {}

        _EXPANDABLE.update({op: fn for op, fn in decomposition_table.items() if isinstance(op, torch._ops.OpOverload)
                            and _composite(op) and not all(stack in statuses(op) for stack in ("native", "xla"))})
    return _EXPANDABLE


class _Symbolic(Exception):
    """A symbolic size: the decomposition is traced only for concrete shapes."""
