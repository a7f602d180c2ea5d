"""Per-series profiles: documented hardware and rules, loaded from profiles/<id>.toml.

A profile is data with provenance: every capability is written as ``{value, source}`` and every
rule, image choice and discrepancy names its source. A broken file fails at load time with the
file and the key, so a typo never turns into a silently wrong template.
"""

from __future__ import annotations

from functools import cache
from pathlib import Path
from typing import Any

from msgspec import Struct, field, structs

from .errors import InputError, ProfileError
from .shipped_data import data_dir, read_toml
from .sources import known_source

SCHEMA = 1

# Capability name -> (python type(s), required). Values come as {value = ..., source = "..."}.
CAPABILITIES: dict[str, tuple[tuple[type, ...], bool]] = {
    "hyperv_generations": ((list,), True),
    "cpu_architecture": ((str,), True),
    "accelerated_networking": ((bool,), True),
    "premium_storage": ((bool,), True),
    "ephemeral_os_disk": ((bool,), True),
    # "unknown" where Microsoft does not name the series (facts sheet, section 2).
    "trusted_launch": ((bool, str), True),
    "infiniband": ((bool,), True),
    "quota_family": ((str,), True),
    "spot": ((bool, str), False),
    "retired": ((str,), False),
    "ultra_disks": ((bool,), False),
    "gpudirect_rdma": ((bool, str), False),
    "nvlink": ((str,), False),
}

SIZE_NUMBERS = (
    "vcpus",
    "memory_gib",
    "gpus",
    "gpu_memory_gib",
    "temp_disk_gib",
    "max_data_disks",
    "max_nics",
    "ib_ports",
    "ib_rate_gbps",
)
SIZE_KEYS = {"name", "aliases", "source", "gpu_model", "gpu_fraction", "nvme", "notes", "health", "certify",
             *SIZE_NUMBERS, *CAPABILITIES}

# What the health gate expects of a healthy node of a size ([sizes.health], each as {value, source}): the
# AzNHC configuration that applies ("" when AzNHC has none for the size, so the fallback runs), and what the
# fallback compares with. A size with GPUs must have them; a size with InfiniBand also needs the port
# fields and the multi-node NCCL bus bandwidth. ib_rate_gbps 0: the rate the guest sees is not documented,
# so only the port state is checked; nccl_busbw_gbps 0: the bandwidth is measured and reported, not judged.
HEALTH_FACTS: dict[str, tuple[tuple[type, ...], str]] = {
    "aznhc_conf": ((str,), "gpu"),
    "gpus": ((int,), "gpu"),
    "gpu_vendor": ((str,), "gpu"),
    "gpu_memory_gib": ((int, float), "optional"),
    "nvlink": ((bool,), "optional"),
    "ib_ports": ((int,), "infiniband"),
    "ib_rate_gbps": ((int,), "infiniband"),
    "nccl_busbw_gbps": ((int, float), "infiniband"),
    # [sockets, cores, threads] as the guest sees them (AzNHC's check_hw_cpuinfo): Slurm's NodeName line.
    "cpu_topology": ((list,), "optional"),
}
GPU_VENDORS = ("nvidia", "amd")
# What `provision certify` expects a healthy node, link or rack of a size to measure ([sizes.certify]):
# each figure {expected, warn, floor} (at least one), with its source; the unit is fixed per figure.
# floor: below it the hardware is faulty (reported); warn: below it the result is re-tested and named.
CERTIFY_FIGURES = {
    "allreduce_busbw": "GB/s",  # all_reduce_perf across an InfiniBand domain, bus bandwidth at the largest size
    "alltoall_busbw": "GB/s",
    "mnnvl_allreduce_busbw": "GB/s",  # all_reduce_perf across one NVL72 rack (multi-node NVLink)
    "loopback_busbw": "GB/s",  # all_reduce_perf on one node's GPUs over InfiniBand only (NCCL_P2P_DISABLE=1)
    "ib_write_bw_gdr": "Gb/s",  # ib_write_bw per port with GPUDirect RDMA (--use_cuda)
    "nvbandwidth_h2d": "GB/s",  # nvbandwidth host_to_device_memcpy_ce, per GPU
    "nvbandwidth_d2h": "GB/s",  # device_to_host_memcpy_ce, per GPU
    "nvbandwidth_d2d": "GB/s",  # device_to_device_memcpy_read_ce, per pair of GPUs
}
PROFILE_KEYS = {
    "schema", "id", "series", "description", "seeds", "default_size", "defaults", "sizes", "images",
    "ofed", "nccl", "extensions", "rules", "discrepancies", "scale_set", "notes", "placement", "vertical_connect",
}
# What a vertical-connect (rack-scale NVLink) size needs on its scale set; see profiles/nd-gb300-v6.toml.
VERTICAL_CONNECT_KEYS = {"rack", "single_placement_group", "platform_fault_domain_count", "ephemeral_placement",
                         "sku_reports_gpus", "source", "notes"}


