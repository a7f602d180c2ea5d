"""The commands that never talk to Azure: profiles, images, validate, plan, render."""

from __future__ import annotations

import click

from ..errors import InputError
from .options import common, emit, print_findings, request_options, validated


def register(cli: click.Group) -> None:
    @cli.group()
    def profiles():
        """Per-series profiles: sizes, documented requirements, sources."""

    @profiles.command("list")
    @common
    def profiles_list(obj):
        """List the series profiles."""
        from ..catalog_view import list_rows, profile_table

        emit(list_rows(), obj, table=profile_table)

    @profiles.command("show")
    @click.argument("profile_id")
    @common
    def profiles_show(obj, profile_id):
        """Show a profile: sizes, requirements with their sources, where other documents disagree with Learn."""
        from ..catalog_view import profile_detail
        from ..profiles import find_size, load_profile

        try:
            profile = load_profile(profile_id)
        except InputError as unknown:
            try:
                profile = find_size(profile_id)[0]  # ND6, NG8 ... resolve to their series
            except InputError:
                raise unknown from None
        emit(profile_detail(profile), obj)

    @cli.group()
    def images():
        """The image catalog azgpu checks requests against offline."""

    @images.command("list")
    @click.option("--profile", default=None, help="Only images built for this profile.")
    @common
    def images_list(obj, profile):
        """List catalog images (Azure HPC images and common marketplace images)."""
        from ..catalog_view import image_rows, image_table

        emit(image_rows(profile), obj, table=image_table)

    @cli.command("validate")
    @request_options
    @common
    def validate_cmd(obj, **values):
        """Check a request against every documented rule; exit 2 on any error."""
        spec = validated(values, "validate")
        print_findings(spec.findings, verbose=obj["verbose"])
        emit({"valid": True, "profile": spec.profile.id, "size": spec.size.name, "nodes": spec.nodes,
              "scale_sets": list(spec.scale_sets), "image": spec.image.urn,
              "findings": [f.as_dict() for f in spec.findings]}, obj)

    @cli.command("plan")
    @request_options
    @click.option("--currency", default="USD", show_default=True,
                  help="Currency of the price (the Azure Retail Prices API's currencies, e.g. EUR).")
    @common
    def plan_cmd(obj, currency, **values):
        """Show the resources a request would create, in dependency order, and what they cost."""
        from ..plan import build_plan
        from ..pricing import check_currency, plan_estimate

        check_currency(currency)  # a bad currency fails before anything else runs
        spec = validated(values, "plan")
        print_findings(spec.findings, verbose=obj["verbose"])
        plan = build_plan(spec)
        emit({**plan.summary(), "cost": plan_estimate(plan, currency=currency).as_dict()}, obj)

    @cli.command("render")
    @request_options
    @click.option("--format", "fmt", type=click.Choice(["arm", "bicep", "all"]), default="all", show_default=True,
                  help="Template format(s) to write.")
    @click.option("--out-dir", default="out", show_default=True, help="Directory to write the templates to.")
    @common
    def render_cmd(obj, fmt, out_dir, **values):
        """Write ARM JSON and/or Bicep templates (+ parameter files) for review."""
        from ..plan import build_plan
        from ..render.arm import render_arm, render_arm_parameters, to_json

        spec = validated(values, "render")
        plan = build_plan(spec)
        files: dict[str, str] = {}
        if fmt in ("arm", "all"):
            files["main.json"] = to_json(render_arm(plan))
            files["main.parameters.json"] = to_json(render_arm_parameters(plan))
        if fmt in ("bicep", "all"):
            from ..render.bicep import render_bicep, render_bicepparam

            files["main.bicep"] = render_bicep(plan)
            files["main.bicepparam"] = render_bicepparam(plan)
        from ..render.write import write_files

        directory = write_files(out_dir, files, private={"main.parameters.json", "main.bicepparam"})
        print_findings(spec.findings, verbose=obj["verbose"])
        emit({"out_dir": str(directory), "files": [{"name": n, "bytes": len(t.encode())} for n, t in files.items()],
              "resources": len(plan.resources), "scale_sets": [r.name for r in plan.scale_sets]}, obj)
