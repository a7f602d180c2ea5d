"""--custom-data: the user's cloud-init merged with azgpu's as MIME multipart, within Azure's limit, carried as a
secure parameter (never in the template), readable in the parameter files."""

from __future__ import annotations

import base64
import email
import json

import pytest

from azgpu import cloud_init
from azgpu.render.arm import render_arm, render_arm_parameters
from azgpu.render.bicep import render_bicep, render_bicepparam

CLOUD_CONFIG = ("#cloud-config\nruncmd:\n  - [mount, /lustre]\n"
                "write_files:\n  - path: /etc/secret\n    content: s3cr3t-token\n")
SCRIPT = "#!/bin/bash\necho ready > /var/tmp/ready\n"


def _parts(text: str) -> list[tuple[str, str, str | None]]:
    message = email.message_from_string(text)
    assert message.is_multipart()
    return [(p.get_content_type(), p.get_payload(decode=True).decode(), p.get("Merge-Type"))
            for p in message.walk() if not p.is_multipart()]


def test_a_file_is_read(az, tmp_path):
    path = tmp_path / "init.yaml"
    path.write_text(CLOUD_CONFIG)
    assert az.request(profile="nd-a100-v4", custom_data=str(path)).custom_data == CLOUD_CONFIG


def test_a_missing_file_is_an_input_error(az, tmp_path):
    f = az.only(az.errors(profile="nd-a100-v4", custom_data=str(tmp_path / "nope.yaml")), "CUSTOM_DATA_NOT_FOUND")
    assert "#cloud-config" in f.remedy


def test_a_binary_file_is_refused(az, tmp_path):
    path = tmp_path / "init.gz"
    path.write_bytes(b"\x1f\x8b\x08\x00\xff\xfe")
    f = az.only(az.errors(profile="nd-a100-v4", custom_data=str(path)), "CUSTOM_DATA_NOT_TEXT")
    assert "uncompressed" in f.remedy


def test_an_empty_file_is_refused(az, tmp_path):
    path = tmp_path / "empty.yaml"
    path.write_text("  \n")
    assert az.only(az.errors(profile="nd-a100-v4", custom_data=str(path)), "CUSTOM_DATA_EMPTY").remedy


def test_alone_it_goes_unchanged(az):
    assert az.spec(profile="nd-a100-v4", custom_data=CLOUD_CONFIG).custom_data == CLOUD_CONFIG


def test_with_azgpus_ofed_install_it_is_merged_as_mime_multipart_after_it(az):
    spec = az.spec(profile="nd-a100-v4", image="ubuntu-2204-gen2", custom_data=CLOUD_CONFIG)
    parts = _parts(spec.custom_data)
    assert [p[0] for p in parts] == ["text/cloud-config", "text/cloud-config"]
    assert "doca-ofed" in parts[0][1] and parts[1][1] == CLOUD_CONFIG


def test_cloud_config_parts_append_lists_instead_of_replacing_them(az):
    spec = az.spec(profile="nd-a100-v4", image="ubuntu-2204-gen2", custom_data=CLOUD_CONFIG)
    assert {p[2] for p in _parts(spec.custom_data)} == {"list(append)+dict(no_replace,recurse_list)+str()"}


def test_a_script_becomes_a_shellscript_part(az):
    parts = _parts(az.spec(profile="nd-a100-v4", image="ubuntu-2204-gen2", custom_data=SCRIPT).custom_data)
    assert parts[1][:2] == ("text/x-shellscript", SCRIPT) and parts[1][2] is None


def test_a_mime_document_of_the_user_keeps_its_parts(az):
    users = cloud_init.compose("#cloud-config\nbootcmd: [a]\n", SCRIPT)  # any MIME multipart document
    parts = _parts(az.spec(profile="nd-a100-v4", image="ubuntu-2204-gen2", custom_data=users).custom_data)
    assert [p[0] for p in parts] == ["text/cloud-config", "text/cloud-config", "text/x-shellscript"]


def test_the_merged_document_is_the_same_on_every_render(az):
    one = az.spec(profile="nd-a100-v4", image="ubuntu-2204-gen2", custom_data=CLOUD_CONFIG).custom_data
    two = az.spec(profile="nd-a100-v4", image="ubuntu-2204-gen2", custom_data=CLOUD_CONFIG).custom_data
    assert one == two


def test_data_cloud_init_would_not_read_cannot_be_merged(az):
    f = az.only(az.errors(profile="nd-a100-v4", image="ubuntu-2204-gen2", custom_data="just some text\nmore"),
                "CUSTOM_DATA_FORMAT")
    assert "#cloud-config" in f.remedy and "#!" in f.remedy


def test_the_limit_is_azures_65535_bytes_of_decoded_custom_data(az):
    header = "#cloud-config\n# "
    at_limit = header + "x" * (cloud_init.MAX_CUSTOM_DATA_BYTES - len(header))
    assert az.spec(profile="nd-a100-v4", custom_data=at_limit).custom_data == at_limit
    f = az.only(az.errors(profile="nd-a100-v4", custom_data=at_limit + "x"), "CUSTOM_DATA_TOO_LARGE")
    assert "65,536 bytes" in f.message and "65,535" in f.message and f.remedy


