"""Conformance with Azure's published examples (tests/fixtures/azure, each with its source).

Two checks per call. Replay: the example's response body is served through `responses` for that
one call, under the real SDK, and azgpu's own preflight or deployer reads it: the assertion is what
azgpu concludes. Shape: the fake's answer to the same call has the example's shape (the keys both
have carry values of the same JSON type; keys only one side has are listed, with why, below).
"""

from __future__ import annotations

import json
import re
from contextlib import contextmanager
from pathlib import Path

import pytest
import requests
import responses
from deploy_support import LOCATION, RG, request
from msgspec import structs

from azgpu import resource_types
from azgpu.deploy import preflight
from azgpu.deploy.deployer import Deployer
from azgpu.deploy.marketplace import terms
from azgpu.deploy.session import Session
from azgpu.images import PurchasePlan
from azgpu.plan import build_plan
from azgpu.spec import validate
from azgpu.testing import FakeCredential

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "azure"
SUB = "00000000-0000-0000-0000-000000000000"
ARM = "https://management.azure.com"


def example(name: str) -> dict:
    return json.loads((FIXTURES / f"{name}.json").read_text())


def body(name: str, status: str = "200"):
    return example(name)["responses"][status]["body"]


@pytest.fixture
def live():
    """A Session against nothing but what a test serves: any other request fails, none goes out."""
    return Session(SUB, FakeCredential(), polling_interval=0)


@contextmanager
def serving(method: str, path: str, payload, status: int = 200):
    with responses.RequestsMock(assert_all_requests_are_fired=True) as mock:
        mock.add(method, re.compile(re.escape(ARM) + path + r"(\?.*)?$"), json=payload, status=status)
        yield mock


def spec(**values):
    return validate(request(**values), command="create")


# -- shape comparison ----------------------------------------------------------------------------

def _type(value) -> str:
    return {bool: "bool", int: "number", float: "number", str: "string", type(None): "null"}.get(type(value),
                                                                                                 type(value).__name__)


def _merged(items: list) -> object:
    """The shape of a list's elements: dicts merged key by key, so every key any element has is checked."""
    dicts = [i for i in items if isinstance(i, dict)]
    if dicts and len(dicts) == len(items):
        out: dict = {}
        for d in dicts:
            for k, v in d.items():
                out.setdefault(k, []).append(v)
        return {k: _merged(v) if all(isinstance(x, (dict, list)) for x in v) and len(v) > 1 else v[0]
                for k, v in out.items()}
    return items[0]


def shape_differences(real, fake, *, only_real: set[str] = frozenset(), only_fake: set[str] = frozenset(),
                      path: str = "") -> list[str]:
    """Where the fake's answer differs in shape from the real one; keys in only_real/only_fake (paths
    such as 'value[].restrictions') may be missing on one side."""
    if isinstance(real, dict) and isinstance(fake, dict):
        out = []
        for key in real.keys() | fake.keys():
            sub = f"{path}.{key}" if path else key
            if key not in fake:
                out += [] if sub in only_real else [f"{sub}: only in Azure's example"]
            elif key not in real:
                out += [] if sub in only_fake else [f"{sub}: only in the fake's answer"]
            else:
                out += shape_differences(real[key], fake[key], only_real=only_real, only_fake=only_fake, path=sub)
        return out
    if isinstance(real, list) and isinstance(fake, list):
        if not real or not fake:
            return []
        model = _merged(real)
        return [d for item in fake for d in shape_differences(model, item, only_real=only_real, only_fake=only_fake,
                                                             path=f"{path}[]")]
    if _type(real) != _type(fake):
        return [f"{path}: {_type(real)} in Azure's example, {_type(fake)} in the fake's answer"]
    return []


def test_the_shape_comparison_notices_a_difference():
    assert sorted(shape_differences({"a": [{"b": "1"}]}, {"a": [{"b": 1}], "c": 2})) == [
        "a[].b: string in Azure's example, number in the fake's answer", "c: only in the fake's answer"]


def fake_get(azure, path: str, api_version: str, **params) -> object:
    """The fake's answer on the wire (no SDK model in between)."""
    return requests.get(f"{ARM}/subscriptions/{azure.subscription_id}{path}",
                        params={"api-version": api_version, **params}, timeout=5).json()


