"""Render a cluster file to ARM JSON and Bicep with azgpu's Python API.

    python examples/render_cluster.py examples/nd-a100-v4.toml out/a100 [--ssh-key ~/.ssh/id_ed25519.pub]

Prints every finding (errors, warnings, notes) and exits 2 when the request breaks a rule.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import azgpu
from azgpu.render.arm import render_arm_parameters
from azgpu.render.bicep import render_bicepparam


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("cluster_file", help="TOML cluster file (keys are the long flag names)")
    parser.add_argument("out_dir", help="directory for main.json, main.bicep and their parameter files")
    parser.add_argument("--ssh-key", help="SSH public key file or key text (default: ~/.ssh/id_*.pub)")
    args = parser.parse_args(argv)

    try:
        values = azgpu.read_cluster_file(args.cluster_file)
    except azgpu.AzgpuError as exc:
        print(f"ERROR: [{exc.code}] {exc.message}\n  remedy: {exc.remedy}", file=sys.stderr)
        return 2
    if args.ssh_key:
        values["ssh-key"] = args.ssh_key
    request = azgpu.build_request(values, origin=args.cluster_file)

    try:
        spec = azgpu.validate(request, command="render")
    except azgpu.ValidationFailed as failed:
        findings = failed.findings
        spec = None
    else:
        findings = spec.findings
    for f in findings:
        print(f"{f.severity.upper()}: [{f.code}] {f.message}", file=sys.stderr)
        if f.remedy:
            print(f"  remedy: {f.remedy}", file=sys.stderr)
    if spec is None:
        return 2

    plan = azgpu.build_plan(spec)
    out = Path(args.out_dir)
    out.mkdir(parents=True, exist_ok=True)
    files = {
        "main.json": json.dumps(azgpu.render_arm(plan), indent=2) + "\n",
        "main.parameters.json": json.dumps(render_arm_parameters(plan), indent=2) + "\n",
        "main.bicep": azgpu.render_bicep(plan),
        "main.bicepparam": render_bicepparam(plan),
    }
    for name, text in files.items():
        (out / name).write_text(text)
    summary = plan.summary()
    print(f"{summary['nodes']} x {summary['size']} in {len(summary['scale_sets'])} scale set(s) -> "
          f"{', '.join(str(out / n) for n in files)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
