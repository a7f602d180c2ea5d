"""README.md and every page under docs/ run as a reader runs them, and the docs build.

The reader's path, exactly: a fresh machine with an empty home directory, a clone, the README's two
set-up commands, then every page's shell lines pasted in page order (the README, then the site's nav
order, then pages not in the nav) into ONE bash, in the clone. Nothing is planted: no SSH key (the
README's quick start makes ~/.ssh/id_rsa with --generate-ssh-keys), no simulated subscription made
for a page, no stand-in for `provision`. Markdown is read with a real Markdown parser
(markdown-it-py, CommonMark), so the blocks are the ones a reader sees, and a fence left open (which
swallows the rest of the page) fails instead of hiding commands. These tests are marked `docs`
(deselect with -m 'not docs' for a quick local run; CI runs them).

bash blocks: every line, as bash reads it, in that one shell (exports, `cd` and `source` carry on to
the next line, as they do for a reader). A line must exit 0, unless it ends in a comment
`# exit N: CODE`, which says it exits N with that error code (how a page shows a refusal); a
traceback fails it. Each line's stdin is empty, as in a script: a line that would ask a question
says `--yes`. The only departures from the reader's machine: the README's set-up commands do not
install anything (the running test environment stands for their .venv, and the test suite they run
is this one), and AZGPU_SIMULATE_LATENCY=0 makes simulated operations instant (it changes how long
they take, nothing else).

python blocks: each page's blocks run in one Python of the shell's own (`python` after the README's
`source .venv/bin/activate`), in one namespace, in page order between the page's shell lines, with
the shell's environment and working directory at that point; test_* functions a block defines are
called.

text blocks (and blocks without a language) are sample output and are not run.

A page that uses the simulated subscription uses one of its own, which it sets up and cleans in
its own lines (`export AZGPU_SIMULATE_STATE=$(mktemp -d)/simulate.json` first, `unset
AZGPU_SIMULATE_STATE` last): a page that changes the simulated cloud the README made, or leaves the
variable set for the next page, fails. So does a page that leaves files in the clone.
"""

from __future__ import annotations

import json
import os
import re
import select
import shlex
import shutil
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
README = REPO / "README.md"
CI = REPO / ".ci" / "run"
# README.md, CONTRIBUTING.md, ARCHITECTURE.md and every page of the guide, pages other contributors add included.
DOC_FILES = [README, REPO / "CONTRIBUTING.md", REPO / "ARCHITECTURE.md", *sorted((REPO / "docs").rglob("*.md"))]
SHELL = {"bash", "sh", "shell", "console"}
OUTPUT = {"", "text", "output"}
LINE_TIMEOUT = 300  # seconds one line may take (the slowest, a simulated create --check, takes a few)


@dataclass
class Block:
    language: str
    code: str
    line: int  # where the block starts in its file
    file: str = "README.md"

    @property
    def id(self) -> str:
        return f"{self.file}:{self.line} ({self.language or 'no language'})"


def blocks(text: str, file: str = "README.md") -> list[Block]:
    """The fenced code blocks as CommonMark reads them; a fence never closed fails."""
    from markdown_it import MarkdownIt

    lines = text.splitlines()
    found = []
    for token in MarkdownIt("commonmark").parse(text):
        if token.type != "fence":
            continue
        start, end = token.map
        closing = lines[end - 1].strip() if end - 1 > start and end <= len(lines) else ""
        # CommonMark ends an unclosed fence at the end of the document: everything after it is code.
        if not (closing.startswith(token.markup) and set(closing) == {token.markup[0]}):
            raise AssertionError(f"{file}:{start + 1}: the {token.markup} fence opened here is never closed, "
                                 "so the rest of the file reads as code")
        # A fence left open is closed by the next block's bare fence: the opening fence of that block
        # (with its language) then sits inside this one, and everything between reads as code.
        for offset, line in enumerate(token.content.splitlines()):
            if re.fullmatch(re.escape(token.markup) + r"+\s*[A-Za-z][\w+-]*\s*", line.strip()):
                raise AssertionError(f"{file}:{start + 1}: the {token.markup} fence opened here is never closed: "
                                     f"line {start + 2 + offset} opens another block inside it")
        found.append(Block(token.info.strip().split(" ")[0].lower(), token.content, start + 1, file))
    return found


EXPECT = re.compile(r"#\s*exit (\d+): ([A-Z][A-Z0-9_]*)\s*$")


def expected(line: str) -> tuple[int, str | None]:
    """The exit code (and error code) a line says it ends with: 0 unless it ends in '# exit N: CODE'."""
    found = EXPECT.search(line)
    return (int(found.group(1)), found.group(2)) if found else (0, None)


def shell_lines(code: str) -> list[str]:
    """A bash block's commands as bash reads them: a line, with the lines a trailing '\\', an open quote
    or a here-document carries on to (bash -n says when a command is complete)."""
    out, pending = [], ""
    for line in code.splitlines(keepends=True):
        if not pending and (not line.strip() or line.lstrip().startswith("#")):
            continue  # a blank line or a comment of its own
        pending += line
        if pending.rstrip("\n").endswith("\\"):
            continue
        check = subprocess.run(["bash", "-n"], input=pending, capture_output=True, text=True)
        if re.search(r"unexpected EOF|unexpected end of file|delimited by end-of-file", check.stderr):
            continue
        out.append(pending.rstrip("\n"))
        pending = ""
    if pending.strip():
        out.append(pending.rstrip("\n"))  # bash reports what is wrong with it when it runs
    return out