# -- resource SKUs ---------------------------------------------------------------------------------

SKUS = "compute/ListAvailableResourceSkusForARegion"


def test_replayed_sku_list_is_read_with_its_zones_and_capabilities(live):
    # The example lists Standard_A0 and Standard_A1 in westus; stand one in for the profile's size.
    s = spec(location="westus", spot=True)
    s = structs.replace(s, size=structs.replace(s.size, name="Standard_A0"))
    pf = preflight.Preflight()
    with serving("GET", r"/subscriptions/[^/]+/providers/Microsoft\.Compute/skus", body(SKUS)):
        preflight.check_sku(pf, s, list(live.compute.resource_skus.list(filter="location eq 'westus'")))
    codes = {f.code for f in pf.findings}
    assert pf.zones == ["1", "2"]  # listed as ["2", "1"]
    # A0 is Gen1 only, without accelerated networking or spot: the live values win over the profile's.
    assert {"IMAGE_GENERATION", "SPOT_NOT_CAPABLE", "SKU_DRIFT"} <= codes
    assert pf.overrides == {"accelerated_networking": False}
    assert pf.family == "standardA0_A7Family"


def test_replayed_sku_list_without_the_size_is_not_offered(live):
    pf = preflight.Preflight()
    with serving("GET", r"/subscriptions/[^/]+/providers/Microsoft\.Compute/skus", body(SKUS)):
        preflight.check_sku(pf, spec(location="westus"),
                            list(live.compute.resource_skus.list(filter="location eq 'westus'")))
    assert [f.code for f in pf.findings] == ["SKU_NOT_OFFERED"]


def test_fake_sku_list_has_the_examples_shape(azure):
    fake = fake_get(azure, "/providers/Microsoft.Compute/skus", "2021-07-01",
                    **{"$filter": f"location eq '{LOCATION}'"})
    assert shape_differences(body(SKUS), fake, only_real={
        "nextLink",  # a last page may leave it out; the fake never pages
        "value[].locationInfo[].zoneDetails",  # per-zone capabilities: the fake serves them only where recorded
    }, only_fake={
        "value[].restrictions",  # in the spec (ResourceSku.restrictions); this example has no restricted size
    }) == []


# -- usages --------------------------------------------------------------------------------------

USAGES = "compute/Usage_List_MaximumSet_Gen"


def _first_usage_page(live):
    # The example's nextLink (a://example.com/...) is a placeholder the pager cannot follow.
    with serving("GET", r"/subscriptions/[^/]+/providers/Microsoft\.Compute/locations/[^/]+/usages", body(USAGES)):
        return list(next(live.compute.usage.list(LOCATION).by_page()))


def test_replayed_usages_without_the_family_leave_the_quota_unknown(live):
    pf = preflight.Preflight()
    preflight.check_quota(pf, spec(), _first_usage_page(live), 192)
    assert [(f.code, f.severity) for f in pf.findings] == [("QUOTA_UNKNOWN", "warning")] * 2


def test_replayed_usage_of_the_family_reads_value_limit_and_usage_name(live):
    pf = preflight.Preflight(family="aaaaaaaaaaaaaaaaaa")  # the example's family name
    preflight.check_quota(pf, spec(), _first_usage_page(live), 192)
    line = pf.quota[0]
    # Named by name.value (the example's 18 a's), as every quota azgpu shows, not localizedValue (14 a's).
    assert (line.name, line.usage, line.limit, line.ok) == ("aaaaaaaaaaaaaaaaaa", 17, 19, False)
    assert "request an increase to 209" in next(f for f in pf.findings if f.code == "QUOTA_INSUFFICIENT").remedy


def test_fake_usages_have_the_examples_shape(azure):
    fake = fake_get(azure, f"/providers/Microsoft.Compute/locations/{LOCATION}/usages", "2026-04-01")
    assert shape_differences(body(USAGES), fake, only_real={"nextLink"}) == []


# -- marketplace images ----------------------------------------------------------------------------

