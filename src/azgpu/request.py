"""The request: what a user asks for, from CLI flags, a cluster file or Python, before validation.

Values are only converted to their types here; whether they are allowed is the validator's
business, so that every finding (bad type or broken rule) is reported at once.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from msgspec import Struct, field, structs

from .bounded_read import read_bounded
from .cloud_init import read_custom_data
from .errors import Finding, InputError
from .resource_types import USER_ASSIGNED_IDENTITY

DEFAULT_VNET_PREFIX = "10.0.0.0/16"


def shown_fields(record: Struct, hidden: tuple[str, ...]) -> list[tuple[str, Any]]:
    """A record's fields without those that may hold secrets (custom data) or are not its value: what its
    __repr__ and its __rich_repr__ show (rich pretty-prints through __rich_repr__ before __repr__, and msgspec's
    own __rich_repr__ yields every field)."""
    return [(f, getattr(record, f)) for f in record.__struct_fields__ if f not in hidden]


def repr_without(record: Struct, hidden: tuple[str, ...]) -> str:
    """A record's repr without the fields shown_fields leaves out."""
    shown = ", ".join(f"{name}={value!r}" for name, value in shown_fields(record, hidden))
    return f"{type(record).__name__}({shown})"


class Request(Struct, frozen=True):
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
    custom_data: str | None = None
    assign_identity: bool = False  # a system-assigned identity on every scale set
    identities: tuple[str, ...] = ()  # user-assigned identity resource IDs
    ppg: str | None = None  # proximity placement group: a name to create, or an existing one's ID
    capacity_reservation_group: str | None = None  # an existing capacity reservation group's ID
    # An InfiniBand size in a reservation group (singlePlacementGroup false) deploys only with this: Learn gives
    # such a scale set no InfiniBand (capacity.spg_conflict).
    accept_reservation_infiniband_risk: bool = False
    boot_diagnostics: bool = True  # with managed storage
    eviction_policy: str | None = None  # Delete | Deallocate, spot only
    generate_ssh_keys: bool = False  # create ~/.ssh/id_rsa(.pub) when no key exists, as az does
    # Findings from turning text into values (a non-numeric --nodes, an unreadable key file ...).
    input_findings: tuple[Finding, ...] = ()

    def __repr__(self) -> str:
        return repr_without(self, ("custom_data", "input_findings"))

    def __rich_repr__(self):
        yield from shown_fields(self, ("custom_data", "input_findings"))

    def __eq__(self, other: object) -> bool:
        # What reading the input found is not part of what was asked: two requests for the same cluster are equal.
        if type(other) is not type(self):
            return NotImplemented
        return all(getattr(self, f) == getattr(other, f) for f in self.__struct_fields__ if f != "input_findings")

    __hash__ = None  # type: ignore[assignment]  # tags is a dict: never hashable, as a frozen dataclass was not

    def with_changes(self, **changes: Any) -> Request:
        return structs.replace(self, **changes)

    def as_dict(self) -> dict[str, Any]:
        return {f.name: getattr(self, f.name) for f in structs.fields(self)
                if f.name not in ("input_findings", "ssh_key", "custom_data")}


KEYS = {f.name for f in structs.fields(Request)} - {"input_findings"}
INTS = {"nodes", "os_disk_size_gb", "data_disks", "data_disk_size_gb", "max_ib_domain"}
BOOLS = {"ephemeral_os_disk", "spot", "public_ip", "outbound", "assign_identity", "boot_diagnostics",
         "generate_ssh_keys", "accept_reservation_infiniband_risk"}
FLOATS = {"max_price"}


def _flag(key: str) -> str:
    return "--" + key.replace("_", "-")


# Whole numbers and decimals in ASCII only: Python's int() and float() also take '1_000', Arabic-Indic
# digits, 'nan' and 'inf', none of which a person means as a node count or a price.
INT_RE = re.compile(r"[+-]?[0-9]+")
FLOAT_RE = re.compile(r"[+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][+-]?[0-9]+)?")
# Bytes that were not UTF-8 arrive as lone surrogates (Python's surrogateescape): not text.
NOT_TEXT = re.compile(r"[\ud800-\udfff]")


