"""tests/eventually.py on a fake clock: returns the first success, retries every failure, and on
timeout names what it waited for, how long, and the last error."""

from __future__ import annotations

import pytest

from tests.eventually import EventuallyTimeout, eventually


class FakeClock:
    def __init__(self) -> None:
        self.now = 0.0
        self.sleeps: list[float] = []

    def __call__(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        self.now += seconds


class FailingUntil:
    """Raises AssertionError on every call before the ``n``-th; records when it was called."""

    def __init__(self, n: int, clock: FakeClock) -> None:
        self.n, self.clock, self.calls = n, clock, list[float]()

    def __call__(self) -> str:
        self.calls.append(self.clock.now)
        if len(self.calls) < self.n:
            raise AssertionError(f"attempt {len(self.calls)}")
        return f"ok after {len(self.calls)}"


def test_returns_the_value_of_the_first_call_that_does_not_raise() -> None:
    clock = FakeClock()
    fn = FailingUntil(3, clock)
    assert eventually(fn, timeout=10, interval=2, clock=clock, sleep=clock.sleep) == "ok after 3"
    assert fn.calls == [0.0, 2.0, 4.0] and clock.sleeps == [2, 2]


def test_a_first_success_does_not_wait() -> None:
    clock = FakeClock()
    assert eventually(lambda: 42, timeout=5, clock=clock, sleep=clock.sleep) == 42
    assert clock.sleeps == []


def test_any_exception_is_retried_not_only_assertions() -> None:
    clock = FakeClock()
    seen: list[int] = []

    def fn() -> int:
        seen.append(1)
        if len(seen) == 1:
            raise ConnectionError("refused")
        return len(seen)

    assert eventually(fn, timeout=5, interval=1, clock=clock, sleep=clock.sleep) == 2


def test_timeout_names_what_how_long_and_the_last_error() -> None:
    clock = FakeClock()
    fn = FailingUntil(100, clock)
    with pytest.raises(EventuallyTimeout) as info:
        eventually(fn, timeout=5, interval=2, what="the broker owning the topic", clock=clock, sleep=clock.sleep)
    err = info.value
    # called at 0, 2, 4 and once more at the deadline (the last sleep is cut to what is left)
    assert fn.calls == [0.0, 2.0, 4.0, 5.0] and clock.sleeps == [2, 2, 1]
    assert err.attempts == 4 and err.waited == 5.0
    assert isinstance(err.last, AssertionError) and str(err.last) == "attempt 4"
    assert err.__cause__ is err.last
    assert str(err) == ("the broker owning the topic did not hold after 5.0 s (4 attempts); "
                        "last error: AssertionError: attempt 4")


def test_an_error_that_is_no_exception_is_not_swallowed() -> None:
    clock = FakeClock()

    def fn() -> None:
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        eventually(fn, timeout=5, clock=clock, sleep=clock.sleep)
    assert clock.sleeps == []


def test_pytest_fail_gives_up_at_once() -> None:
    clock = FakeClock()

    def fn() -> None:
        pytest.fail("the process died")

    with pytest.raises(pytest.fail.Exception, match="the process died"):
        eventually(fn, timeout=5, clock=clock, sleep=clock.sleep)
    assert clock.sleeps == []
