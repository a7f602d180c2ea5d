"""Profiles: they all load, every cited source exists, aliases resolve, `profiles show` tells the
requirements with their sources and the seeds' discrepancies, and a broken profile fails loudly."""

from __future__ import annotations

import json
import re
import tomllib
from pathlib import Path

import pytest

from azgpu import images, list_profiles, load_profile
from azgpu.errors import ProfileError
from azgpu.profiles import find_size, profile_ids, profiles_dir
from azgpu.sources import sources

REPO = Path(__file__).resolve().parents[1]
PROFILE_IDS = ["nd", "nd-a100-v4", "nd-gb200-v6", "nd-gb300-v6", "nd-h100-v5", "nd-h200-v5", "nd-mi300x-v5",
               "ndm-a100-v4", "ndv2", "ng"]


def test_all_ten_profiles_are_listed():
    assert profile_ids() == PROFILE_IDS
    assert [p.id for p in list_profiles()] == PROFILE_IDS


@pytest.mark.parametrize("profile_id", PROFILE_IDS)
def test_profile_loads_and_its_defaults_resolve(profile_id):
    profile = load_profile(profile_id)
    assert profile.size(profile.default_size).name == profile.default_size
    assert profile.default_image in images.catalog()
    for name in profile.recommended_images:
        assert name in images.catalog(), f"{profile_id} recommends unknown image {name}"


def test_profiles_list_cli(run):
    rc, out, err = run("profiles", "list", "--query", "[].id")
    assert rc == 0, err
    assert json.loads(out) == PROFILE_IDS


def test_profiles_list_table(run):
    rc, out, _ = run("profiles", "list", "-o", "table")
    assert rc == 0
    assert out.splitlines()[0].split()[:2] == ["ID", "Series"]
    lines = out.splitlines()
    assert max(len(line) for line in lines) <= 120
    assert [line.split()[0] for line in lines[2:] if not line.startswith(" ")] == PROFILE_IDS


# ------------------------------------------------------------------------------ sources


def _cited(value, out: set[str]) -> set[str]:
    if isinstance(value, dict):
        for key, item in value.items():
            if key == "source":
                out.update([item] if isinstance(item, str) else item)
            else:
                _cited(item, out)
    elif isinstance(value, list):
        for item in value:
            _cited(item, out)
    return out


def data_citations() -> dict[str, set[str]]:
    cited = {}
    for path in sorted(profiles_dir().glob("*.toml")):
        if path.name != "sources.toml":
            with path.open("rb") as fh:
                cited[path.name] = _cited(tomllib.load(fh), set())
    return cited


def code_citations() -> dict[str, set[str]]:
    pattern = re.compile(r"""["']((?:D|R|T)-[a-z0-9][a-z0-9-]*)["']""")
    return {str(p.relative_to(REPO)): set(pattern.findall(p.read_text()))
            for p in sorted((REPO / "src" / "azgpu").rglob("*.py"))}


def test_the_code_cites_the_sources_it_is_expected_to():
    cited = set().union(*code_citations().values())
    expected = {"D-managed-disks", "D-spot", "D-ephemeral", "D-findimage", "D-name-rules", "D-regions", "D-linux-faq",
                "D-tags", "D-zones", "D-vnet-faq", "D-arm-limits", "D-tl"}
    assert expected <= cited


@pytest.mark.parametrize("origin", ["data", "code"])
def test_every_cited_source_exists_in_sources_toml(origin):
    known = sources()
    citations = data_citations() if origin == "data" else code_citations()
    missing = {where: sorted(k for k in keys if not k.startswith("seed:") and k not in known)
               for where, keys in citations.items()}
    assert not {k: v for k, v in missing.items() if v}


def test_every_source_has_a_title_and_an_https_address():
    for key, source in sources().items():
        assert source.title.strip(), key
        if key.startswith("T-") and not source.url:  # third-party notes without a stable address say so
            assert "no stable address" in source.title, key
        else:
            assert source.url.startswith("https://"), key


def test_seed_citations_name_seed_files():
    seeds = REPO.parent / "shared" / "seeds"
    cited = {k[5:] for keys in data_citations().values() for k in keys if k.startswith("seed:")}
    cited |= {s for p in list_profiles() for s in p.seeds} | {d.seed for p in list_profiles() for d in p.discrepancies}
    assert cited
    if not seeds.is_dir():
        pytest.skip("shared/seeds is not beside the checkout")
    assert cited <= {p.name for p in seeds.iterdir()}


# ------------------------------------------------------------------------------ aliases