def page_order() -> list[Path]:
    """The README, the guide in the site's nav order, the pages not in the nav, then the other files."""
    import yaml

    def names(nav) -> list[str]:
        out = []
        for item in nav:
            value = next(iter(item.values())) if isinstance(item, dict) else item
            out += names(value) if isinstance(value, list) else [value]
        return out

    nav = [REPO / "docs" / name for name in names(yaml.safe_load((REPO / "mkdocs.yml").read_text())["nav"])]
    rest = [p for p in DOC_FILES if p not in nav and p != README]
    return [README, *[p for p in nav if p.is_file()], *rest]


# ------------------------------------------------------------------------------ the reader's shell


class Shell:
    """One bash, as a reader's terminal in the clone: each line is run as typed (`source`d, so exports,
    `cd` and functions carry on), with its stdout and stderr kept apart and its exit status read."""

    def __init__(self, cwd: Path, env: dict[str, str], scratch: Path):
        self.scratch = scratch
        scratch.mkdir(parents=True, exist_ok=True)
        self.count = 0
        self.proc = subprocess.Popen(["bash", "--norc", "--noprofile"], cwd=cwd, env=env, stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, stderr=open(scratch / "bash.err", "w"),
                                     start_new_session=True)

    def run(self, text: str, timeout: float = LINE_TIMEOUT) -> tuple[int, str, str]:
        self.count += 1
        base = self.scratch / f"line{self.count:04d}"
        Path(f"{base}.sh").write_text(text + "\n")
        q = shlex.quote
        self._send(f"{{ . {q(f'{base}.sh')}; }} </dev/null >{q(f'{base}.out')} 2>{q(f'{base}.err')}; "
                   f"echo \"__azgpu_docs__ $?\"\n")
        status = self._read(timeout, text)
        return status, Path(f"{base}.out").read_text(errors="replace"), Path(f"{base}.err").read_text(errors="replace")

    def environment(self) -> tuple[dict[str, str], str]:
        """The shell's exported variables and working directory now."""
        env_file, cwd_file = self.scratch / "env", self.scratch / "cwd"
        q = shlex.quote
        self._send(f"env -0 >{q(str(env_file))}; pwd >{q(str(cwd_file))}; echo \"__azgpu_docs__ $?\"\n")
        self._read(30, "env")
        pairs = [item.split("=", 1) for item in env_file.read_text().split("\0") if "=" in item]
        return dict(pairs), cwd_file.read_text().rstrip("\n")

    def _send(self, command: str) -> None:
        assert self.proc.poll() is None, f"the shell ended: {(self.scratch / 'bash.err').read_text()[-2000:]}"
        self.proc.stdin.write(command.encode())
        self.proc.stdin.flush()

    def _read(self, timeout: float, what: str) -> int:
        buffer, deadline = b"", time.monotonic() + timeout
        fd = self.proc.stdout.fileno()
        while b"\n" not in buffer:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([fd], [], [], left)[0]:
                self.close()
                raise AssertionError(f"`{what}` did not finish within {timeout:.0f} s")
            chunk = os.read(fd, 4096)
            if not chunk:
                raise AssertionError(f"the shell ended while running `{what}`: "
                                     f"{(self.scratch / 'bash.err').read_text()[-2000:]}")
            buffer += chunk
        line = buffer.decode(errors="replace").strip().splitlines()[-1]
        assert line.startswith("__azgpu_docs__ "), line
        return int(line.split()[1])

    def close(self) -> None:
        if self.proc.poll() is None:
            try:
                os.killpg(self.proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            self.proc.wait()


# Each page's Python blocks run in one interpreter of their own, started by the harness with the
# shell's `python`, environment and working directory (as a reader starts one from that shell).
PYTHON_DRIVER = r"""
import json, linecache, os, sys, traceback
namespace = {"__name__": "__main__"}
reply = os.fdopen(os.dup(1), "w")
for request in sys.stdin:
    job = json.loads(request)
    os.environ.clear()
    os.environ.update(job["env"])
    os.chdir(job["cwd"])
    saved = os.dup(1), os.dup(2)
    error = None
    with open(job["out"], "w") as out, open(job["err"], "w") as err:
        os.dup2(out.fileno(), 1)
        os.dup2(err.fileno(), 2)
        linecache.cache[job["name"]] = (len(job["code"]), None, job["code"].splitlines(True), job["name"])
        try:
            before = set(namespace)
            exec(compile(job["code"], job["name"], "exec"), namespace)
            for name in sorted(set(namespace) - before):
                if name.startswith("test_") and callable(namespace[name]):
                    namespace[name]()
        except BaseException:
            error = traceback.format_exc()
        sys.stdout.flush()
        sys.stderr.flush()
        os.dup2(saved[0], 1)
        os.dup2(saved[1], 2)
    reply.write(json.dumps({"error": error}) + "\n")
    reply.flush()
"""


class Python:
    def __init__(self, executable: str, env: dict[str, str], cwd: str, scratch: Path):
        self.scratch, self.count = scratch, 0
        self.proc = subprocess.Popen([executable, "-c", PYTHON_DRIVER], env=env, cwd=cwd, stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, text=True, start_new_session=True)

    def run(self, block: Block, env: dict[str, str], cwd: str) -> tuple[str | None, str, str]:
        self.count += 1
        out, err = self.scratch / f"python{self.count:03d}.out", self.scratch / f"python{self.count:03d}.err"
        self.proc.stdin.write(json.dumps({"code": block.code, "name": block.id, "env": env, "cwd": cwd,
                                          "out": str(out), "err": str(err)}) + "\n")
        self.proc.stdin.flush()
        fd = self.proc.stdout.fileno()
        if not select.select([fd], [], [], LINE_TIMEOUT)[0]:
            self.close()
            raise AssertionError(f"{block.id} did not finish within {LINE_TIMEOUT} s")
        answer = self.proc.stdout.readline()
        assert answer, f"{block.id}: Python ended: {err.read_text()[-3000:]}"
        return json.loads(answer)["error"], out.read_text(), err.read_text()

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.stdin.close()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait()


# ------------------------------------------------------------------------------ the reader


# What the README's set-up commands do that the test environment already stands for.
SET_UP_DONE = (re.compile(r"python3 -m venv \.venv$"), re.compile(r"\.venv/bin/pip install .*"),
               re.compile(r"\.venv/bin/python -m pytest\b.*"))


@dataclass
class Reader:
    """A fresh machine: an empty home, a clone (the checkout's files), one shell."""

    root: Path
    clone: Path = field(init=False)
    home: Path = field(init=False)
    shell: Shell = field(init=False)
    transcript: list = field(default_factory=list)  # (file, line, status, stdout, stderr)
    timings: list = field(default_factory=list)  # (seconds, file, line)

    def __post_init__(self):
        self.clone, self.home = self.root / "clone", self.root / "home"
        self.home.mkdir(parents=True)
        files = subprocess.run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"], cwd=REPO,
                               capture_output=True, check=True).stdout.decode().split("\0")
        for name in filter(None, files):
            source = REPO / name
            if source.is_file():
                (self.clone / name).parent.mkdir(parents=True, exist_ok=True)
                shutil.copy2(source, self.clone / name)
        # The README's set-up made .venv; the tests' own environment is one with the test extras.
        assert (Path(sys.prefix) / "bin" / "activate").is_file(), "the tests run from a virtual environment"
        (self.clone / ".venv").symlink_to(sys.prefix)
        # The clone as git sees it, so that what a page leaves behind is what `git status` would show a reader.
        git = ["git", "-c", "user.name=reader", "-c", "user.email=reader@example.com"]
        subprocess.run([*git, "init", "-q"], cwd=self.clone, check=True)
        (self.clone / ".git" / "info" / "exclude").write_text(".venv\n")
        subprocess.run([*git, "add", "-A"], cwd=self.clone, check=True)
        subprocess.run([*git, "commit", "-q", "-m", "clone"], cwd=self.clone, check=True)
        env = {"HOME": str(self.home), "PATH": "/usr/bin:/bin", "LANG": "C.UTF-8", "TERM": "dumb",
               "AZGPU_SIMULATE_LATENCY": "0"}
        self.shell = Shell(self.clone, env, self.root / "lines")

    def left_in_clone(self) -> list[str]:
        """What `git status` shows in the clone: files made (and not ignored), changed or deleted."""
        status = subprocess.run(["git", "status", "--porcelain", "--untracked-files=all"], cwd=self.clone,
                                capture_output=True, text=True, check=True).stdout
        return status.splitlines()

    def default_state(self) -> Path:
        """The simulated cloud --simulate uses when nothing names another: the README's."""
        return self.home / ".local" / "state" / "azgpu" / "simulate.json"

    def run_line(self, block: Block, line: str) -> tuple[int, str, str]:
        started = time.monotonic()
        status, out, err = self.shell.run(line)
        self.timings.append((time.monotonic() - started, block.file, line))
        self.transcript.append((block.file, line, status, out, err))
        want, code = expected(line)
        assert status == want, f"{block.id}: `{line}` exited {status}, the page says {want}:\n{err[-4000:]}"
        assert "Traceback" not in err, f"{block.id}: `{line}`:\n{err[-4000:]}"
        assert code is None or f"[{code}]" in err, f"{block.id}: `{line}` did not say {code}:\n{err[-4000:]}"
        return status, out, err

    def run_set_up(self, block: Block) -> None:
        """A README set-up command: what it does beyond installing and testing (the simulated cluster)."""
        line = block.code.strip()
        assert line in ci_commands(), f"{block.id}: .ci/run must run the README's set-up command as it stands"
        rest = [part for part in line.split(" && ") if not any(p.fullmatch(part) for p in SET_UP_DONE)]
        if rest:
            self.run_line(block, " && ".join(rest))

    def run_page(self, path: Path, set_up: int = 0) -> list[Block]:
        """Every block of one page in order; the first `set_up` bash blocks are set-up commands."""
        name = path.relative_to(REPO).as_posix() if path.is_relative_to(REPO) else path.name
        found = blocks(path.read_text(), name)
        python: Python | None = None
        readme_cloud = self.default_state().read_bytes() if self.default_state().is_file() else None
        shell_before = self.shell.environment()
        try:
            for block in found:
                if block.language in SHELL and set_up > 0:
                    set_up -= 1
                    self.run_set_up(block)
                elif block.language in SHELL:
                    for line in shell_lines(block.code):
                        self.run_line(block, line)
                elif block.language == "python":
                    env, cwd = self.shell.environment()
                    if python is None:
                        executable = shutil.which("python", path=env.get("PATH")) or sys.executable
                        python = Python(executable, env, cwd, self.root / "python" / name.replace("/", "_"))
                        python.scratch.mkdir(parents=True, exist_ok=True)
                    error, out, err = python.run(block, env, cwd)
                    self.transcript.append((name, block.code, 1 if error else 0, out, err))
                    assert error is None, f"{block.id} failed:\n{error}\n{err[-3000:]}"
                else:
                    assert block.language in OUTPUT, f"{block.id}: the harness does not know how to run a " \
                                                      f"{block.language} block"
        finally:
            if python is not None:
                python.close()
        if path != README:
            env, cwd = self.shell.environment()
            assert "AZGPU_SIMULATE_STATE" not in env, (
                f"{name} leaves AZGPU_SIMULATE_STATE set for the next page: end the page with "
                "`unset AZGPU_SIMULATE_STATE`")
            now = self.default_state().read_bytes() if self.default_state().is_file() else None
            assert now == readme_cloud, (
                f"{name} changed the simulated subscription the README made: give the page one of its own "
                "(`export AZGPU_SIMULATE_STATE=$(mktemp -d)/simulate.json` before its first simulated command, "
                "`unset AZGPU_SIMULATE_STATE` after its last)")
            changed = {k for k in {*env, *shell_before[0]} - {"_", "OLDPWD", "SHLVL"}
                       if env.get(k) != shell_before[0].get(k)}
            assert not changed, f"{name} leaves the shell's {sorted(changed)} changed for the next page: undo it"
            assert cwd == shell_before[1], f"{name} leaves the shell in {cwd}: cd back"
        return found

    def lines_of(self, file: str) -> list[tuple[str, int, str, str]]:
        return [(line, status, out, err) for f, line, status, out, err in self.transcript if f == file]

    def close(self) -> None:
        self.shell.close()