class Fact(Struct, frozen=True):
    value: Any
    source: tuple[str, ...]


class Health(Struct, frozen=True):
    """[sizes.health]: what a healthy node of the size shows, each fact with its source."""

    facts: dict[str, Fact]

    def get(self, name: str, default: Any = None) -> Any:
        fact = self.facts.get(name)
        return default if fact is None else fact.value

    def source(self, name: str) -> tuple[str, ...]:
        fact = self.facts.get(name)
        return fact.source if fact else ()


class Figure(Struct, frozen=True):
    """One expected figure of [sizes.certify]: higher is better; None where the source gives none."""

    name: str
    unit: str
    source: tuple[str, ...]
    expected: float | None = None
    warn: float | None = None
    floor: float | None = None
    note: str = ""


class Size(Struct, frozen=True):
    name: str
    aliases: tuple[str, ...]
    source: tuple[str, ...]
    vcpus: int
    memory_gib: float
    gpus: int
    gpu_model: str
    gpu_memory_gib: float
    temp_disk_gib: float
    max_data_disks: int
    max_nics: int
    ib_ports: int
    ib_rate_gbps: int
    facts: dict[str, Fact]
    gpu_fraction: str = ""
    nvme: str = ""
    notes: str = ""
    health: Health | None = None
    certify: dict[str, Figure] = field(default_factory=dict)

    def cap(self, name: str, default: Any = None) -> Any:
        fact = self.facts.get(name)
        return default if fact is None else fact.value

    @property
    def generations(self) -> tuple[str, ...]:
        return tuple(self.cap("hyperv_generations", ()))

    @property
    def arch(self) -> str:
        return self.cap("cpu_architecture")

    @property
    def infiniband(self) -> bool:
        return bool(self.cap("infiniband"))

    @property
    def retired(self) -> str:
        return self.cap("retired", "") or ""


class Rule(Struct, frozen=True):
    """A named rule from the registry in rules.py, with the arguments this profile gives it."""

    name: str
    args: dict[str, Any]
    source: tuple[str, ...]


# The series rules a profile's [[rules]] may name: the arguments each takes, and those it requires.
# rules.py registers a check under each name (tests/test_rules.py holds the two equal).
SERIES_RULE_ARGS: dict[str, tuple[frozenset[str], frozenset[str]]] = {
    "hpc_image": (frozenset(), frozenset()),
    "rdma_address_space": (frozenset({"reserved"}), frozenset()),
    "cuda_max": (frozenset({"max_major"}), frozenset({"max_major"})),
    "rack_multiple": (frozenset({"multiple"}), frozenset()),  # the rack is the profile's: Profile.rack_size
    "gpu_vendor": (frozenset({"vendor"}), frozenset({"vendor"})),
    "manual_driver": (frozenset({"message"}), frozenset({"message"})),
}


