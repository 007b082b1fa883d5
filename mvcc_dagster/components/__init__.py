"""Dagster components: `MvccTableComponent`, one table's asset, checks, jobs, schedule and sensors from a
``defs.yaml`` (docs/integrations/dagster/component.md)."""

from __future__ import annotations

from .table_component import MvccTableComponent

__all__ = ["MvccTableComponent"]
