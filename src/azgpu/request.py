"""The request: what a user asks for, from CLI flags, a cluster file or Python, before validation.

Values are only converted to their types here; whether they are allowed is the validator's
business, so that every finding (bad type or broken rule) is reported at once.
"""

from __future__ import annotations

import tomllib
from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from typing import Any

from .errors import Finding, InputError

DEFAULT_VNET_PREFIX = "10.0.0.0/16"


@dataclass(frozen=True)
class Request:
    profile: str
    name: str | None = None
    size: str | None = None
    nodes: int | None = 1
    location: str | None = None
    resource_group: str | None = None
    image: str | None = None
    admin_username: str = "azureuser"
    ssh_key: str | None = None
    os_disk_size_gb: int | None = None
    ephemeral_os_disk: bool = False
    data_disks: int = 0
    data_disk_size_gb: int = 1024
    spot: bool = False
    max_price: float | None = None
    zone: str | None = None
    vnet_address_prefix: str | None = None
    subnet_id: str | None = None
    public_ip: bool = False
    # Outbound internet for the nodes through a NAT gateway on the new VNet; False for locked-down networks.
    outbound: bool = True
    ssh_source: str | None = None
    security_type: str | None = None
    max_ib_domain: int | None = None
    tags: dict[str, str] = field(default_factory=dict)
    # --custom-data: the cloud-config or script itself (read from the file), merged with azgpu's own
    # cloud-init. It may hold secrets, so it is kept out of repr and as_dict.
    custom_data: str | None = field(default=None, repr=False)
    assign_identity: bool = False  # a system-assigned identity on every scale set
    identities: tuple[str, ...] = ()  # user-assigned identity resource IDs
    ppg: str | None = None  # proximity placement group: a name to create, or an existing one's ID
    boot_diagnostics: bool = True  # with managed storage
    eviction_policy: str | None = None  # Delete | Deallocate, spot only
    generate_ssh_keys: bool = False  # create ~/.ssh/id_rsa(.pub) when no key exists, as az does
    # Findings from turning text into values (a non-numeric --nodes, an unreadable key file ...).
    input_findings: tuple[Finding, ...] = field(default=(), compare=False, repr=False)

    def with_changes(self, **changes: Any) -> Request:
        return replace(self, **changes)

    def as_dict(self) -> dict[str, Any]:
        return {f.name: getattr(self, f.name) for f in fields(self)
                if f.name not in ("input_findings", "ssh_key", "custom_data")}


KEYS = {f.name for f in fields(Request)} - {"input_findings"}
INTS = {"nodes", "os_disk_size_gb", "data_disks", "data_disk_size_gb", "max_ib_domain"}
BOOLS = {"ephemeral_os_disk", "spot", "public_ip", "outbound", "assign_identity", "boot_diagnostics", "generate_ssh_keys"}
FLOATS = {"max_price"}


def _flag(key: str) -> str:
    return "--" + key.replace("_", "-")


def _to_int(key: str, value: Any, findings: list[Finding]) -> int | None:
    if isinstance(value, bool):
        value = str(value)
    if isinstance(value, int):
        return value
    try:
        return int(str(value).strip())
    except ValueError:
        findings.append(Finding(
            f"INVALID_{key.upper()}",
            f"{_flag(key)} must be a whole number, not {value!r}",
            f"pass a whole number, e.g. {_flag(key)} 4",
            field=key,
        ))
        return None


def _to_bool(key: str, value: Any, findings: list[Finding]) -> bool:
    if isinstance(value, bool):
        return value
    text = str(value).strip().lower()
    if text in ("1", "true", "yes", "on"):
        return True
    if text in ("0", "false", "no", "off", ""):
        return False
    findings.append(Finding(f"INVALID_{key.upper()}", f"{_flag(key)} must be true or false, not {value!r}",
                            "use true or false", field=key))
    return False


