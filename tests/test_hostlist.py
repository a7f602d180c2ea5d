"""Slurm hostlist expressions: what azgpu writes expands, in Slurm's syntax, to exactly the names given.

The oracle is python-hostlist (an independent implementation of Slurm's hostlist syntax) and, where
it is installed, Slurm's own `scontrol show hostnames`. The literal expectations below were checked
with scontrol from Slurm 22.05.
"""

from __future__ import annotations

import os
import random
import shutil
import subprocess

import hostlist as oracle
import pytest

from azgpu.hostlist import compress
from azgpu.testing.models.instances import base36


def azure_names(instances, prefix: str = "c1-000-") -> list[str]:
    """Computer names as Azure gives them to scale-set instances: prefix + six base-36 digits."""
    return [prefix + base36(i) for i in instances]


def test_zero_padded_run_keeps_its_width():
    assert compress(["n08", "n09", "n10"]) == "n[08-10]"


def test_unpadded_run_crosses_a_digit_boundary():
    assert compress(["n9", "n10", "n11"]) == "n[9-11]"


def test_next_number_in_another_width_starts_a_new_range():
    # `n[9-010]` would not expand to n010: a range writes every number at the width of its first.
    assert compress(["n9", "n010", "n011"]) == "n[9,010-011]"
    assert oracle.expand_hostlist(compress(["n9", "n010", "n011"])) == ["n9", "n010", "n011"]


def test_base36_suffix_with_a_letter_stands_alone():
    assert compress(azure_names(range(12))) == "c1-000-[000000-000009],c1-000-00000a,c1-000-00000b"


def test_letter_inside_the_suffix_becomes_part_of_the_prefix():
    assert compress(azure_names(range(360, 363))) == "c1-000-0000a[0-2]"


def test_private_ips_compress_on_the_last_octet():
    assert compress([f"10.0.0.{i}" for i in range(4, 14)]) == "10.0.0.[4-13]"


def test_order_is_kept_without_sort():
    names = ["n3", "n1", "n2"]
    assert oracle.expand_hostlist(compress(names)) == names


def test_sort_joins_numbers_that_instance_order_keeps_apart():
    # Instance 36 is c1-000-000010: after sorting it extends the run of instances 0-9.
    assert compress(azure_names([36, 0, 9, 5, 1, 2, 3, 4, 6, 7, 8]), sort=True) == "c1-000-[000000-000010]"


@pytest.mark.parametrize("seed", range(20))
def test_expands_back_to_the_same_names_in_the_same_order(seed):
    rng = random.Random(seed)
    names = azure_names(sorted(rng.sample(range(1400), rng.randint(1, 120))))
    if seed % 2:
        rng.shuffle(names)
    assert oracle.expand_hostlist(compress(names)) == names


@pytest.mark.parametrize("seed", range(10))
def test_sorted_expression_expands_to_the_same_set(seed):
    rng = random.Random(seed)
    names = azure_names(rng.sample(range(1400), rng.randint(1, 120)))
    assert sorted(oracle.expand_hostlist(compress(names, sort=True))) == sorted(names)


def test_a_name_with_hostlist_syntax_is_refused():
    with pytest.raises(ValueError, match="hostlist syntax"):
        compress(["node[1]"])


@pytest.mark.skipif(not shutil.which("scontrol"),
                    reason="Slurm's scontrol is not installed (apt-get install slurm-client)")
def test_slurm_itself_expands_the_expression_to_the_same_names(tmp_path):
    conf = tmp_path / "slurm.conf"  # scontrol reads a configuration before it expands anything
    conf.write_text("ClusterName=check\nSlurmctldHost=localhost\nNodeName=dummy CPUs=1\nPartitionName=p Nodes=dummy\n")
    names = azure_names([0, 1, 2, 9, 10, 11, 35, 36, 37, 38, 360, 361, 400]) + ["10.0.0.4", "10.0.0.5"]
    done = subprocess.run(["scontrol", "show", "hostnames", compress(names)], capture_output=True, text=True,
                          env={**os.environ, "SLURM_CONF": str(conf)})
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == names