def test_nd6_alias_resolves_on_nd(az):
    assert az.spec("render", profile="nd", size="ND6").size.name == "Standard_ND6s"


def test_ng8_alias_resolves_on_ng(run, ssh_key):
    rc, out, err = run("validate", "--profile", "ng", "--size", "NG8", "-n", "demo", "--ssh-key", ssh_key,
                       "--query", "size")
    assert rc == 0, err
    assert json.loads(out) == "Standard_NG8ads_V620_v1"


def test_size_without_profile_finds_its_profile(run, ssh_key):
    rc, out, err = run("validate", "--size", "ND40rs_v2", "-n", "demo", "--ssh-key", ssh_key,
                       "--query", "[profile, size]")
    assert rc == 0, err
    assert json.loads(out) == ["ndv2", "Standard_ND40rs_v2"]


def test_size_lookup_is_case_insensitive_and_accepts_the_short_arm_name():
    assert find_size("nd96asr_v4")[1].name == "Standard_ND96asr_v4"
    assert find_size("standard_nd96isr_h100_v5")[0].id == "nd-h100-v5"


def test_profiles_show_accepts_an_alias(run):
    rc, out, err = run("profiles", "show", "NG8", "--query", "id")
    assert rc == 0, err
    assert json.loads(out) == "ng"


def test_profiles_show_unknown_suggests_the_nearest(run):
    rc, out, err = run("profiles", "show", "nd-a100v4")
    assert rc == 2 and out == ""
    assert err.startswith("ERROR: [UNKNOWN_PROFILE] unknown profile 'nd-a100v4'\n  remedy: did you mean 'nd-a100-v4'?")


# ------------------------------------------------------------------------------ profiles show


def show(run, profile_id: str) -> dict:
    rc, out, err = run("profiles", "show", profile_id)
    assert rc == 0, err
    return json.loads(out)


def test_profiles_show_lists_the_sizes(run):
    detail = show(run, "nd")
    assert [s["name"] for s in detail["sizes"]] == ["Standard_ND6s", "Standard_ND12s", "Standard_ND24s",
                                                    "Standard_ND24rs"]
    assert detail["sizes"][0]["aliases"] == ["ND6"]
    assert detail["sizes"][0]["gpu_model"] == "NVIDIA Tesla P40"


def test_profiles_show_gives_every_requirement_a_source(run):
    detail = show(run, "ndv2")
    assert {r["rule"] for r in detail["requirements"]} == {"hpc_image", "rdma_address_space", "cuda_max"}
    for requirement in detail["requirements"]:
        assert "<https://" in requirement["source"] or "NDv2 size page" in requirement["source"]
    assert detail["sizes"][0]["capabilities"]["hyperv_generations"]["source"]


def test_profiles_show_prints_nd_v1_p40_against_the_seed_v100(run):
    (disc,) = [d for d in show(run, "nd")["discrepancies"] if "V100" in d["claim"]]
    assert disc["document"] == "Azure ND-Series: AI and Deep Learning GPU Virtual Machines"
    assert "P40" in disc["documented"]
    assert disc["source"]


def test_profiles_show_prints_ng_a100_claim(run):
    (disc,) = [d for d in show(run, "ng")["discrepancies"] if "NVIDIA A100 Tensor Core" in d["claim"]]
    assert "AMD Radeon PRO V620" in disc["documented"]


def test_profiles_show_table_has_sections(run):
    rc, out, _ = run("profiles", "show", "ng", "-o", "table")
    assert rc == 0
    for section in ("Sizes", "Requirements", "Discrepancies"):
        assert f"\n{section}\n" in out


def test_images_list_filters_by_profile(run):
    rc, out, err = run("images", "list", "--profile", "ndv2", "--query", "[].name")
    assert rc == 0, err
    names = json.loads(out)
    assert "ubuntu-hpc-2204-v100" in names and "ubuntu-hpc-2204" not in names


# ------------------------------------------------------------------------------ broken profiles


def edit(path: Path, old: str, new: str) -> None:
    text = path.read_text()
    assert old in text, f"{old!r} not in {path.name}"
    path.write_text(text.replace(old, new, 1))


