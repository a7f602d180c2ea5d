"""-o table and -o tsv as the az CLI writes them: lists as rows, readable headers, no empty rows,
tables that stay tables, and messages that stay short at 10,000 nodes."""

from __future__ import annotations

import pytest

from azgpu.output import header, listing, render

KEY = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIJOgAYClhajeh3m7rJp5Bf+XHzOywcIepjITM9B6OJMg azgpu-test"


@pytest.mark.parametrize("key, text", [("gpus", "GPUs"), ("vcpus", "vCPUs"), ("ib_domain", "IB domain"),
                                       ("infiniband", "InfiniBand"), ("resource_group", "Resource group"),
                                       ("gpu_memory_gib", "GPU memory GiB"), ("os", "OS"), ("urn", "URN"),
                                       ("id", "ID"), ("name", "Name")])
def test_headers_spell_acronyms_and_units(key, text):
    assert header(key) == text


def test_tsv_of_a_list_of_lists_has_one_line_per_inner_list():
    assert render([["a", 1], ["b", 2]], "tsv") == "a\t1\nb\t2\n"


def test_table_of_a_list_of_lists_is_a_table():
    lines = render([["a", 1], ["bb", 2]], "table").splitlines()
    assert lines[0].split() == ["Column1", "Column2"] and lines[2].split() == ["a", "1"]


def test_table_leaves_out_empty_lists():
    text = render({"cluster": "demo", "findings": [], "notes": [], "resource_group": None}, "table")
    assert text.splitlines() == ["Cluster         demo", "Resource group"]


def test_plan_table_has_readable_headers_and_no_empty_rows(run):
    rc, out, err = run("plan", "--profile", "nd-h100-v5", "-n", "train01", "--nodes", "4", "-l", "eastus",
                       "--ssh-key", KEY, "-o", "table")
    assert rc == 0, err
    heads = {line.split("  ")[0] for line in out.splitlines()}
    assert {"GPUs", "vCPUs", "IB domain", "Quota family"} <= heads
    assert not {"Gpus", "Vcpus", "Ib Domain"} & heads
    # Findings and notes show only when there are some (a plan with a NAT gateway has a note on it).
    assert all(len(line.split(None, 1)) == 2
               for line in out.splitlines() if line.split("  ")[0] in ("Notes", "Findings"))


def test_images_list_table_is_a_table(run):
    rc, out, err = run("images", "list", "-o", "table")
    assert rc == 0, err
    lines = out.splitlines()
    assert lines[0].split()[:2] == ["Name", "OS"] and set(lines[1]) == {"-", " "}
    assert max(len(line) for line in lines) <= 120
    count = int(run("images", "list", "--query", "length(@)")[1])
    assert len(lines) == 2 + count  # a header, a rule and a row per image: no blocks of records


def test_images_list_table_flags_legacy_images(run):
    _, out, _ = run("images", "list", "-o", "table")
    head, _, *rows = out.splitlines()
    column = head.index("Legacy")
    legacy = {row.split()[0]: row[column:column + 3] for row in rows}
    assert legacy["ubuntu-hpc-1804"] == "yes" and legacy["ubuntu-hpc-2204"].strip() == ""


def test_images_list_json_keeps_the_legacy_note(run):
    rc, out, _ = run("images", "list", "--query", "[?name=='ubuntu-hpc-1804'].legacy | [0]", "-o", "tsv")
    assert rc == 0 and "no longer listed" in out


def test_table_query_bypasses_the_summary(run):
    rc, out, _ = run("images", "list", "--query", "[?name=='ubuntu-hpc-1804'].[name, legacy]", "-o", "table")
    assert rc == 0 and "no longer listed" in out


def test_ib_split_warning_at_10000_nodes_stays_short(run):
    rc, _, err = run("validate", "--profile", "nd-h100-v5", "-n", "big", "--nodes", "10000", "-l", "eastus",
                     "--ssh-key", KEY, "-o", "none")
    assert rc == 0, err
    (warning,) = [line for line in err.splitlines() if "IB_DOMAIN_SPLIT" in line]
    assert "(100 x 100 VMs)" in warning and len(warning) < 250


def test_ib_split_warning_counts_each_size():
    from azgpu.rules import _counts

    assert _counts([100, 100, 50]) == "2 x 100 VMs + 1 x 50 VMs"


def test_long_name_lists_in_messages_are_cut_with_a_count():
    assert listing([f"vmss{i:03d}" for i in range(100)]) == "vmss000, vmss001, vmss002, vmss003, vmss004 and 95 more"
    assert listing(["a", "b"]) == "a, b"
