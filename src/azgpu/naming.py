"""Deterministic resource names and Azure's naming rules for them.

Names never carry randomness: a re-run derives the same names and so finds what it made before.
"""

from __future__ import annotations

import re

from msgspec import Struct

NAMING_SOURCE = "D-name-rules"

# Our own rule for the cluster name: it becomes part of every resource name, a tag and hostnames,
# so keep it to what all of those accept.
CLUSTER_NAME_RE = re.compile(r"^[a-z][a-z0-9-]{0,48}[a-z0-9]$")



def location_name(name: str | None) -> str:
    """A location as ARM compares it: the display name 'East US' and the programmatic 'eastus' are one."""
    return (name or "").replace(" ", "").lower()

class NameRule(Struct, frozen=True):
    kind: str
    min_len: int
    max_len: int
    pattern: re.Pattern
    describe: str


_NET = re.compile(r"^[A-Za-z0-9](?:[A-Za-z0-9._-]*[A-Za-z0-9_])?$")
RULES = {
    "resource_group": NameRule("resource group", 1, 90, re.compile(r"^[-\w._()]*[-\w_()]$"),
                               "letters, digits, underscores, hyphens, periods and parentheses, "
                               "not ending in a period"),
    "nsg": NameRule("network security group", 1, 80, _NET,
                    "letters, digits, '_', '.', '-'; start alphanumeric; end alphanumeric or '_'"),
    "vnet": NameRule("virtual network", 2, 64, _NET,
                     "letters, digits, '_', '.', '-'; start alphanumeric; end alphanumeric or '_'"),
    "subnet": NameRule("subnet", 1, 80, _NET,
                       "letters, digits, '_', '.', '-'; start alphanumeric; end alphanumeric or '_'"),
    "nat_gateway": NameRule("NAT gateway", 1, 80, _NET,
                            "letters, digits, '_', '.', '-'; start alphanumeric; end alphanumeric or '_'"),
    "public_ip": NameRule("public IP address", 1, 80, _NET,
                          "letters, digits, '_', '.', '-'; start alphanumeric; end alphanumeric or '_'"),
    "vmss": NameRule("virtual machine scale set", 1, 64, _NET,
                     "letters, digits, '_', '.', '-'; start alphanumeric; end alphanumeric or '_'"),
    "ppg": NameRule("proximity placement group", 1, 80, _NET,
                    "letters, digits, '_', '.', '-'; start alphanumeric; end alphanumeric or '_'"),
    "computer_name_prefix_linux": NameRule("Linux computer name prefix", 1, 58,
                                           re.compile(r"^[A-Za-z0-9][A-Za-z0-9-]*$"),
                                           "letters, digits and hyphens (no '_' or '.'), not only digits"),
    "computer_name_prefix_windows": NameRule("Windows computer name prefix", 1, 9,
                                             re.compile(r"^[A-Za-z0-9][A-Za-z0-9-]*$"),
                                             "letters, digits and hyphens, at most 9 characters"),
}


def check(kind: str, name: str) -> str | None:
    """None when `name` is valid for `kind`, else what is wrong."""
    rule = RULES[kind]
    if not rule.min_len <= len(name) <= rule.max_len:
        return f"{rule.kind} name '{name}' has {len(name)} characters; Azure allows {rule.min_len}-{rule.max_len}"
    if not rule.pattern.fullmatch(name) or name.isdigit():  # fullmatch: "$" lets a final newline through
        return f"{rule.kind} name '{name}' is not allowed: {rule.describe}"
    return None


class Names(Struct, frozen=True):
    cluster: str

    @property
    def nsg(self) -> str:
        return f"{self.cluster}-nsg"

    @property
    def vnet(self) -> str:
        return f"{self.cluster}-vnet"

    @property
    def subnet(self) -> str:
        return "compute"

    @property
    def nat_gateway(self) -> str:
        return f"{self.cluster}-natgw"

    @property
    def nat_public_ip(self) -> str:
        return f"{self.cluster}-natgw-ip"

    def vmss(self, index: int) -> str:
        return f"{self.cluster}-vmss{index:03d}"

    def computer_name_prefix(self, index: int, *, windows: bool = False) -> str:
        # Azure appends a 6-character instance suffix to the prefix.
        return f"{self.cluster[:6]}{index:03d}" if windows else f"{self.cluster}-{index:03d}-"

    def derived(self, scale_sets: int, *, windows: bool = False) -> list[tuple[str, str]]:
        out = [("nsg", self.nsg), ("vnet", self.vnet), ("subnet", self.subnet), ("nat_gateway", self.nat_gateway),
               ("public_ip", self.nat_public_ip)]
        prefix_kind = "computer_name_prefix_windows" if windows else "computer_name_prefix_linux"
        for i in range(scale_sets):
            out += [("vmss", self.vmss(i)), (prefix_kind, self.computer_name_prefix(i, windows=windows))]
        return out
