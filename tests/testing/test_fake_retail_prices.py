"""The fake answers the Azure Retail Prices API (prices.azure.com) from its recording, in the API's
shape, so --simulate can price a cluster without a request leaving the process."""

from __future__ import annotations

import pytest
import requests

from azgpu.testing import NotImplementedInFake
from azgpu.testing.retail_prices import RECORDED

URL = "https://prices.azure.com/api/retail/prices"
A100_EASTUS = ("serviceName eq 'Virtual Machines' and armRegionName eq 'eastus' and armSkuName eq "
               "'Standard_ND96asr_v4' and priceType eq 'Consumption'")


def test_a_filtered_query_answers_the_recorded_rows_in_the_apis_shape(azure):
    body = requests.get(URL, params={"$filter": A100_EASTUS}).json()
    assert set(body) == {"BillingCurrency", "CustomerEntityId", "CustomerEntityType", "Items", "NextPageLink", "Count"}
    assert {(i["meterName"], i["retailPrice"]) for i in body["Items"]} == {("ND96asr v4", 27.197),
                                                                          ("ND96asr v4 Spot", 2.99167)}
    assert body["Count"] == 2 and body["NextPageLink"] is None


def test_filter_values_compare_case_sensitively(azure):
    body = requests.get(URL,
                        params={"$filter": A100_EASTUS.replace("Standard_ND96asr_v4", "standard_nd96asr_v4")}).json()
    assert body["Items"] == []


def test_a_size_without_a_recording_answers_no_items(azure):
    assert ("Standard_ND128isr_GB300_v6", "westus3") not in RECORDED
    body = requests.get(URL, params={"$filter": "armSkuName eq 'Standard_ND128isr_GB300_v6'"}).json()
    assert body["Items"] == [] and body["Count"] == 0


def test_another_currency_answers_no_items_rather_than_made_up_rates(azure):
    body = requests.get(URL, params={"currencyCode": "'EUR'", "$filter": A100_EASTUS}).json()
    assert body["BillingCurrency"] == "EUR" and body["Items"] == []


def test_a_filter_it_does_not_understand_fails_loudly(azure):
    with pytest.raises(NotImplementedInFake):
        requests.get(URL, params={"$filter": "contains(armSkuName, 'ND')"})


def test_prices_requests_are_logged_like_any_other(azure):
    requests.get(URL, params={"$filter": A100_EASTUS})
    assert [(r.method, r.path, r.status) for r in azure.requests] == [("GET", "/api/retail/prices", 200)]


def test_other_hosts_still_never_go_out(azure):
    with pytest.raises(NotImplementedInFake):
        requests.get("https://example.com/api/retail/prices")
