"""The stored key index and its nearest-key search: what ``tune = "nearest"`` serves a new key from.

:class:`NearestKeys` must order stored keys exactly as the warm start's default distance does
(nearest first, ties by the key's digest), measuring only a few; the index's plain data must
read back, and refuse what it cannot trust.
"""

from __future__ import annotations

import random

import pytest
from kerneltune.core.errors import CacheReadError
from kerneltune.core.machine.nearest_keys import NearestKeys
from kerneltune.core.machine.warm_start import default_distance
from kerneltune.core.values.key_index import empty_index, reads, rows_for, with_rows
from kerneltune.core.values.keys import digest, encode_key


def by_default_distance(stored, key):
    """Every stored key at a finite distance from ``key``, nearest first, ties by digest: the reference."""
    found = [(default_distance(key, other), digest(other), other) for other in stored if other != key]
    return [(d, other) for d, _, other in sorted(found, key=lambda entry: entry[:2]) if d != float("inf")]


def random_keys(seed, count):
    rng = random.Random(seed)
    keys = []
    for _ in range(count):
        shape = rng.choice(["m", "mnk", "m-dtype", "float"])
        m = rng.choice([1, 3, 8, 64, 100, 1024, 4096, 5000, 2**40])
        if shape == "m":
            keys.append(m)
        elif shape == "mnk":
            keys.append((m, rng.choice([64, 4096]), rng.choice([128, 256, 257])))
        elif shape == "m-dtype":
            keys.append((m, rng.choice(["torch.float16", "torch.bfloat16"]), rng.choice([True, False])))
        else:
            keys.append((rng.choice([0.5, 1.5, -2.0]), m))
    return [encode_key(key) for key in keys]


@pytest.mark.parametrize("seed", range(6))
def test_the_nearest_keys_are_the_default_distances_in_its_order(seed):
    stored = list({digest(key): key for key in random_keys(seed, 300)}.values())
    index = NearestKeys([(key, i) for i, key in enumerate(stored)])
    assert len(index) == len(stored)
    for query in random_keys(seed + 100, 40) + stored[:10]:
        expected = by_default_distance(stored, query)
        found = [(d, key) for d, key, _ in index.nearest(query)]
        assert [key for _, key in found] == [key for _, key in expected], query
        assert [d for d, _ in found] == pytest.approx([d for d, _ in expected])


@pytest.mark.parametrize("seed", range(3))
def test_int_keys_are_searched_in_the_default_distances_order_scaling_a_few(seed):
    rng = random.Random(seed)
    stored = sorted(
        {rng.choice([-1, 1]) * rng.randrange(0, 10**6) for _ in range(1000)}, key=lambda _: rng.random()
    )
    index = NearestKeys([(key, i) for i, key in enumerate(stored)])
    assert len(index) == len(stored)
    query = rng.randrange(-(10**6), 10**6)
    distance, key, _ = next(index.nearest(query))
    assert (distance, key) == pytest.approx(by_default_distance(stored, query)[0])
    assert len(index._shapes["#"]._made) <= 16, "a search scales the keys it walks past, not all"
    found = [(d, key) for d, key, _ in index.nearest(query)]
    assert [key for _, key in found] == [key for _, key in by_default_distance(stored, query)]


def test_int_keys_beyond_a_float_are_searched_as_the_default_distance_says():
    stored = [2**1001, 5, -(2**1001), 7]
    index = NearestKeys([(key, i) for i, key in enumerate(stored)])
    found = [(d, key) for d, key, _ in index.nearest(6)]
    assert [key for _, key in found] == [key for _, key in by_default_distance(stored, 6)]
    assert [d for d, _ in found] == pytest.approx([d for d, _ in by_default_distance(stored, 6)])


class Counted(tuple):
    """A stored key's numbers that count each distance measured to them."""

    measured = 0

    def __iter__(self):
        Counted.measured += 1
        return super().__iter__()


def test_the_nearest_key_is_found_measuring_a_few_of_a_thousand():
    stored = [encode_key((8 * m, 4096, "torch.bfloat16")) for m in range(1, 1001)]
    index = NearestKeys([(key, None) for key in stored])
    for rows in index._shapes.values():
        rows[:] = [(first, Counted(numbers), key, value) for first, numbers, key, value in rows]
    query = encode_key((8 * 500 + 3, 4096, "torch.bfloat16"))
    distance, key, _ = next(index.nearest(query))
    assert key == by_default_distance(stored, query)[0][1] == [4000, 4096, "torch.bfloat16"]
    assert distance == pytest.approx(default_distance(query, key))
    assert Counted.measured <= 4, "the walk stops once the first number's gap alone is farther"


