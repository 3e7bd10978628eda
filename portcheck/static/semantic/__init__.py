"""The semantic model across a project: per-file summaries read from Python's syntax tree, and the call graph
built from them after every file is analysed (where code runs, CUDA probes and CUDA-only functions across files)."""
