"""``eventually(fn)``: wait for a condition by calling ``fn`` until it stops raising, instead of a
bare ``time.sleep`` loop. On timeout the error says what was awaited, how long, and the last failure.
On the real clock the timeout is multiplied by the machine's factor (``PULSARLAB_TIMEOUT_SCALE``), as
every wait of pulsarlab's own is: a loaded or slow machine gets longer, a passing wait is no slower."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TypeVar

from pulsarlab import timeouts

T = TypeVar("T")


class EventuallyTimeout(AssertionError):
    """The condition did not hold within the timeout; ``last`` is the last error ``fn`` raised."""

    def __init__(self, what: str, waited: float, attempts: int, last: BaseException) -> None:
        super().__init__(
            f"{what} did not hold after {waited:.1f} s ({attempts} attempts); last error: {type(last).__name__}: {last}"
        )
        self.what, self.waited, self.attempts, self.last = what, waited, attempts, last


def eventually(
    fn: Callable[[], T],
    *,
    timeout: float,
    interval: float = 0.5,
    what: str = "the condition",
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], None] = time.sleep,
) -> T:
    """Call ``fn`` until it returns without raising (an ``AssertionError`` or any other ``Exception``)
    and return its value; after ``timeout`` seconds raise :class:`EventuallyTimeout` chained to the
    last error. ``fn`` is always called at least once, and once more at the deadline. To give up at
    once (the process being waited on died), ``fn`` calls ``pytest.fail``, which is no ``Exception``."""
    if clock is time.monotonic:  # a fake clock measures no machine
        timeout *= timeouts.scale()
    start = clock()
    deadline = start + timeout
    attempts = 0
    while True:
        attempts += 1
        try:
            return fn()
        except Exception as exc:  # the condition does not hold yet: try again until the deadline
            last = exc
        now = clock()
        if now >= deadline:
            raise EventuallyTimeout(what, now - start, attempts, last) from last
        sleep(min(interval, deadline - now))
