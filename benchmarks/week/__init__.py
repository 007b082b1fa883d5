"""A simulated week of pipeline traffic kept healthy by Dagster alone (`python -m benchmarks.week --quick`), and the
tools that measure what its runs and ticks cost."""