BROKEN = {
    "unknown top-level key": ("ndv2.toml", 'default_size = "Standard_ND40rs_v2"',
                              'default_size = "Standard_ND40rs_v2"\ndefault_sise = "x"', ["ndv2.toml", "default_sise"]),
    "fact without source": ("ndv2.toml", 'ephemeral_os_disk = { value = true, source = "D-ndv2" }',
                            "ephemeral_os_disk = { value = true }", ["ndv2.toml", "ephemeral_os_disk"]),
    "unknown source key": ("ndv2.toml", 'ephemeral_os_disk = { value = true, source = "D-ndv2" }',
                           'ephemeral_os_disk = { value = true, source = "D-nowhere" }', ["ndv2.toml", "D-nowhere"]),
    "wrong type": ("ndv2.toml", "vcpus = 40", 'vcpus = "forty"', ["ndv2.toml", "vcpus"]),
    "wrong capability type": ("ndv2.toml", 'ephemeral_os_disk = { value = true, source = "D-ndv2" }',
                              'ephemeral_os_disk = { value = "yes", source = "D-ndv2" }',
                              ["ndv2.toml", "ephemeral_os_disk"]),
    "unknown rule": ("ndv2.toml", 'rule = "cuda_max"', 'rule = "cuda_maximum"', ["ndv2.toml", "cuda_maximum"]),
    "unknown rule argument": ("ndv2.toml", "max_major = 12", "max_major = 12\nmin_major = 1",
                              ["ndv2.toml", "min_major"]),
    "missing size key": ("ndv2.toml", "max_nics = 8\n", "", ["ndv2.toml", "max_nics"]),
    "default size not a size": ("ndv2.toml", 'default_size = "Standard_ND40rs_v2"',
                                'default_size = "Standard_ND41rs_v2"',
                                ["ndv2.toml", "default_size"]),
    "id does not match the file": ("ndv2.toml", 'id = "ndv2"', 'id = "nd-v2"', ["ndv2.toml", "'id'"]),
    "invalid toml": ("ndv2.toml", 'id = "ndv2"', 'id = "ndv2', ["ndv2.toml", "not valid TOML"]),
    "seed without an entry in seeds.toml": ("ndv2.toml", 'seeds = ["001_2e93371591e7fc2e.txt"',
                                            'seeds = ["009_0000000000000000.txt"', ["ndv2.toml", "seeds.toml"]),
}


@pytest.mark.parametrize("file, old, new, named", BROKEN.values(), ids=BROKEN.keys())
def test_broken_profile_fails_loading_naming_file_and_key(profile_copy, file, old, new, named):
    edit(profile_copy / file, old, new)
    with pytest.raises(ProfileError) as info:
        load_profile("ndv2")
    for part in named:
        assert part in str(info.value)


RACK_RULE = 'rule = "rack_multiple"\n'


@pytest.mark.parametrize("profile_id", ["nd-gb200-v6", "nd-gb300-v6"])
def test_an_nvl72_profile_holds_one_rack_size_with_its_source(profile_id):
    profile = load_profile(profile_id)
    assert (profile.rack_size, "R-agentbaker-gb300" in profile.rack_source) == (18, True)
    text = (REPO / "profiles" / f"{profile_id}.toml").read_text()
    assert re.findall(r"^(?:rack|multiple) = (\d+)$", text, re.M) == ["18"]  # written once: [vertical_connect] rack


@pytest.mark.parametrize("profile_id", ["nd-gb200-v6", "nd-gb300-v6"])
def test_a_profile_whose_rack_rule_disagrees_with_its_rack_size_is_refused(profile_copy, profile_id):
    edit(profile_copy / f"{profile_id}.toml", RACK_RULE, RACK_RULE + "multiple = 16\n")
    with pytest.raises(ProfileError) as info:
        load_profile(profile_id)
    assert all(part in str(info.value) for part in (f"{profile_id}.toml", "rack_multiple", "multiple = 16",
                                                    "rack = 18", "one rack size")), str(info.value)


def test_the_rack_size_is_read_one_way():
    """Profile.rack_size, not the [vertical_connect] table's key again (rack_gate read it so twice)."""
    src = REPO / "src" / "azgpu"
    readers = sorted(str(p.relative_to(src)) for p in src.rglob("*.py")
                     if p.relative_to(src).parts[0] != "testing" and re.search(r"""\[["']rack["']\]""", p.read_text()))
    assert readers == ["profiles.py"]


@pytest.mark.parametrize("rack", ["0", "-18"])
def test_a_rack_size_that_is_not_a_number_of_vms_is_refused(profile_copy, rack):
    """The nodes are cut into racks of this many (layout, rules, certify): 0 divided by zero at create."""
    edit(profile_copy / "nd-gb300-v6.toml", "\nrack = 18\n", f"\nrack = {rack}\n")
    with pytest.raises(ProfileError) as info:
        load_profile("nd-gb300-v6")
    assert all(part in str(info.value) for part in ("nd-gb300-v6.toml", "[vertical_connect]", f"rack = {rack}"))


