"""Marketplace terms (Microsoft.MarketplaceOrdering agreements) of the simulated subscription.

Terms are accepted once per subscription and plan (publisher, offer = the plan's product, plan
name), as `az vm image terms accept` does through the Marketplace Ordering API; a fresh
subscription has accepted none. Bodies follow AgreementTerms (Azure/azure-rest-api-specs,
specification/marketplaceordering/.../stable/2021-01-01/Agreements.json).
"""

from __future__ import annotations

from .. import images
from ..errors import NotImplementedInFake
from ..lro import iso
from ..messages import Request
from ..store import Store


def key(publisher: str, offer: str, plan: str) -> str:
    return f"{publisher}/{offer}/{plan}".lower()


def accepted(store: Store, publisher: str, offer: str, plan: str) -> bool:
    return bool(store.agreements.get(key(publisher, offer, plan), {}).get("accepted"))


def set_accepted(store: Store, publisher: str, offer: str, plan: str, value: bool, now: float) -> None:
    store.agreements[key(publisher, offer, plan)] = {"accepted": value, "retrieveDatetime": iso(now) if value else None}


def terms(store: Store, subscription_id: str, publisher: str, offer: str, plan: str, *, current: bool = True) -> dict:
    """The AgreementTerms body for a plan (accepted or not), as GET .../agreements/current answers it."""
    entry = store.agreements.get(key(publisher, offer, plan), {})
    if current:
        rid = (f"/subscriptions/{subscription_id}/providers/Microsoft.MarketplaceOrdering/offerTypes/VirtualMachine"
               f"/publishers/{publisher}/offers/{offer}/plans/{plan}/agreements/current")
        type_ = "Microsoft.MarketplaceOrdering/offertypes"
    else:
        rid = (f"/subscriptions/{subscription_id}/providers/Microsoft.MarketplaceOrdering/agreements/{publisher}"
               f"/offers/{offer}/plans/{plan}")
        type_ = "Microsoft.MarketplaceOrdering/agreements"
    link = f"https://mpcprodsa.blob.core.windows.net/legalterms/{key(publisher, offer, plan).replace('/', '_')}.txt"
    return {
        "id": rid,
        "name": plan,
        "type": type_,
        "properties": {
            "publisher": publisher,
            "product": offer,
            "plan": plan,
            "licenseTextLink": link,
            "privacyPolicyLink": f"https://azure.microsoft.com/support/legal/privacy-statement/{publisher}",
            "marketplaceTermsLink": "https://mpcprodsa.blob.core.windows.net/marketplaceterms/3EDEF_marketplaceterms_VIRTUALMACHINE.txt",
            "retrieveDatetime": entry.get("retrieveDatetime") or iso(0),
            "signature": "AZGPUTESTINGSIMULATEDSIGNATURE",
            "accepted": bool(entry.get("accepted")),
        },
    }


def require_plan(store: Store, req: Request, publisher: str, offer: str, plan: str) -> None:
    """Terms exist for the purchase plans of the fake's images; for anything else the fake knows no
    answer Azure would give, so it fails loudly instead of inventing one."""
    want = (publisher.lower(), offer.lower(), plan.lower())
    for image in (*images.seed_images(), *store.images):
        p = images.plan_of(image)
        if p and (p["publisher"].lower(), p["product"].lower(), p["name"].lower()) == want:
            return
    raise NotImplementedInFake(req.method, req.path, "no marketplace image of the fake has this purchase plan")