def test_the_index_keeps_one_row_per_key_and_facts_and_reads_back_what_was_put_in():
    facts = {"source": "s", "hardware": {"device": "cpu"}, "objective": "device", "versions": {"torch": "2"}}
    other = {**facts, "versions": {"torch": "3"}}
    index = with_rows(empty_index("f"), [(facts, [8, "a"], ["x", "y"]), (other, [8, "a"], ["y"])])
    index = with_rows(index, [(facts, [8, "a"], ["z", "x"]), (facts, 16, ["y"])])
    assert rows_for(index, "f", lambda given: given == facts) == [([8, "a"], ["z", "x"]), (16, ["y"])]
    assert rows_for(index, "f", lambda given: given == other) == [([8, "a"], ["y"])]
    assert len(index["configs"]) == 3, "each fingerprint stored once"
    assert index["rankings"] == [[0, 1], [1], [2, 0]], "each ranking stored once, the replaced one kept"
    assert index["groups"] == [
        {"facts": facts, "keys": [[8, "a"], 16], "rankings": [2, 1]},
        {"facts": other, "keys": [[8, "a"]], "rankings": [1]},
    ], "rows kept by their facts"


def add_row_ranked_as_float(index):
    """A second row whose ranking is 0.0 beside the first's 0: one distinct value, found on the read."""
    for column, value in (("keys", 16), ("rankings", 0.0)):
        index["groups"][0][column].append(value)


def group(index):
    return index["groups"][0]


@pytest.mark.parametrize(
    ("damage", "message"),
    [
        (lambda index: index.update(kind="something else"), "not a key index"),
        (lambda index: index.update(schema=2), "not a key index of schema 3"),  # older: listed again
        (lambda index: index.update(function="g"), "the key index of 'g'"),
        (lambda index: index.update(groups={"keys": [8]}), r"stored keys\.groups is a dict, not a list"),
        (lambda index: index["groups"].append([0, 8]), r"stored keys\.groups\[1\] is a list, not a mapping"),
        (lambda index: group(index)["keys"].append(9), r"groups\[0\]: its keys and rankings differ"),
        (lambda index: group(index).pop("rankings"), r"stored keys\.groups\[0\]\.rankings is a NoneType"),
        (lambda index: group(index)["rankings"].__setitem__(0, 1), "names a ranking the index lacks"),
        (lambda index: group(index)["rankings"].__setitem__(0, -1), "names a ranking the index lacks"),
        (lambda index: group(index)["rankings"].__setitem__(0, "0"), "names a ranking the index lacks"),
        (lambda index: group(index)["rankings"].__setitem__(0, [0]), "a list or mapping where a number"),
        (add_row_ranked_as_float, r"groups\[0\]\.rankings holds a number that is no int"),
        (lambda index: index["rankings"].append([7]), r"rankings\[1\] names a config the index lacks"),
        (lambda index: index["rankings"].append([-1]), r"rankings\[1\] names a config the index lacks"),
        (lambda index: index["rankings"].append(["0"]), r"rankings\[1\] names a config the index lacks"),
        (lambda index: index["rankings"].append(0), r"rankings\[1\] names a config the index lacks"),
        (lambda index: index.update(configs=[3]), "fingerprint that is no string"),
    ],
)
def test_an_index_that_cannot_be_trusted_does_not_read(damage, message):
    index = with_rows(empty_index("f"), [({"source": "s"}, 8, ["x"])])
    damage(index)
    with pytest.raises(CacheReadError, match=message):
        rows_for(index, "f", lambda given: True)


def test_a_damaged_group_of_other_facts_is_skipped_by_a_reader_and_makes_the_index_unread_whole():
    facts, other = {"source": "s"}, {"source": "t"}
    index = with_rows(empty_index("f"), [(facts, 8, ["x"]), (other, 16, ["x"])])
    index["groups"][1]["rankings"] = [5]
    assert rows_for(index, "f", lambda given: given == facts) == [(8, ["x"])]
    assert not reads(index, "f"), "a listing replaces it"
    assert reads(index, "f", rows=False), "a new row may still go in"
