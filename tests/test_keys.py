"""Business keys: which types are allowed, how they encode, and that they survive the disk."""

from __future__ import annotations

import pytest
import torch
from kerneltune.core import register_key_encoder
from kerneltune.core.driving import encode_key
from tuning_doubles import load_file, record_files

from triton_dist.tune import autotune

# Their tuned functions return which config ran, or work that differs by config: outputs unchecked.
pytestmark = pytest.mark.usefixtures("unchecked")

ALL_DTYPES = sorted({v for v in vars(torch).values() if isinstance(v, torch.dtype)}, key=str)

KEYS = {
    "int": 7,
    "negative-int": -(2**70),
    "float": 0.1,
    "float-inf": float("inf"),
    "str": "bf16/nt",
    "true": True,
    "false": False,
    "none": None,
    "empty-tuple": (),
    "tuple": (1, "a", 2.5, None, False),
    "nested": ((1, 2), ("x", (3.0,))),
    "size": torch.Size([4, 1024]),
    "seed-style": ((1 << 18,), "torch.float32"),
    "mixed": (torch.Size([2, 3]), torch.float16, 8, True),
}


def _body(x, n, key):
    _body.calls.append(n)
    return n


def _fresh_tuner():
    _body.calls = []
    return autotune(config_space=[{"n": 1}, {"n": 2}], key_fn=lambda x, key: key)(_body)


def _round_trip(isolated, key, suffix="json"):
    _fresh_tuner()(0, key=key)
    assert len(_body.calls) == 3, "first process tunes"
    files = record_files(isolated, "_body", suffix)
    stored = [load_file(p) for p in files]
    assert [r["key"] for r in stored if r["key"] == encode_key(key)], "the key is stored as encoded"

    result = _fresh_tuner()(0, key=key)
    assert _body.calls == [result], f"{key!r} did not hit the disk cache"
    return files


@pytest.mark.parametrize("key", list(KEYS.values()), ids=list(KEYS))
def test_key_round_trips_through_the_disk_cache(quick, isolated, key):
    _round_trip(isolated, key)


@pytest.mark.parametrize("dtype", ALL_DTYPES, ids=str)
def test_every_torch_dtype_round_trips(quick, isolated, dtype):
    _round_trip(isolated, dtype)
    _round_trip(isolated, (dtype, torch.Size([3])))


def test_float32_is_among_the_dtypes():
    assert torch.float32 in ALL_DTYPES and torch.bfloat16 in ALL_DTYPES and len(ALL_DTYPES) > 15


@pytest.mark.parametrize("key", [KEYS["mixed"], torch.float32, 0.1], ids=["mixed", "float32", "float"])
def test_keys_round_trip_through_msgpack(monkeypatch, quick, isolated, key):
    monkeypatch.setenv("KERNELTUNE_CACHE", "msgpack")
    _round_trip(isolated, key, suffix="msgpack")


def test_every_dtype_is_its_own_entry(quick, isolated):
    tuner = _fresh_tuner()
    for dtype in ALL_DTYPES:
        tuner(0, key=dtype)
    assert len(record_files(isolated, "_body")) == len({str(d) for d in ALL_DTYPES})


def test_encodings_are_distinct_and_plain():
    values = [
        1,
        1.0,
        True,
        "1",
        (1,),
        torch.Size([1]),
        None,
        "None",
        0.1,
        0.1 + 1e-17 * 10,
        torch.float32,
        "torch.float32",
    ]
    encoded = [encode_key(v) for v in values]
    assert len({repr(e) for e in encoded}) == len(values)
    assert encode_key(torch.float32) == encode_key(torch.float) == {"torch.dtype": "torch.float32"}
    assert encode_key(torch.Size([2, 3])) == {"torch.Size": [2, 3]}
    assert encode_key((1, (2.5, "a"))) == [1, [{"float": (2.5).hex()}, "a"]]


class Layout:
    def __init__(self, rows: int) -> None:
        self.rows = rows


UNSUPPORTED = {
    "object": object(),
    "tensor": torch.ones(2),
    "list": [1, 2],
    "dict": {"m": 1},
    "set": {1},
    "list-inside-tuple": (1, [2]),
    "object-inside-tuple": (1, (2, Layout(3))),
    "device": torch.device("cpu"),
}


