"""Request -> Spec: every input check and documented rule at once, errors and warnings together."""

from __future__ import annotations

import base64
import binascii
import ipaddress
import re
from functools import cache

from msgspec import Struct

from . import cloud_init, naming, rules
from .drivers import cloud_init_ofed, decide_drivers
from .errors import AzgpuError, Finding, ValidationFailed
from .eviction import decide_eviction
from .images import Image, resolve
from .layout import decide_layout, resource_kinds
from .ownership import RESERVED_TAGS
from .profiles import Extension, Profile, Size, find_size, load_profile
from .request import DEFAULT_VNET_PREFIX, Request, repr_without, shown_fields
from .resource_types import PPG, SUBNET, USER_ASSIGNED_IDENTITY
from .shipped_data import data_dir, read_toml
from .sources import cite

MAX_NODES = 100_000  # beyond any InfiniBand cluster Azure sells; catches typos such as 40000000
ARM_MAX_RESOURCES = 800
RESERVED_USERNAMES = {
    "administrator", "admin", "user", "user1", "test", "user2", "test1", "user3", "admin1", "1", "123", "a",
    "actuser", "adm", "admin2", "aspnet", "backup", "console", "david", "guest", "john", "owner", "root",
    "server", "sql", "support", "support_388945a0", "sys", "test2", "test3", "user4", "user5",
}
SSH_KEY_RE = re.compile(r"^(ssh-rsa|ssh-ed25519|ecdsa-sha2-nistp(?:256|384|521)|sk-ssh-ed25519@openssh\.com|"
                        r"sk-ecdsa-sha2-nistp256@openssh\.com) ([A-Za-z0-9+/]+={0,3})(?: [^\x00-\x1f\x7f]*)?$")
# The resource-ID forms below are matched case-insensitively (re.I) and compiled on first use, through re's own
# cache: only a request that names such an ID pays for them, not every render.
SUBNET_ID = (r"/subscriptions/(?P<sub>[^/]+)/resourceGroups/(?P<rg>[^/]+)"
             + SUBNET.path_pattern(r"(?P<vnet>[^/]+)", r"(?P<subnet>[^/]+)"))
SUBSCRIPTION_RE = re.compile(r"[0-9A-Za-z-]{1,64}")  # a GUID in Azure; its characters at least
INTERNET = {"*", "internet", "any", "0.0.0.0/0"}
IDENTITY_ID = r"^/subscriptions/[^/\s]+/resourceGroups/[^/\s]+" + USER_ASSIGNED_IDENTITY.path_pattern(r"[^/\s]+") + "$"
PPG_ID = r"^/subscriptions/[^/\s]+/resourceGroups/[^/\s]+" + PPG.path_pattern(r"[^/\s]+") + "$"


class Spec(Struct, frozen=True):
    """A validated request with every decision the plan needs."""

    request: Request
    profile: Profile
    size: Size
    image: Image
    names: naming.Names
    command: str
    security_type: str
    accelerated_networking: bool
    ib_domain: int
    scale_sets: tuple[int, ...]
    vnet_prefix: str | None
    subnet_id: str | None
    ssh_source: str | None
    install_ofed: str | None
    extensions: tuple[Extension, ...]
    findings: tuple[Finding, ...]
    # azgpu's cloud-init and --custom-data merged (MIME multipart); None without --custom-data.
    custom_data: str | None = None
    identity: dict | None = None  # the scale sets' ARM identity block
    ppg_id: str | None = None  # an existing proximity placement group the scale sets join
    ppg_name: str | None = None  # a proximity placement group the plan creates
    eviction_policy: str | None = None  # spot only
    boot_diagnostics: bool = True
    # A NAT gateway with a Standard public IP gives the new VNet's nodes their way out (--no-outbound: none).
    nat_gateway: bool = False
    # Where an ephemeral OS disk goes; None: as the documentation implies (plan.documented_placement).
    # Preflight replaces it with what the live SupportedEphemeralOSDiskPlacements capability allows.
    ephemeral_placement: str | None = None

    def __repr__(self) -> str:
        return repr_without(self, ("custom_data",))

    def __rich_repr__(self):
        yield from shown_fields(self, ("custom_data",))

    @property
    def warnings(self) -> list[Finding]:
        return [f for f in self.findings if f.severity == "warning"]

    @property
    def nodes(self) -> int:
        return sum(self.scale_sets)


