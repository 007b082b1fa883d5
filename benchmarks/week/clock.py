"""The week benchmark's simulated clock as retention sees it (benchmarks/week/simulation.py)."""

import time
from datetime import UTC, datetime, timedelta


class SimulatedClock:
    """The harness's clock as the retention setting sees it (the main process's sensor and schedule ticks).

    Commit timestamps are real, and the simulated clock holds while the run pool is full, so real time runs
    ahead of simulated time by the holds. "Older than W simulated hours at simulated hour h" means "committed
    before the real instant simulated hour h - W began": `now()` returns that instant plus the jobs' real
    `older_than`, so a tick's ``now - older_than`` (the cutoff the schedule and the sensor give their runs)
    is exactly it. Without a hold it is the wall clock at the hour's start."""

    def __init__(self, hour_seconds: float, retention_days: float) -> None:
        self.hour_seconds = hour_seconds
        self.window_hours = round(retention_days * 24)
        self.window = timedelta(seconds=retention_days * 24 * hour_seconds)  # the jobs' real `older_than`
        self.started: list[float] = []  # the real time (epoch seconds) each simulated hour began
        self.hour = 0

    def begin(self, hour: int) -> None:
        """Simulated `hour` begins now (in real time)."""
        self.started.append(time.time())
        self.hour = hour

    def real_start(self, hour: int) -> datetime:
        """The real instant simulated `hour` began (before the week: extrapolated at the time scale)."""
        if hour >= 0:
            return datetime.fromtimestamp(self.started[hour], UTC)
        return datetime.fromtimestamp(self.started[0] + hour * self.hour_seconds, UTC)

    def cutoff(self) -> datetime:
        """Versions committed before this are older than the window at the current simulated hour."""
        return self.real_start(self.hour - self.window_hours)

    def now(self) -> datetime:
        """The time a tick measures ages to: ``now() - older_than == cutoff()``."""
        return self.cutoff() + self.window
