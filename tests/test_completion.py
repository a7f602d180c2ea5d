"""Shell completion through click's documented mechanism (_PROVISION_COMPLETE), as docs/cli.md shows."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

PROVISION = Path(sys.executable).with_name("provision")


def complete(words: str, shell: str = "bash") -> str:
    env = {**os.environ, "_PROVISION_COMPLETE": f"{shell}_complete", "COMP_WORDS": words,
           "COMP_CWORD": str(len(words.split()) - (0 if words.endswith(" ") else 1))}
    done = subprocess.run([str(PROVISION)], env=env, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    return done.stdout


pytestmark = pytest.mark.skipif(not PROVISION.exists(), reason="needs the installed provision script")


def test_the_activation_script_is_what_click_generates():
    for shell in ("bash", "zsh", "fish"):
        done = subprocess.run([str(PROVISION)], env={**os.environ, "_PROVISION_COMPLETE": f"{shell}_source"},
                              capture_output=True, text=True)
        assert done.returncode == 0 and "_PROVISION_COMPLETE" in done.stdout, (shell, done.stderr)


def test_commands_subcommands_options_and_profiles_complete():
    assert "plain,create" in complete("provision cr").splitlines()
    assert "plain,quota" in complete("provision simulate q").splitlines()
    assert "plain,--profile" in complete("provision create --prof").splitlines()
    assert complete("provision create --profile nd-h").splitlines() == ["plain,nd-h100-v5", "plain,nd-h200-v5"]


@pytest.mark.skipif(shutil.which("bash") is None, reason="no bash")
def test_the_bash_script_loads():
    script = subprocess.run([str(PROVISION)], env={**os.environ, "_PROVISION_COMPLETE": "bash_source"},
                            capture_output=True, text=True).stdout
    done = subprocess.run(["bash", "-c", script + "\ncomplete -p provision"], capture_output=True, text=True)
    assert done.returncode == 0 and "_provision_completion" in done.stdout, done.stderr