@cache
def regions() -> tuple[str, ...]:
    return tuple(read_toml(data_dir("profiles") / "regions.toml")["regions"])


def _check_location(loc: str | None, command: str) -> list[Finding]:
    if loc is None:
        if command == "create":
            return [Finding(code="MISSING_LOCATION", message="no location given",
                            remedy="pass -l/--location, e.g. -l eastus", field="location")]
        return []
    if loc in regions():
        return []
    squashed = naming.location_name(loc)
    import difflib  # only for suggestions on an error: not on every start
    near = [squashed] if squashed in regions() else difflib.get_close_matches(squashed, regions(), n=1, cutoff=0.6)
    hint = f"did you mean '{near[0]}'? " if near else ""
    return [Finding(code="INVALID_LOCATION", message=f"'{loc}' is not an Azure region name",
                    remedy=f"{hint}use the lowercase name without spaces as "
                           "'az account list-locations -o table' shows it",
                    field="location", source=cite(("D-regions",)))]


def _check_ssh_key(key: str | None, command: str, input_findings) -> list[Finding]:
    if key is None:
        if any(f.field == "ssh_key" for f in input_findings):
            return []
        if command == "create":
            return [Finding(code="MISSING_SSH_KEY",
                            message="no SSH public key: azgpu creates Linux nodes with SSH keys only",
                            remedy="pass --ssh-key with your public key file (e.g. --ssh-key ~/.ssh/id_rsa.pub), or "
                                   "--generate-ssh-keys to make ~/.ssh/id_rsa",
                            field="ssh_key")]
        if command == "render":  # the parameter files are written without it
            return [Finding(code="SSH_KEY_NOT_SET",
                            message="no SSH public key given: main.parameters.json leaves sshPublicKey for "
                            "you to fill", remedy="pass --ssh-key (e.g. --ssh-key ~/.ssh/id_rsa.pub) to fill it",
                            field="ssh_key", severity="warning")]
        # validate and plan write nothing: a note (under --verbose) of what create will need.
        return [Finding(code="SSH_KEY_NOT_SET", message="no SSH public key given: 'provision create' will need one",
                        remedy="pass --ssh-key (e.g. --ssh-key ~/.ssh/id_rsa.pub), or --generate-ssh-keys to make "
                               "~/.ssh/id_rsa", field="ssh_key",
                        severity="note")]
    match = SSH_KEY_RE.fullmatch(key.strip())
    valid = bool(match)
    if match:
        try:
            base64.b64decode(match.group(2), validate=True)
        except (binascii.Error, ValueError):
            valid = False
    if not valid:
        return [Finding(code="INVALID_SSH_KEY",
                        message="the SSH public key is not an OpenSSH public "
                                "key (ssh-ed25519/ssh-rsa/ecdsa-... AAAA...)",
                        remedy="pass the .pub file, e.g. --ssh-key ~/.ssh/id_ed25519.pub", field="ssh_key")]
    return []


