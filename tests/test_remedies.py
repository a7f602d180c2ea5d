"""Remedies that fit: what a remedy tells the reader to run is a command they can paste as it stands (no
SIZE, LOCATION or NAME left to fill in where azgpu knows the value), and under --simulate it goes to the
simulated subscription, never to Azure. Checked over every error code azgpu's source gives (the registry
tools/reference_docs.py reads, which docs/error-codes.md shows), and end to end on the codes the issue met."""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
SIM = ("--simulate", "--simulate-latency", "0")


def registry() -> dict[str, list[dict]]:
    sys.path.insert(0, str(REPO / "tools"))
    try:
        import reference_docs
    finally:
        sys.path.remove(str(REPO / "tools"))
    return reference_docs.error_codes()


CODES = registry()
REMEDIES = [(code, entry["remedy"]) for code, entries in CODES.items() for entry in entries if entry["remedy"]]
# Words in capitals that are names, not blanks to fill in.
WORDS = {"AZURE_CLIENT_ID", "AZURE_TENANT_ID", "AZURE_CLIENT_SECRET", "AZGPU_THROTTLE_BUDGET", "AZURE_SUBSCRIPTION_ID",
         "NAT", "IAM", "GPU", "VM", "HPC", "OFED", "MLNX_OFED", "LTS", "TOML", "NCCL", "IMDS", "SKU", "ID", "IB", "CPU",
         "OS", "API", "SSH", "JSON", "ARM", "GUID", "URN", "V100", "V2", "IP", "DNS", "US", "CIDR",
         "CLI"}
WORD = re.compile(r"(?<![\w<‹/.-])([A-Z][A-Z0-9]*(?:_[A-Z0-9]+)*)(?![\w>›/-])")
FLAG_VALUE = re.compile(r"(?:^|\s)--?[a-z][a-z-]*[ =]([A-Z][A-Z0-9_]*)\b")
QUOTED = re.compile(r"'((?:provision|az) [^']*)'")


def placeholders(remedy: str) -> list[str]:
    """The blanks a remedy leaves: a word in capitals that stands for a value (SIZE, LOCATION, RG), a flag's
    value in capitals (--id ID), or any capital word inside a command it quotes. The shape of a resource ID
    the user supplies (/subscriptions/SUB/resourceGroups/RG/...) describes a form, and ‹…› in the registry
    is a value filled in at run time."""
    found = [w for w in WORD.findall(remedy) if w not in WORDS and w not in CODES]
    found += FLAG_VALUE.findall(remedy)
    for command in QUOTED.findall(remedy):
        found += [w for w in re.findall(r"\b[A-Z][A-Z0-9_]*\b", command) if w not in WORDS - {"ID", "URN"}]
        # '...' for the options left out, or <caller>: the pasted command fails (a missing option, a shell
        # redirect from a file named 'caller')
        found += re.findall(r"\.\.\.|<[a-z][\w -]*>", command)
    return sorted(set(found))


def unquoted_commands(remedy: str) -> list[str]:
    """Commands a remedy names outside quotes: the CLI could not tell them apart from its prose."""
    return re.findall(r"\b((?:provision|az) [a-z][\w-]*)", QUOTED.sub("''", remedy))


def test_the_registry_is_read():
    assert len(REMEDIES) > 150 and "CHANGE_NOT_ALLOWED" in CODES and "SKU_NOT_OFFERED" in CODES


def test_the_checks_find_what_they_look_for():
    # The remedies the issue met, as they were.
    assert placeholders("choose another location ('az vm list-skus --size SIZE --all')") == ["SIZE"]
    assert placeholders("follow them with 'provision quota status -l ‹…› --id ID'") == ["ID"]
    assert placeholders("name the cluster: -n NAME -g RESOURCE_GROUP") == ["NAME", "RESOURCE_GROUP"]
    assert placeholders(f"pass {'/subscriptions/SUB/resourceGroups/RG/providers/X/y/NAME'}") == []
    assert unquoted_commands("redirect stdout instead: provision outputs ... > x") == ["provision outputs"]
    assert placeholders("instead: 'provision outputs ... --format json > o.json'") == ["..."]
    assert placeholders("run 'az role assignment create --assignee <caller> --scope /x'") == ["<caller>"]
    assert placeholders("run 'provision outputs -n demo -g demo-rg --format json > o.json'") == []