def test_the_limit_counts_azgpus_part_too(az):
    header = "#cloud-config\n# "
    fits_alone = header + "x" * (cloud_init.MAX_CUSTOM_DATA_BYTES - len(header) - 10)
    f = az.only(az.errors(profile="nd-a100-v4", image="ubuntu-2204-gen2", custom_data=fits_alone),
                "CUSTOM_DATA_TOO_LARGE")
    assert "merged with azgpu's cloud-init" in f.message


def test_an_oversize_file_exits_2_offline(run, ssh_key, tmp_path):
    path = tmp_path / "big.yaml"
    path.write_text("#cloud-config\n# " + "x" * 70_000)
    rc, out, err = run("validate", "--profile", "nd-a100-v4", "-n", "demo", "-l", "eastus", "--ssh-key", ssh_key,
                       "--custom-data", path)
    assert rc == 2 and "ERROR: [CUSTOM_DATA_TOO_LARGE]" in err and "  remedy: " in err and "Traceback" not in err


def test_the_template_carries_a_secure_parameter_never_the_data(az):
    plan = az.plan(profile="nd-a100-v4", image="ubuntu-2204-gen2", custom_data=CLOUD_CONFIG)
    template, bicep = render_arm(plan), render_bicep(plan)
    assert template["parameters"]["customData"]["type"] == "securestring"
    assert "@secure()\nparam customData string" in bicep
    vmss = next(r for r in template["resources"] if r["type"].endswith("virtualMachineScaleSets"))
    os_profile = vmss["properties"]["virtualMachineProfile"]["osProfile"]
    assert os_profile["customData"] == "[base64(parameters('customData'))]"
    assert "customData: base64(customData)" in bicep
    for text in (json.dumps(template), bicep):
        assert "s3cr3t-token" not in text


def test_the_parameter_files_hold_the_merged_data(az):
    plan = az.plan(profile="nd-a100-v4", image="ubuntu-2204-gen2", custom_data=CLOUD_CONFIG)
    value = render_arm_parameters(plan)["parameters"]["customData"]["value"]
    assert value == plan.spec.custom_data and "doca-ofed" in value and "s3cr3t-token" in value
    assert "param customData = '" in render_bicepparam(plan)


def test_the_plan_output_does_not_show_the_data(az):
    plan = az.plan(profile="nd-a100-v4", custom_data=CLOUD_CONFIG)
    assert "s3cr3t-token" not in json.dumps(plan.summary())
    assert "custom_data" not in plan.spec.request.as_dict() and "s3cr3t" not in repr(plan.spec.request)


def test_without_custom_data_the_ofed_install_stays_inline(az):
    vmss = next(r for r in az.plan(profile="nd-a100-v4", image="ubuntu-2204-gen2").resources if r.stage == "scale-set")
    inline = vmss.body["properties"]["virtualMachineProfile"]["osProfile"]["customData"]
    assert isinstance(inline, str) and "doca-ofed" in base64.b64decode(inline).decode()
    assert "customData" not in {p.name for p in az.plan(profile="nd-a100-v4", image="ubuntu-2204-gen2").parameters}


@pytest.mark.parametrize("first,kind", [("#cloud-config", "cloud-config"), ("#!/bin/sh", "x-shellscript"),
                                        ("#cloud-boothook", "cloud-boothook"), ("#include", "x-include-url"),
                                        ("## template: jinja", "jinja2"),
                                        ("#cloud-config-archive", "cloud-config-archive")])
def test_cloud_init_headers_name_their_part_type(first, kind):
    assert cloud_init.subtype(first + "\nrest") == kind


@pytest.mark.parametrize("show", [repr, str, "{}".format, "{!r}".format], ids=["repr", "str", "format", "format-r"])
def test_no_text_form_of_the_request_or_spec_shows_the_data(az, show):
    spec = az.spec(profile="nd-a100-v4", custom_data=CLOUD_CONFIG)
    for record in (spec.request, spec):
        assert "s3cr3t" not in show(record) and "custom_data" not in show(record)


def test_rich_pretty_printing_does_not_show_the_data(az):
    # rich (a dependency: the CLI's tables) pretty-prints an object through its __rich_repr__ before its __repr__,
    # and msgspec's own __rich_repr__ yields every field: a record that hides a field from repr hides it here too.
    from rich.pretty import pretty_repr

    spec = az.spec(profile="nd-a100-v4", custom_data=CLOUD_CONFIG)
    for record in (spec.request, spec):
        text = pretty_repr(record)
        assert "s3cr3t" not in text and "custom_data" not in text and "input_findings" not in text
        assert "nd-a100-v4" in text  # the rest of the record is still shown


def test_the_plan_as_text_does_not_show_the_data(az):
    # The plan holds the merged data as the value of its secure customData parameter: neither the plan's repr
    # nor rich's pretty-printing of it shows a secure parameter's value.
    from rich.pretty import pretty_repr

    plan = az.plan(profile="nd-a100-v4", custom_data=CLOUD_CONFIG)
    assert any(p.secure and p.value == plan.spec.custom_data for p in plan.parameters)
    for text in (repr(plan), str(plan), pretty_repr(plan)):
        assert "s3cr3t" not in text and "customData" in text