def _check_subnet_id(subnet_id: str) -> list[Finding]:
    """A subnet resource ID whose every segment has only the characters Azure allows there: anything
    else (quotes, brackets, spaces, control characters) cannot name a subnet and would end up in
    templates and request URLs."""
    match = re.fullmatch(SUBNET_ID, subnet_id, re.I)
    problems = []
    if match:
        if not SUBSCRIPTION_RE.fullmatch(match["sub"]):
            problems.append(f"subscription '{match['sub']}' is not a subscription ID")
        problems += [p for kind in ("resource_group", "vnet", "subnet")
                     if (p := naming.check(kind, match[{"resource_group": "rg"}.get(kind, kind)]))]
    if match and not problems:
        return []
    detail = f": {'; '.join(problems)}" if problems else ""
    return [Finding(code="INVALID_SUBNET_ID", message=f"--subnet-id {subnet_id!r} is not a subnet resource ID{detail}",
                    remedy=f"pass {SUBNET.example_id('VNET', 'SUBNET')}",
                    field="subnet_id", source=cite((naming.NAMING_SOURCE,)))]


def _check_network(req: Request, nodes: int) -> tuple[list[Finding], ipaddress.IPv4Network | None, str | None]:
    out: list[Finding] = []
    vnet = None
    ssh_source = None
    if req.vnet_address_prefix and req.subnet_id:
        out.append(Finding(code="CONFLICTING_NETWORK",
                           message="--vnet-address-prefix and --subnet-id exclude each other",
                           remedy="pass --subnet-id to use an existing subnet, "
                                  "or --vnet-address-prefix for a new network",
                           field="subnet_id"))
    if req.subnet_id:
        out += _check_subnet_id(req.subnet_id)
    else:
        prefix = req.vnet_address_prefix or DEFAULT_VNET_PREFIX
        try:
            vnet = ipaddress.IPv4Network(prefix, strict=True)
        except ValueError as exc:
            fix = ""
            try:
                fix = f", e.g. {ipaddress.IPv4Network(prefix, strict=False)}"
            except ValueError:
                pass
            out.append(Finding(code="INVALID_CIDR",
                               message=f"--vnet-address-prefix '{prefix}' is not an IPv4 network: {exc}",
                               remedy=f"pass a network in CIDR form{fix or ', e.g. 10.0.0.0/16'}",
                               field="vnet_address_prefix"))
        else:
            if vnet.prefixlen > 29:
                out.append(Finding(code="INVALID_CIDR",
                                   message=f"--vnet-address-prefix {vnet} is smaller than Azure's smallest subnet "
                                   "(/29)",
                                   remedy="pass a larger network, e.g. 10.0.0.0/16", field="vnet_address_prefix",
                                   source=cite(("D-vnet-faq",))))
            elif nodes > vnet.num_addresses - 5:
                out.append(Finding(code="SUBNET_TOO_SMALL",
                                   message=f"{vnet} holds {vnet.num_addresses - 5} node addresses (Azure reserves 5 "
                                           f"per subnet), {nodes} needed",
                                   remedy="pass a larger --vnet-address-prefix, e.g. 10.0.0.0/16",
                                   field="vnet_address_prefix", source=cite(("D-vnet-faq",))))
    if req.ssh_source:
        text = req.ssh_source.strip()
        if text.lower() in INTERNET:
            ssh_source = "Internet"
            out.append(Finding(code="SSH_OPEN_TO_INTERNET",
                               message="--ssh-source opens SSH (22/tcp) to the whole internet",
                               remedy="narrow it to your address, e.g. --ssh-source 203.0.113.7/32", field="ssh_source",
                               severity="warning"))
        else:
            try:
                ssh_source = str(ipaddress.ip_network(text, strict=False))
            except ValueError:
                out.append(Finding(code="INVALID_SSH_SOURCE",
                                   message=f"--ssh-source '{text}' is not an IP address or CIDR",
                                   remedy="pass your address or network, e.g. --ssh-source 203.0.113.7/32",
                                   field="ssh_source"))
    if req.subnet_id and not req.outbound:
        out.append(Finding(code="OUTBOUND_NOT_MANAGED",
                           message="--no-outbound changes nothing with --subnet-id: azgpu creates no NAT "
                           "gateway in a network it does not own",
                           remedy="drop --no-outbound; the subnet's own outbound path applies",
                           field="outbound", source=cite(("D-default-outbound",)), severity="note"))
    if req.public_ip and not req.ssh_source:
        out.append(Finding(code="PUBLIC_IP_WITHOUT_SSH_RULE",
                           message="--public-ip without --ssh-source: the NSG admits no inbound SSH",
                           remedy="add --ssh-source with your address to reach the nodes, e.g. --ssh-source "
                                  "203.0.113.7/32", field="public_ip",
                           severity="warning"))
    return out, vnet, ssh_source


