"""Microsoft.Resources providers: a resource provider's registration state (the model behind
routes/providers.py). The fake models the registration of the providers that name themselves here
(Microsoft.Impact, for Guest Health Reporting's onboarding); their own models say what they offer.
"""

from __future__ import annotations

from typing import Any

from ..errors import ArmError
from ..store import Store


def registration_state(store: Store, namespace: str) -> str:
    return store.providers.get(namespace.lower(), "Registered")


def provider_body(store: Store, subscription: str, namespace: str, resource_types: tuple[str, ...],
                  api_versions: list[str]) -> dict[str, Any]:
    """Providers - Get, in the spec's Provider shape (GetProviders.json, 2024-11-01)."""
    return {
        "id": f"/subscriptions/{subscription}/providers/{namespace}",
        "namespace": namespace,
        "registrationState": registration_state(store, namespace),
        "registrationPolicy": "RegistrationRequired",
        "resourceTypes": [{"resourceType": t, "locations": [], "apiVersions": list(api_versions),
                           "capabilities": "None"} for t in resource_types],
    }


def not_registered(namespace: str) -> ArmError:
    # Learn, "Resolve errors for resource provider registration": MissingSubscriptionRegistration.
    message = (f"The subscription is not registered to use namespace '{namespace}'. See https://aka.ms/rps-not-found "
               "for how to register subscriptions.")
    return ArmError(409, "MissingSubscriptionRegistration", message,
                    details=[{"code": "MissingSubscriptionRegistration", "target": namespace, "message": message}])
