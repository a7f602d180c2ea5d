"""Microsoft.ManagedIdentity user-assigned identities (the model behind routes/identity.py): the fake has
the identities a test seeds (seeding.add_identity), and reading one that does not exist is ARM's 404."""

from __future__ import annotations

from .galleries import IDENTITY_TYPE


def get(backend, rg: str, name: str) -> dict:
    return backend.require(f"{backend.rg_id(rg)}/providers/{IDENTITY_TYPE}/{name}")