@pytest.mark.parametrize("code, remedy", REMEDIES, ids=[f"{c}-{i}" for i, (c, _) in enumerate(REMEDIES)])
def test_no_remedy_holds_a_placeholder(code, remedy):
    assert not placeholders(remedy), f"{code}: {remedy}"
    assert not unquoted_commands(remedy), f"{code} names a command outside quotes: {remedy}"


def _string_text(node) -> str | None:
    """A string expression's text, a value filled in at run time as ‹›: a constant, an f-string, or a sum of
    strings ("'provision create " + "...'" holds a blank no constant of it shows)."""
    import ast

    if isinstance(node, ast.Constant):
        return node.value if isinstance(node.value, str) else None
    if isinstance(node, ast.JoinedStr):
        return "".join(v.value if isinstance(v, ast.Constant) else "‹›" for v in node.values)
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        left, right = _string_text(node.left), _string_text(node.right)
        if left is not None or right is not None:
            return (left if left is not None else "‹›") + (right if right is not None else "‹›")
    return None


def source_blanks(source: str, name: str = "<source>") -> list[str]:
    """The quoted commands in a module's strings (not its docstrings, which are prose about commands) that hold
    '...', <caller> or a word in capitals (NAME, RG, SIZE)."""
    import ast

    tree = ast.parse(source, name)
    docstrings = {id(n.value) for n in ast.walk(tree) if isinstance(n, ast.Expr)}
    found = []
    for node in ast.walk(tree):
        text = None if id(node) in docstrings else _string_text(node)
        for command in re.findall(r"'((?:provision|az) (?:\\.|[^'\\])*)(?:'|$)", text or ""):
            capitals = [w for w in re.findall(r"\b[A-Z][A-Z0-9_]*\b", command) if w not in WORDS - {"ID", "URN"}]
            if capitals or re.search(r"\.\.\.|<[a-z][\w -]*>", command):
                found.append(f"{name}:{node.lineno}: {command}")
    return sorted(set(found))


def test_the_source_scan_finds_blanks_in_f_strings_and_sums():
    assert source_blanks("x = \"'provision create \" + \"...'\"")
    assert source_blanks("x = f\"'provision check -n {n} -g RG'\"")
    assert source_blanks("x = \"'az role assignment create --assignee <caller>'\".format()")
    assert not source_blanks("x = f\"'provision check -n {n} -g {g}'\"")
    assert not source_blanks("def f():\n    \"\"\"'provision create ...' in prose\"\"\"")


def test_no_text_in_the_source_quotes_a_command_with_options_left_out():
    """The registry reads a remedy chosen by a condition, or printed by log(), as ‹…› or not at all: every string
    in azgpu's source that opens a quoted command is checked for '...', <caller> or a capital word before its
    closing quote."""
    found = []
    for path in sorted((REPO / "src" / "azgpu").rglob("*.py")):
        found += source_blanks(path.read_text(), str(path.relative_to(REPO)))
    assert not found, "\n".join(found)


@pytest.mark.parametrize("code, remedy", REMEDIES, ids=[f"{c}-{i}" for i, (c, _) in enumerate(REMEDIES)])
def test_every_remedy_under_simulate_names_commands_of_the_simulation(code, remedy):
    from azgpu.cli.options import _takes_simulate, for_session

    shown = for_session(remedy, {"simulate": True})
    from azgpu.cli import COMMANDS

    bare = re.findall(r"'((?:" + "|".join(COMMANDS) + r") [^']*)'", shown)
    for command in QUOTED.findall(shown) + bare:
        if not command.startswith("az ") and _takes_simulate(command):
            assert "--simulate" in command.split(), f"{code}: {shown}"
        if command.startswith("az "):
            assert f"'{command}' (in Azure, not in the simulated subscription)" in shown, f"{code}: {shown}"
    assert for_session(remedy, {}) == remedy  # without --simulate, as written


def test_simulate_goes_before_a_redirect_and_carries_the_state_file():
    from azgpu.cli.options import for_session

    assert for_session("instead: 'provision outputs ... --format json > o.json'", {"simulate": True}) == \
        "instead: 'provision outputs ... --format json --simulate > o.json'"
    assert for_session("run 'provision destroy -n m2 -g m-rg' first", {"simulate": True, "simulate_state": "s.json"}) \
        == "run 'provision destroy -n m2 -g m-rg --simulate --simulate-state s.json' first"
    # A simulate command has no --simulate; an az command with a simulated counterpart names it.
    assert for_session("'provision simulate quota list -l eastus'", {"simulate": True}) == \
        "'provision simulate quota list -l eastus'"
    assert for_session("check 'az vm list-usage -l westus'", {"simulate": True}) == \
        "check 'provision simulate quota list -l westus'"
    # A command quoted without 'provision' is one too.
    assert for_session("'create --replace-unhealthy' without --report-to-azure", {"simulate": True}) == \
        "'create --replace-unhealthy --simulate' without --report-to-azure"


