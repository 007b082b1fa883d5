"""The example dg project of `MvccTableComponent` (see ../pyproject.toml and docs/integrations/dagster/index.md)."""
