"""mvcc's benchmarks (not tests): run from the checkout's root as modules, e.g. `python -m benchmarks.run --quick`."""