# ------------------------------------------------------------------------------ end to end


def test_change_not_allowed_under_simulate_names_the_simulated_destroy(run, ssh_key, tmp_path, monkeypatch):
    monkeypatch.setenv("AZGPU_SIMULATE_STATE", str(tmp_path / "sim.json"))
    args = ("create", "-n", "m2", "-g", "m-rg", "-l", "eastus", "--nodes", "2", "--ssh-key", ssh_key, *SIM,
            "-o", "none")
    assert run(*args[:1], "--profile", "nd-h100-v5", *args[1:])[0] == 0
    rc, out, err = run(*args[:1], "--profile", "nd-h200-v5", *args[1:])
    assert rc != 0 and "[CHANGE_NOT_ALLOWED]" in err
    assert "'provision destroy -n m2 -g m-rg --simulate' first" in err


def test_sku_not_offered_names_the_locations_that_offer_the_size(run, ssh_key, tmp_path, monkeypatch):
    from azgpu.testing import FakeAzure

    monkeypatch.setenv("AZGPU_SIMULATE_STATE", str(tmp_path / "sim.json"))
    rc, out, err = run("create", "--profile", "nd-a100-v4", "-n", "m3", "-g", "m-rg", "-l", "westus", "--nodes", "2",
                       "--ssh-key", ssh_key, *SIM, "-o", "none")
    assert rc == 2 and "[SKU_NOT_OFFERED]" in err and "list-skus" not in err
    # The locations named are the ones whose Resource SKUs (the fake's recordings) offer the size, less those a
    # Location restriction closes to the subscription (japaneast, NotAvailableForSubscription).
    with FakeAzure() as azure:
        entries = {loc: s for loc in azure._skus.all_locations() for s in azure._skus.in_location(loc)
                   if s["name"] == "Standard_ND96asr_v4"}
    offered = sorted(loc for loc, s in entries.items() if not any(r["type"] == "Location" for r in s["restrictions"]))
    assert "japaneast" in entries and "japaneast" not in offered and "westus" not in entries
    named = next(line for line in err.splitlines() if line.startswith("  remedy:")).split(": ", 2)[2]
    assert named.startswith(", ".join(offered[:7]) + " and ") and "(e.g. -l australiaeast)" in named


def test_capacity_judges_the_primary_location_and_reports_fallbacks_apart(run, tmp_path, monkeypatch):
    monkeypatch.setenv("AZGPU_SIMULATE_STATE", str(tmp_path / "sim.json"))
    capacity = ("capacity", "--profile", "nd-a100-v4", "--nodes", "2", *SIM)
    rc, out, err = run(*capacity, "-l", "eastus", "--fallback-locations", "westus")
    report = json.loads(out)
    assert rc == 0, err  # eastus holds the cluster; westus does not offer the size
    assert report["verdict"] == "ok" and report["fallbacks"] == [{"location": "westus", "verdict": "blocked"}]
    assert "westus: blocked" in err
    rc, out, err = run(*capacity, "-l", "westus", "--fallback-locations", "eastus")
    assert rc == 1 and json.loads(out)["verdict"] == "blocked" and "[CAPACITY_NOT_READY] capacity report: westus" in err


def test_remedies_in_a_result_under_simulate_carry_simulate_too(run, tmp_path, monkeypatch):
    monkeypatch.setenv("AZGPU_SIMULATE_STATE", str(tmp_path / "sim.json"))
    assert run("simulate", "quota", "set", "-l", "eastus", "--name", "cores", "--limit", "10")[0] == 0
    rc, out, err = run("capacity", "--profile", "nd-a100-v4", "--nodes", "2", "-l", "eastus", *SIM)
    short = next(c for c in json.loads(out)["checks"] if c["status"] == "short")
    assert rc == 1 and short["remedy"].startswith(
        "request 192: 'provision quota request --size Standard_ND96asr_v4 --nodes 2 -l eastus --simulate'")
    command = short["remedy"].split("'")[1].split()[1:]  # the quoted command, pasted: it files the request
    rc, out, err = run(*command, "--simulate-latency", "0", "--yes")
    assert rc in (0, 1) and "request 192" in err and "ERROR" not in err.replace("QUOTA_REQUEST", ""), err



