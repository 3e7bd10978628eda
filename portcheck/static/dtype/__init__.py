"""dtype (PC302-PC304, PC312-PC315): dtypes NeuronCores lack or narrow.

Facts come from the data-types page (KNOWLEDGE.md §1.2): no FP64 on any NeuronCore, complex only partly
(complex64 on ~30 HLO ops from compiler 2.32, which the xla stack's SDK <= 2.31 lacks), FP8 only as e4m3,
e5m2 or e3m4, no integer datapath for matmul and scatter-with-compute, int64 narrowed to int32 on
NeuronCore-v2. Which dtypes each rule reports, with their error codes, is rules/dtypes.toml's to say, and the
codes of integer matmul and scatter rules/ops.toml's; the trace reads the same data.
"""