def check_profile_rules(profile: Profile) -> None:
    """A profile naming an unknown rule or argument fails at load time, naming file and rule."""
    for rule in profile.rules:
        known = SERIES_RULE_ARGS.get(rule.name)
        where = f"{profile.path.rsplit('/', 1)[-1]} [[rules]] {rule.name!r}"
        if known is None:
            raise ProfileError(f"{where}: unknown rule (known: {', '.join(sorted(SERIES_RULE_ARGS))})")
        args, required = known
        extra = set(rule.args) - args
        missing = required - set(rule.args)
        if extra or missing:
            raise ProfileError(f"{where}: unknown argument(s) {sorted(extra)} / missing {sorted(missing)}")
        if rule.name == "rack_multiple":
            _check_rack_rule(profile, rule, where)


def _check_rack_rule(profile: Profile, rule: Rule, where: str) -> None:
    """A profile has one rack size, [vertical_connect] rack: a rack rule without it, or naming another, is refused."""
    if profile.rack_size is None:
        raise ProfileError(f"{where}: the rule needs the profile's rack size ([vertical_connect] rack)")
    if "multiple" in rule.args and rule.args["multiple"] != profile.rack_size:
        raise ProfileError(f"{where}: multiple = {rule.args['multiple']!r} disagrees with the profile's rack size "
                           f"([vertical_connect] rack = {profile.rack_size}); a profile has one rack size")


class Extension(Struct, frozen=True):
    name: str
    publisher: str
    type: str
    type_handler_version: str
    settings: dict[str, Any]
    when: str  # "non-hpc-image" | "always"
    os: tuple[str, ...]
    source: tuple[str, ...]
    notes: str = ""


class Discrepancy(Struct, frozen=True):
    seed: str
    claim: str
    documented: str
    source: tuple[str, ...]


class Profile(Struct, frozen=True):
    id: str
    series: str
    description: str
    seeds: tuple[str, ...]
    default_size: str
    sizes: tuple[Size, ...]
    default_image: str
    recommended_images: tuple[str, ...]
    images_source: tuple[str, ...]
    ofed: dict[str, Any]
    nccl: dict[str, Any]
    extensions: tuple[Extension, ...]
    rules: tuple[Rule, ...]
    discrepancies: tuple[Discrepancy, ...]
    scale_set: dict[str, Any]
    path: str
    notes: str = ""
    # When a proximity placement group helps and when it only constrains capacity; racks (GB200/GB300).
    placement: dict[str, Any] | None = None
    # Rack-scale NVLink sizes (GB200/GB300): how Azure wants their scale sets; None elsewhere.
    vertical_connect: dict[str, Any] | None = None

    @property
    def rack_size(self) -> int | None:
        """VMs per rack-scale NVLink domain ([vertical_connect] rack: 18 on GB200/GB300), None without racks."""
        return int(self.vertical_connect["rack"]) if self.vertical_connect else None

    @property
    def rack_source(self) -> tuple[str, ...]:
        """The sources of rack_size."""
        return tuple(self.vertical_connect["source"]) if self.vertical_connect else ()

    def size(self, name: str) -> Size:
        """A size by ARM name or alias, case-insensitively; suggests the nearest otherwise."""
        wanted = name.strip().lower()
        for size in self.sizes:
            if wanted == size.name.lower() or wanted in (a.lower() for a in size.aliases):
                return size
        for size in self.sizes:
            if wanted == size.name.lower().removeprefix("standard_"):
                return size
        names = [s.name for s in self.sizes] + [a for s in self.sizes for a in s.aliases]
        import difflib  # only for suggestions on an error: not on every start
        near = difflib.get_close_matches(name, names, n=1, cutoff=0.4)
        hint = f"did you mean '{near[0]}'? " if near else ""
        raise InputError(
            f"size '{name}' is not in profile '{self.id}'",
            code="UNKNOWN_SIZE",
            remedy=f"{hint}choose one of: {', '.join(s.name for s in self.sizes)} "
                   f"(see 'provision profiles show {self.id}')",
        )

    @property
    def infiniband(self) -> bool:
        return any(s.infiniband for s in self.sizes)


