"""What azgpu accepts from one node before writing it onto another: the NCCL check's public key.

The launcher's key goes into every other node's authorized_keys. A compromised launcher could answer
with a second line (a key without from= or expiry), options, or another comment that cleanup would not
find; so the key must be exactly one OpenSSH ed25519 public key line as nccl-keygen writes it
(RFC 4253/8709 wire format: string "ssh-ed25519", string of 32 bytes), comment azgpu-nccl.
"""

from __future__ import annotations

import base64
import binascii
import re

COMMENT = "azgpu-nccl"
_LINE = re.compile(r"ssh-ed25519 (?P<blob>[A-Za-z0-9+/]{40,200}={0,2}) azgpu-nccl")


def valid_nccl_pubkey(value: object) -> bool:
    if not isinstance(value, str):
        return False
    match = _LINE.fullmatch(value)
    if match is None:
        return False
    try:
        blob = base64.b64decode(match.group("blob"), validate=True)
    except (binascii.Error, ValueError):
        return False
    name = b"ssh-ed25519"
    return blob == (len(name).to_bytes(4, "big") + name + (32).to_bytes(4, "big") + blob[-32:]) and len(blob) == 51
