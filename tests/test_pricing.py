"""A cluster's price from the Azure Retail Prices API, answered here through `responses` with bodies
in the API's shape; never a request to the network, never a guess when there is no answer."""

from __future__ import annotations

import json
import subprocess
import sys
import threading

import pytest
import requests
import responses

import azgpu
from azgpu import pricing
from azgpu.profiles import list_profiles, load_profile
from azgpu.testing import retail_prices

ENDPOINT = pricing.ENDPOINT
KEY = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIJOgAYClhajeh3m7rJp5Bf+XHzOywcIepjITM9B6OJMg azgpu-test"
DEPLOYABLE = [p.id for p in list_profiles() if not load_profile(p.id).size(load_profile(p.id).default_size).retired]


def item(size: str, region: str, price: float, meter: str | None = None, **extra) -> dict:
    """One row as the API answers it (Learn's documented fields)."""
    meter = meter or size.removeprefix("Standard_").replace("_", " ")
    row = {"currencyCode": "USD", "tierMinimumUnits": 0.0, "retailPrice": price, "unitPrice": price,
           "armRegionName": region, "location": "US East", "effectiveStartDate": "2024-01-01T00:00:00Z",
           "meterName": meter, "productName": "Virtual Machines", "skuName": meter, "serviceName": "Virtual Machines",
           "serviceFamily": "Compute", "unitOfMeasure": "1 Hour", "type": "Consumption", "isPrimaryMeterRegion": True,
           "armSkuName": size}
    return {**row, **extra}


def page(items: list[dict], next_link: str | None = None, currency: str = "USD") -> dict:
    return {"BillingCurrency": currency, "CustomerEntityId": "Default", "CustomerEntityType": "Retail",
            "Items": items, "NextPageLink": next_link, "Count": len(items)}


