"""The Azure Retail Prices API (https://prices.azure.com/api/retail/prices) as the fake answers it.

The answer has the documented shape (Learn, "Azure Retail Prices overview": BillingCurrency,
CustomerEntityId, CustomerEntityType, Items, NextPageLink, Count; 1,000 items a page; `$filter` of
`field eq 'value'` terms joined by `and`, values compared case-sensitively from api-version
2023-01-01-preview on; `currencyCode='EUR'`). The prices are recorded, not made up: the Linux
pay-as-you-go and spot prices per hour that SkyPilot's catalog recorded from this API
(skypilot-org/skypilot-catalog, catalogs/v6/azure/vms.csv at commit
098741e70562f65d7af1cceb81e33b284f742604, columns Price and SpotPrice). Only the fields that
follow from those figures are filled; meter and product ids are left out rather than invented.
A size or region without a recording answers no items, as the real API does for a size it has no
price for, and so does any currency but USD: the fake knows no exchange rates.
"""

from __future__ import annotations

import re
from urllib.parse import urlencode

from .errors import NotImplementedInFake
from .messages import Response

HOST = "prices.azure.com"
PATH = "/api/retail/prices"
# The version whose shape the answer follows (case-sensitive filters); older ones are answered alike.
API_VERSION = "2023-01-01-preview"
PAGE_SIZE = 1000

# armRegionName -> the API's display location (the `location` field).
LOCATIONS = {
    "eastus": "US East", "eastus2": "US East 2", "westus": "US West", "westus2": "US West 2",
    "southcentralus": "US South Central",
}

# (armSkuName, armRegionName): (pay-as-you-go USD/hour, spot USD/hour or None), from the recording.
# Standard_ND96isr_H100_v5 is recorded with a spot price equal to its on-demand price, which is
# how the catalog marks a missing spot meter, so no spot row is kept for it.
RECORDED: dict[tuple[str, str], tuple[float, float | None]] = {
    ("Standard_ND40rs_v2", "eastus"): (22.032, 2.42352),
    ("Standard_ND40rs_v2", "southcentralus"): (26.438, 2.90818),
    ("Standard_ND40rs_v2", "westus2"): (22.032, 2.42352),
    ("Standard_ND96asr_v4", "eastus"): (27.197, 2.99167),
    ("Standard_ND96asr_v4", "southcentralus"): (32.63, 3.5893),
    ("Standard_ND96asr_v4", "westus2"): (27.197, 2.99167),
    ("Standard_ND96amsr_A100_v4", "eastus"): (32.77, 3.6047),
    ("Standard_ND96amsr_A100_v4", "eastus2"): (32.77, 3.611254),
    ("Standard_ND96amsr_A100_v4", "southcentralus"): (39.324, 4.32564),
    ("Standard_ND96isr_H100_v5", "eastus"): (98.32, None),
    ("Standard_ND96isr_H100_v5", "eastus2"): (98.32, None),
    ("Standard_ND96isr_H100_v5", "westus"): (127.816, None),
    ("Standard_NG8ads_V620_v1", "eastus2"): (0.908, 0.227),
    ("Standard_NG16ads_V620_v1", "eastus2"): (1.815, 0.45375),
    ("Standard_NG32ads_V620_v1", "eastus2"): (3.63, 0.9075),
}


def _item(size: str, region: str, price: float, spot: bool) -> dict:
    # Meter and SKU names are the size without "Standard_", underscores as spaces, and " Spot" for
    # the spot meter, as Learn's example shows for Standard_F16s ("F16s Spot").
    meter = size.removeprefix("Standard_").replace("_", " ") + (" Spot" if spot else "")
    return {
        "currencyCode": "USD",
        "tierMinimumUnits": 0.0,
        "retailPrice": price,
        "unitPrice": price,
        "armRegionName": region,
        "location": LOCATIONS.get(region, region),
        "meterName": meter,
        "skuName": meter,
        "serviceName": "Virtual Machines",
        "serviceFamily": "Compute",
        "unitOfMeasure": "1 Hour",
        "type": "Consumption",
        "isPrimaryMeterRegion": True,
        "armSkuName": size,
    }


def items() -> list[dict]:
    out = []
    for (size, region), (price, spot) in sorted(RECORDED.items()):
        out.append(_item(size, region, price, spot=False))
        if spot is not None:
            out.append(_item(size, region, spot, spot=True))
    return out


_TERM = re.compile(r"\s*(\w+)\s+eq\s+'([^']*)'\s*", re.IGNORECASE)
# $filter names that are item fields under another name.
_FIELDS = {"pricetype": "type"}


def _terms(text: str, method: str, url: str) -> list[tuple[str, str]]:
    terms = []
    for part in re.split(r"\band\b", text, flags=re.IGNORECASE) if text.strip() else []:
        match = _TERM.fullmatch(part)
        if not match:
            raise NotImplementedInFake(method, url, f"$filter term {part.strip()!r}")
        terms.append((match.group(1), match.group(2)))
    return terms


def answer(method: str, path: str, query: dict, url: str) -> Response:
    if method != "GET" or path.rstrip("/").lower() != PATH:
        raise NotImplementedInFake(method, url, "the Retail Prices API has GET /api/retail/prices only")
    currency = query.get("currencyCode", "USD").strip("'\"").upper()
    found = [] if currency != "USD" else items()
    for name, value in _terms(query.get("$filter", ""), method, url):
        field = _FIELDS.get(name.lower(), name)
        found = [i for i in found if str(i.get(field, "")) == value]
    skip = int(query.get("$skip", "0") or 0)
    page = found[skip:skip + PAGE_SIZE]
    next_link = None
    if skip + PAGE_SIZE < len(found):
        rest = {k: v for k, v in query.items() if k != "$skip"}
        next_link = f"https://{HOST}:443{PATH}?" + urlencode({**rest, "$skip": skip + PAGE_SIZE})
    return Response(200, {"BillingCurrency": currency, "CustomerEntityId": "Default", "CustomerEntityType": "Retail",
                          "Items": page, "NextPageLink": next_link, "Count": len(page)})
