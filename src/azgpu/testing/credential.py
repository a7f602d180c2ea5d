"""A credential for the fake: satisfies the SDK's bearer-token policy and never contacts anything."""

from __future__ import annotations

from typing import Any

from azure.core.credentials import AccessToken, AccessTokenInfo

# Far enough ahead that the token policy never tries to refresh during a test or a simulation.
_EXPIRES_ON = 4102444800  # 2100-01-01T00:00:00Z


class FakeCredential:
    """Stands in for DefaultAzureCredential; implements TokenCredential and SupportsTokenInfo."""

    def __init__(self, token: str = "fake"):
        self.token = token
        self.scopes: list[tuple[str, ...]] = []  # what the SDK asked tokens for

    def get_token(self, *scopes: str, **kwargs: Any) -> AccessToken:
        self.scopes.append(scopes)
        return AccessToken(self.token, _EXPIRES_ON)

    def get_token_info(self, *scopes: str, options: Any = None) -> AccessTokenInfo:
        self.scopes.append(scopes)
        return AccessTokenInfo(self.token, _EXPIRES_ON)

    def close(self) -> None:
        pass

    def __enter__(self) -> FakeCredential:
        return self

    def __exit__(self, *exc: object) -> None:
        pass
