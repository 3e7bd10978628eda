"""dynamic-shape (PC201-PC210): shapes known only from tensor data, and Python control flow on tensor values.

The Neuron compiler needs every shape static (NCC_EMOD025); `torch_neuronx.trace` freezes control flow and
intermediate shapes. So an op whose output size depends on the data (`nonzero`, a boolean mask, `unique`),
a size read out of a tensor (`torch.zeros(int(t.max()))`) or an `if` on a tensor value inside `forward`
either fails to compile, compiles one graph per value, or bakes the example's value into the graph.

Only code that can reach a compiled graph counts. Functions that run on the host around the model stay quiet
(`__init__`, `__getitem__`, `collate*`, `post_process*`); in the generation loop around it (transformers'
`generate` and `*_for_generation` helpers, a `_generate` of its own) a data-dependent op is info, saying it runs
between the compiled steps; and so, on the native stack, does code that `torch.compile` skips: the body of
`if not is_torchdynamo_compiling():` / `torch.compiler.is_compiling()` (observed: Dynamo answers True while
tracing). The xla stack's `torch_neuronx.trace` runs the model eagerly on XLA tensors and sets neither flag
nor `torch.jit.is_tracing()` (`xla_trace` calls `func(*example_inputs)` directly: gschaves/torch-neuronx:
xla_impl/hlo_conversion.py, a public copy of the torch-neuronx wheel), so there those guards change nothing.
"""

from portcheck.static.dynamic_shape.shape_from_data import SIZE_FACTORIES, SIZE_METHODS  # host_sync uses them too

__all__ = ["SIZE_FACTORIES", "SIZE_METHODS"]
