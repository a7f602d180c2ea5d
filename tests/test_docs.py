"""Every code block of README.md runs as written.

bash blocks: every line, in order. `provision` commands (also as .venv/bin/provision) run
in-process against one simulated subscription (azgpu.testing.FakeAzure, virtual clock, quota large
enough for any example), with a home directory holding ~/.ssh/id_ed25519.pub, a working directory
holding a copy of examples/, and a terminal that answers 'y'; a line that says `--simulate` runs
azgpu's own simulation, on its state file, with no simulated latency. A line must exit 0, unless it
ends in a comment `# exit N: CODE`, which says it exits N with that error code (how the README
shows a refusal). `python SCRIPT` runs a script of the
checkout. Any other command must be a set-up line that .ci/run runs as it stands (the README's
install commands): a command the harness cannot run fails the test instead of being skipped.

python blocks run in one namespace, in order, as written; test_* functions a block defines are
called. Azure calls go to the same simulated subscription: AZURE_SUBSCRIPTION_ID names it and
default_credential() gives a FakeCredential, the only two things a real session would take from
the machine.

text blocks (and blocks without a language) are sample output and are not run.
"""

from __future__ import annotations

import io
import os
import re
import shlex
import shutil
import subprocess
import sys
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import pytest

from azgpu.deploy import session as session_module
from azgpu.deploy.session import Session
from azgpu.testing import FakeAzure, FakeCredential

REPO = Path(__file__).resolve().parents[1]
README = REPO / "README.md"
CI = REPO / ".ci" / "run"
KEY = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIJOgAYClhajeh3m7rJp5Bf+XHzOywcIepjITM9B6OJMg azgpu-test"
FENCE = re.compile(r"^```([^\n`]*)\n(.*?)^```[ \t]*$", re.MULTILINE | re.DOTALL)
SHELL = {"bash", "sh", "shell", "console"}
OUTPUT = {"", "text", "output"}


@dataclass
class Block:
    language: str
    code: str
    line: int  # where the block starts in README.md

    @property
    def id(self) -> str:
        return f"README.md:{self.line} ({self.language or 'no language'})"


def blocks(text: str) -> list[Block]:
    return [Block(m.group(1).strip().lower(), m.group(2), text.count("\n", 0, m.start()) + 1)
            for m in FENCE.finditer(text)]


EXPECT = re.compile(r"#\s*exit (\d+): ([A-Z][A-Z0-9_]*)\s*$")


def expected(line: str) -> tuple[int, str | None]:
    """The exit code (and error code) a line says it ends with: 0 unless it ends in '# exit N: CODE'."""
    found = EXPECT.search(line)
    return (int(found.group(1)), found.group(2)) if found else (0, None)


def commands(code: str) -> list[tuple[str, list[str]]]:
    """(the line as written, argv) for each command of each line; '\\' continues a line."""
    out = []
    for line in code.replace("\\\n", " ").splitlines():
        lexer = shlex.shlex(line, posix=True, punctuation_chars=";&|<>")
        lexer.whitespace_split = True
        lexer.commenters = "#"
        argv: list[str] = []
        for token in list(lexer) + [";"]:
            if token in (";", "&&"):
                if argv:
                    out.append((line.strip(), argv))
                argv = []
            elif set(token) <= set(";&|<>"):
                raise AssertionError(f"README line {line!r} uses {token!r}: the harness runs commands, not pipelines")
            else:
                argv.append(token)
    return out


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


@pytest.fixture
def simulated(tmp_path, monkeypatch):
    """One simulated subscription for the whole README, and a machine like a user's."""
    home = tmp_path / "home"
    (home / ".ssh").mkdir(parents=True)
    (home / ".ssh" / "id_ed25519.pub").write_text(KEY + "\n")
    monkeypatch.setenv("HOME", str(home))
    work = tmp_path / "work"
    shutil.copytree(REPO / "examples", work / "examples")
    monkeypatch.chdir(work)
    with FakeAzure() as azure:
        generous_quota(azure)
        session = Session(azure.subscription_id, FakeCredential(), polling_interval=0, sleep=azure.sleep)

        from azgpu.cli import options

        real = options.session_for

        @contextmanager
        def session_for(subscription, simulate, latency, state):
            if simulate:  # a line that says --simulate runs it, on its own state file, without waiting
                with real(subscription, simulate, 0 if latency is None else latency, state) as simulated_session:
                    yield simulated_session
                return
            yield session

        monkeypatch.setattr(options, "session_for", session_for)
        monkeypatch.setattr(session_module, "default_credential", FakeCredential)
        monkeypatch.setenv("AZURE_SUBSCRIPTION_ID", azure.subscription_id)
        yield azure


def generous_quota(azure) -> None:
    """Every usage limit of every simulated location raised far above any example's needs."""
    from azure.mgmt.compute import ComputeManagementClient

    from azgpu.testing.skus import DEFAULT_LOCATIONS

    compute = ComputeManagementClient(FakeCredential(), azure.subscription_id, polling_interval=0)
    for location in DEFAULT_LOCATIONS:
        for usage in compute.usage.list(location):
            azure.set_quota(location, usage.name.value, limit=10_000_000)