# Azure's tag limits (Microsoft Learn, tag-resources, "Limitations"): 50 name/value pairs per
# resource, names up to 512 characters without <>%&\?/, values up to 256 characters; names are
# case-insensitive for operations, so two names differing only in case are one tag.
MAX_TAGS = 50
MAX_TAG_NAME = 512
MAX_TAG_VALUE = 256
TAG_NAME_FORBIDDEN = set("<>%&\\?/")
# The tags azgpu puts on every resource it creates (plan.cluster_tags): they count against the 50.
OWN_TAGS = 3
# Control characters (and lone surrogates: bytes that were not UTF-8) break logs, terminals and the
# templates a person reviews; no tag needs them.
UNPRINTABLE = re.compile(r"[\x00-\x1f\x7f-\x9f\u2028\u2029\ud800-\udfff]")


def _check_tags(tags: dict[str, str]) -> list[Finding]:
    out = []
    seen: dict[str, str] = {}
    for key, value in tags.items():
        shown = ascii(key) if UNPRINTABLE.search(key) else f"'{key[:80]}{'...' if len(key) > 80 else ''}'"
        if key.lower() in RESERVED_TAGS:
            out.append(Finding(code="RESERVED_TAG", message=f"tag {shown} is set by azgpu to find its resources",
                               remedy="choose another tag name",
                               field="tags"))
        elif not key.strip():
            out.append(Finding(code="INVALID_TAG", message="a tag has an empty name",
                               remedy="write tags as --tag team=ml", field="tags", source=cite(("D-tags",))))
        elif len(key) > MAX_TAG_NAME:
            out.append(Finding(code="INVALID_TAG",
                               message=f"tag name {shown} has {len(key)} characters; Azure allows {MAX_TAG_NAME}",
                               remedy="shorten the tag name", field="tags", source=cite(("D-tags",))))
        elif set(key) & TAG_NAME_FORBIDDEN:
            out.append(Finding(code="INVALID_TAG",
                               message=f"tag name {shown} contains {''.join(sorted(set(key) & TAG_NAME_FORBIDDEN))}: "
                               "Azure forbids < > % & \\ ? / in tag names", remedy="rename the tag", field="tags",
                               source=cite(("D-tags",))))
        elif UNPRINTABLE.search(key) or UNPRINTABLE.search(value):
            out.append(Finding(code="INVALID_TAG",
                               message=f"tag {shown} has control characters or bytes that are not UTF-8 text in its "
                               "name or value", remedy="use printable text in tag names and values", field="tags"))
        elif len(value) > MAX_TAG_VALUE:
            out.append(Finding(code="INVALID_TAG",
                               message=f"the value of tag {shown} has {len(value)} characters; Azure allows "
                               f"{MAX_TAG_VALUE}", remedy="shorten the value", field="tags", source=cite(("D-tags",))))
        elif key.lower() in seen:
            out.append(Finding(code="DUPLICATE_TAG",
                               message=f"tags {seen[key.lower()]!r} and {key!r} are one tag: Azure compares tag "
                               "names without case", remedy="keep one of them", field="tags", source=cite(("D-tags",))))
        seen.setdefault(key.lower(), key)
    if len(tags) + OWN_TAGS > MAX_TAGS:
        out.append(Finding(code="TOO_MANY_TAGS",
                           message=f"{len(tags)} tags: Azure allows {MAX_TAGS} per resource and azgpu adds "
                           f"{OWN_TAGS} of its own, so at most {MAX_TAGS - OWN_TAGS} can be given",
                           remedy="pass fewer tags",
                           field="tags", source=cite(("D-tags",))))
    return out