@pytest.fixture
def reader(tmp_path):
    reader = Reader(tmp_path)
    yield reader
    reader.close()
    if os.environ.get("AZGPU_DOCS_TIMINGS"):
        for seconds, file, line in sorted(reader.timings, reverse=True)[:25]:
            print(f"{seconds:6.1f} s  {file}: {line[:110]}")


@pytest.fixture
def activated(reader):
    """A reader past the README's set-up, in its quick start's shell (for the harness's own tests)."""
    assert reader.shell.run("source .venv/bin/activate")[0] == 0
    return reader


# ------------------------------------------------------------------------------ what pages must have done


def check_readme(lines, reader: Reader) -> None:
    # The first set-up command made the simulated cluster, in the fresh home's state directory.
    assert "demo-vmss000" in lines[0][2] and reader.default_state().is_file()
    # --generate-ssh-keys made the key in the fresh home and said so.
    create = next(err for line, _, _, err in lines if "--generate-ssh-keys" in line)
    assert (reader.home / ".ssh" / "id_rsa").is_file() and str(reader.home / ".ssh" / "id_rsa") in create
    # The quick start ran to its end: every node passed, the hostfile, the cluster destroyed.
    check = next(out for line, _, out, _ in lines if line.startswith("provision check -n train01"))
    assert re.search(r"^Healthy +true$", check, re.M) and re.search(r"^Passed +16$", check, re.M)
    hostfile = next(out for line, _, out, _ in lines if "--format hostfile" in line)
    assert "slots=8" in hostfile
    assert any(line.startswith("provision destroy -n train01") for line, _, _, _ in lines)


