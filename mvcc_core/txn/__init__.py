"""Transactions and the commit loop: staging, conflict rules, rebase, the external manifest store and the
immutable `TableState` a commit returns (docs/format.md "Commits", docs/conflicts.md)."""
