"""`python -m benchmarks.week`: the week (see `benchmarks.week.simulation`)."""

from benchmarks.week.simulation import main

main()