def test_the_capacity_reports_reservation_lines_quote_a_whole_reserve_command(run, tmp_path, monkeypatch):
    """The report's lines are not error codes, so the registry does not hold them: checked here, end to end."""
    monkeypatch.setenv("AZGPU_SIMULATE_STATE", str(tmp_path / "sim.json"))
    group = ("/subscriptions/00000000-0000-0000-0000-000000000000/resourceGroups/capacity-rg/providers/"
             "Microsoft.Compute/capacityReservationGroups/a100-crg")
    capacity = ("capacity", "--profile", "nd-a100-v4", "--nodes", "2", "-l", "eastus", "--zones", "1",
                "--capacity-reservation-group", group, *SIM)
    rc, out, err = run(*capacity)
    missing = next(c for c in json.loads(out)["checks"] if "does not exist" in c["detail"])
    assert rc == 1 and missing["remedy"] == ("create it with 'provision reserve -g capacity-rg --group a100-crg --size "
                                             "Standard_ND96asr_v4 --count 2 -l eastus --zone 1 --simulate'")
    # Reserve another size in the group: the line for this one names the command that adds it.
    assert run("simulate", "sku", "capability", "-l", "eastus", "--size", "Standard_ND96amsr_A100_v4", "--name",
               "CapacityReservationSupported", "--value", "True")[0] == 0
    assert run("reserve", "-g", "capacity-rg", "--group", "a100-crg", "-l", "eastus", "--size",
               "Standard_ND96amsr_A100_v4", "--count", "1", "--yes", "-o", "none", *SIM)[0] == 0
    rc, out, err = run(*capacity)
    lines = [c for c in json.loads(out)["checks"] if c["check"] == "reservation"]
    assert rc == 1 and any(c["remedy"] == "add one with 'provision reserve -g capacity-rg --group a100-crg --size "
                           "Standard_ND96asr_v4 --count 2 -l eastus --zone 1 --simulate'" for c in lines), lines
    for line in lines:
        assert not placeholders(line["remedy"]), line


def test_a_slurm_programs_logged_remedy_under_simulate_carries_simulate(run, tmp_path, monkeypatch):
    """A power program logs its final error in its own line format, not the CLI's: the remedy fits the session
    there too."""
    monkeypatch.setenv("AZGPU_SIMULATE_STATE", str(tmp_path / "sim.json"))
    cluster = tmp_path / "c.toml"
    cluster.write_text(f'profile = "nd-a100-v4"\nnodes = 4\nname = "train01"\nlocation = "eastus"\n'
                       f'resource-group = "ml-rg"\nssh-key = "{REPO / "examples" / "demo_key.pub"}"\n')
    rc, out, err = run("slurm", "resume", "-f", cluster, "--scontrol", "true", "--state-dir", tmp_path / "st",
                       "nosuch-0001", *SIM)
    remedy = next(line for line in err.splitlines() if "resume nosuch-0001: remedy:" in line)
    assert rc == 2 and "[UNKNOWN_SLURM_NODE]" in err and "'provision slurm config --simulate'" in remedy


def test_a_failed_gate_in_create_names_the_whole_create_that_replaces_the_nodes(run, ssh_key, tmp_path, monkeypatch):
    """The remedy quotes the create as it was typed, with --replace-unhealthy added (and --simulate under
    --simulate): pasted, it replaces the failing nodes. Options left out ('provision create ...') would fail."""
    import shlex

    monkeypatch.setenv("AZGPU_SIMULATE_STATE", str(tmp_path / "sim.json"))
    assert run("simulate", "fault", "--next", "1", "--gpus", "7")[0] == 0
    create = ("create", "--profile", "nd-a100-v4", "-n", "m4", "-g", "m-rg", "-l", "eastus", "--nodes", "2",
              "--ssh-key", ssh_key, "--simulate", "--simulate-latency", "0", "--check", "-o", "none")
    rc, out, err = run(*create)
    remedy = next(line for line in err.splitlines() if line.startswith("  remedy:"))
    assert rc == 1 and "[UNHEALTHY_NODES]" in err and "..." not in remedy, err
    command = shlex.split(remedy.split("replace them: ", 1)[1])[0]
    assert shlex.split(command) == ["provision", *create, "--replace-unhealthy"], remedy
    rc, out, err = run(*shlex.split(command)[1:])
    assert rc == 0, err