def check_cli(lines, reader: Reader) -> None:
    listed = next(out for line, _, out, _ in lines if line.startswith("provision list"))
    assert "alma01" in listed and "train01" in listed
    assert any(line.startswith("provision check") and "passed" in out for line, _, out, _ in lines)
    render = json.loads(next(out for line, _, out, _ in lines if line.startswith("provision render")))
    assert render["out_dir"] == "out/a100" and "main.json" in [f["name"] for f in render["files"]]


def check_review(lines, reader: Reader) -> None:
    # What the page says its review commands print is what they print.
    what_if = next(out for line, _, out, _ in lines if "--what-if" in line and "--nodes 120" in line)
    what_if = " ".join(what_if.split())  # the summary lines wrap to the terminal's width
    assert "Resource changes: 6 to modify." in what_if  # NSG, NAT gateway and its IP, VNet, 2 scale sets
    assert "Instances to delete: 30 GPU node(s): train01-vmss001_49" in what_if
    assert "now 4,079.55 USD/hour for 150 node(s)" in what_if


def check_ghr(lines, reader: Reader) -> None:
    # Guest Health Reporting: the gate's one bad node reported once, the targeted report, the refusal,
    # and the Python block's reports.
    reports = next(out for line, _, out, _ in lines if line.startswith("provision reports -g ghr-rg"))
    rows = [row for row in reports.splitlines() if row.startswith("azgpu-h100-vmss000-0-")]
    assert len(rows) == 1 and "HpcMissingGpu" in rows[0] and "NodeRemovedFromService" in rows[0]
    assert "IBPortDown  filed  NodeRemovedFromService" in next(
        out for line, _, out, _ in lines if line.startswith("provision report -n h100") and "--node" in line)
    # Under --simulate the remedy names the simulated subscription's registration, not Azure's.
    refused = next(err for line, _, _, err in lines if "GHR_NOT_ONBOARDED" in line)
    assert "'provision simulate ghr --provider-state Registered'" in refused and "az provider" not in refused
    python = next(out for line, _, out, _ in lines if "ReportOptions(report_to_azure=True" in line)
    assert "Resource.Hpc.Unhealthy.XID79FallenOffBus filed NodeRemovedFromService" in python


