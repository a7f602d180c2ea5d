"""Every code block of README.md and of every page under docs/ runs as written; the docs build.

Each file runs against a simulated subscription of its own, its blocks in order. Markdown is read
with a real Markdown parser (markdown-it-py, CommonMark), so the blocks are the ones a reader sees,
and a fence left open (which swallows the rest of the page) fails instead of hiding commands.
These tests are marked `docs` (deselect with -m 'not docs' for a quick local run; CI runs them).

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
# README.md, CONTRIBUTING.md, ARCHITECTURE.md and every page of the guide, pages other contributors add included.
DOC_FILES = [README, REPO / "CONTRIBUTING.md", REPO / "ARCHITECTURE.md", *sorted((REPO / "docs").rglob("*.md"))]
SHELL = {"bash", "sh", "shell", "console"}
OUTPUT = {"", "text", "output"}


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
    # Each file's --simulate lines share one simulated cloud of its own, never the user's.
    monkeypatch.setenv("AZGPU_SIMULATE_STATE", str(tmp_path / "simulate.json"))
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
            assert "Traceback" not in err, f"{block.id}: `{shlex.join(argv)}`:\n{err}"
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
    exec(compile(block.code, f"{block.file}:{block.line}", "exec"), namespace)
    for name in sorted(set(namespace) - before):
        if name.startswith("test_") and callable(namespace[name]):
            namespace[name]()


def run_readme(run, monkeypatch, transcript: list | None = None, path: Path | None = None) -> list[Block]:
    path = path or README
    found = blocks(path.read_text(), path.relative_to(REPO).as_posix() if path.is_relative_to(REPO) else path.name)
    namespace: dict = {"__name__": "readme"}
    for block in found:
        if block.language in SHELL:
            run_shell(block, run, monkeypatch, transcript)
        elif block.language == "python":
            run_python(block, namespace)
        else:
            assert block.language in OUTPUT, f"{block.id}: the harness does not know how to run a {block.language} block"
    return found


def check_readme(azure, transcript) -> None:
    # The first block's simulated cluster (its own state file) was made; the quick start ran.
    first_line, first_out, _ = transcript[0]
    assert "--simulate" in first_line and "demo-vmss000" in first_out
    assert any(line.startswith("provision destroy -n train01") for line, _, _ in transcript)


def check_cli(azure, transcript) -> None:
    clusters = {r["tags"]["azgpu-cluster"] for r in azure.resources(type="Microsoft.Compute/virtualMachineScaleSets")}
    assert "alma01" in clusters and "train01" not in clusters  # the block ends by destroying train01
    assert any(line.startswith("provision check") and "passed" in out for line, out, _ in transcript)
    assert (Path.cwd() / "out" / "a100" / "main.json").is_file()


def check_review(azure, transcript) -> None:
    # What the page says its review commands print is what they print.
    what_if = next(out for line, out, _ in transcript if "--what-if" in line and "--nodes 120" in line)
    what_if = " ".join(what_if.split())  # the summary lines wrap to the terminal's width
    assert "Resource changes: 6 to modify." in what_if  # NSG, NAT gateway and its IP, VNet, 2 scale sets
    assert "Instances to delete: 30 GPU node(s): train01-vmss001_49" in what_if
    assert "now 4,079.55 USD/hour for 150 node(s)" in what_if


def check_ghr(azure, transcript) -> None:
    # Guest Health Reporting: the gate's one bad node reported once, the targeted report, the refusal.
    reports = next(out for line, out, _ in transcript if line.startswith("provision reports -g ghr-rg"))
    rows = [row for row in reports.splitlines() if row.startswith("azgpu-h100-vmss000-0-")]
    assert len(rows) == 1 and "HpcMissingGpu" in rows[0] and "NodeRemovedFromService" in rows[0]
    assert "IBPortDown  filed  NodeRemovedFromService" in next(
        out for line, out, _ in transcript if line.startswith("provision report -n h100") and "--node" in line)
    assert "az provider register" in next(err for line, _, err in transcript if "GHR_NOT_ONBOARDED" in line)


def check_azure_validation(azure, transcript) -> None:
    # The sample output the page shows is what its what-if prints (legend and cost lines left out), and
    # the policy denial names the assignment.
    page = (REPO / "docs" / "azure-validation.md").read_text()
    what_if = next(out for line, out, _ in transcript if "--what-if" in line and "--nodes 3" in line)
    sample = [line for line in next(b.code for b in blocks(page) if b.language == "text").splitlines() if line]
    assert [line for line in what_if.splitlines() if line in sample] == sample
    denied = next(err for line, _, err in transcript if "--dry-run" in line)
    assert "--name no-nd-a100 --scope /subscriptions/" in denied


def check_python_api(azure, transcript) -> None:
    clusters = {r["tags"]["azgpu-cluster"] for r in azure.resources(type="Microsoft.Compute/virtualMachineScaleSets")}
    assert "train01" in clusters


# What some files' blocks must have done, beyond exiting as they say (a harness that ran nothing would
# pass the loop): the file, the languages it must hold, and a check of the outcome.
CHECKS = {"README.md": ({"bash"}, check_readme), "docs/cli.md": ({"bash"}, check_cli),
          "docs/review.md": ({"bash"}, check_review), "docs/guest-health-reporting.md": ({"bash", "python"}, check_ghr),
          "docs/python-api.md": ({"python"}, check_python_api),
          "docs/azure-validation.md": ({"bash", "text"}, check_azure_validation)}


def test_every_checked_file_exists():
    assert {p.relative_to(REPO).as_posix() for p in DOC_FILES} >= set(CHECKS)


@pytest.mark.docs
@pytest.mark.parametrize("path", DOC_FILES, ids=lambda p: p.relative_to(REPO).as_posix())
def test_doc_blocks_run_as_written(path, simulated, run, monkeypatch):
    transcript: list = []
    found = run_readme(run, monkeypatch, transcript, path)
    languages, check = CHECKS.get(path.relative_to(REPO).as_posix(), (set(), None))
    assert {b.language for b in found} >= languages
    if check is not None:
        check(simulated, transcript)


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
        named = set(re.findall(r"# exit \d+: ([A-Z][A-Z0-9]*(?:_[A-Z0-9]+)+)|ERROR: \[([A-Z][A-Z0-9]*(?:_[A-Z0-9]+)+)\]",
                               path.read_text()))
        for code in {c for pair in named for c in pair if c}:
            assert code in known, f"{path.name} names {code}, which no code gives"


# ------------------------------------------------------------------------------ the newcomer's path


QUICK_START = "## Five minutes without Azure"


@pytest.mark.docs
@pytest.mark.slow
def test_the_quick_start_runs_verbatim_in_a_fresh_shell(tmp_path):
    """The README's quick start pasted into bash, from a fresh HOME, in a checkout set up by the
    README's first command (the running interpreter's virtual environment stands for its .venv)."""
    text = README.read_text()
    section = text[text.index(QUICK_START):]
    quick = next(b for b in blocks(section) if b.language == "bash")
    assert quick.code.startswith("source .venv/bin/activate\n")
    assert (Path(sys.prefix) / "bin" / "activate").is_file(), "the tests run from a virtual environment"
    checkout = tmp_path / "checkout"
    checkout.mkdir()
    (checkout / ".venv").symlink_to(sys.prefix)
    shutil.copytree(REPO / "examples", checkout / "examples")
    home = tmp_path / "home"
    home.mkdir()
    env = {"HOME": str(home), "PATH": "/usr/bin:/bin", "LANG": "C.UTF-8", "TERM": "dumb"}
    done = subprocess.run(["bash", "-euo", "pipefail"], input=quick.code, cwd=checkout, env=env, capture_output=True,
                          text=True, timeout=300)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert "Traceback" not in done.stderr
    assert "train01-vmss000" in done.stdout and "slots=8" in done.stdout
    # --generate-ssh-keys made the key in the fresh home and said so.
    assert (home / ".ssh" / "id_rsa").is_file() and str(home / ".ssh" / "id_rsa") in done.stderr
    # The simulated cloud lives in the fresh home's state directory, nowhere else.
    assert list(home.rglob("simulate.json"))