def test_check_and_report_say_in_words_what_replaces_the_nodes(run, ssh_key, tmp_path, monkeypatch):
    """Standalone check does not hold the options the cluster was created with: no create with '...' in it."""
    monkeypatch.setenv("AZGPU_SIMULATE_STATE", str(tmp_path / "sim.json"))
    assert run("create", "--profile", "nd-a100-v4", "-n", "m5", "-g", "m-rg", "-l", "eastus", "--nodes", "2",
               "--ssh-key", ssh_key, *SIM, "-o", "none")[0] == 0
    assert run("simulate", "fault", "-n", "m5", "--instance", "1", "--xid", "79")[0] == 0
    rc, out, err = run("check", "-n", "m5", "-g", "m-rg", *SIM, "-o", "none")
    remedy = next(line for line in err.splitlines() if line.startswith("  remedy:"))
    assert rc == 1 and "'provision check -n m5 -g m-rg -o table --simulate'" in remedy, err
    assert "re-run the create that made the cluster with --check --replace-unhealthy added" in remedy
    assert not placeholders(remedy), remedy


def test_quota_request_needs_a_name_only_to_count_what_a_cluster_in_its_group_holds(run, tmp_path, monkeypatch):
    """The capacity report's quota remedy names no cluster (capacity has none): quota request files for a size,
    count and location without -n; with -g, the name picks the cluster whose scale sets hold quota already."""
    monkeypatch.setenv("AZGPU_SIMULATE_STATE", str(tmp_path / "sim.json"))
    quota = ("quota", "request", "--size", "Standard_ND96asr_v4", "--nodes", "2", "-l", "eastus", "--yes", *SIM)
    rc, out, err = run(*quota)
    assert rc == 0 and json.loads(out)["shortfall"] == [] and "MISSING_NAME" not in err, err
    rc, out, err = run(*quota, "-g", "ml-rg")
    assert rc == 2 and "[MISSING_NAME]" in err and "train01" not in err and "the cluster in -g" in err, err


# Words a shell would split, expand or run, and a history expansion ('!') in an interactive bash.
HOSTILE_TAG = "note=it's $(touch MARK) `touch MARK` \"q\" back\\slash ~root !! \u00e9"


def _pasted(command: str, tmp_path, interactive: bool = False) -> list[str]:
    """The argv a `provision` receives when `command` is pasted into bash (interactive: history expansion on)."""
    import subprocess

    script = "set -H; provision() { printf '%s\\0' \"$@\"; }\n" + command + "\n"
    args = ["bash", "-i"] if interactive else ["bash", "-c", script]
    done = subprocess.run(args, input=script if interactive else None, capture_output=True, text=True,
                          cwd=tmp_path, env={"PATH": "/usr/bin:/bin", "HOME": str(tmp_path)}, timeout=30)
    assert not (tmp_path / "MARK").exists(), "pasting the remedy ran a command"
    return done.stdout.split("\0")[:-1]


def test_the_replacing_create_pastes_back_exactly_what_was_typed(run, ssh_key, tmp_path, monkeypatch):
    """A word holding quotes, $(...), backticks, a backslash, a ~ or a ! arrives as typed when the remedy's command
    is pasted into a shell, an interactive bash too; --simulate stays where it was and is not added again."""
    monkeypatch.setenv("AZGPU_SIMULATE_STATE", str(tmp_path / "sim.json"))
    assert run("simulate", "fault", "--next", "1", "--gpus", "7")[0] == 0
    create = ("create", "--profile", "nd-a100-v4", "-n", "m6", "-g", "m-rg", "-l", "eastus", "--nodes", "2",
              "--tag", HOSTILE_TAG, "--ssh-key", ssh_key, *SIM, "--check", "-o", "none")
    rc, out, err = run(*create)
    remedy = next(line for line in err.splitlines() if line.startswith("  remedy:"))
    assert rc == 1 and "[UNHEALTHY_NODES]" in err, err
    quoted = remedy.split("replace them: '", 1)[1]
    command = quoted[:quoted.rindex("'")]  # what the user copies: from the opening quote to the closing one
    for interactive in (False, True):
        assert _pasted(command, tmp_path, interactive) == [*create, "--replace-unhealthy"], (interactive, remedy)


def test_a_command_line_no_one_line_shows_as_typed_is_not_quoted_back():
    """A newline or an escape sequence in a word: one_line shows it escaped, so the pasted command would differ."""
    from azgpu.cli.options import rerun

    assert rerun({"argv": ["create", "--tag", "k=a\nb"]}, "--check") is None
    assert rerun({"argv": ["create", "--tag", "k=\x1b[31mred"]}, "--check") is None
    assert rerun({"argv": ["create", "--tag", "k=v"]}, "--check") == "provision create --tag k=v --check"