def _shown(value: Any) -> str:
    """A value as an error message shows it: one line, no control characters, not too long."""
    text = ascii(value) if isinstance(value, str) and not value.isprintable() else repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def _to_int(key: str, value: Any, findings: list[Finding]) -> int | None:
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    digits = isinstance(value, str) and INT_RE.fullmatch(value.strip())
    if digits and len(value.strip()) <= 30:  # far beyond any limit, short of int()'s own 4300-digit error
        return int(value.strip())
    findings.append(Finding(
        code=f"INVALID_{key.upper()}",
        message=f"{_flag(key)} {_shown(value)} is far too large" if digits else
        f"{_flag(key)} must be a whole number, not {_shown(value)}",
        remedy=f"pass a whole number, e.g. {_flag(key)} 4",
        field=key,
    ))
    return None


def _to_bool(key: str, value: Any, findings: list[Finding]) -> bool:
    if isinstance(value, bool):
        return value
    text = str(value).strip().lower() if isinstance(value, (str, int)) else None
    if text in ("1", "true", "yes", "on"):
        return True
    if text in ("0", "false", "no", "off", ""):
        return False
    findings.append(Finding(code=f"INVALID_{key.upper()}",
                            message=f"{_flag(key)} must be true or false, not {_shown(value)}",
                            remedy="use true or false", field=key))
    return False


def _to_float(key: str, value: Any, findings: list[Finding]) -> float | None:
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return float(value)  # nan and inf too: the rules say why a price cannot be either
    if isinstance(value, str) and FLOAT_RE.fullmatch(value.strip()):
        return float(value.strip())
    findings.append(Finding(code=f"INVALID_{key.upper()}",
                            message=f"{_flag(key)} must be a number, not {_shown(value)}",
                            remedy=f"pass a number, e.g. {_flag(key)} -1 (pay up to the on-demand price)", field=key))
    return None


TAG_REMEDY = 'write tags as --tag team=ml, or in a cluster file as [tags] team = "ml"'


def _tags(value: Any, findings: list[Finding]) -> dict[str, str]:
    """Tags from a table (cluster file, Python), 'key=value' text or a list of them (--tag)."""
    out: dict[str, str] = {}
    if isinstance(value, dict):
        for key, val in value.items():
            if isinstance(key, str) and isinstance(val, str):
                out[key] = val
            else:
                findings.append(Finding(code="INVALID_TAG",
                                        message=f"tag {_shown(key)} = {_shown(val)}: tag names and values "
                                        "are text", remedy=TAG_REMEDY, field="tags"))
        return out
    if isinstance(value, str):
        items = [value]
    elif isinstance(value, (list, tuple)):
        items = list(value)
    else:
        findings.append(Finding(code="INVALID_TAG",
                                message=f"tags must be a table or a list of 'key=value', not {_shown(value)}",
                                remedy=TAG_REMEDY, field="tags"))
        return out
    for item in items:
        key, sep, val = item.partition("=") if isinstance(item, str) else ("", "", "")
        if not sep or not key.strip():
            findings.append(Finding(code="INVALID_TAG", message=f"--tag {_shown(item)} is not key=value",
                                    remedy="write tags as --tag team=ml",
                                    field="tags"))
            continue
        out[key.strip()] = val.strip()
    return out


def _merge_tags(earlier: dict[str, str], later: dict[str, str]) -> dict[str, str]:
    """Later tags win per name; Azure compares tag names without case, so 'Team' replaces 'team'."""
    replaced = {k.lower() for k in later}
    return {**{k: v for k, v in earlier.items() if k.lower() not in replaced}, **later}


