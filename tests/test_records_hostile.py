"""Records read back from a file anyone may have edited: every field is checked, nothing but a
CacheReadError comes out, and the stored pick must be what the stored times say."""

from __future__ import annotations

import copy
import math

import attrs
import pytest
from kerneltune.core import CacheReadError
from kerneltune.core.driving import TuningRecord
from tuning_doubles import make_record


def _set(path: str, value):
    """Set the field at a dotted path ("candidates.1.samples_ms.0") of record data."""

    def change(data):
        *parents, last = path.split(".")
        target = data
        for part in parents:
            target = target[int(part)] if isinstance(target, list) else target[part]
        if isinstance(target, list):
            target[int(last)] = value
        else:
            target[last] = value

    return change


def _deep(levels: int):
    nested: list = []
    for _ in range(levels):
        nested = [nested]
    return nested


HOSTILE = {
    "index-infinity": _set("best.index", math.inf),
    "index-1e400": _set("best.index", float("1e400")),
    "index-400-digits": _set("best.index", 10**400),
    "index-fraction": _set("best.index", 0.9),
    "index-true": _set("best.index", True),
    "index-string": _set("best.index", "0"),
    "index-negative": _set("best.index", -1),
    "index-out-of-range": _set("best.index", 3),
    "created-400-digits": _set("created", 10**400),
    "created-infinity": _set("created", math.inf),
    "created-nan": _set("created", math.nan),
    "created-year-beyond-9999": _set("created", 1e300),
    "sample-400-digits": _set("candidates.1.samples_ms.0", 10**400),
    "sample-nan": _set("candidates.1.samples_ms.0", math.nan),
    "sample-infinity": _set("candidates.1.samples_ms.0", math.inf),
    "sample-negative": _set("candidates.1.samples_ms.0", -1.0),
    "sample-bool": _set("candidates.1.samples_ms.0", True),
    "sample-string": _set("candidates.1.samples_ms.0", "1.0"),
    "samples-not-a-list": _set("candidates.1.samples_ms", 1.0),
    "time-negative": _set("candidates.0.time_ms", -5.0),
    "time-nan": _set("candidates.0.time_ms", math.nan),
    "time-400-digits": _set("candidates.0.time_ms", 10**400),
    "label-not-a-string": _set("candidates.0.label", 5),
    "fingerprint-not-a-string": _set("candidates.0.fingerprint", ["x"]),
    "error-not-a-string": _set("candidates.0.error", 7),
    "row-index-float": _set("candidates.0.index", 0.0),
    "row-not-a-mapping": _set("candidates.2", "x"),
    "function-not-a-string": _set("function", None),
    "version-not-a-string": _set("versions.python", 3.11),
    "hardware-not-a-mapping": _set("hardware", [1]),
    "hardware-nan": _set("hardware.count", math.nan),
    "key-5000-deep": _set("key", _deep(5000)),
    "hardware-5000-deep": _set("hardware.count", _deep(5000)),
    "key-with-bytes": _set("key", b"\x00"),
    "schema-true": _set("schema", True),
    "schema-float": _set("schema", 1.0),
    "warmup-1e400": _set(
        "measured_with",
        {"objective": "device", "statistic": "mean", "timer": "", "warmup": float("1e400"), "repeat": 1},
    ),
    "warmup-fraction": _set(
        "measured_with", {"objective": "device", "statistic": "mean", "timer": "", "warmup": 0.5, "repeat": 1}
    ),
    "timed-not-a-string": _set("measured_with.timed", 5),
    "finalists-out-of-range": _set("finalists", [1, 5]),
    "finalists-unsorted": _set("finalists", [2, 1]),
    "finalists-empty": _set("finalists", []),
    "finalists-bool": _set("finalists", [True]),
    "finalists-not-a-list": _set("finalists", "1"),
}


@pytest.mark.parametrize("damage", sorted(HOSTILE))
def test_a_hostile_record_is_a_cache_read_error_and_nothing_else(damage):
    data = make_record().to_data()
    HOSTILE[damage](data)
    with pytest.raises(CacheReadError):
        TuningRecord.from_data(data)


LEAF_VALUES = [
    math.inf,
    -math.inf,
    math.nan,
    10**400,
    -(10**400),
    1e308,
    -1,
    0.9,
    True,
    None,
    "",
    [],
    {},
    _deep(3000),
]


def _leaf_paths(data, prefix=""):
    if isinstance(data, dict):
        for key, value in data.items():
            yield from _leaf_paths(value, f"{prefix}{key}.")
    elif isinstance(data, list) and data:
        for i, value in enumerate(data):
            yield from _leaf_paths(value, f"{prefix}{i}.")
    yield prefix.rstrip(".")


