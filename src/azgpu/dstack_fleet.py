"""`provision outputs --format dstack-fleet`: the cluster as dstack SSH fleets, one per InfiniBand domain.

dstack's Azure backend places VMs without InfiniBand; an SSH fleet takes hosts that already exist
(dstack docs, "Fleets", SSH fleets: dstack.ai/docs/concepts/fleets/#ssh-fleets, and the
reference dstack.ai/docs/reference/dstack.yml/fleet/). `placement: cluster` tells dstack the hosts
are interconnected for distributed tasks; InfiniBand connects only the VMs of one scale set, so
each domain is a fleet of its own. Fields written here, as that reference names them: type, name,
placement, ssh_config.user, ssh_config.identity_file, ssh_config.hosts[].hostname and
.internal_ip (dstack 0.18.29+: the address the hosts use among themselves), env.
Pure function of the outputs dict: no Azure SDK, no I/O.
"""

from __future__ import annotations

from typing import Any

from .errors import InputError

DEFAULT_USER = "azureuser"
DEFAULT_IDENTITY = "~/.ssh/id_rsa"
FLEET_KEYS = ("type", "name", "placement", "ssh_config", "env")
SSH_KEYS = ("user", "identity_file", "hosts")
HOST_KEYS = ("hostname", "internal_ip")


def _public(nodes: list[dict[str, Any]]) -> bool:
    return bool(nodes) and all(n.get("public_ip") for n in nodes)


def fleets(out: dict[str, Any], *, user: str = DEFAULT_USER, identity_file: str = DEFAULT_IDENTITY) -> list[dict]:
    """One fleet per InfiniBand domain (all nodes in one fleet where there is no InfiniBand)."""
    domains = [d for d in out["ib_domains"] if d["nodes"]]
    if not domains:
        raise InputError(f"cluster '{out['cluster']}' has no nodes to hand to dstack", code="NO_NODES",
                         remedy="create the nodes first ('provision create' or 'provision wait')")
    if not out.get("infiniband"):
        domains = [{"scale_set": out["cluster"], "nodes": [n for d in domains for n in d["nodes"]]}]
    env = {k: str(v) for k, v in (out.get("nccl_env") or {}).items()}
    result = []
    for domain in domains:
        nodes = domain["nodes"]
        public = _public(nodes)
        hosts = [{"hostname": n["public_ip"], "internal_ip": n["ip"]} if public else {"hostname": n["ip"]}
                 for n in nodes]
        fleet: dict[str, Any] = {"type": "fleet", "name": domain["scale_set"], "placement": "cluster",
                                 "ssh_config": {"user": user, "identity_file": identity_file, "hosts": hosts}}
        if env:
            fleet["env"] = env
        result.append(fleet)
    return result


def fleet_files(out: dict[str, Any], *, user: str = DEFAULT_USER, identity_file: str = DEFAULT_IDENTITY) -> dict[str,
                                                                                                                 str]:
    """`<fleet>.dstack.yml` per fleet ('dstack apply -f FILE' takes one configuration a file)."""
    import yaml

    files = {}
    for fleet in fleets(out, user=user, identity_file=identity_file):
        hosts = fleet["ssh_config"]["hosts"]
        public = "internal_ip" in hosts[0]
        head = [f"# dstack SSH fleet: {len(hosts)} x {out.get('size')} of azgpu cluster {out['cluster']}, "
                + (f"InfiniBand domain {fleet['name']}." if out.get("infiniband") else "one Ethernet network."),
                "# placement: cluster: the hosts are interconnected"
                + (" (InfiniBand within this scale set only)." if out.get("infiniband") else "."),
                "# Apply with: dstack apply -f " + f"{fleet['name']}.dstack.yml"]
        if public:
            head.append("# hostname: the public IP dstack's server connects "
                        "to; internal_ip: the private IP the hosts use.")
        else:
            head.append("# hostname: private IPs: run the dstack server inside the virtual network (or add "
                        "ssh_config.proxy_jump).")
        if fleet.get("env"):
            head.append("# env: the profile's NCCL settings for this size.")
        files[f"{fleet['name']}.dstack.yml"] = "\n".join(head) + "\n" + yaml.safe_dump(fleet, sort_keys=False)
    return files
