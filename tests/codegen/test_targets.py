"""Target entries of codegen/targets.yaml as the code reads them: the layout estimate's constants per target."""

from __future__ import annotations

import dataclasses

import pytest

from edgec.codegen import costmodel, targets
from edgec.codegen.targets import get_target, target_names
from edgec.errors import EdgecError

NAMED = [n for n in target_names() if n != "native"]


@pytest.mark.parametrize("name", NAMED)
def test_every_target_prices_every_layout_key(name):
    t = get_target(name)
    assert {k for k, _ in t.layout_cost} == set(costmodel.LAYOUT_KEYS)
    assert all(v > 0 for _, v in t.layout_cost)
    hash(t)  # still usable as a key


def test_native_carries_its_entry_layout_cost():
    t = get_target("native")
    assert t.layout_cost == get_target(t.name).layout_cost


def test_layout_cost_entries_checked():
    assert targets._layout_cost("t", {"dw_tap": 1, "elem": 0.5}) == (("dw_tap", 1.0), ("elem", 0.5))
    for bad in ({"dw_tap": "fast"}, {"dw_tap": -1.0}, {"dw_tap": True}, {"dw_tap": float("nan")}, [0.1]):
        with pytest.raises(EdgecError) as e:
            targets._layout_cost("t", bad)
        assert "target t" in str(e.value) and "\n" not in str(e.value)


def test_missing_layout_key_named():
    t = dataclasses.replace(get_target("x86_64-avx2"),
                            layout_cost=tuple(kv for kv in get_target("x86_64-avx2").layout_cost
                                              if kv[0] != "reorder_byte"))
    with pytest.raises(EdgecError, match="x86_64-avx2: .*no layout_cost reorder_byte"):
        costmodel.layout_reorder_cost(t, 4096)
