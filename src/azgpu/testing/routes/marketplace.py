"""Microsoft.MarketplaceOrdering: the marketplace terms (agreements) of image purchase plans.

GET and PUT of .../offerTypes/virtualmachine/.../agreements/current are what `az vm image terms
show` and `az vm image terms accept` send (the PUT carries the GET's body with accepted: true);
sign and cancel are the older accept and revoke calls of the same API (2021-01-01).
"""

from __future__ import annotations

from ..errors import NotImplementedInFake
from ..models import marketplace
from . import SUB, Response, route

# The REST api-version whose shapes these routes answer in (Microsoft.MarketplaceOrdering Agreements).
API_VERSION = "2021-01-01"

PROVIDER = SUB + r"/providers/Microsoft\.MarketplaceOrdering"
PLAN_PATH = r"/publishers/(?P<publisher>[^/]+)/offers/(?P<offer>[^/]+)/plans/(?P<plan>[^/]+)"
CURRENT = PROVIDER + r"/offerTypes/(?P<offer_type>[^/]+)" + PLAN_PATH + r"/agreements/current"
AGREEMENT = PROVIDER + r"/agreements/(?P<publisher>[^/]+)/offers/(?P<offer>[^/]+)/plans/(?P<plan>[^/]+)"


def _check_offer_type(req, offer_type: str) -> None:
    if offer_type.lower() != "virtualmachine":  # the only offer type the API has (Agreements.json, OfferType)
        raise NotImplementedInFake(req.method, req.path, f"offer type {offer_type!r}")


@route("GET", CURRENT)
def get_terms(backend, req, sub, offer_type, publisher, offer, plan):
    _check_offer_type(req, offer_type)
    marketplace.require_plan(backend.store, req, publisher, offer, plan)
    return Response(200, marketplace.terms(backend.store, sub, publisher, offer, plan))


@route("PUT", CURRENT)
def put_terms(backend, req, sub, offer_type, publisher, offer, plan):
    _check_offer_type(req, offer_type)
    marketplace.require_plan(backend.store, req, publisher, offer, plan)
    accepted = bool(((req.body or {}).get("properties") or {}).get("accepted"))
    marketplace.set_accepted(backend.store, publisher, offer, plan, accepted, backend.now())
    backend.dirty = True
    return Response(200, marketplace.terms(backend.store, sub, publisher, offer, plan))


@route("GET", AGREEMENT)
def get_agreement(backend, req, sub, publisher, offer, plan):
    marketplace.require_plan(backend.store, req, publisher, offer, plan)
    return Response(200, marketplace.terms(backend.store, sub, publisher, offer, plan, current=False))


def _sign_or_cancel(backend, req, sub, publisher, offer, plan, value: bool) -> Response:
    marketplace.require_plan(backend.store, req, publisher, offer, plan)
    marketplace.set_accepted(backend.store, publisher, offer, plan, value, backend.now())
    backend.dirty = True
    return Response(200, marketplace.terms(backend.store, sub, publisher, offer, plan, current=False))


@route("POST", AGREEMENT + r"/sign")
def sign(backend, req, sub, publisher, offer, plan):
    return _sign_or_cancel(backend, req, sub, publisher, offer, plan, True)


@route("POST", AGREEMENT + r"/cancel")
def cancel(backend, req, sub, publisher, offer, plan):
    return _sign_or_cancel(backend, req, sub, publisher, offer, plan, False)
