"""docs/capacity.md's bash blocks run as written, in order, in simulation (the conventions of
tests/test_readme.py: a line exits 0 unless it ends in `# exit N: CODE`; ~ is a home holding
~/.ssh/id_ed25519.pub; --simulate lines run without simulated latency)."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

from azgpu.cli import main

DOC = Path(__file__).resolve().parents[1] / "docs" / "capacity.md"
KEY = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIJOgAYClhajeh3m7rJp5Bf+XHzOywcIepjITM9B6OJMg azgpu-test"
EXIT = re.compile(r"#\s*exit (\d+): ([A-Z_]+)\s*$")


def lines() -> list[str]:
    text = DOC.read_text()
    return [line for block in re.findall(r"^```bash\n(.*?)^```", text, re.M | re.S) for line in block.splitlines()
            if line.strip()]


def test_every_bash_line_runs_as_written(tmp_path, monkeypatch, capsys):
    home = tmp_path / "home"
    (home / ".ssh").mkdir(parents=True)
    (home / ".ssh" / "id_ed25519.pub").write_text(KEY)
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("AZGPU_SIMULATE_STATE", str(tmp_path / "sim.json"))
    monkeypatch.setenv("AZGPU_PRICES", "off")
    assert lines(), "the page holds commands"
    for line in lines():
        expected, code = 0, None
        if match := EXIT.search(line):
            expected, code = int(match.group(1)), match.group(2)
            line = line[:match.start()]
        argv = [a.replace("~", str(home), 1) if a.startswith("~") else a for a in shlex.split(line)]
        assert argv[0] == "provision", line
        argv = argv[1:] + (["--simulate-latency", "0"] if "--simulate" in argv else [])
        capsys.readouterr()
        rc = main(argv)
        err = capsys.readouterr().err
        assert rc == expected, f"{line}: exit {rc}\n{err}"
        if code:
            assert f"[{code}]" in err, f"{line}: {err}"