IMAGE_LIST = "compute/VirtualMachineImage_List_MinimumSet_Gen"
IMAGE_GET = "compute/VirtualMachineImage_Get_MaximumSet_Gen"
VERSIONS = (r"/subscriptions/[^/]+/providers/Microsoft\.Compute/locations/[^/]+/publishers/[^/]+/artifacttypes/vmimage"
            r"/offers/[^/]+/skus/[^/]+/versions")


def test_replayed_version_list_is_a_bare_array_azgpu_picks_from(live):
    with serving("GET", VERSIONS, body(IMAGE_LIST)):
        versions = list(live.compute.virtual_machine_images.list(LOCATION, "p", "o", "s"))
    assert preflight.latest_version(versions) == "aaaaaaaa"
    pf = preflight.Preflight()
    preflight.check_image(pf, spec(), versions, None)
    assert pf.findings == []


def test_replayed_image_is_read_for_generation_deprecation_and_plan(live):
    with serving("GET", VERSIONS + "/[^/]+", body(IMAGE_GET)):
        detail = live.compute.virtual_machine_images.get(LOCATION, "p", "o", "s", "v")
    pf = preflight.Preflight()
    preflight.check_image(pf, spec(), [detail], detail)  # nd-a100-v4 with ubuntu-hpc-2204, a Gen2 image without plan
    by_code = {f.code: f for f in pf.findings}
    assert set(by_code) == {"IMAGE_GENERATION", "IMAGE_DEPRECATION_SCHEDULED", "IMAGE_PLAN_DIFFERS"}
    assert "2023-01-13" in by_code["IMAGE_DEPRECATION_SCHEDULED"].message
    assert "offer 'aaaaaaa'" in by_code["IMAGE_DEPRECATION_SCHEDULED"].remedy
    assert pf.plan == PurchasePlan(publisher="aaaaaaaaaaaaaaaaaaa", product="aaaaaaaaaaaaaa", name="aaaaaaaaa")


def test_fake_version_list_has_the_examples_shape(azure):
    fake = fake_get(azure, f"/providers/Microsoft.Compute/locations/{LOCATION}/publishers/microsoft-dsvm/artifacttypes"
                           "/vmimage/offers/ubuntu-hpc/skus/2204/versions", "2026-04-01")
    assert isinstance(fake, list) and shape_differences(body(IMAGE_LIST), fake) == []


@pytest.mark.parametrize("urn", ["almalinux:almalinux-hpc:8_10-hpc-gen2:8.10.2026072901",
                                 "OpenLogic:CentOS-HPC:7_9-gen2:7.9.2022040101"], ids=["with plan", "deprecated"])
def test_fake_image_has_the_examples_shape(azure, urn):
    publisher, offer, sku, version = urn.split(":")
    fake = fake_get(azure,
                    f"/providers/Microsoft.Compute/locations/{LOCATION}/publishers/{publisher}/artifacttypes/vmimage"
                           f"/offers/{offer}/skus/{sku}/versions/{version}", "2026-04-01")
    assert shape_differences(body(IMAGE_GET), fake, only_real={
        "tags", "extendedLocation",  # the fake's images have no tags and no edge-zone location
        "properties.plan",  # only images with a purchase plan carry one
        "properties.imageDeprecationStatus.alternativeOption",  # only for a deprecation
        "properties.imageDeprecationStatus.scheduledDeprecationTime",
    }, only_fake={
        "properties.architecture",  # in the spec (VirtualMachineImageProperties.architecture); not in this example
        "properties.osDiskImage.sizeInGb",  # not in the spec's OSDiskImage, but real answers carry it (recorded
                                            # `az vm image show` outputs in public code)
    }) == []


# -- marketplace terms -----------------------------------------------------------------------------

TERMS = "marketplaceordering/GetMarketplaceTerms"
AGREEMENT = (r"/subscriptions/[^/]+/providers/Microsoft\.MarketplaceOrdering/offerTypes/virtualmachine/publishers/[^/]+"
             r"/offers/[^/]+/plans/[^/]+/agreements/current")


def test_replayed_accepted_terms_let_the_preflight_pass(live):
    pf = preflight.Preflight(plan=PurchasePlan("pubid", "offid", "planid"))
    with serving("GET", AGREEMENT, body(TERMS)):
        preflight.check_terms(pf, spec(), terms(live, pf.plan))
    assert pf.findings == [] and pf.accept_terms is None