ZONES = ("1", "2", "3")


def location_findings(loc: str, flag: str = "-l/--location") -> list[Finding]:
    """A location given to a command that reads Azure (quota status, capacity): a region name Azure has, checked
    before it goes into a request's path (a '../x' would address something else)."""
    return [Finding(code=f.code, message=f"{flag}: {f.message}", remedy=f.remedy, source=f.source, field=f.field)
            for f in _check_location(loc, "create")]


def check_fallbacks(zones, locations) -> list[Finding]:
    """--zones and --fallback-locations, checked before anything is created: a bad one would otherwise
    surface only after a capacity error, once the first attempt's scale sets were already removed."""
    out = []
    for zone in zones or ():
        if zone not in ZONES:
            out.append(Finding(code="INVALID_ZONES", message=f"--zones must list zones 1, 2 or 3, not {zone!r}",
                               remedy="e.g. --zones 1 2 3",
                               field="zone", source=cite(("D-zones",))))
    for loc in locations or ():
        for f in _check_location(loc, "create"):
            out.append(Finding(code="INVALID_FALLBACK_LOCATIONS", message=f"--fallback-locations: {f.message}",
                               remedy=f.remedy, source=f.source,
                               severity=f.severity, field="fallback_locations"))
    return out


def _check_identities(req: Request) -> tuple[list[Finding], dict | None]:
    """--assign-identity and --identity: the ARM identity block of the scale sets (VirtualMachineScaleSetIdentity)."""
    out = []
    for rid in req.identities:
        if not re.match(IDENTITY_ID, rid, re.I):
            out.append(Finding(code="INVALID_IDENTITY",
                               message=f"--identity '{rid}' is not a user-assigned identity resource ID",
                               remedy=f"pass {USER_ASSIGNED_IDENTITY.example_id('NAME')} "
                               "('az identity list --query [].id' lists them)",
                               field="identities",
                               source=cite(("S-compute-2026-04-01",))))
    if out or not (req.assign_identity or req.identities):
        return out, None
    kinds = [k for k, on in (("SystemAssigned", req.assign_identity), ("UserAssigned", bool(req.identities))) if on]
    block: dict = {"type": ", ".join(kinds)}
    if req.identities:
        # "The dictionary values can be empty objects ({}) in requests" (VirtualMachineScaleSetIdentity).
        block["userAssignedIdentities"] = {rid: {} for rid in req.identities}
    return out, block


def _check_ppg(req: Request) -> tuple[list[Finding], str | None, str | None]:
    """--ppg NAME creates a proximity placement group in the resource group; --ppg ID joins an existing one."""
    if not req.ppg:
        return [], None, None
    text = req.ppg.strip()
    if text.startswith("/"):
        if not re.match(PPG_ID, text, re.I):
            return [Finding(code="INVALID_PPG",
                            message=f"--ppg '{text}' is not a proximity placement group resource ID",
                            remedy=f"pass a name to create one, or {PPG.example_id('NAME')}", field="ppg",
                            source=cite(("D-ppg",)))], None, None
        return [], text, None
    if problem := naming.check("ppg", text):
        return [Finding(code="INVALID_PPG", message=problem, remedy="e.g. --ppg train01-ppg", field="ppg",
                        source=cite((naming.NAMING_SOURCE,)))], None, None
    return [], None, text


def decide(request: Request, profile: Profile, size: Size, image: Image | None, command: str,
           vnet: ipaddress.IPv4Network | None = None) -> rules.Context:
    """The decisions the plan is built from (layout, drivers, eviction), taken once, in the frozen
    context the rules check: the rules only report on them."""
    return rules.Context(request=request, profile=profile, size=size, image=image, command=command,
                         layout=decide_layout(request, profile, size), drivers=decide_drivers(profile, size, image),
                         eviction_policy=decide_eviction(request), vnet=vnet)