def _sources(value: Any, where: str) -> tuple[str, ...]:
    if isinstance(value, str) and value:
        keys: tuple[str, ...] = (value,)
    elif isinstance(value, list) and value and all(isinstance(v, str) and v for v in value):
        keys = tuple(value)
    else:
        keys = ()
    if keys:
        unknown = [k for k in keys if not known_source(k)]
        if unknown:
            raise ProfileError(f"{where}: unknown source(s) {unknown}: add them to profiles/sources.toml (seed:<file> "
                               "to profiles/seeds.toml)")
        return keys
    raise ProfileError(f"{where}: 'source' must name a source (a key of profiles/sources.toml or seed:<file>)")


def _seed(name: Any, where: str) -> str:
    if not isinstance(name, str) or not known_source(f"seed:{name}"):
        raise ProfileError(f"{where}: unknown seed document {name!r}: add it to profiles/seeds.toml")
    return name


def _fact(raw: Any, name: str, where: str, table: dict | None = None) -> Fact:
    if not isinstance(raw, dict) or "value" not in raw or "source" not in raw:
        raise ProfileError(f"{where}: '{name}' must be written as {{ value = ..., source = \"...\" }}")
    types, _ = (table or CAPABILITIES)[name]
    if not isinstance(raw["value"],
                      types) or (isinstance(raw["value"], str) and types == (bool, str) and raw["value"] != "unknown"):
        raise ProfileError(f"{where}: '{name}' has value {raw['value']!r} of the wrong type")
    extra = set(raw) - {"value", "source", "note"}
    if extra:
        raise ProfileError(f"{where}: '{name}' has unknown key(s) {sorted(extra)}")
    return Fact(raw["value"], _sources(raw["source"], f"{where}.{name}"))


def _require(table: dict, key: str, types: type | tuple[type, ...], where: str) -> Any:
    if key not in table:
        raise ProfileError(f"{where}: missing key '{key}'")
    value = table[key]
    if not isinstance(value, types) or (isinstance(value, bool)
                                        and bool not in (types if isinstance(types, tuple) else (types,))):
        raise ProfileError(f"{where}: key '{key}' has value {value!r} of the wrong type")
    return value


def _vertical_connect(raw: dict | None, where: str) -> dict[str, Any] | None:
    if not raw:
        return None
    table = dict(raw)
    _check_keys(table, VERTICAL_CONNECT_KEYS, where)
    if _require(table, "rack", int, where) < 1:  # nodes are cut into racks of this many: 0 would divide by zero
        raise ProfileError(f"{where}: rack = {table['rack']} is not a number of VMs (1 or more)")
    _require(table, "single_placement_group", bool, where)
    _require(table, "platform_fault_domain_count", int, where)
    _require(table, "ephemeral_placement", str, where)
    table["source"] = _sources(table.get("source"), f"{where}.source")
    return table


def _check_keys(table: dict, allowed: set[str], where: str) -> None:
    unknown = set(table) - allowed
    if unknown:
        raise ProfileError(f"{where}: unknown key(s) {sorted(unknown)}")


