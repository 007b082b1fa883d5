"""`python -m mvcc_core.cli`: the `mvcc` console script."""

from mvcc_core.cli.commands import main

if __name__ == "__main__":
    main()
