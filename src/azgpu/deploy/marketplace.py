"""Marketplace terms of an image's purchase plan, through the Marketplace Ordering API.

Terms are accepted once per subscription and plan; without them Azure refuses a deployment of the
image (MarketplacePurchaseEligibilityFailed). `az vm image terms show/accept` use the same calls:
GET and PUT of offerTypes/virtualmachine/publishers/{publisher}/offers/{product}/plans/{plan}/
agreements/current, api-version 2021-01-01 (Azure/azure-rest-api-specs, specification/
marketplaceordering/.../stable/2021-01-01/Agreements.json).
"""

from __future__ import annotations

from typing import Any

from ..images import PurchasePlan

OFFER_TYPE = "virtualmachine"  # the only offer type the API defines


def terms(session, plan: PurchasePlan) -> Any:
    """The plan's AgreementTerms for this subscription (.accepted says whether they are accepted)."""
    return session.marketplace.marketplace_agreements.get(offer_type=OFFER_TYPE, publisher_id=plan.publisher,
                                                          offer_id=plan.product, plan_id=plan.name)


def accept_terms(session, plan: PurchasePlan) -> Any:
    """Accept the plan's terms for this subscription, as `az vm image terms accept` does: the current
    terms sent back with accepted set."""
    current = terms(session, plan)
    current.accepted = True
    return session.marketplace.marketplace_agreements.create(offer_type=OFFER_TYPE, publisher_id=plan.publisher,
                                                             offer_id=plan.product, plan_id=plan.name,
                                                             parameters=current)