def run_shell(block: Block, run, monkeypatch, transcript: list | None = None) -> None:
    ci = CI.read_text()
    for line, argv in commands(block.code):
        env = {}
        while argv and re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*=.*", argv[0]):
            key, _, value = argv.pop(0).partition("=")
            env[key] = value
        if argv[0] == "export":
            for item in argv[1:]:
                key, _, value = item.partition("=")
                monkeypatch.setenv(key, value)
            continue
        for key, value in env.items():
            monkeypatch.setenv(key, value)
        program = argv[0]
        if program == "provision" or program.endswith("/provision"):
            monkeypatch.setattr(sys, "stdin", Terminal("y\n" * 10))
            rc, out, err = run(*argv[1:])
            status, code = expected(line)
            assert rc == status, f"{block.id}: `{shlex.join(argv)}` exited {rc}:\n{err}"
            assert code is None or f"[{code}]" in err, f"{block.id}: `{shlex.join(argv)}` did not say {code}:\n{err}"
            if transcript is not None:
                transcript.append((line, out, err))
        elif program in ("python", "python3") and len(argv) > 1 and (REPO / argv[1]).is_file():
            done = subprocess.run([sys.executable, str(REPO / argv[1]), *argv[2:]], capture_output=True, text=True)
            assert done.returncode == 0, f"{block.id}: `{shlex.join(argv)}` exited {done.returncode}:\n{done.stderr}"
        else:
            assert line in ci, (f"{block.id}: `{shlex.join(argv)}` is neither a provision command nor a set-up line "
                                f"that .ci/run runs; teach tests/test_docs.py to run it")


def run_python(block: Block, namespace: dict) -> None:
    before = set(namespace)
    exec(compile(block.code, f"README.md:{block.line}", "exec"), namespace)
    for name in sorted(set(namespace) - before):
        if name.startswith("test_") and callable(namespace[name]):
            namespace[name]()


def run_readme(run, monkeypatch, transcript: list | None = None) -> list[Block]:
    found = blocks(README.read_text())
    namespace: dict = {"__name__": "readme"}
    for block in found:
        if block.language in SHELL:
            run_shell(block, run, monkeypatch, transcript)
        elif block.language == "python":
            run_python(block, namespace)
        else:
            assert block.language in OUTPUT, f"{block.id}: the harness does not know how to run a {block.language} block"
    return found


def test_readme_blocks_run_as_written(simulated, run, monkeypatch):
    transcript: list = []
    found = run_readme(run, monkeypatch, transcript)
    assert {b.language for b in found} >= {"bash", "python"}
    # The blocks did what they say (a harness that ran nothing would pass the loop above): the
    # first block's simulated cluster (its own state file) and the Python blocks' clusters are
    # deployed, render wrote its templates.
    first_line, first_out, _ = transcript[0]
    assert "--simulate" in first_line and "demo-vmss000" in first_out
    clusters = {r["tags"]["azgpu-cluster"] for r in simulated.resources(type="Microsoft.Compute/virtualMachineScaleSets")}
    assert {"train01", "alma01"} <= clusters
    assert (Path.cwd() / "out" / "a100" / "main.json").is_file()
    # What the README says its review commands print is what they print.
    what_if = next(out for line, out, _ in transcript if "--what-if" in line and "--nodes 120" in line)
    assert "Resource changes: 6 to modify." in what_if  # NSG, NAT gateway and its IP, VNet, 2 scale sets
    assert "Instances to delete: 30 GPU node(s): train01-vmss001_49" in what_if
    assert "now 4,079.55 USD/hour for 150 node(s)" in what_if
    # Guest Health Reporting: the gate's one bad node reported once, the targeted report, the refusal.
    reports = next(out for line, out, _ in transcript if line.startswith("provision reports -g ghr-rg"))
    rows = [row for row in reports.splitlines() if row.startswith("azgpu-h100-vmss000-0-")]
    assert len(rows) == 1 and "HpcMissingGpu" in rows[0] and "NodeRemovedFromService" in rows[0]
    assert "IBPortDown  filed  NodeRemovedFromService" in next(
        out for line, out, _ in transcript if line.startswith("provision report -n h100") and "--node" in line)
    assert "az provider register" in next(err for line, _, err in transcript if "GHR_NOT_ONBOARDED" in line)


def test_a_line_says_what_it_exits_with():
    assert expected("provision create ... -o none   # exit 2: QUOTA_INSUFFICIENT") == (2, "QUOTA_INSUFFICIENT")
    assert expected("provision check -n x -g y   # health of every node; exit 0 = all passed") == (0, None)


# ------------------------------------------------------------------------------ the harness itself


def test_commands_split_lines_as_bash_does():
    assert commands("a && b c  # note\nd 'e f'\n") == [("a && b c  # note", ["a"]), ("a && b c  # note", ["b", "c"]),
                                                      ("d 'e f'", ["d", "e f"])]


def test_a_pipe_is_refused_not_run_halfway():
    with pytest.raises(AssertionError, match="pipelines"):
        commands("provision outputs -n x -g y --format hostfile|slurm")


def test_an_unknown_command_fails(simulated, run, monkeypatch):
    with pytest.raises(AssertionError, match="teach tests/test_docs.py"):
        run_shell(Block("bash", "curl https://example.com\n", 1), run, monkeypatch)


def test_a_failing_provision_line_fails(simulated, run, monkeypatch):
    with pytest.raises(AssertionError, match="exited 2"):
        run_shell(Block("bash", "provision plan --profile nope\n", 1), run, monkeypatch)


def test_an_unknown_block_language_fails(simulated, run, monkeypatch, tmp_path):
    readme = tmp_path / "README.md"
    readme.write_text("```bash\nprovision profiles list\n```\n```ruby\nputs 1\n```\n")
    monkeypatch.setattr(sys.modules[__name__], "README", readme)
    with pytest.raises(AssertionError, match="ruby"):
        run_readme(run, monkeypatch)


def test_python_blocks_share_names_and_their_tests_run(simulated, run, monkeypatch, tmp_path):
    readme = tmp_path / "README.md"
    readme.write_text("```python\nx = 1\n```\n```python\ndef test_x():\n    assert x == 2\n```\n")
    monkeypatch.setattr(sys.modules[__name__], "README", readme)
    with pytest.raises(AssertionError):
        run_readme(run, monkeypatch)