# A public key file is a line or two; anything bigger (or a device, a FIFO) is not one, and reading
# it whole could exhaust memory (/dev/zero) or block forever (a FIFO nobody writes to).
MAX_KEY_FILE = 64 * 1024
MAX_CLUSTER_FILE = 1024 * 1024


def looks_private(text: str) -> bool:
    """OpenSSH/PEM private keys, PuTTY key files, or a bare OpenSSH private key body."""
    if text.startswith(("ssh-", "ecdsa-", "sk-")) and "\n" not in text.strip():
        return False  # one public key line, whatever its comment says
    return ("PRIVATE KEY" in text or text.lstrip().startswith("PuTTY-User-Key-File")
            or "b3BlbnNzaC1rZXktdjE" in text)  # base64 of the private format's magic 'openssh-key-v1'


def read_ssh_key(value: str, findings: list[Finding]) -> str | None:
    """A literal OpenSSH public key, or the path of a file holding one. Key material never appears
    in a finding: a private key passed by mistake must not end up in a terminal or a CI log."""
    text = value.strip()
    if looks_private(text):
        findings.append(Finding(code="SSH_KEY_PRIVATE",
                                message="the --ssh-key value looks like a private key; azgpu needs the "
                                "public key (and never prints or stores a private one)",
                                remedy="pass the public key file, e.g. --ssh-key ~/.ssh/id_ed25519.pub",
                                field="ssh_key"))
        return None
    if text.startswith(("ssh-", "ecdsa-", "sk-")):
        return text
    if not text or "\n" in text or len(text) > 4096 or NOT_TEXT.search(text) or "\0" in text:
        findings.append(Finding(code="INVALID_SSH_KEY",
                                message="the --ssh-key value is neither an OpenSSH public key nor the path "
                                "of a file", remedy="pass the .pub file, e.g. --ssh-key ~/.ssh/id_ed25519.pub",
                                field="ssh_key"))
        return None
    path = Path(text).expanduser()
    shown = _shown(text)
    try:
        raw = read_bounded(path, limit=MAX_KEY_FILE)
    except FileNotFoundError:
        findings.append(Finding(code="SSH_KEY_NOT_FOUND", message=f"SSH public key file {shown} does not exist",
                                remedy="pass an existing .pub file or the key itself: --ssh-key ~/.ssh/id_ed25519.pub "
                                "(create one with ssh-keygen -t ed25519)", field="ssh_key"))
        return None
    except IsADirectoryError as exc:
        findings.append(Finding(code="SSH_KEY_UNREADABLE",
                                message=f"SSH public key file {shown} is {exc.args[0] if exc.args else 'a directory'}",
                                remedy="pass the path of a .pub file, e.g. --ssh-key ~/.ssh/id_ed25519.pub",
                                field="ssh_key"))
        return None
    except OSError as exc:
        findings.append(Finding(code="SSH_KEY_UNREADABLE",
                                message=f"cannot read SSH public key file {shown}: {exc.strerror}",
                                remedy="check the path and its permissions", field="ssh_key"))
        return None
    if len(raw) > MAX_KEY_FILE:
        findings.append(Finding(code="INVALID_SSH_KEY",
                                message=f"SSH public key file {shown} is larger than {MAX_KEY_FILE // 1024} KiB: "
                                "not a public key", remedy="pass the .pub file, e.g. --ssh-key ~/.ssh/id_ed25519.pub",
                                field="ssh_key"))
        return None
    try:
        content = raw.decode("utf-8").strip()
    except UnicodeDecodeError:
        findings.append(Finding(code="INVALID_SSH_KEY",
                                message=f"SSH public key file {shown} is not text (binary or not UTF-8): "
                                "not an OpenSSH public key",
                                remedy="pass the .pub file, e.g. --ssh-key ~/.ssh/id_ed25519.pub",
                                field="ssh_key"))
        return None
    if looks_private(content):
        findings.append(Finding(code="SSH_KEY_PRIVATE", message=f"{shown} is a private key; azgpu needs the public key",
                                remedy=f"pass the .pub file instead, e.g. --ssh-key {text}.pub", field="ssh_key"))
        return None
    return content