def _size(raw: dict, defaults: dict[str, Fact], where: str) -> Size:
    _check_keys(raw, SIZE_KEYS, where)
    name = _require(raw, "name", str, where)
    where = f"{where} ({name})"
    facts = dict(defaults)
    for key in CAPABILITIES:
        if key in raw:
            facts[key] = _fact(raw[key], key, where)
    missing = [k for k, (_, required) in CAPABILITIES.items() if required and k not in facts]
    if missing:
        raise ProfileError(f"{where}: missing capabilities {missing} (set them in [defaults] or on the size)")
    numbers = {k: _require(raw, k, (int, float), where) for k in SIZE_NUMBERS}
    size = Size(
        name=name,
        aliases=tuple(raw.get("aliases", ())),
        source=_sources(raw.get("source"), f"{where}.source"),
        gpu_model=_require(raw, "gpu_model", str, where),
        facts=facts,
        gpu_fraction=raw.get("gpu_fraction", ""),
        nvme=raw.get("nvme", ""),
        notes=raw.get("notes", ""),
        **numbers,
    )
    size = _with_health(size, raw.get("health"), where)
    size = structs.replace(size, certify=_certify(raw.get("certify"), f"{where} [sizes.certify]"))
    if size.infiniband != (size.ib_ports > 0):
        raise ProfileError(f"{where}: 'infiniband' is {size.infiniband} but ib_ports is {size.ib_ports}")
    if size.arch not in ("x64", "Arm64"):
        raise ProfileError(f"{where}: cpu_architecture must be 'x64' or 'Arm64', not {size.arch!r}")
    if not set(size.generations) <= {"V1", "V2"} or not size.generations:
        raise ProfileError(f"{where}: hyperv_generations must be a non-empty list of 'V1'/'V2'")
    return size


def _with_health(size: Size, raw: Any, where: str) -> Size:
    """The size with its [sizes.health] expectations; a size with GPUs cannot go without them."""
    where = f"{where} [sizes.health]"
    if raw is None:
        if size.gpus > 0:
            raise ProfileError(f"{where}: {size.name} has {size.gpus} GPU(s) but no health expectations: add "
                               f"[sizes.health] with {', '.join(k for k, (_, w) in HEALTH_FACTS.items() if w == 'gpu')}"
                               " (each { value, source })")
        return size
    if not isinstance(raw, dict):
        raise ProfileError(f"{where}: must be a table")
    _check_keys(raw, set(HEALTH_FACTS), where)
    facts = {k: _fact(v, k, where, HEALTH_FACTS) for k, v in raw.items()}
    needed = [k for k, (_, when) in HEALTH_FACTS.items()
              if (when == "gpu" and size.gpus > 0) or (when == "infiniband" and size.infiniband)]
    missing = [k for k in needed if k not in facts]
    if missing:
        raise ProfileError(f"{where}: missing {missing}")
    vendor = facts.get("gpu_vendor")
    if vendor is not None and vendor.value not in GPU_VENDORS:
        raise ProfileError(f"{where}: gpu_vendor must be one of {list(GPU_VENDORS)}, not {vendor.value!r}")
    cpus = facts.get("cpu_topology")
    if cpus is not None and not (len(cpus.value) == 3 and all(isinstance(n, int) and n > 0 for n in cpus.value)
                                 and cpus.value[1] % cpus.value[0] == 0 and cpus.value[2] % cpus.value[1] == 0
                                 and cpus.value[2] == size.vcpus):
        raise ProfileError(f"{where}: cpu_topology is [sockets, cores, threads] with the size's {size.vcpus} threads, "
                           f"not {cpus.value!r}")
    conf = facts.get("aznhc_conf")
    if conf is not None and conf.value and not conf.value.endswith(".conf"):
        raise ProfileError(f"{where}: aznhc_conf names an AzNHC conf/ file (e.g. nd96asr_v4.conf) or is empty")
    return structs.replace(size, health=Health(facts))


def _certify(raw: Any, where: str) -> dict[str, Figure]:
    if raw is None:
        return {}
    if not isinstance(raw, dict):
        raise ProfileError(f"{where}: must be a table")
    _check_keys(raw, set(CERTIFY_FIGURES), where)
    out = {}
    for name, entry in raw.items():
        if not isinstance(entry, dict):
            raise ProfileError(f"{where}: '{name}' must be written as "
                               "{ expected = ..., warn = ..., floor = ..., source = ... }")
        _check_keys(entry, {"expected", "warn", "floor", "source", "note"}, f"{where}.{name}")
        levels = {k: entry.get(k) for k in ("expected", "warn", "floor")}
        if all(v is None for v in levels.values()):
            raise ProfileError(f"{where}: '{name}' names no expected, warn or floor figure")
        for k, v in levels.items():
            if v is not None and (isinstance(v, bool) or not isinstance(v, (int, float)) or v <= 0):
                raise ProfileError(f"{where}: '{name}.{k}' must be a positive number")
        known = [v for v in (levels["floor"], levels["warn"], levels["expected"]) if v is not None]
        if known != sorted(known):
            raise ProfileError(f"{where}: '{name}' must have floor <= warn <= expected")
        out[name] = Figure(name, CERTIFY_FIGURES[name], _sources(entry.get("source"), f"{where}.{name}.source"),
                           *(float(v) if v is not None else None
                             for v in (levels["expected"], levels["warn"], levels["floor"])),
                           note=str(entry.get("note", "")))
    return out


