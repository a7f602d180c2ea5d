"""--generate-ssh-keys: an RSA key pair in OpenSSH format where none exists, never overwriting one.

Follows `az vm create --generate-ssh-keys` (azure-cli-core `keys.generate_ssh_keys`): an existing
public key is used as it is; an existing private key without its public half gets the public key
derived from it; otherwise both are created, the directory 0700, the private key 0600 and the public
key 0644. The keys are made with the `cryptography` package (already installed with azure-identity)
rather than the ssh-keygen binary: it works the same on every platform and in tests, and it can read
an existing private key back to derive its public half.
"""

from __future__ import annotations

import os
from pathlib import Path

from .bounded_read import read_bounded

MAX_PRIVATE_KEY = 64 * 1024  # an OpenSSH RSA-16384 private key is about 12 KiB
MAX_PUBLIC_KEY = 16 * 1024  # its public half is about 2.8 KiB
RSA_BITS = 4096  # ssh-keygen -t rsa -b 4096; az generates RSA keys too
COMMENT = "generated-by-azgpu"


class SshKeyError(Exception):
    def __init__(self, message: str, *, code: str = "SSH_KEY_GENERATION_FAILED", remedy: str = ""):
        super().__init__(message)
        self.message, self.code, self.remedy = message, code, remedy


def _read_key(path: Path, limit: int, what: str) -> bytes:
    """A key file, read as every file a user names is: a FIFO would block for ever, /dev/zero fill memory."""
    try:
        raw = read_bounded(path, limit=limit)
    except IsADirectoryError as exc:
        raise SshKeyError(f"'{path}' exists but is {exc.args[0] if exc.args else 'a directory'}, not a {what}",
                          remedy="pass --ssh-key with another path") from None
    if len(raw) > limit:
        raise SshKeyError(f"'{path}' exists but is larger than {limit // 1024} KiB: not a {what}",
                          remedy="pass --ssh-key with another path")
    return raw


def generate(public_path: str | os.PathLike) -> str:
    """The OpenSSH public key at public_path, creating the pair when it is missing; returns the key."""
    public = Path(public_path).expanduser()
    if public.suffix != ".pub":
        raise SshKeyError(f"--ssh-key '{public_path}' must name a .pub file for --generate-ssh-keys",
                          code="INVALID_SSH_KEY_PATH",
                          remedy="pass the public key's path, e.g. --ssh-key ~/.ssh/id_rsa.pub, or drop --ssh-key")
    if public.exists():
        return _read_key(public, MAX_PUBLIC_KEY, "public key").decode("utf-8", "replace").strip()
    private = public.with_suffix("")
    from cryptography.exceptions import UnsupportedAlgorithm
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import rsa

    unreadable = (ValueError, TypeError, UnsupportedAlgorithm)  # encrypted, or not a private key

    try:
        if private.exists():
            # The pair's private half is there: derive its public key, as az does; never replace it.
            raw = _read_key(private, MAX_PRIVATE_KEY, "private key")
            try:
                key = serialization.load_ssh_private_key(raw, password=None)
            except unreadable:
                try:
                    key = serialization.load_pem_private_key(raw, password=None)
                except unreadable as exc:
                    raise SshKeyError(f"'{private}' exists but its public key cannot be derived: {exc}",
                                      remedy=f"write its public key yourself (ssh-keygen -y -f {private} > {public}) "
                                             "or pass --ssh-key with another path") from None
        else:
            if not private.parent.exists():
                private.parent.mkdir(parents=True)
                private.parent.chmod(0o700)
            key = rsa.generate_private_key(public_exponent=65537, key_size=RSA_BITS)
            pem = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.OpenSSH,
                                    serialization.NoEncryption())
            # O_EXCL: a file that appeared meanwhile is never overwritten; 0600 from the first byte.
            fd = os.open(private, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            with os.fdopen(fd, "wb") as fh:
                fh.write(pem)
        text = key.public_key().public_bytes(serialization.Encoding.OpenSSH,
                                             serialization.PublicFormat.OpenSSH).decode() + f" {COMMENT}"
        fd = os.open(public, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
        with os.fdopen(fd, "w") as fh:
            fh.write(text + "\n")
    except OSError as exc:
        raise SshKeyError(f"cannot write SSH keys next to '{public}': {exc.strerror}",
                          remedy="check the directory's permissions, or pass --ssh-key with a writable path") from None
    return text