def _to_float(key: str, value: Any, findings: list[Finding]) -> float | None:
    try:
        return float(value)
    except (TypeError, ValueError):
        findings.append(Finding(f"INVALID_{key.upper()}", f"{_flag(key)} must be a number, not {value!r}",
                                f"pass a number, e.g. {_flag(key)} -1 (pay up to the on-demand price)", field=key))
        return None


def _tags(value: Any, findings: list[Finding]) -> dict[str, str]:
    if isinstance(value, dict):
        return {str(k): str(v) for k, v in value.items()}
    items = [value] if isinstance(value, str) else list(value or ())
    out = {}
    for item in items:
        key, sep, val = str(item).partition("=")
        if not sep or not key.strip():
            findings.append(Finding("INVALID_TAG", f"--tag {item!r} is not key=value", "write tags as --tag team=ml",
                                    field="tags"))
            continue
        out[key.strip()] = val.strip()
    return out


def read_ssh_key(value: str, findings: list[Finding]) -> str | None:
    """A literal OpenSSH public key, or the path of a file holding one."""
    text = value.strip()
    if text.startswith(("ssh-", "ecdsa-", "sk-")):
        return text
    path = Path(text).expanduser()
    try:
        content = path.read_text().strip()
    except FileNotFoundError:
        findings.append(Finding("SSH_KEY_NOT_FOUND", f"SSH public key file '{text}' does not exist",
                                "pass an existing .pub file or the key itself: --ssh-key ~/.ssh/id_ed25519.pub "
                                "(create one with ssh-keygen -t ed25519)", field="ssh_key"))
        return None
    except OSError as exc:
        findings.append(Finding("SSH_KEY_UNREADABLE", f"cannot read SSH public key file '{text}': {exc.strerror}",
                                "check the path and its permissions", field="ssh_key"))
        return None
    if "PRIVATE KEY" in content:
        findings.append(Finding("SSH_KEY_PRIVATE", f"'{text}' is a private key; azgpu needs the public key",
                                f"pass the .pub file instead, e.g. --ssh-key {text}.pub", field="ssh_key"))
        return None
    return content


def _identities(value: Any, findings: list[Finding]) -> tuple[str, ...]:
    items = [value] if isinstance(value, str) else value if isinstance(value, (list, tuple)) else None
    if items is None or not all(isinstance(i, str) for i in items):
        findings.append(Finding("INVALID_IDENTITY", f"--identity must be resource IDs, not {value!r}",
                                "pass --identity /subscriptions/SUB/resourceGroups/RG/providers/"
                                "Microsoft.ManagedIdentity/userAssignedIdentities/NAME (repeatable)", field="identities"))
        return ()
    return tuple(dict.fromkeys(i.strip() for i in items if i.strip()))


def _generate_ssh_keys(raw: dict[str, Any], findings: list[Finding]) -> None:
    """--generate-ssh-keys: make the key pair --ssh-key (or ~/.ssh/id_rsa.pub) names when it is missing."""
    given = raw.get("ssh_key", raw.get("ssh-key"))  # cluster files spell keys like the flags
    if given is None:
        existing = default_ssh_key()
        if existing is not None:
            raw["ssh_key"] = existing  # a key exists already: use it, as az does
            return
        target = Path.home() / ".ssh" / "id_rsa.pub"
        raw["ssh_key"] = str(target)
    else:
        text = str(given).strip()
        if text.startswith(("ssh-", "ecdsa-", "sk-")) or Path(text).expanduser().exists():
            return
        target = Path(text).expanduser()
    from .sshkeys import SshKeyError, generate  # only when asked: imports cryptography

    try:
        generate(target)
    except SshKeyError as exc:
        findings.append(Finding(exc.code, exc.message, exc.remedy, field="ssh_key"))


def default_ssh_key() -> str | None:
    for name in ("id_ed25519.pub", "id_rsa.pub", "id_ecdsa.pub"):
        path = Path.home() / ".ssh" / name
        if path.is_file():
            return str(path)
    return None


