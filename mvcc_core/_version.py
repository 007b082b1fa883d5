"""The version of mvcc, recorded as the writer of every manifest (one home, below every other module)."""

__version__ = "0.1.0"
