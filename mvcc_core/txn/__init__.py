"""Transactions and the commit loop: staging, conflict rules, rebase, the external manifest store and the
immutable `TableState` a commit returns (docs/reference/format.md "Commits", docs/reference/conflicts.md)."""
