"""Fault localisation (azgpu/certify/localise.py) and fleet outliers (outliers.py), on groups whose
faults the test decides: the method of Microsoft's nccl_diagnosis.md, bounded in rounds."""

from __future__ import annotations

import math

import pytest

from azgpu.certify.localise import localise
from azgpu.certify.outliers import outliers, robust_z

NODES = [f"n{i:02d}" for i in range(64)]


def passes(value):
    return value is not None and value >= 400


def fabric(bad: set[str], transient_at: set[int] = frozenset(), log: list | None = None):
    calls = {"n": 0}

    def measure(groups):
        out = []
        for group in groups:
            calls["n"] += 1
            value = 270.0 if bad & set(group) else 450.0
            if calls["n"] in transient_at:
                value *= 0.7
            out.append(value)
        if log is not None:
            log.append(list(groups))
        return out

    return measure


@pytest.mark.parametrize("bad", [{"n05"}, {"n05", "n40"}, {"n00", "n31", "n63"}, {"n10", "n11"}])
def test_the_culprits_are_found_within_ceil_log2_n_plus_2_rounds(bad):
    found = localise([("domain", NODES)], fabric(bad), passes)
    assert sorted(found.culprits) == sorted(bad)
    assert found.rounds <= math.ceil(math.log2(64)) + 2 == found.bound == 8
    assert found.exhaustive == 63 and not found.unresolved and not found.common


def test_halves_are_tested_together_and_pairs_use_distinct_good_nodes():
    log = []
    localise([("domain", NODES)], fabric({"n05", "n40"}, log=log), passes)
    assert [len(g) for g in log[0]] == [32, 32]  # both halves in the first round
    for round_ in log:
        pairs = [g for g in round_ if len(g) == 2]
        partners = [g[1] for g in pairs]
        assert len(partners) == len(set(partners))  # no good node shared in a round


def test_a_culprit_is_named_only_after_failing_twice_with_different_partners():
    found = localise([("domain", NODES)], fabric({"n05"}), passes)
    tests = found.evidence["n05"]
    assert [t.purpose for t in tests] == ["pair", "confirm"] and not any(t.passed for t in tests)
    assert tests[0].group[1] != tests[1].group[1]


def test_a_transient_in_a_half_is_retested_and_names_nobody():
    # The second test of the first round (the half without the culprit) is slowed once.
    found = localise([("domain", NODES)], fabric({"n05"}, transient_at={2}), passes)
    assert found.culprits == ["n05"] and len(found.transients) == 1 and len(found.transients[0]) == 32
    assert found.rounds <= found.bound


def test_a_transient_alone_names_nobody():
    found = localise([("domain", NODES)], fabric(set(), transient_at={1}), passes)
    assert found.culprits == [] and found.transients and not found.unresolved


def test_a_transient_in_a_pair_is_cleared_by_the_confirmation():
    slowed = []

    def measure(groups):
        out = []
        for g in groups:
            once = len(g) == 2 and g[0] == "n06" and not slowed  # n06's first pair is slowed, once
            if once:
                slowed.append(g)
            out.append(270.0 if "n05" in g or once else 450.0)
        return out

    found = localise([("domain", NODES)], measure, passes)
    assert slowed and found.culprits == ["n05"] and ("n06", slowed[0][1]) not in found.transients
    assert any(t[0] == "n06" for t in found.transients)


def test_a_fault_of_everyone_names_nobody():
    found = localise([("domain", NODES)], fabric(set(NODES)), passes)
    assert found.culprits == [] and found.common == ["domain"]


def test_slow_only_whole_is_the_fabric_between_them():
    def measure(groups):
        return [270.0 if len(g) == 64 else 450.0 for g in groups]

    found = localise([("domain", NODES)], measure, passes)
    assert found.culprits == [] and found.unresolved == [tuple(NODES)]


def test_racks_are_localised_side_by_side_with_their_own_good_nodes():
    racks = [("rack-a", NODES[:18]), ("rack-b", NODES[18:36])]
    found = localise(racks, fabric({"n03", "n20"}), passes)
    assert sorted(found.culprits) == ["n03", "n20"]
    for t in found.tests:
        members = dict(racks)[t.domain]
        assert set(t.group) <= set(members)  # a pair never leaves its rack's NVLink domain


def test_robust_z_is_microsofts_formula():
    values = {"a": 10.0, "b": 10.2, "c": 9.8, "d": 10.1, "e": 5.0}
    z = robust_z(values)
    # median 10.0, MAD median(|x - 10|) = median(0, .2, .2, .1, 5) = 0.2
    assert z["e"] == pytest.approx(0.6745 * (5.0 - 10.0) / 0.2)


def test_an_outlier_within_the_floor_is_named_and_noise_is_not():
    values = {f"n{i}": 40.0 + (i % 5) * 0.05 for i in range(20)}
    values["slow"] = 34.0  # 15 % below its peers, within any floor
    values["noisy"] = 39.5  # 1 % below: noise, however small the MAD
    assert [o.key for o in outliers(values)] == ["slow"]
