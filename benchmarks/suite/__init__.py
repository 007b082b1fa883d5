"""The benchmark suite: each module compares mvcc with a named peer or floor in the same run
(`python -m benchmarks.run`)."""