def _identities(value: Any, findings: list[Finding]) -> tuple[str, ...]:
    items = [value] if isinstance(value, str) else value if isinstance(value, (list, tuple)) else None
    if items is None or not all(isinstance(i, str) for i in items):
        findings.append(Finding(code="INVALID_IDENTITY", message=f"--identity must be resource IDs, not {value!r}",
                                remedy=f"pass --identity {USER_ASSIGNED_IDENTITY.example_id('NAME')} (repeatable)",
                                field="identities"))
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

    private = target.with_suffix("")
    existed = {path: path.exists() for path in (private, target)}
    try:
        generate(target)
    except SshKeyError as exc:
        findings.append(Finding(code=exc.code, message=exc.message, remedy=exc.remedy, field="ssh_key"))
        return
    # Files written on the user's behalf are announced, as az does ("SSH key files ... have been generated").
    written = [path for path, was in existed.items() if not was and path.exists()]
    if written:
        what = " and ".join(f"{p} (private key, mode 0600)" if p == private else str(p) for p in written)
        findings.append(Finding(code="SSH_KEYS_GENERATED", message=f"--generate-ssh-keys wrote {what}",
                                remedy="keep the private key safe: it logs in to "
                                       "every node; the cluster uses the public key",
                                severity="warning", field="ssh_key"))


def default_ssh_key() -> str | None:
    for name in ("id_ed25519.pub", "id_rsa.pub", "id_ecdsa.pub"):
        path = Path.home() / ".ssh" / name
        if path.is_file():
            return str(path)
    return None


def build_request(mapping: dict[str, Any] | None = None, /, *, origin: str = "", **values: Any) -> Request:
    """A Request from a mapping (cluster file, CLI) and/or keyword values; never raises for bad values.

    Keyword values override the mapping's, except tags, which merge: a keyword tag replaces only the
    mapping's tag of the same name (as --tag does over a cluster file's [tags]).
    """
    findings: list[Finding] = []
    raw = {**(mapping or {}), **values}
    generate = raw.get("generate_ssh_keys", raw.get("generate-ssh-keys"))
    if generate is not None and _to_bool("generate_ssh_keys", generate, []):
        _generate_ssh_keys(raw, findings)  # names the key it made, or the one that exists, when none was given
        if raw.get("ssh_key") is not None and all(
                source.get(k) is None for source in (mapping or {}, values) for k in ("ssh_key", "ssh-key")):
            values = {**values, "ssh_key": raw["ssh_key"]}
    clean: dict[str, Any] = {}
    where = f" in {origin}" if origin else ""
    for key, value in [*(mapping or {}).items(), *values.items()]:
        name = key.replace("-", "_") if isinstance(key, str) else str(key)
        if name == "tag":
            name = "tags"
        if name == "identity":
            name = "identities"
        if name not in KEYS:
            import difflib  # only for suggestions on an error: not on every start
            near = difflib.get_close_matches(name, sorted(KEYS), n=1, cutoff=0.6)
            hint = f"did you mean '{near[0].replace('_', '-')}'? " if near else ""
            allowed = ", ".join(sorted(k.replace("_", "-") for k in KEYS))
            findings.append(Finding(code="UNKNOWN_KEY", message=f"unknown key {_shown(key)}{where}",
                                    remedy=f"{hint}allowed keys: {allowed}",
                                    field=str(key)))
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
            value = _merge_tags(clean.get("tags", {}), _tags(value, findings))
        elif name == "identities":
            value = _identities(value, findings)
        elif name == "zone" and isinstance(value, int) and not isinstance(value, bool):
            value = str(value)  # zone = 1 in a cluster file means zone "1"
        elif not isinstance(value, str):
            findings.append(Finding(code=f"INVALID_{name.upper()}",
                                    message=f"{_flag(name)} must be text, not {_shown(value)}{where}",
                                    remedy=f"quote the value{where}", field=name))
            continue
        elif NOT_TEXT.search(value):
            findings.append(Finding(code=f"INVALID_{name.upper()}",
                                    message=f"{_flag(name)} is not text: it holds bytes that are not "
                                    f"UTF-8{where}", remedy=f"pass {_flag(name)} as UTF-8 text", field=name))
            continue
        elif name == "ssh_key":
            value = read_ssh_key(value, findings)
        elif name == "custom_data":
            value = read_custom_data(value, findings)
        if value is not None:
            clean[name] = value
    if "profile" not in clean:
        if "size" not in clean:  # a size alone names its profile (--size ND40rs_v2 -> ndv2)
            findings.append(Finding(code="MISSING_PROFILE", message="no profile given",
                                    remedy="pass --profile or --size, e.g. --profile nd-a100-v4 ('provision profiles "
                                           "list')",
                                    field="profile"))
        clean["profile"] = ""
    given = {str(k).replace("-", "_") for k in [*(mapping or {}), *values]}
    if "ssh_key" not in clean and "ssh_key" not in given:
        default = default_ssh_key()
        if default:
            clean["ssh_key"] = read_ssh_key(default, findings)
    return Request(**clean, input_findings=tuple(findings))