def check_azure_validation(lines, reader: Reader) -> None:
    # The sample output the page shows is what its what-if prints (legend and cost lines left out), and
    # the policy denial names the assignment.
    page = (REPO / "docs" / "azure-validation.md").read_text()
    what_if = next(out for line, _, out, _ in lines if "--what-if" in line and "--nodes 3" in line)
    sample = [line for line in next(b.code for b in blocks(page) if b.language == "text").splitlines() if line]
    assert [line for line in what_if.splitlines() if line in sample] == sample
    denied = next(err for line, _, _, err in lines if "--dry-run" in line)
    assert "--name no-nd-a100 --scope /subscriptions/" in denied


def check_python_api(lines, reader: Reader) -> None:
    # The first example deployed four nodes in the simulated subscription and read their addresses back.
    first = next(out for line, _, out, _ in lines if "simulated_session()" in line)
    assert first.startswith("train01-vmss000 [") and first.count("'10.") == 4, first


# What some files' blocks must have done, beyond exiting as they say (a harness that ran nothing would
# pass the loop): the file, the languages it must hold, and a check of the outcome.
CHECKS = {"README.md": ({"bash"}, check_readme), "docs/cli.md": ({"bash"}, check_cli),
          "docs/review.md": ({"bash"}, check_review), "docs/guest-health-reporting.md": ({"bash", "python"}, check_ghr),
          "docs/python-api.md": ({"python"}, check_python_api),
          "docs/azure-validation.md": ({"bash", "text"}, check_azure_validation)}


def test_every_checked_file_exists():
    assert {p.relative_to(REPO).as_posix() for p in DOC_FILES} >= set(CHECKS)


@pytest.mark.docs
def test_every_page_runs_in_page_order_in_one_shell(reader):
    """The issue's test: README's set-up, then every page's lines pasted in page order into one shell."""
    order = page_order()
    assert order[0] == README and set(order) == set(DOC_FILES)
    for path in order:
        name = path.relative_to(REPO).as_posix()
        found = reader.run_page(path, set_up=2 if path == README else 0)
        languages, check = CHECKS.get(name, (set(), None))
        assert {b.language for b in found} >= languages
        if check is not None:
            check(reader.lines_of(name), reader)
    left = reader.left_in_clone()
    assert not left, f"the docs' commands leave files in the clone (write them under out/ or a temp dir): {left}"


def ci_commands(text: str | None = None) -> list[str]:
    """The commands .ci/run runs: its lines as bash reads them, less comments; only those after its
    `set -euo pipefail` (a command before it, or one that is not a line of its own, would not stop CI)."""
    lines = shell_lines(CI.read_text() if text is None else text)
    strict = next((i for i, line in enumerate(lines) if line.split("#")[0].split() == ["set", "-euo", "pipefail"]),
                  None)
    assert strict is not None, ".ci/run must stop at the first command that fails (set -euo pipefail)"
    return lines[strict + 1:]


def set_up_commands(text: str) -> list[Block]:
    """The README's set-up: the shell blocks of its '## Set up' section, which must hold its first shell block."""
    found = [b for b in blocks(text) if b.language in SHELL]
    lines = text.splitlines()
    start = next(i for i, line in enumerate(lines, 1) if line.strip() == "## Set up")
    end = next((i for i, line in enumerate(lines, 1) if i > start and line.startswith("## ")), len(lines) + 1)
    inside = [b for b in found if start < b.line < end]
    assert found and inside and found[0] is inside[0], "the README's first shell block must be in '## Set up'"
    return inside


def check_set_up(text: str, ci: str) -> None:
    """The README starts with exactly two set-up commands, one line each: the first installs azgpu and runs
    its main job in simulation, the second installs the test extras and runs the tests; .ci/run runs both,
    as they stand, in that order."""
    commands = [b.code.strip() for b in set_up_commands(text)]
    assert len(commands) == 2, f"the README's set-up must be exactly two commands, not {len(commands)}"
    assert all("\n" not in c for c in commands), "each set-up command must be one line"
    first, second = (c.split(" && ") for c in commands)
    assert any(re.fullmatch(r"\.venv/bin/pip install -q \.", p) for p in first), "the first must install azgpu"
    assert any(p.startswith(".venv/bin/provision create ") and "--simulate" in p.split() for p in first), \
        "the first must run the main job (create) in simulation"
    assert not any("pytest" in p for p in first)
    assert any(re.fullmatch(r"\.venv/bin/pip install -q -e '\.\[test\]'", p) for p in second), \
        "the second must install the test extras"
    assert any(re.fullmatch(r"\.venv/bin/python -m pytest", p) for p in second), "the second must run the tests"
    run = ci_commands(ci)
    assert all(c in run for c in commands), ".ci/run must run the README's set-up commands as they stand"
    assert run.index(commands[0]) < run.index(commands[1]), ".ci/run must run them in the README's order"


