"""Every code block of README.md runs as written.

bash blocks: every line, in order. `provision` commands (also as .venv/bin/provision) run
in-process against one simulated subscription (azgpu.testing.FakeAzure, virtual clock, quota large
enough for any example), with a home directory holding ~/.ssh/id_ed25519.pub, a working directory
holding a copy of examples/, and a terminal that answers 'y'. `python SCRIPT` runs a script of the
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

        @contextmanager
        def session_for(*args, **kwargs):
            yield session

        from azgpu.cli import options

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


def run_shell(block: Block, run, monkeypatch) -> None:
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
            assert rc == 0, f"{block.id}: `{shlex.join(argv)}` exited {rc}:\n{err}"
        elif program in ("python", "python3") and len(argv) > 1 and (REPO / argv[1]).is_file():
            done = subprocess.run([sys.executable, str(REPO / argv[1]), *argv[2:]], capture_output=True, text=True)
            assert done.returncode == 0, f"{block.id}: `{shlex.join(argv)}` exited {done.returncode}:\n{done.stderr}"
        else:
            assert line in ci, (f"{block.id}: `{shlex.join(argv)}` is neither a provision command nor a set-up line "
                                f"that .ci/run runs; teach tests/test_readme.py to run it")


def run_python(block: Block, namespace: dict) -> None:
    before = set(namespace)
    exec(compile(block.code, f"README.md:{block.line}", "exec"), namespace)
    for name in sorted(set(namespace) - before):
        if name.startswith("test_") and callable(namespace[name]):
            namespace[name]()


def run_readme(run, monkeypatch) -> list[Block]:
    found = blocks(README.read_text())
    namespace: dict = {"__name__": "readme"}
    for block in found:
        if block.language in SHELL:
            run_shell(block, run, monkeypatch)
        elif block.language == "python":
            run_python(block, namespace)
        else:
            assert block.language in OUTPUT, f"{block.id}: the harness does not know how to run a {block.language} block"
    return found


def test_readme_blocks_run_as_written(simulated, run, monkeypatch):
    found = run_readme(run, monkeypatch)
    assert {b.language for b in found} >= {"bash", "python"}
    # The blocks did what they say (a harness that ran nothing would pass the loop above): the
    # first block's cluster and the Python block's are deployed, render wrote its templates.
    clusters = {r["tags"]["azgpu-cluster"] for r in simulated.resources(type="Microsoft.Compute/virtualMachineScaleSets")}
    assert {"demo", "train01"} <= clusters
    assert (Path.cwd() / "out" / "a100" / "main.json").is_file()


# ------------------------------------------------------------------------------ the harness itself


def test_commands_split_lines_as_bash_does():
    assert commands("a && b c  # note\nd 'e f'\n") == [("a && b c  # note", ["a"]), ("a && b c  # note", ["b", "c"]),
                                                      ("d 'e f'", ["d", "e f"])]


def test_a_pipe_is_refused_not_run_halfway():
    with pytest.raises(AssertionError, match="pipelines"):
        commands("provision outputs -n x -g y --format hostfile|slurm")


def test_an_unknown_command_fails(simulated, run, monkeypatch):
    with pytest.raises(AssertionError, match="teach tests/test_readme.py"):
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