def read_cluster_file(path: str) -> dict[str, Any]:
    """A cluster file (TOML) whose keys are the long flag names; raises InputError when unreadable."""
    import tomllib  # here only: a command without a cluster file never parses TOML (shipped files are cached)

    file = Path(path).expanduser()
    try:
        raw = read_bounded(file, limit=MAX_CLUSTER_FILE)
        if len(raw) > MAX_CLUSTER_FILE:
            raise InputError(f"cluster file {_shown(path)} is larger than "
                             f"{MAX_CLUSTER_FILE // 1024} KiB: not a cluster file",
                             code="CLUSTER_FILE_INVALID", remedy="pass a cluster file such as examples/nd-a100-v4.toml")
        data = tomllib.loads(raw.decode("utf-8"))
    except FileNotFoundError:
        raise InputError(f"cluster file '{path}' does not exist", code="CLUSTER_FILE_NOT_FOUND",
                         remedy="check the path given to -f/--file") from None
    except IsADirectoryError as exc:
        raise InputError(f"cluster file {_shown(path)} is {exc.args[0] if exc.args else 'a directory'}",
                         code="CLUSTER_FILE_UNREADABLE", remedy="pass the path of a .toml file to -f/--file") from None
    except OSError as exc:
        raise InputError(f"cannot read cluster file '{path}': {exc.strerror}", code="CLUSTER_FILE_UNREADABLE",
                         remedy="check the file's permissions") from None
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise InputError(f"cluster file '{path}' is not valid TOML: {exc}", code="CLUSTER_FILE_INVALID",
                         remedy="fix the TOML syntax (see examples/*.toml)") from None
    except RecursionError:  # tomllib recurses into nested arrays and inline tables: a few KB reach the limit
        raise InputError(f"cluster file {_shown(path)} nests arrays or tables thousands deep: not a cluster file",
                         code="CLUSTER_FILE_INVALID",
                         remedy="pass a cluster file such as examples/nd-a100-v4.toml") from None
    except ValueError:  # a NUL in the path (possible from Python, not from a shell)
        raise InputError(f"cluster file {_shown(path)} is not a valid path", code="CLUSTER_FILE_NOT_FOUND",
                         remedy="check the path given to -f/--file") from None
    nested = [k for k, v in data.items() if isinstance(v, dict) and k not in ("tags", "tag")]
    if nested:
        raise InputError(f"cluster file '{path}' has table(s) {nested}; only top-level keys and [tags] are allowed",
                         code="CLUSTER_FILE_INVALID",
                         remedy="write keys at the top level, e.g. nodes = 4 (see examples/)")
    return data