def test_every_field_replaced_by_any_odd_value_loads_or_is_a_cache_read_error():
    good = make_record(finalists=(0, 1)).to_data()
    tried = 0
    for path in [p for p in _leaf_paths(good) if p]:
        for value in LEAF_VALUES:
            data = copy.deepcopy(good)
            _set(path, value)(data)
            try:
                record = TuningRecord.from_data(data)
            except CacheReadError:
                continue
            finally:
                tried += 1
            record.to_data()  # whatever loads can be written back, as a rank shares it
    assert tried > 500


def test_finalists_round_trip_and_older_records_load_without_them():
    record = make_record(times=(1.0, 2.0, 0.5), finalists=(0, 1))
    data = record.to_data()
    assert data["finalists"] == [0, 1]
    assert TuningRecord.from_data(data) == record
    assert make_record().to_data()["finalists"] is None
    del data["finalists"]
    assert TuningRecord.from_data(data).finalists is None


RANK_TIMES = ((1.5, 2.0), (1.0, 0.5), (math.inf, 3.0))


def test_rank_times_round_trip_and_older_records_load_without_them():
    record = attrs.evolve(make_record(times=(2.0, 1.0, math.inf)), rank_times=RANK_TIMES)
    data = record.to_data()
    assert [c["rank_times_ms"] for c in data["candidates"]] == [[1.5, 2.0], [1.0, 0.5], [None, 3.0]]
    assert TuningRecord.from_data(data) == record
    assert "rank_times_ms" not in make_record().to_data()["candidates"][0]
    for row in data["candidates"]:
        del row["rank_times_ms"]
    assert TuningRecord.from_data(data).rank_times == ()


@pytest.mark.parametrize(
    "damage",
    [
        _set("candidates.0.rank_times_ms", [1.0]),  # not as many ranks as the others
        _set("candidates.0.rank_times_ms.0", -1.0),
        _set("candidates.0.rank_times_ms.0", "1.0"),
        _set("candidates.0.rank_times_ms.0", math.nan),
        _set("candidates.0.rank_times_ms", {"0": 1.0}),
    ],
)
def test_hostile_rank_times_are_a_cache_read_error(damage):
    data = attrs.evolve(make_record(times=(2.0, 1.0, math.inf)), rank_times=RANK_TIMES).to_data()
    damage(data)
    with pytest.raises(CacheReadError):
        TuningRecord.from_data(data)


def test_sharded_owners_round_trip_and_older_records_load_without_them():
    record = attrs.evolve(make_record(), measured_on=(0, 1, None))
    data = record.to_data()
    assert [c["measured_on"] for c in data["candidates"]] == [0, 1, None]
    assert TuningRecord.from_data(data) == record
    assert "measured_on" not in make_record().to_data()["candidates"][0]


@pytest.mark.parametrize("value", [-1, 1.0, "1", True, [0]])
def test_a_hostile_measuring_rank_is_a_cache_read_error(value):
    data = attrs.evolve(make_record(), measured_on=(0, 1, 0)).to_data()
    data["candidates"][1]["measured_on"] = value
    with pytest.raises(CacheReadError, match=r"candidates\[1\]\.measured_on"):
        TuningRecord.from_data(data)


@pytest.mark.parametrize(
    ("times", "finalists", "best"),
    [
        ((2.0, 1.0, 3.0), None, 1),
        ((1.0, 1.0, 3.0), None, 0),  # a tie goes to the lower index
        ((math.inf, 4.0, 3.0), None, 2),  # a failed candidate never wins
        ((0.5, 2.0, 1.0), (1, 2), 2),  # a staged search picks among its finalists
    ],
)
def test_a_consistent_pick_passes_the_check(times, finalists, best):
    TuningRecord.from_data(make_record(times, finalists).to_data()).check_pick()
    assert make_record(times, finalists).best_index == best


@pytest.mark.parametrize(
    ("times", "finalists", "best", "reason"),
    [
        ((2.0, 1.0, 3.0), None, 0, r"pick \[0\] is not the fastest .* \(\[1\]\)"),
        ((1.0, 1.0, 3.0), None, 1, r"pick \[1\] is not the fastest"),
        ((0.5, 2.0, 1.0), (1, 2), 0, r"pick \[0\] is not the fastest .* \(\[2\]\)"),
        ((math.inf, math.inf, math.inf), None, 0, "no candidate .* has a finite time"),
    ],
)
def test_an_inconsistent_pick_fails_the_check(times, finalists, best, reason):
    record = TuningRecord.from_data(make_record(times, finalists, best).to_data())
    with pytest.raises(CacheReadError, match=reason):
        record.check_pick()


def test_a_pick_that_failed_fails_the_check():
    data = make_record((2.0, 1.0, 3.0)).to_data()
    data["candidates"][1]["error"] = "RuntimeError: boom"
    with pytest.raises(CacheReadError, match=r"stored pick \[1\] failed"):
        TuningRecord.from_data(data).check_pick()