def validate(request: Request, *, command: str = "validate") -> Spec:
    """All findings at once; raises ValidationFailed when any is an error."""
    req = request
    findings: list[Finding] = list(req.input_findings)

    profile: Profile | None = None
    size: Size | None = None
    try:
        if req.profile:
            profile = load_profile(req.profile)
            size = profile.size(req.size or profile.default_size)
        elif req.size:
            profile, size = find_size(req.size)
    except AzgpuError as exc:
        findings.append(Finding(code=exc.code, message=exc.message, remedy=exc.remedy,
                                field="size" if exc.code == "UNKNOWN_SIZE" else "profile"))
    if profile and req.profile != profile.id:
        req = req.with_changes(profile=profile.id)

    nodes = req.nodes
    if nodes is not None and nodes <= 0:
        findings.append(Finding(code="INVALID_NODES", message=f"--nodes must be 1 or more, not {nodes}",
                                remedy="pass --nodes 1 or more", field="nodes"))
    elif nodes is not None and nodes > MAX_NODES:
        findings.append(Finding(code="INVALID_NODES",
                                message=f"--nodes {nodes} is beyond {MAX_NODES}, more than any GPU cluster Azure sells",
                                remedy="check the number; split very large clusters into several azgpu clusters",
                                field="nodes"))

    if not req.name and command == "quota":  # with -g the name picks the cluster whose nodes there hold quota
        findings.append(Finding(code="MISSING_NAME", message="no cluster name given", field="name",
                                remedy="pass -n with the name of the cluster in -g whose nodes hold quota already, or "
                                "drop -g (a request is per location)"))
    elif not req.name:
        findings.append(Finding(code="MISSING_NAME", message="no cluster name given",
                                remedy="pass -n/--name, e.g. -n train01", field="name"))
    elif not naming.CLUSTER_NAME_RE.fullmatch(req.name):
        findings.append(Finding(code="INVALID_NAME",
                                message=f"cluster name '{req.name}' must be 2-50 lowercase letters, digits or hyphens, "
                                "start with a letter and end with a letter or digit", remedy="e.g. -n train01",
                                field="name",
                                source=cite((naming.NAMING_SOURCE,))))
    findings += _check_location(req.location, command)
    if req.resource_group is None and command == "create":
        findings.append(Finding(code="MISSING_RESOURCE_GROUP", message="no resource group given",
                                remedy="pass -g/--resource-group, e.g. -g ml-rg",
                                field="resource_group"))
    elif req.resource_group is not None and (problem := naming.check("resource_group", req.resource_group)):
        findings.append(Finding(code="INVALID_RESOURCE_GROUP", message=problem, remedy="e.g. -g ml-rg",
                                field="resource_group", source=cite((naming.NAMING_SOURCE,))))

    if not re.fullmatch(r"[a-z_][a-z0-9_-]{0,31}", req.admin_username) or req.admin_username in RESERVED_USERNAMES:
        findings.append(Finding(code="INVALID_ADMIN_USERNAME",
                                message=f"admin username '{req.admin_username}' is reserved "
                                "or not a Linux user name (1-32 lowercase letters, digits, '_', '-')",
                                remedy="e.g. --admin-username azureuser",
                                field="admin_username", source=cite(("D-linux-faq",))))
    findings += _check_ssh_key(req.ssh_key, command, req.input_findings)

    security = (req.security_type or "Standard")
    canonical = {"standard": "Standard", "trustedlaunch": "TrustedLaunch"}.get(security.lower())
    if canonical is None:
        findings.append(Finding(code="INVALID_SECURITY_TYPE",
                                message=f"--security-type must be Standard or TrustedLaunch, not '{security}'",
                                remedy="pass --security-type Standard", field="security_type", source=cite(("D-tl",))))
        canonical = "Standard"
    req = req.with_changes(security_type=canonical)
    if req.zone is not None and req.zone not in ZONES:
        findings.append(Finding(code="INVALID_ZONE", message=f"--zone must be 1, 2 or 3, not '{req.zone}'",
                                remedy="pass --zone 1, or omit it",
                                field="zone", source=cite(("D-zones",))))

    net, vnet, ssh_source = _check_network(req, nodes if nodes and 0 < nodes <= MAX_NODES else 0)
    findings += net
    findings += _check_tags(req.tags)
    identity_findings, identity = _check_identities(req)
    findings += identity_findings
    ppg_findings, ppg_id, ppg_name = _check_ppg(req)
    findings += ppg_findings
    if req.capacity_reservation_group:  # the reservations' module (patterns, dates) loads only when asked
        from .capacity import group_option_findings

        findings += group_option_findings(req, bool(size is not None and size.infiniband),
                                          vertical_connect=bool(profile and profile.vertical_connect))

    image: Image | None = None
    try:
        image = resolve(req.image or (profile.default_image if profile else "")) if (req.image or profile) else None
    except AzgpuError as exc:
        findings.append(Finding(code=exc.code, message=exc.message, remedy=exc.remedy, field="image"))

    ctx = None
    if profile and size:
        checked = req if nodes is not None and 0 < nodes <= MAX_NODES else req.with_changes(nodes=0)
        ctx = decide(checked, profile, size, image, command, vnet)
        findings += rules.run(ctx)
        scale_sets = ctx.layout.scale_sets
        windows = bool(image and image.is_windows)
        if req.name and naming.CLUSTER_NAME_RE.fullmatch(req.name):
            for kind, derived in naming.Names(req.name).derived(len(scale_sets), windows=windows):
                if problem := naming.check(kind, derived):
                    findings.append(Finding(code="INVALID_DERIVED_NAME", message=problem,
                                            remedy="choose a shorter -n/--name", field="name",
                                            source=cite((naming.NAMING_SOURCE,))))
        kinds = resource_kinds(existing_subnet=bool(req.subnet_id),
                               nat_gateway=bool(not req.subnet_id and req.outbound),
                               new_ppg=bool(ppg_name), scale_sets=len(scale_sets))
        if len(kinds) > ARM_MAX_RESOURCES:
            findings.append(Finding(code="TEMPLATE_TOO_LARGE",
                                    message=f"{len(scale_sets)} scale sets exceed ARM's "
                                            f"{ARM_MAX_RESOURCES} resources per template",
                                    remedy="use fewer --nodes or a larger --max-ib-domain, "
                                           "or split into several clusters",
                                    field="nodes",
                                    source=cite(("D-arm-limits",))))

    custom_data = None
    if ctx is not None and req.custom_data is not None:
        ofed = ctx.drivers.install_ofed
        custom_data, custom_findings = cloud_init.check(cloud_init_ofed(ofed) if ofed else None, req.custom_data)
        findings += custom_findings

    if any(f.is_error for f in findings) or ctx is None or image is None:
        raise ValidationFailed(findings)
    return Spec(
        request=req,
        profile=profile,
        size=size,
        image=image,
        names=naming.Names(req.name),
        command=command,
        security_type=canonical,
        accelerated_networking=ctx.drivers.accelerated_networking,
        ib_domain=ctx.layout.ib_domain,
        scale_sets=ctx.layout.scale_sets,
        vnet_prefix=str(vnet) if vnet else None,
        subnet_id=req.subnet_id,
        ssh_source=ssh_source,
        install_ofed=ctx.drivers.install_ofed,
        extensions=ctx.drivers.extensions,
        findings=tuple(findings),
        custom_data=custom_data,
        identity=identity,
        ppg_id=ppg_id,
        ppg_name=ppg_name,
        eviction_policy=ctx.eviction_policy,
        boot_diagnostics=req.boot_diagnostics,
        nat_gateway=not req.subnet_id and req.outbound,
    )