def parse_profile(data: dict, path: str) -> Profile:
    where = Path(path).name
    _check_keys(data, PROFILE_KEYS, where)
    if data.get("schema") != SCHEMA:
        raise ProfileError(f"{where}: 'schema' must be {SCHEMA}")
    defaults_raw = data.get("defaults", {})
    _check_keys(defaults_raw, set(CAPABILITIES), f"{where} [defaults]")
    defaults = {k: _fact(v, k, f"{where} [defaults]") for k, v in defaults_raw.items()}
    sizes_raw = _require(data, "sizes", list, where)
    sizes = tuple(_size(s, defaults, f"{where} [[sizes]] #{i + 1}") for i, s in enumerate(sizes_raw))
    if not sizes:
        raise ProfileError(f"{where}: no [[sizes]]")

    images = _require(data, "images", dict, where)
    _check_keys(images, {"default", "recommended", "source", "notes"}, f"{where} [images]")
    extensions = []
    for i, e in enumerate(data.get("extensions", [])):
        w = f"{where} [[extensions]] #{i + 1}"
        _check_keys(e,
                    {"name", "publisher", "type", "type_handler_version", "settings", "when", "os", "source", "notes"},
                    w)
        when = e.get("when", "non-hpc-image")
        if when not in ("non-hpc-image", "always"):
            raise ProfileError(f"{w}: 'when' must be 'non-hpc-image' or 'always'")
        extensions.append(
            Extension(
                name=_require(e, "name", str, w),
                publisher=_require(e, "publisher", str, w),
                type=_require(e, "type", str, w),
                type_handler_version=_require(e, "type_handler_version", str, w),
                settings=dict(e.get("settings", {})),
                when=when,
                os=tuple(e.get("os", ())),
                source=_sources(e.get("source"), f"{w}.source"),
                notes=e.get("notes", ""),
            )
        )
    rules = []
    for i, r in enumerate(data.get("rules", [])):
        w = f"{where} [[rules]] #{i + 1}"
        name = _require(r, "rule", str, w)
        args = {k: v for k, v in r.items() if k not in ("rule", "source")}
        rules.append(Rule(name, args, _sources(r.get("source"), f"{w}.source")))
    discrepancies = []
    for i, d in enumerate(data.get("discrepancies", [])):
        w = f"{where} [[discrepancies]] #{i + 1}"
        _check_keys(d, {"seed", "claim", "documented", "source"}, w)
        discrepancies.append(
            Discrepancy(
                _seed(_require(d, "seed", str, w), f"{w}.seed"),
                _require(d, "claim", str, w),
                _require(d, "documented", str, w),
                _sources(d.get("source"), f"{w}.source"),
            )
        )
    ofed = dict(data.get("ofed", {}))
    if ofed:
        _check_keys(ofed, {"minimum", "maximum", "pinned", "install", "source", "notes"}, f"{where} [ofed]")
        ofed["source"] = _sources(ofed.get("source"), f"{where} [ofed].source")
    nccl = dict(data.get("nccl", {}))
    if nccl:
        _check_keys(nccl, {"topology_file", "env", "source", "notes"}, f"{where} [nccl]")
        nccl["source"] = _sources(nccl.get("source"), f"{where} [nccl].source")
    scale_set = dict(data.get("scale_set", {}))
    _check_keys(scale_set, {"max_per_ib_domain", "max_per_ib_domain_raised", "max_per_scale_set", "source"},
                f"{where} [scale_set]")
    placement = dict(data.get("placement", {}))
    if placement:
        _check_keys(placement, {"ppg", "racks", "source"}, f"{where} [placement]")
        placement["source"] = _sources(placement.get("source"), f"{where} [placement].source")
    vertical = _vertical_connect(data.get("vertical_connect"), f"{where} [vertical_connect]")

    profile = Profile(
        id=_require(data, "id", str, where),
        series=_require(data, "series", str, where),
        description=data.get("description", ""),
        seeds=tuple(_seed(s, f"{where} seeds") for s in data.get("seeds", ())),
        default_size=_require(data, "default_size", str, where),
        sizes=sizes,
        default_image=_require(images, "default", str, f"{where} [images]"),
        recommended_images=tuple(images.get("recommended", ())),
        images_source=_sources(images.get("source"), f"{where} [images].source"),
        ofed=ofed,
        nccl=nccl,
        extensions=tuple(extensions),
        rules=tuple(rules),
        discrepancies=tuple(discrepancies),
        scale_set=scale_set,
        path=str(path),
        notes=data.get("notes", ""),
        placement=placement or None,
        vertical_connect=vertical,
    )
    if profile.id != Path(path).stem:
        raise ProfileError(f"{where}: 'id' is {profile.id!r} but the file is named {Path(path).stem!r}")
    try:
        profile.size(profile.default_size)
    except InputError:
        raise ProfileError(f"{where}: default_size {profile.default_size!r} is not one of its sizes") from None
    return profile


