"""The one shape of progress reporting: `progress(done, total)`, called after each unit of work.

Long operations (compaction tasks, index build tasks, files removed by retention) take `progress=` with
this shape, so a CLI progress bar or a Dagster log line plugs into any of them the same way.
"""

from __future__ import annotations

from collections.abc import Callable

#: `progress(done, total)`: `done` units of `total` are finished (called with done == total at the end).
Progress = Callable[[int, int], None]