def test_a_rack_rule_that_agrees_with_the_rack_size_loads(profile_copy):
    edit(profile_copy / "nd-gb300-v6.toml", RACK_RULE, RACK_RULE + "multiple = 18\n")
    assert load_profile("nd-gb300-v6").rack_size == 18


def test_a_rack_rule_without_a_rack_size_is_refused(profile_copy):
    edit(profile_copy / "ndv2.toml", 'rule = "cuda_max"', 'rule = "rack_multiple"\nsource = "D-ndv2"\n\n[[rules]]\n'
                                                           'rule = "cuda_max"')
    with pytest.raises(ProfileError) as info:
        load_profile("ndv2")
    assert "[vertical_connect] rack" in str(info.value)


def test_the_copy_loads_when_unchanged(profile_copy):
    assert load_profile("ndv2").path == str(profile_copy / "ndv2.toml")


def test_broken_image_catalog_names_the_entry(profile_copy):
    edit(profile_copy / "images.toml", 'name = "ubuntu-hpc-2204"', 'name = "ubuntu-hpc-2204"\nkernel = "6.8"')
    with pytest.raises(ProfileError) as info:
        images.catalog()
    assert "images.toml [[image]] #1" in str(info.value) and "kernel" in str(info.value)


def test_image_with_unknown_source_fails(profile_copy):
    edit(profile_copy / "images.toml", 'source = ["R-azhpc", "D-hpcimg"]', 'source = ["R-azhpc", "D-nowhere"]')
    with pytest.raises(ProfileError) as info:
        images.catalog()
    assert "images.toml [[image]] #1" in str(info.value) and "D-nowhere" in str(info.value)


def test_broken_profile_on_the_command_line_is_a_clear_error(profile_copy, run):
    edit(profile_copy / "ndv2.toml", "vcpus = 40", 'vcpus = "forty"')
    rc, out, err = run("profiles", "list")
    assert rc == 2 and out == ""
    assert err.startswith("ERROR: [PROFILE_INVALID] ndv2.toml")
    assert "Traceback" not in err


def test_image_plan_without_its_name_fails(profile_copy):
    edit(profile_copy / "images.toml", 'product = "almalinux-hpc", name = "8_10-hpc-gen2" }',
         'product = "almalinux-hpc" }')
    with pytest.raises(ProfileError) as info:
        images.catalog()
    assert "'plan' must be a table with publisher, product and name" in str(info.value)


# ------------------------------------------------------------------------------ seeds by what they are

SEED_FILE_NAME = re.compile(r"\d{3}_[0-9a-f]{16}\.txt")


@pytest.mark.parametrize("argv", [["profiles", "list"], ["profiles", "list", "-o", "table"],
                                  *(["profiles", "show", p, "-o", fmt]
                                    for p in PROFILE_IDS for fmt in ("json", "table"))],
                         ids=lambda argv: " ".join(argv[1:]))
def test_profiles_never_show_a_seed_by_its_file_name(run, argv):
    rc, out, err = run(*argv)
    assert rc == 0, err
    assert not SEED_FILE_NAME.search(out), SEED_FILE_NAME.search(out)


def test_profiles_show_says_what_each_seed_is(run):
    detail = show(run, "ndv2")
    assert detail["documents"] == [
        "'NDv2-series' (Microsoft's NDv2 size page as of 2020-02-03)",
        "'Azure ND-Series: AI and Deep Learning GPU Virtual Machines' (an undated overview of the ND "
        "family; several of its claims contradict Microsoft Learn)"]


def test_every_cited_seed_has_a_title_and_a_role():
    from azgpu.sources import seeds

    cited = {s for p in list_profiles() for s in p.seeds} | {d.seed for p in list_profiles() for d in p.discrepancies}
    assert cited and cited <= set(seeds())
    assert all(entry["title"] and entry["role"] for entry in seeds().values())


@pytest.mark.parametrize("argv",
                         [("profiles", "list"), ("profiles", "list", "-o", "table"), ("profiles", "show", "--help"),
                                  *[("profiles", "show", p, "-o", o) for p in PROFILE_IDS for o in ("json", "table")]])
def test_no_user_is_told_of_seed_documents(run, argv):
    """The documents the project started from are named by what they are, never as "seeds"."""
    rc, out, err = run(*argv)
    assert rc == 0, err
    assert "seed" not in (out + err).lower()