def test_the_readme_starts_with_the_two_set_up_commands_ci_runs():
    check_set_up(README.read_text(), CI.read_text())


def test_the_set_up_check_fails_on_what_it_guards():
    readme, ci = README.read_text(), CI.read_text()
    first, second = (b.code.strip() for b in set_up_commands(readme))
    third = "```bash\npip install something-else\n```\n\n## Five minutes without Azure"
    cases = {
        "exactly two": (readme.replace("## Five minutes without Azure", third, 1), ci),
        "as they stand": (readme, ci.replace(first, "# " + first)),
        "set -euo pipefail": (readme, ci.replace("set -euo pipefail", "set -u")),
        "in simulation": (readme.replace(" --simulate -o table", " -o table", 1), ci),
        "the README's order": (readme, ci.replace(first, "FIRST").replace(second, first).replace("FIRST", second)),
        "install the test extras": (readme.replace(".venv/bin/pip install -q -e '.[test]'", ".venv/bin/pip install "
                                                   "-q -e .", 1), ci),
        "run the tests": (readme.replace(" && .venv/bin/python -m pytest\n", "\n", 1), ci),
    }
    for expected_message, (text, script) in cases.items():
        with pytest.raises(AssertionError, match=re.escape(expected_message)):
            check_set_up(text, script)


def test_a_line_says_what_it_exits_with():
    assert expected("provision create ... -o none   # exit 2: QUOTA_INSUFFICIENT") == (2, "QUOTA_INSUFFICIENT")
    assert expected("provision check -n x -g y   # health of every node; exit 0 = all passed") == (0, None)


# ------------------------------------------------------------------------------ the harness itself


def test_lines_are_split_as_bash_reads_them():
    code = "a && b c  # note\n\n# a comment\nd 'e\nf' \\\n  g\ncat <<EOF\nx\nEOF\n"
    assert shell_lines(code) == ["a && b c  # note", "d 'e\nf' \\\n  g", "cat <<EOF\nx\nEOF"]


def test_the_page_order_is_the_sites():
    order = [p.relative_to(REPO).as_posix() for p in page_order()]
    assert order[:3] == ["README.md", "docs/index.md", "docs/cli.md"]
    assert order.index("docs/capacity.md") < order.index("docs/health-gate.md") < order.index("docs/python-api.md")


def test_a_failing_line_fails(activated):
    page = Block("bash", "provision plan --profile nope\n", 1, "page.md")
    with pytest.raises(AssertionError, match="exited 2, the page says 0"):
        activated.run_line(page, shell_lines(page.code)[0])
    # ... and a line that says so passes, with the code it names.
    activated.run_line(page, "provision plan --profile nope  # exit 2: UNKNOWN_PROFILE")
    with pytest.raises(AssertionError, match="did not say UNKNOWN_SIZE"):
        activated.run_line(page, "provision plan --profile nope  # exit 2: UNKNOWN_SIZE")


def test_an_unknown_option_or_command_fails(activated):
    page = Block("bash", "", 1, "page.md")
    with pytest.raises(AssertionError, match="exited 2"):
        activated.run_line(page, "provision plan --profile nd-a100-v4 --no-such-option")
    with pytest.raises(AssertionError, match="exited 127"):
        activated.run_line(page, "no-such-command --help")


def test_exports_and_cd_carry_on_as_in_a_shell(activated):
    page = Block("bash", "", 1, "page.md")
    activated.run_line(page, "export AZGPU_DOCS_X=1 && mkdir -p sub && cd sub")
    _, out, _ = activated.run_line(page, 'echo "$AZGPU_DOCS_X $(basename "$PWD")" && cd ..  && rmdir sub')
    assert out == "1 sub\n"


def test_a_page_that_changes_the_readmes_simulated_cloud_fails(activated, tmp_path):
    page = tmp_path / "page.md"
    page.write_text("```bash\nprovision simulate quota set -l eastus --name cores --limit 10 -o none\n```\n")
    with pytest.raises(AssertionError, match="changed the simulated subscription the README made"):
        activated.run_page(page)
    own = ("```bash\nexport AZGPU_SIMULATE_STATE=$(mktemp -d)/simulate.json\n"
           "provision simulate quota set -l eastus --name cores --limit 10 -o none\n```\n")
    page.write_text(own)
    with pytest.raises(AssertionError, match="leaves AZGPU_SIMULATE_STATE set"):
        activated.run_page(page)
    activated.shell.run("unset AZGPU_SIMULATE_STATE")
    page.write_text(own + "```bash\nunset AZGPU_SIMULATE_STATE\n```\n")
    activated.run_page(page)


