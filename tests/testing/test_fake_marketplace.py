"""Marketplace images with a purchase plan: the agreements API, and what a scale-set PUT needs."""

from __future__ import annotations

import pytest
from azure.core.exceptions import HttpResponseError
from azure.mgmt.marketplaceordering import MarketplaceOrderingAgreements
from fake_azure_support import RG, create_vmss, vmss_body

from azgpu.testing import FakeAzure, FakeCredential, NotImplementedInFake

ALMA = {"publisher": "almalinux", "offer": "almalinux-hpc", "sku": "8_10-hpc-gen2", "version": "latest"}
PLAN = {"publisher": "almalinux", "product": "almalinux-hpc", "name": "8_10-hpc-gen2"}
VMSS = "Microsoft.Compute/virtualMachineScaleSets"


@pytest.fixture
def agreements(azure):
    return MarketplaceOrderingAgreements(FakeCredential(), azure.subscription_id).marketplace_agreements


def _terms(agreements):
    return agreements.get(offer_type="virtualmachine", publisher_id="almalinux", offer_id="almalinux-hpc",
                          plan_id="8_10-hpc-gen2")


def _plan_body(network, plan=PLAN):
    body = vmss_body(network["subnet"], image=ALMA)
    if plan:
        body["plan"] = plan
    return body


def _refused(clients, body) -> HttpResponseError:
    with pytest.raises(HttpResponseError) as err:
        clients.compute.virtual_machine_scale_sets.begin_create_or_update(RG, "vmss", body)
    return err.value


def test_terms_of_a_fresh_subscription_are_not_accepted(agreements):
    terms = _terms(agreements)
    assert (terms.accepted, terms.publisher, terms.product, terms.plan) == (False, "almalinux", "almalinux-hpc",
                                                                            "8_10-hpc-gen2")


def test_accepting_through_the_api_as_az_does(azure, agreements):
    terms = _terms(agreements)
    terms.accepted = True
    agreements.create(offer_type="virtualmachine", publisher_id="almalinux", offer_id="almalinux-hpc",
                      plan_id="8_10-hpc-gen2", parameters=terms)
    assert _terms(agreements).accepted is True
    assert azure.terms_accepted("almalinux", "almalinux-hpc", "8_10-hpc-gen2")


def test_sign_and_cancel_accept_and_revoke(azure, agreements):
    agreements.sign(publisher_id="almalinux", offer_id="almalinux-hpc", plan_id="8_10-hpc-gen2")
    assert azure.terms_accepted("almalinux", "almalinux-hpc", "8_10-hpc-gen2")
    agreements.cancel(publisher_id="almalinux", offer_id="almalinux-hpc", plan_id="8_10-hpc-gen2")
    assert not azure.terms_accepted("almalinux", "almalinux-hpc", "8_10-hpc-gen2")


def test_accept_terms_method(azure, agreements):
    azure.accept_terms("almalinux", "almalinux-hpc", "8_10-hpc-gen2")
    assert _terms(agreements).accepted is True


def test_terms_of_a_plan_no_image_has_fail_loudly(agreements):
    with pytest.raises(NotImplementedInFake):
        agreements.get(offer_type="virtualmachine", publisher_id="nobody", offer_id="nothing", plan_id="none")


def test_acceptance_survives_in_the_state_file(tmp_path):
    state = tmp_path / "state.json"
    with FakeAzure(state_file=state) as first:
        first.accept_terms("almalinux", "almalinux-hpc", "8_10-hpc-gen2")
    with FakeAzure.load(state) as second:
        assert second.terms_accepted("almalinux", "almalinux-hpc", "8_10-hpc-gen2")


def test_scale_set_of_a_plan_image_without_plan_is_refused(azure, clients, network):
    azure.accept_terms("almalinux", "almalinux-hpc", "8_10-hpc-gen2")
    err = _refused(clients, _plan_body(network, plan=None))
    assert (err.status_code, err.error.code) == (400, "VMMarketplaceInvalidInput")
    assert "requires Plan information in the request" in err.error.message
    assert azure.resources(type=VMSS) == []


def test_scale_set_with_unaccepted_terms_is_refused(azure, clients, network):
    err = _refused(clients, _plan_body(network))
    assert (err.status_code, err.error.code) == (400, "MarketplacePurchaseEligibilityFailed")
    assert "You have not accepted the legal terms on this subscription" in err.error.details[0].message
    assert azure.resources(type=VMSS) == []


def test_scale_set_with_plan_and_accepted_terms_is_created_with_its_plan(azure, clients, network):
    azure.accept_terms("almalinux", "almalinux-hpc", "8_10-hpc-gen2")
    vmss = clients.compute.virtual_machine_scale_sets.begin_create_or_update(RG, "vmss", _plan_body(network)).result()
    assert (vmss.provisioning_state, vmss.plan.name) == ("Succeeded", "8_10-hpc-gen2")


def test_image_without_plan_needs_no_terms(clients, network):
    assert create_vmss(clients, network).provisioning_state == "Succeeded"  # ubuntu-hpc: no plan
