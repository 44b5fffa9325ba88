"""A failure that repeats, logged once with a count rather than every time it recurs.

A flush that fails for a reason that does not go away by itself (executors on another Python,
a store that refuses writes) fails again at every interval, every few seconds: logged in full
each time, with a stack trace, it buries everything else in the log. `FailureLog` logs the
first failure with its reason, then the same reason again (numbers aside: a stage's, a
task's) only at the 2nd, 4th, 8th, ... time, with the count and since when; a failure with
another reason is logged at once; and the first success after failures says how many there
were. Tracebacks go to DEBUG.
"""

from __future__ import annotations

import logging
import re
import time

# The length of a reason compared with the last one's (see `_shape`).
_SHAPE_LENGTH = 300


def _shape(reason: str) -> str:
    """A reason without its numbers: the same failure names a new stage, task or job each
    time ("Task 0 in stage 3.0 failed", then "in stage 4.0"); and, since a reason is cut
    to a length, which its numbers' digits move, without its last characters."""
    return re.sub(r"\d+", "#", reason)[:_SHAPE_LENGTH]


class FailureLog:
    """The failures of one recurring task (`what`, e.g. "a flush"), logged on `log`."""

    def __init__(self, log: logging.Logger, what: str) -> None:
        self._log = log
        self._what = what
        self._reason: str | None = None
        self._count = 0
        self._since = 0.0  # wall clock time of the first failure of the run

    def failed(
        self, reason: str, detail: str = "", exc: BaseException | None = None, trace: bool = False
    ) -> bool:
        """Records one failure for `reason` (`detail`: more of the message, which may change
        from one failure to the next without making it another one), with `exc`'s traceback
        at DEBUG, or with the line itself if `trace` (an unexpected error). Returns whether
        it was logged."""
        if _shape(reason) != _shape(self._reason or ""):
            self._reason, self._count, self._since = reason, 0, time.time()
        self._count += 1
        logged = not self._count & (self._count - 1)  # the 1st, 2nd, 4th, 8th, ... time
        if exc is not None and not (logged and trace):
            self._log.debug("%s failed", self._what, exc_info=exc)
        if not logged:
            return False
        info = exc if trace else None
        if self._count == 1:
            self._log.warning("%s failed: %s%s", self._what, reason, detail, exc_info=info)
        else:
            since = time.strftime("%H:%M:%S", time.localtime(self._since))
            self._log.warning(
                "%s failed again, %d times since %s: %s%s", self._what, self._count, since, reason, detail,
                exc_info=info,
            )
        return True

    def succeeded(self) -> None:
        """The task ran: a run of failures, if there was one, has ended."""
        if self._count:
            times = f"{self._count} time{'s' if self._count > 1 else ''}"
            self._log.info("%s succeeded, after failing %s: %s", self._what, times, self._reason)
        self._reason, self._count = None, 0

    @property
    def count(self) -> int:
        """Failures in a row, for the current reason."""
        return self._count