def test_python_blocks_share_a_namespace_and_the_shells_environment(activated, tmp_path):
    page = tmp_path / "page.md"
    page.write_text("```bash\nexport AZGPU_DOCS_X=7\n```\n"
                    "```python\nimport os\nx = int(os.environ['AZGPU_DOCS_X'])\n```\n"
                    "```python\ndef test_x():\n    assert x == 8\n```\n")
    with pytest.raises(AssertionError, match="assert x == 8"):
        activated.run_page(page)
    page.write_text(page.read_text().replace("x == 8", "x == 7"))
    activated.run_page(page)


def test_an_unknown_block_language_fails(activated, tmp_path):
    page = tmp_path / "page.md"
    page.write_text("```bash\nprovision profiles list -o none\n```\n```ruby\nputs 1\n```\n")
    with pytest.raises(AssertionError, match="ruby"):
        activated.run_page(page)


def test_an_unclosed_fence_fails(tmp_path):
    page = "# Page\n\n```bash\nprovision profiles list\n\n## Next section\n\n```bash\nprovision images list\n```\n"
    with pytest.raises(AssertionError, match=r"page.md:3: the ``` fence opened here is never closed: line 8"):
        blocks(page, "page.md")
    # The same page with the fence closed reads as two blocks.
    fixed = page.replace("list\n\n## Next", "list\n```\n\n## Next")
    assert [b.code for b in blocks(fixed, "page.md")] == ["provision profiles list\n", "provision images list\n"]


def test_an_unclosed_fence_at_the_end_fails():
    with pytest.raises(AssertionError, match="never closed"):
        blocks("text\n\n~~~python\nprint(1)\n", "page.md")


def test_indented_and_tilde_fences_are_blocks_too():
    found = blocks("- item\n\n  ```bash\n  provision profiles list\n  ```\n\n~~~text\nout\n~~~\n", "page.md")
    assert [(b.language, b.code) for b in found] == [("bash", "provision profiles list\n"), ("text", "out\n")]


# ------------------------------------------------------------------------------ the site and generated pages


@pytest.mark.docs
def test_the_docs_build_strictly(tmp_path):
    """`mkdocs build --strict`: a broken link, a missing nav page or bad config fails."""
    done = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "-f", str(REPO / "mkdocs.yml"),
                           "-d", str(tmp_path / "site")], capture_output=True, text=True, cwd=REPO)
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "site" / "error-codes" / "index.html").is_file()


@pytest.mark.docs
def test_a_broken_link_fails_the_build(tmp_path):
    docs = tmp_path / "docs"
    shutil.copytree(REPO / "docs", docs)
    (docs / "extra-page.md").write_text("# Extra\n\nAn extra page, not in the nav, is fine.\n")
    config = (REPO / "mkdocs.yml").read_text().replace("docs_dir: docs", f"docs_dir: {docs}")
    (tmp_path / "mkdocs.yml").write_text(config)
    build = [sys.executable, "-m", "mkdocs", "build", "--strict", "-f", str(tmp_path / "mkdocs.yml"), "-d",
             str(tmp_path / "site")]
    ok = subprocess.run(build, capture_output=True, text=True, cwd=tmp_path)
    assert ok.returncode == 0, ok.stderr  # pages other contributors add need not be in the nav
    (docs / "cli.md").write_text((docs / "cli.md").read_text() + "\nSee [nowhere](no-such-page.md).\n")
    broken = subprocess.run(build, capture_output=True, text=True, cwd=tmp_path)
    assert broken.returncode != 0 and "no-such-page.md" in broken.stderr


def test_the_generated_pages_are_current():
    sys.path.insert(0, str(REPO / "tools"))
    try:
        import reference_docs
    finally:
        sys.path.remove(str(REPO / "tools"))
    for name, make in reference_docs.PAGES.items():
        assert (REPO / "docs" / name).read_text() == make(), f"docs/{name} is stale: run python tools/reference_docs.py"
    codes = reference_docs.error_codes()
    # Codes the user meets most, each with a remedy.
    for code in ("QUOTA_INSUFFICIENT", "IMAGE_GENERATION", "UNHEALTHY_NODES", "SCALE_IN_REFUSED"):
        assert code in codes and any(e["remedy"] for e in codes[code]), code


def test_every_error_code_in_the_docs_exists():
    """A code a page names (`# exit N: CODE`, ERROR: [CODE]) is one the code base gives."""
    sys.path.insert(0, str(REPO / "tools"))
    try:
        import reference_docs
    finally:
        sys.path.remove(str(REPO / "tools"))
    known = set(reference_docs.error_codes())
    for path in DOC_FILES:
        code_re = r"[A-Z][A-Z0-9]*(?:_[A-Z0-9]+)+"
        named = set(re.findall(rf"# exit \d+: ({code_re})|ERROR: \[({code_re})\]", path.read_text()))
        for code in {c for pair in named for c in pair if c}:
            assert code in known, f"{path.name} names {code}, which no code gives"


# ------------------------------------------------------------------------------ the prose