@pytest.mark.parametrize("key", list(UNSUPPORTED.values()), ids=list(UNSUPPORTED))
def test_unsupported_key_is_a_clear_type_error_and_writes_nothing(isolated, key):
    tuner = _fresh_tuner()

    with pytest.raises(TypeError, match="cannot be part of a tuning key"):
        tuner(0, key=key)

    assert _body.calls == []
    assert not isolated.exists() or not list(isolated.rglob("*.*"))


def test_unsupported_key_names_the_type_and_position():
    with pytest.raises(TypeError, match=r"key\[1\]\[1\] is a .*Layout"):
        encode_key((1, (2, Layout(3))))


def test_registered_encoder_allows_a_type(quick, isolated):
    class Grid:
        def __init__(self, x: int, y: int) -> None:
            self.x, self.y = x, y

        def __eq__(self, other):
            return isinstance(other, Grid) and (self.x, self.y) == (other.x, other.y)

        def __hash__(self):
            return hash((self.x, self.y))

    with pytest.raises(TypeError):
        encode_key(Grid(1, 2))
    register_key_encoder(Grid, "tests.Grid", lambda g: (g.x, g.y))

    assert encode_key(Grid(1, 2)) == {"tests.Grid": [1, 2]}
    _round_trip(isolated, (Grid(4, 8), "bf16"))


@pytest.mark.parametrize(
    ("key", "where"),
    [(float("nan"), r"key is NaN"), ((1, (2.0, float("nan"))), r"key\[1\]\[1\] is NaN")],
    ids=["nan", "nested-nan"],
)
def test_a_nan_in_a_key_is_a_clear_error_at_the_first_call(isolated, key, where):
    tuner = _fresh_tuner()
    with pytest.raises(TypeError, match=where + ".*could never be found again"):
        tuner(0, key=key)
    assert _body.calls == []
    assert len(tuner._picks) == 0, "the pick table does not grow"


def test_a_key_nested_5000_deep_is_a_clear_error_not_a_recursion_error(isolated):
    key: tuple = ()
    for _ in range(5000):
        key = (key,)
    tuner = _fresh_tuner()
    with pytest.raises(TypeError, match=r"nested more than 32 levels deep"):
        tuner(0, key=key)
    assert _body.calls == []


def test_a_key_32_levels_deep_still_round_trips(quick, isolated):
    key: tuple = (1,)
    for _ in range(31):
        key = (key,)
    _round_trip(isolated, key)


def test_a_class_defined_again_takes_its_tag_over():
    def define():
        class Shape:  # a notebook cell run twice defines this class twice
            def __init__(self, n):
                self.n = n

        return Shape

    first, second = define(), define()
    register_key_encoder(first, "tests.Shape", lambda s: s.n)
    register_key_encoder(second, "tests.Shape", lambda s: s.n + 1)
    assert encode_key(second(3)) == {"tests.Shape": 4}, "the new definition's encoder"
    with pytest.raises(TypeError, match="cannot be part of a tuning key"):
        encode_key(first(3))  # the class that went out of use


def test_one_tag_names_one_type_alone():
    class Rows:
        def __init__(self, n):
            self.n = n

    class Columns:
        def __init__(self, n):
            self.n = n

    register_key_encoder(Rows, "tests.Layout8", lambda r: r.n)
    register_key_encoder(Rows, "tests.Layout8", lambda r: r.n)  # the same again changes nothing
    with pytest.raises(
        ValueError, match=r"the key tag 'tests.Layout8' already names .*Rows; keys of .*Columns"
    ):
        register_key_encoder(Columns, "tests.Layout8", lambda c: c.n)
    with pytest.raises(TypeError, match="cannot be part of a tuning key"):
        encode_key(Columns(3))  # so it is never served Rows(3)'s pick
    with pytest.raises(ValueError, match=r"already registered, under the tag 'tests\.Layout8'"):
        register_key_encoder(Rows, "tests.Other", lambda r: r.n)
    for tag in ("float", "torch.dtype", "torch.Size"):
        with pytest.raises(ValueError, match=f"the key tag '{tag}' is kerneltune's own"):
            register_key_encoder(Columns, tag, lambda c: c.n)
    with pytest.raises(ValueError, match="non-empty string"):
        register_key_encoder(Columns, "", lambda c: c.n)
