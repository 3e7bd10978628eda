"""`portcheck advise`: the compile plan for a target — memory per core, tensor-parallel degree, cores, chips,
instance, neuronx-cc flags, environment, buckets — and a bring-up script that runs it."""