def paragraphs(text: str) -> list[tuple[int, str]]:
    """(line, text) of each top-level paragraph (not in a list, a quote or a table)."""
    from markdown_it import MarkdownIt

    tokens = MarkdownIt("commonmark").enable("table").parse(text)
    return [(t.map[0] + 1, tokens[i + 1].content.strip()) for i, t in enumerate(tokens)
            if t.type == "paragraph_open" and t.level == 0]


def unfinished(text: str) -> bool:
    """A paragraph that stops mid-sentence: its last word is not followed by . : ! or ?"""
    last = text.rstrip("*_`)\"'")
    return not last or last[-1] not in ".:!?"


def test_no_paragraph_stops_mid_sentence():
    assert unfinished("within a throttling budget: 600 seconds of")  # docs/cli.md's last line, once
    assert not unfinished("as Learn says (see [its page](x.md)).") and not unfinished("prints:")
    for path in DOC_FILES:
        for line, text in paragraphs(path.read_text()):
            assert not unfinished(text), f"{path.relative_to(REPO)}:{line} stops mid-sentence: ...{text[-80:]!r}"


def code_spans(text: str) -> list[tuple[int, str]]:
    from markdown_it import MarkdownIt

    return [(t.map[0] + 1, c.content) for t in MarkdownIt("commonmark").enable("table").parse(text)
            if t.type == "inline" for c in t.children or [] if c.type == "code_inline"]


def options_of(command) -> set[str]:
    import click

    return {o for p in command.params if isinstance(p, click.Option) for o in (*p.opts, *p.secondary_opts)} | {"--help"}


def unknown_options(span: str) -> list[str]:
    """What is wrong with a `provision ...` the prose names: a command that does not exist, or an option
    the command does not take. A word in capitals or '...' stands for any command."""
    import click

    from azgpu.cli import cli

    ctx, command = click.Context(cli), cli
    try:
        words = shlex.split(span)[1:]
    except ValueError:
        words = span.split()[1:]
    while isinstance(command, click.Group) and words:
        found = command.get_command(ctx, words[0])
        if found is None:
            return [] if words[0].isupper() or words[0].startswith(("...", "-")) else [f"no command {words[0]!r}"]
        command, words = found, words[1:]
    if isinstance(command, click.Group):
        return []
    known = options_of(command)
    return [w for w in (w.strip("[]").split("=")[0] for w in words) if w.startswith("--") and w not in known
            or re.fullmatch(r"-[a-zA-Z]", w) and w not in known]


def every_option() -> set[str]:
    """Every option of every provision command, and of the repository's own scripts (benchmarks, tools)."""
    import click

    from azgpu.cli import cli

    def walk(group) -> set[str]:
        out: set[str] = set()
        for name in group.list_commands(click.Context(cli)):
            command = group.get_command(click.Context(cli), name)
            out |= walk(command) if isinstance(command, click.Group) else options_of(command)
        return out

    scripts = " ".join(p.read_text() for folder in ("benchmarks", "tools", "examples")
                       for p in (REPO / folder).rglob("*.py"))
    return walk(cli) | set(re.findall(r"[\"'](--[a-z][a-z0-9-]*)[\"']", scripts))


def test_every_option_the_prose_names_exists():
    assert unknown_options("provision create --profile x --check --no-such-flag") == ["--no-such-flag"]
    assert unknown_options("provision simulate quota sett -l eastus") == ["no command 'sett'"]
    assert unknown_options("provision COMMAND --help") == unknown_options("provision slurm ...") == []
    known = every_option()
    for path in DOC_FILES:
        for line, span in code_spans(path.read_text()):
            where = f"{path.relative_to(REPO)}:{line} `{span}`"
            if span.startswith("provision "):
                assert not unknown_options(span), f"{where}: {unknown_options(span)}"
            elif found := re.fullmatch(r"(--[a-z][a-z0-9-]*)(?:[ =].*)?", span):
                assert found.group(1) in known, f"{where}: no command takes {found.group(1)}"


# ------------------------------------------------------------------------------ the library page, offline


def offline() -> list[str]:
    """A prefix that runs a command without any network (a network namespace with nothing in it), where
    this machine can make one; else nothing (the simulated session opens no connection either way)."""
    for prefix in (["unshare", "--net"], ["unshare", "--map-root-user", "--net"]):
        if shutil.which("unshare") and subprocess.run([*prefix, "true"], capture_output=True).returncode == 0:
            return prefix
    return []


@pytest.mark.docs
def test_the_library_pages_first_example_runs_offline(tmp_path):
    """`python -c` of docs/python-api.md's first example, from a clone with a fresh home and no network."""
    page = REPO / "docs" / "python-api.md"
    first = next(b for b in blocks(page.read_text(), "docs/python-api.md") if b.language == "python")
    assert "azgpu.simulated_session()" in first.code  # the simulated session comes first
    shutil.copytree(REPO / "examples", tmp_path / "examples")
    (tmp_path / "home").mkdir()
    env = {"HOME": str(tmp_path / "home"), "PATH": "/usr/bin:/bin", "LANG": "C.UTF-8"}
    done = subprocess.run([*offline(), sys.executable, "-c", first.code], cwd=tmp_path, env=env, capture_output=True,
                          text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-4000:]
    assert done.stdout.startswith("train01-vmss000 [") and done.stdout.count("'10.") == 4, done.stdout