def profiles_dir() -> Path:
    return data_dir("profiles")


def profile_ids() -> list[str]:
    return sorted(p.stem for p in profiles_dir().glob("*.toml")
                  if p.stem not in ("images", "sources", "regions", "seeds"))


def _read_toml(path: Path) -> dict:
    try:
        return read_toml(path)
    except ValueError as exc:  # tomllib.TOMLDecodeError: tomllib loads only when a file is parsed, not from the cache
        raise ProfileError(f"{path.name}: not valid TOML: {exc}") from None


@cache
def load_profile(profile_id: str) -> Profile:
    """Load one profile by id (or by a size name or alias it holds); suggests the nearest id."""
    key = profile_id.strip().lower()
    path = profiles_dir() / f"{key}.toml"
    if key in profile_ids():
        profile = parse_profile(_read_toml(path), str(path))
        check_profile_rules(profile)
        return profile
    ids = profile_ids()
    import difflib  # only for suggestions on an error: not on every start
    near = difflib.get_close_matches(key, ids, n=1, cutoff=0.4)
    hint = f"did you mean '{near[0]}'? " if near else ""
    raise InputError(
        f"unknown profile '{profile_id}'",
        code="UNKNOWN_PROFILE",
        remedy=f"{hint}choose one of: {', '.join(ids)} ('provision profiles list')",
    )


def list_profiles() -> list[Profile]:
    return [load_profile(i) for i in profile_ids()]


def find_size(name: str) -> tuple[Profile, Size]:
    """The profile that holds a size name or alias (ND6, NG8, Standard_ND96asr_v4 ...)."""
    for profile in list_profiles():
        try:
            return profile, profile.size(name)
        except InputError:
            continue
    names = [s.name for p in list_profiles() for s in p.sizes] + [a for p in list_profiles() for s in p.sizes
                                                                  for a in s.aliases]
    import difflib  # only for suggestions on an error: not on every start
    near = difflib.get_close_matches(name, names, n=1, cutoff=0.4)
    hint = f"did you mean '{near[0]}'? " if near else ""
    raise InputError(f"unknown size '{name}'", code="UNKNOWN_SIZE", remedy=f"{hint}see 'provision profiles list'")