@pytest.fixture
def api(monkeypatch, tmp_path):
    """The Retail Prices API behind `responses`, with lookups turned on and a fresh cache."""
    monkeypatch.delenv(pricing.PRICES_ENV, raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    with responses.RequestsMock(assert_all_requests_are_fired=False) as mock:
        yield mock


def answer(api, *items: dict, **kw) -> None:
    api.add(responses.GET, ENDPOINT, json=page(list(items), **kw))


# -- choosing the row ------------------------------------------------------------------------------

def test_pay_as_you_go_price_of_linux(api):
    answer(api, item("Standard_ND96asr_v4", "eastus", 27.197),
           item("Standard_ND96asr_v4", "eastus", 31.0, productName="Virtual Machines NDasr A100 v4 Series Windows"),
           item("Standard_ND96asr_v4", "eastus", 2.99167, meter="ND96asr v4 Spot"),
           item("Standard_ND96asr_v4", "eastus", 5.4, meter="ND96asr v4 Low Priority"))
    price = pricing.lookup("Standard_ND96asr_v4", "eastus")
    assert (price.status, price.per_hour, price.price_type, price.meter) == ("known", 27.197, "pay-as-you-go",
                                                                             "ND96asr v4")


def test_spot_price(api):
    answer(api, item("Standard_ND96asr_v4", "eastus", 27.197), item("Standard_ND96asr_v4", "eastus", 2.99167,
                                                                     meter="ND96asr v4 Spot"))
    price = pricing.lookup("Standard_ND96asr_v4", "eastus", spot=True)
    assert (price.per_hour, price.price_type) == (2.99167, "spot")


def test_reservations_and_other_units_are_not_hourly_prices(api):
    answer(api, item("Standard_ND96asr_v4", "eastus", 150000.0, type="Reservation", unitOfMeasure="1 Year"))
    price = pricing.lookup("Standard_ND96asr_v4", "eastus")
    assert price.status == "unknown" and "lists no Linux pay-as-you-go price" in price.reason


def test_the_newest_price_in_effect_wins(api):
    answer(api, item("Standard_ND96asr_v4", "eastus", 30.0, effectiveStartDate="2022-01-01T00:00:00Z"),
           item("Standard_ND96asr_v4", "eastus", 27.197, effectiveStartDate="2024-01-01T00:00:00Z"),
           item("Standard_ND96asr_v4", "eastus", 25.0, effectiveStartDate="2999-01-01T00:00:00Z"))
    assert pricing.lookup("Standard_ND96asr_v4", "eastus").per_hour == 27.197


# -- the request ------------------------------------------------------------------------------------

def test_the_query_filters_size_region_and_price_type(api):
    answer(api, item("Standard_ND96asr_v4", "eastus", 27.197))
    pricing.lookup("Standard_ND96asr_v4", "eastus", currency="EUR")
    (call,) = api.calls
    query = requests.utils.urlparse(call.request.url).query
    params = dict(p.split("=", 1) for p in requests.utils.unquote(query).split("&"))
    assert params["$filter"].replace("+", " ") == ("serviceName eq 'Virtual Machines' and armRegionName eq 'eastus' "
                                                    "and armSkuName eq 'Standard_ND96asr_v4' "
                                                    "and priceType eq 'Consumption'")
    assert params["currencyCode"] == "'EUR'" and params["api-version"] == pricing.API_VERSION


def test_pages_are_followed_through_next_page_link(api):
    second = ENDPOINT + "?$filter=x&$skip=1000"
    api.add(responses.GET, second, json=page([item("Standard_ND96asr_v4", "eastus", 27.197)]))
    api.add(responses.GET, ENDPOINT, json=page([item("Standard_D2s_v5", "eastus", 0.096)], next_link=second))
    assert pricing.lookup("Standard_ND96asr_v4", "eastus").per_hour == 27.197
    assert len(api.calls) == 2


def test_another_currency(api):
    answer(api, item("Standard_ND96asr_v4", "eastus", 25.03, currencyCode="EUR"), currency="EUR")
    price = pricing.lookup("Standard_ND96asr_v4", "eastus", currency="eur")
    assert (price.per_hour, price.currency) == (25.03, "EUR")


def test_a_currency_the_api_does_not_offer_is_bad_input():
    with pytest.raises(azgpu.InputError) as info:
        pricing.lookup("Standard_ND96asr_v4", "eastus", currency="XYZ")
    assert info.value.code == "INVALID_CURRENCY" and "EUR" in info.value.remedy


# -- when there is no answer -----------------------------------------------------------------------

def test_offline_the_price_is_unknown_and_says_why(api):
    api.add(responses.GET, ENDPOINT, body=requests.exceptions.ConnectionError("Failed to resolve 'prices.azure.com' "
                                                                              "(NameResolutionError)"))
    price = pricing.lookup("Standard_ND96asr_v4", "eastus")
    assert (price.status, price.per_hour) == ("unknown", None)
    assert price.reason == "offline: prices.azure.com cannot be resolved"


def test_an_error_answer_is_an_unknown_price(api):
    api.add(responses.GET, ENDPOINT, status=503, json={"error": "unavailable"})
    price = pricing.lookup("Standard_ND96asr_v4", "eastus")
    assert price.status == "unknown" and price.reason == "prices.azure.com answered HTTP 503"


def test_a_lookup_that_hangs_is_given_up():
    release = threading.Event()
    with pytest.raises(TimeoutError):
        pricing._within(lambda: release.wait(), 0)  # gives up at once; the worker is let go after
    release.set()


def test_lookups_can_be_turned_off_without_a_request(api, monkeypatch):
    monkeypatch.setenv(pricing.PRICES_ENV, "off")
    price = pricing.lookup("Standard_ND96asr_v4", "eastus")
    assert price.status == "unknown" and "AZGPU_PRICES=off" in price.reason
    assert len(api.calls) == 0


# -- the cache ---------------------------------------------------------------------------------------

def test_an_answer_is_cached(api):
    answer(api, item("Standard_ND96asr_v4", "eastus", 27.197))
    pricing.lookup("Standard_ND96asr_v4", "eastus")
    assert pricing.lookup("Standard_ND96asr_v4", "eastus", spot=False).per_hour == 27.197
    assert len(api.calls) == 1


def test_a_failure_is_cached_so_offline_commands_do_not_try_again(api):
    api.add(responses.GET, ENDPOINT, body=requests.exceptions.ConnectionError("NameResolutionError"))
    pricing.lookup("Standard_ND96asr_v4", "eastus")
    assert pricing.lookup("Standard_ND96asr_v4", "eastus").status == "unknown"
    assert len(api.calls) == 1


def test_a_cached_answer_expires(api, monkeypatch):
    answer(api, item("Standard_ND96asr_v4", "eastus", 27.197))
    pricing.lookup("Standard_ND96asr_v4", "eastus")
    later = pricing.time.time() + pricing.PRICE_TTL + 1
    monkeypatch.setattr(pricing.time, "time", lambda: later)
    pricing.lookup("Standard_ND96asr_v4", "eastus")
    assert len(api.calls) == 2


# -- provision plan -----------------------------------------------------------------------------------

def recorded_or_shaped(size: str, region: str) -> tuple[dict, float]:
    """The fake's recorded row for this size and region (azgpu.testing.retail_prices, from SkyPilot's
    catalog of this API) where there is one; otherwise a row of the same shape with a test price
    (no recording exists here for that size): what is tested is which row is used and the arithmetic."""
    recorded = retail_prices.RECORDED.get((size, region))
    price = recorded[0] if recorded else 10.0
    return item(size, region, price), price


@pytest.mark.parametrize("profile", DEPLOYABLE)
def test_plan_shows_hourly_and_monthly_cost_for_every_profile(api, run, profile):
    size = load_profile(profile).default_size
    row, price = recorded_or_shaped(size, "eastus")
    answer(api, row)
    rc, out, err = run("plan", "--profile", profile, "-n", "c1", "-l", "eastus", "--nodes", 18, "--ssh-key", KEY)
    assert rc == 0, err
    cost = json.loads(out)["cost"]
    assert (cost["status"], cost["per_node_hourly"], cost["nodes"]) == ("known", price, 18)
    assert cost["hourly"] == round(price * 18, 4) and cost["monthly"] == round(price * 18 * 730, 2)
    assert sum(s["nodes"] for s in cost["scale_sets"]) == 18


def test_plan_with_spot_shows_the_spot_price(api, run):
    answer(api, item("Standard_ND96asr_v4", "eastus", 27.197), item("Standard_ND96asr_v4", "eastus", 2.99167,
                                                                     meter="ND96asr v4 Spot"))
    rc, out, err = run("plan", "--profile", "nd-a100-v4", "-n", "c1", "-l", "eastus", "--nodes", 2, "--spot",
                       "--ssh-key", KEY)
    cost = json.loads(out)["cost"]
    assert (cost["price_type"], cost["hourly"]) == ("spot", round(2.99167 * 2, 4))


def test_plan_says_unknown_offline_and_still_succeeds(api, run):
    api.add(responses.GET, ENDPOINT, body=requests.exceptions.ConnectionError("NameResolutionError"))
    rc, out, err = run("plan", "--profile", "nd-a100-v4", "-n", "c1", "-l", "eastus", "--ssh-key", KEY)
    assert rc == 0, err
    cost = json.loads(out)["cost"]
    assert cost["status"] == "unknown" and cost["reason"] == "offline: prices.azure.com cannot be resolved"


def test_plan_table_shows_the_cost_section(api, run):
    answer(api, item("Standard_ND96asr_v4", "eastus", 27.197))
    rc, out, err = run("plan", "--profile", "nd-a100-v4", "-n", "c1", "-l", "eastus", "--nodes", 2, "--ssh-key", KEY,
                       "-o", "table")
    assert rc == 0, err
    assert "\nCost\n" in out and "Hourly           54.394" in out


def test_plan_with_an_unknown_currency_exits_2(run):
    rc, out, err = run("plan", "--profile", "nd-a100-v4", "-n", "c1", "-l", "eastus", "--ssh-key", KEY,
                       "--currency", "XYZ")
    assert rc == 2 and "ERROR: [INVALID_CURRENCY]" in err and "remedy: use one of USD" in err


def test_a_plan_that_asks_for_the_price_loads_no_azure_sdk(tmp_path, monkeypatch):
    """A fresh process with the lookup really made (answered by `responses`, so nothing leaves)."""
    probe = (
        "import sys, responses\n"
        "from azgpu.cli import main\n"
        "with responses.RequestsMock() as m:\n"
        "    m.add(responses.GET, 'https://prices.azure.com/api/retail/prices', json={'Items': [],"
        " 'NextPageLink': None})\n"
        "    rc = main(sys.argv[1:])\n"
        "    assert len(m.calls) == 1\n"
        "assert not [k for k in sys.modules if k == 'azure' or k.startswith('azure.')]\n"
        "sys.exit(rc)\n")
    monkeypatch.delenv(pricing.PRICES_ENV, raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    done = subprocess.run([sys.executable, "-c", probe, "plan", "--profile", "nd-a100-v4", "-n", "c1", "-l", "eastus",
                           "--ssh-key", KEY, "-o", "none"], capture_output=True, text=True, cwd=tmp_path)
    assert done.returncode == 0, done.stderr


def test_python_api_estimate_cost(api, ssh_key):
    answer(api, item("Standard_ND96asr_v4", "eastus", 27.197))
    plan = azgpu.build_plan(azgpu.validate(azgpu.build_request(profile="nd-a100-v4", name="c1", nodes=4,
                                                               location="eastus", ssh_key=ssh_key), command="plan"))
    assert azgpu.estimate_cost(plan).as_dict()["hourly"] == round(27.197 * 4, 4)