def test_fake_terms_have_the_examples_shape(azure):
    fake = fake_get(azure, "/providers/Microsoft.MarketplaceOrdering/offerTypes/virtualmachine/publishers/almalinux"
                           "/offers/almalinux-hpc/plans/8_10-hpc-gen2/agreements/current", "2021-01-01")
    assert shape_differences(body(TERMS), fake) == []


# -- scale sets ------------------------------------------------------------------------------------

CREATE_WITH_PLAN = "compute/VirtualMachineScaleSet_Create_WithAMarketplaceImagePlan"
GET_VMSS = "compute/VirtualMachineScaleSet_Get_WithUserData"
VMSS_PATH = r"/subscriptions/[^/]+/resourceGroups/[^/]+/providers/Microsoft\.Compute/virtualMachineScaleSets/[^/]+"


def test_azgpu_sends_the_plan_where_the_example_does(live):
    plan = build_plan(spec(image="almalinux-hpc-8-10"))
    deployer = Deployer(live, plan, RG)
    with serving("PUT", VMSS_PATH, body(CREATE_WITH_PLAN, "201"), status=201) as mock:
        deployer.begin_put(plan.scale_sets[0], wait=False).result()
        sent = json.loads(mock.calls[0].request.body)
    published = example(CREATE_WITH_PLAN)["parameters"]["parameters"]
    assert set(sent["plan"]) == set(published["plan"])  # a top-level plan: publisher, product, name
    assert "plan" not in sent["properties"]


def test_replayed_scale_set_in_lower_case_succeeded_counts_as_converged(live):
    s = spec(nodes=4)
    plan = build_plan(s)
    r = structs.replace(plan.scale_sets[0], name="myVirtualMachineScaleSet")
    with serving("GET", VMSS_PATH, body(GET_VMSS)):
        current = resource_types.of(r.type).get(live, "myResourceGroup", r.name, api_version=r.api_version)
    deployer = Deployer(live, plan, RG)
    # Converged also needs the plan's body to change nothing, and the example is another scale set
    # (its image, tags ...): with nothing to change, the state as the example writes it decides.
    deployer.delta = lambda r, current: []
    assert deployer._converged(r, current)  # "succeeded" as the example writes it
    current.provisioning_state = "Updating"
    assert not deployer._converged(r, current)


def test_replayed_foreign_scale_set_is_not_changed_in_place(live):
    from azgpu.errors import InputError

    plan = build_plan(spec(nodes=4))
    r = plan.scale_sets[0]
    with serving("GET", VMSS_PATH, body(GET_VMSS)):
        current = resource_types.of(r.type).get(live, "myResourceGroup", "myVirtualMachineScaleSet",
                                                api_version=r.api_version)
    problem = Deployer(live, plan, RG)._immutable_problem(r, current)
    assert isinstance(problem, InputError) and problem.code == "CHANGE_NOT_ALLOWED"
    assert "size 'standard_d2s_v3'" in problem.message and "singlePlacementGroup False" in problem.message


def test_fake_scale_set_answers_have_the_examples_shape(azure, session):
    from azgpu.deploy import create

    azure.accept_terms("almalinux", "almalinux-hpc", "8_10-hpc-gen2")
    create(session, request(image="almalinux-hpc-8-10"))
    put = next(r for r in azure.requests if r.method == "PUT" and "virtualMachineScaleSets" in r.path)
    created = fake_get(azure, put.path.split(azure.subscription_id, 1)[1], "2026-04-01")
    common = shape_differences(body(GET_VMSS), created, only_real=set(_flatten_keys(body(GET_VMSS))),
                               only_fake=set(_flatten_keys(created)))
    assert common == []  # every key both have carries the same JSON type
    published = body(CREATE_WITH_PLAN, "201")
    assert set(created["plan"]) == set(published["plan"])
    assert {k for k in published if k != "plan"} <= set(created)


def _flatten_keys(value, path: str = "") -> list[str]:
    out = []
    if isinstance(value, dict):
        for k, v in value.items():
            sub = f"{path}.{k}" if path else k
            out += [sub, *_flatten_keys(v, sub)]
    elif isinstance(value, list):
        for v in value:
            out += _flatten_keys(v, f"{path}[]")
    return out