def build_request(mapping: dict[str, Any] | None = None, /, *, origin: str = "", **values: Any) -> Request:
    """A Request from a mapping (cluster file, CLI) and/or keyword values; never raises for bad values."""
    raw = {**(mapping or {}), **values}
    findings: list[Finding] = []
    generate = raw.get("generate_ssh_keys", raw.get("generate-ssh-keys"))
    if generate is not None and _to_bool("generate_ssh_keys", generate, []):
        _generate_ssh_keys(raw, findings)
    clean: dict[str, Any] = {}
    where = f" in {origin}" if origin else ""
    for key, value in raw.items():
        name = key.replace("-", "_")
        if name == "tag":
            name = "tags"
        if name == "identity":
            name = "identities"
        if name not in KEYS:
            import difflib  # only for suggestions on an error: not on every start
            near = difflib.get_close_matches(name, sorted(KEYS), n=1, cutoff=0.6)
            hint = f"did you mean '{near[0].replace('_', '-')}'? " if near else ""
            findings.append(Finding("UNKNOWN_KEY", f"unknown key '{key}'{where}",
                                    f"{hint}allowed keys: {', '.join(sorted(k.replace('_', '-') for k in KEYS))}",
                                    field=key))
            continue
        if value is None:
            continue
        if name in INTS:
            value = _to_int(name, value, findings)
        elif name in BOOLS:
            value = _to_bool(name, value, findings)
        elif name in FLOATS:
            value = _to_float(name, value, findings)
        elif name == "tags":
            value = _tags(value, findings)
        elif name == "ssh_key":
            value = read_ssh_key(str(value), findings)
        elif name == "identities":
            value = _identities(value, findings)
        elif name == "custom_data" and isinstance(value, str):
            from .cloud_init import read_custom_data

            value = read_custom_data(value, findings)
        elif not isinstance(value, str):
            findings.append(Finding(f"INVALID_{name.upper()}", f"{_flag(name)} must be text, not {value!r}{where}",
                                    f"quote the value{where}", field=name))
            continue
        if value is not None:
            clean[name] = value
    if "profile" not in clean:
        if "size" not in clean:  # a size alone names its profile (--size ND40rs_v2 -> ndv2)
            findings.append(Finding("MISSING_PROFILE", "no profile given",
                                    "pass --profile ID or --size SIZE ('provision profiles list')", field="profile"))
        clean["profile"] = ""
    if "ssh_key" not in clean and "ssh_key" not in raw:
        default = default_ssh_key()
        if default:
            clean["ssh_key"] = read_ssh_key(default, findings)
    return Request(**clean, input_findings=tuple(findings))


def read_cluster_file(path: str) -> dict[str, Any]:
    """A cluster file (TOML) whose keys are the long flag names; raises InputError when unreadable."""
    file = Path(path).expanduser()
    try:
        with file.open("rb") as fh:
            data = tomllib.load(fh)
    except FileNotFoundError:
        raise InputError(f"cluster file '{path}' does not exist", code="CLUSTER_FILE_NOT_FOUND",
                         remedy="check the path given to -f/--file") from None
    except IsADirectoryError:
        raise InputError(f"cluster file '{path}' is a directory", code="CLUSTER_FILE_UNREADABLE",
                         remedy="pass the path of a .toml file to -f/--file") from None
    except OSError as exc:
        raise InputError(f"cannot read cluster file '{path}': {exc.strerror}", code="CLUSTER_FILE_UNREADABLE",
                         remedy="check the file's permissions") from None
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise InputError(f"cluster file '{path}' is not valid TOML: {exc}", code="CLUSTER_FILE_INVALID",
                         remedy="fix the TOML syntax (see examples/*.toml)") from None
    nested = [k for k, v in data.items() if isinstance(v, dict) and k not in ("tags", "tag")]
    if nested:
        raise InputError(f"cluster file '{path}' has table(s) {nested}; only top-level keys and [tags] are allowed",
                         code="CLUSTER_FILE_INVALID", remedy="write keys at the top level, e.g. nodes = 4 (see examples/)")
    return data

