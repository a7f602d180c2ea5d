"""Values inside plan resources that are not known until deployment.

The plan holds these objects; each back end turns them into its own form: an ARM expression
string, a Bicep expression, or (the deployer) the concrete value sent on the wire.
"""

from __future__ import annotations

from typing import Any, Protocol

from msgspec import Struct

from .resource_types import SUBNET


class Resolver(Protocol):
    """What the deployer knows at run time."""

    def parameter(self, name: str) -> Any: ...

    def resource_id(self, type_: str, *names: str) -> str: ...


class Param(Struct, frozen=True):
    name: str

    def arm(self) -> str:
        return f"parameters('{self.name}')"

    def bicep(self) -> str:
        return self.name

    def resolve(self, r: Resolver) -> Any:
        return r.parameter(self.name)


class ResourceId(Struct, frozen=True):
    """The ID of a resource the plan declares, referenced by its symbolic key."""

    key: str
    type: str
    name: str

    def arm(self) -> str:
        return f"resourceId('{self.type}', '{self.name}')"

    def bicep(self) -> str:
        return f"{self.key}.id"

    def resolve(self, r: Resolver) -> str:
        return r.resource_id(self.type, self.name)


class SubnetId(Struct, frozen=True):
    """A subnet declared inline in a VNet the plan declares (index into its subnets)."""

    key: str
    vnet: str
    subnet: str
    index: int = 0

    def arm(self) -> str:
        return f"resourceId('{SUBNET.type}', '{self.vnet}', '{self.subnet}')"

    def bicep(self) -> str:
        return f"{self.key}.properties.subnets[{self.index}].id"

    def resolve(self, r: Resolver) -> str:
        return r.resource_id(SUBNET.type, self.vnet, self.subnet)


class Format(Struct, frozen=True):
    """String interpolation of literal text and parameters: '{0}' placeholders."""

    template: str
    args: tuple[Param, ...]

    def arm(self) -> str:
        return f"format('{self.template}', {', '.join(a.arm() for a in self.args)})"

    def bicep(self) -> str:
        text = self.template.replace("'", "\\'")
        for i, a in enumerate(self.args):
            text = text.replace("{" + str(i) + "}", "${" + a.bicep() + "}")
        return f"'{text}'"

    def resolve(self, r: Resolver) -> str:
        return self.template.format(*(a.resolve(r) for a in self.args))


class ResourceGroupLocation(Struct, frozen=True):
    def arm(self) -> str:
        return "resourceGroup().location"

    def bicep(self) -> str:
        return "resourceGroup().location"

    def resolve(self, r: Resolver) -> str:
        return r.parameter("location")


class Base64(Struct, frozen=True):
    """A parameter's text, base64-encoded where it is used (osProfile.customData): the parameter file
    keeps the readable text, as Learn's custom-data example does with ARM's base64()."""

    arg: Param

    def arm(self) -> str:
        return f"base64({self.arg.arm()})"

    def bicep(self) -> str:
        return f"base64({self.arg.bicep()})"

    def resolve(self, r: Resolver) -> str:
        import base64

        return base64.b64encode(str(self.arg.resolve(r)).encode("utf-8")).decode("ascii")


EXPR_TYPES = (Param, ResourceId, SubnetId, Format, ResourceGroupLocation, Base64)


def walk(value: Any, fn) -> Any:
    """Copy a property tree, replacing every expression object with fn(expr)."""
    if isinstance(value, EXPR_TYPES):
        return fn(value)
    if isinstance(value, dict):
        return {k: walk(v, fn) for k, v in value.items()}
    if isinstance(value, list):
        return [walk(v, fn) for v in value]
    return value


def references(value: Any) -> set[str]:
    """Symbolic keys of the plan resources a property tree refers to."""
    found: set[str] = set()

    def collect(e):
        if isinstance(e, (ResourceId, SubnetId)):
            found.add(e.key)
        return e

    walk(value, collect)
    return found
