"""The shortest path through the documented API: tune, persist, hit."""

import pytest

from triton_dist.tune import autotune

# Their tuned functions return which config ran, or work that differs by config: outputs unchecked.
pytestmark = pytest.mark.usefixtures("unchecked")


def test_tunes_once_then_dispatches(isolated):
    calls = []

    @autotune(config_space=[{"n": 1}, {"n": 2}], key_fn=lambda x: x)
    def work(x, n):
        calls.append(n)
        return x * n

    assert work(3) in (3, 6)
    tuned_calls = len(calls)
    assert tuned_calls == 2 * (5 + 10) + 1
    assert work(3) in (3, 6)
    assert len(calls) == tuned_calls + 1
    assert list((isolated / "work").glob("*.json"))
