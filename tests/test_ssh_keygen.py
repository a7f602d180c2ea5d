"""--generate-ssh-keys: an RSA key pair where none exists, as az does; never overwriting, private key 0600."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest
from cryptography.hazmat.primitives import serialization

from azgpu.sshkeys import RSA_BITS, SshKeyError, generate


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_keys_are_made_at_id_rsa_when_none_exist(az):
    ssh = Path.home() / ".ssh"
    request = az.request(profile="nd-a100-v4", ssh_key=None, generate_ssh_keys=True)
    private, public = ssh / "id_rsa", ssh / "id_rsa.pub"
    assert private.is_file() and public.is_file()
    assert request.ssh_key == public.read_text().strip() and request.ssh_key.startswith("ssh-rsa ")


def test_the_private_key_is_0600_and_its_directory_0700(az):
    az.request(profile="nd-a100-v4", ssh_key=None, generate_ssh_keys=True)
    ssh = Path.home() / ".ssh"
    assert _mode(ssh / "id_rsa") == 0o600 and _mode(ssh) == 0o700


def test_the_pair_is_a_4096_bit_rsa_key_in_openssh_format(az):
    az.request(profile="nd-a100-v4", ssh_key=None, generate_ssh_keys=True)
    ssh = Path.home() / ".ssh"
    key = serialization.load_ssh_private_key((ssh / "id_rsa").read_bytes(), password=None)
    assert key.key_size == RSA_BITS == 4096
    derived = key.public_key().public_bytes(serialization.Encoding.OpenSSH, serialization.PublicFormat.OpenSSH).decode()
    assert (ssh / "id_rsa.pub").read_text().startswith(derived)


def test_the_generated_key_validates_for_create(az):
    spec = az.spec("create", profile="nd-a100-v4", ssh_key=None, generate_ssh_keys=True, resource_group="rg")
    assert spec.request.ssh_key.startswith("ssh-rsa ")


def test_an_existing_key_is_used_and_nothing_is_generated(az, ssh_key):
    ssh = Path.home() / ".ssh"
    ssh.mkdir(mode=0o700)
    (ssh / "id_ed25519.pub").write_text(ssh_key + "\n")
    request = az.request(profile="nd-a100-v4", ssh_key=None, generate_ssh_keys=True)
    assert request.ssh_key == ssh_key
    assert not (ssh / "id_rsa").exists()


def test_a_given_public_key_path_that_exists_is_left_alone(az, ssh_key_file):
    before = Path(ssh_key_file).read_text()
    request = az.request(profile="nd-a100-v4", ssh_key=ssh_key_file, generate_ssh_keys=True)
    assert Path(ssh_key_file).read_text() == before and request.ssh_key == before.strip()


def test_a_missing_public_key_at_a_given_path_is_generated_there(az, tmp_path):
    target = tmp_path / "keys" / "cluster.pub"
    request = az.request(profile="nd-a100-v4", ssh_key=str(target), generate_ssh_keys=True)
    assert request.ssh_key == target.read_text().strip() and (tmp_path / "keys" / "cluster").is_file()


def test_a_private_key_without_its_public_half_gets_it_derived_not_replaced(tmp_path):
    private = tmp_path / "id_rsa"
    generate(tmp_path / "id_rsa.pub")
    original = private.read_bytes()
    (tmp_path / "id_rsa.pub").unlink()
    text = generate(tmp_path / "id_rsa.pub")
    assert private.read_bytes() == original
    key = serialization.load_ssh_private_key(original, password=None)
    assert text.split()[1] == key.public_key().public_bytes(
        serialization.Encoding.OpenSSH, serialization.PublicFormat.OpenSSH).decode().split()[1]


def test_an_encrypted_private_key_is_not_guessed_at(tmp_path):
    from cryptography.hazmat.primitives.asymmetric import ed25519

    key = ed25519.Ed25519PrivateKey.generate()
    (tmp_path / "id_rsa").write_bytes(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                                        serialization.BestAvailableEncryption(b"pw")))
    with pytest.raises(SshKeyError) as info:
        generate(tmp_path / "id_rsa.pub")
    assert "ssh-keygen -y" in info.value.remedy and not (tmp_path / "id_rsa.pub").exists()


@pytest.mark.parametrize("kind", ["fifo", "zero", "directory"])
def test_a_private_half_that_is_no_file_is_refused_without_waiting_or_reading_it_all(tmp_path, kind):
    """The private half beside a missing .pub is read to derive its public key: a FIFO nobody writes to blocked
    for ever, /dev/zero was read until memory ran out. Read as every other user file is (bounded_read)."""
    private = _no_file(tmp_path / "id_rsa", kind)
    error = _refusal_within_10s(tmp_path / "id_rsa.pub")
    assert str(private) in error.message and not (tmp_path / "id_rsa.pub").exists()


@pytest.mark.parametrize("kind", ["fifo", "zero", "directory"])
def test_a_public_half_that_is_no_file_is_refused_without_waiting(tmp_path, kind):
    """An existing .pub is the key itself: a FIFO there blocked sshkeys.generate for ever (read_text)."""
    public = _no_file(tmp_path / "id_rsa.pub", kind)
    error = _refusal_within_10s(public)
    assert str(public) in error.message and not (tmp_path / "id_rsa").exists()


def _no_file(path, kind):
    if kind == "fifo":
        os.mkfifo(path)
    elif kind == "zero":
        path.symlink_to("/dev/zero")
    else:
        path.mkdir()
    return path


def _refusal_within_10s(public):
    import threading

    outcome: list = []

    def run():
        try:
            generate(public)
        except SshKeyError as exc:
            outcome.append(exc)

    worker = threading.Thread(target=run, daemon=True)
    worker.start()
    worker.join(10)
    assert not worker.is_alive(), "still reading the key"
    (error,) = outcome
    return error


def test_a_path_that_is_not_a_pub_file_is_refused(az, tmp_path):
    f = az.only(az.errors(profile="nd-a100-v4", ssh_key=str(tmp_path / "cluster_key"), generate_ssh_keys=True),
                "INVALID_SSH_KEY_PATH")
    assert ".pub" in f.remedy and not (tmp_path / "cluster_key").exists()


def test_without_the_flag_nothing_is_written(az):
    az.findings("create", profile="nd-a100-v4", ssh_key=None, resource_group="rg")
    assert not (Path.home() / ".ssh").exists()


def test_cli_generate_ssh_keys(run, tmp_path):
    rc, _, err = run("render", "--profile", "nd-a100-v4", "-n", "demo", "-l", "eastus", "--generate-ssh-keys",
                     "--out-dir", tmp_path, "-o", "none")
    assert rc == 0, err
    public = (Path.home() / ".ssh" / "id_rsa.pub").read_text().strip()
    assert public in (tmp_path / "main.parameters.json").read_text()
    assert os.stat(Path.home() / ".ssh" / "id_rsa").st_mode & 0o077 == 0


def test_a_cluster_file_can_ask_for_keys_at_its_own_path(tmp_path):
    from azgpu.request import build_request, read_cluster_file

    target = tmp_path / "cluster.pub"
    (tmp_path / "cluster.toml").write_text(f'profile = "nd-a100-v4"\nssh-key = "{target}"\ngenerate-ssh-keys = true\n')
    request = build_request(read_cluster_file(str(tmp_path / "cluster.toml")))
    assert request.ssh_key == target.read_text().strip() and (tmp_path / "cluster").is_file()


def test_the_files_written_are_announced_once(run, tmp_path):
    rc, _, err = run("render", "--profile", "nd-a100-v4", "-n", "demo", "-l", "eastus", "--generate-ssh-keys",
                     "--out-dir", tmp_path, "-o", "none")
    private = Path.home() / ".ssh" / "id_rsa"
    assert rc == 0 and f"WARNING: [SSH_KEYS_GENERATED] --generate-ssh-keys wrote {private} (private key, mode 0600) " \
                       f"and {private}.pub" in err
    # The next run finds the key and writes (and says) nothing.
    rc, _, err = run("render", "--profile", "nd-a100-v4", "-n", "demo", "-l", "eastus", "--generate-ssh-keys",
                     "--out-dir", tmp_path, "-o", "none")
    assert rc == 0 and "SSH_KEYS_GENERATED" not in err
