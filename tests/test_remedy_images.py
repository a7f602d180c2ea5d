"""Every remedy that names an image names a current one: never a legacy image of the catalog (CentOS
7.9, Ubuntu 18.04 ...), for any profile and any image a request may start from."""

from __future__ import annotations

import re

import pytest

from azgpu.images import catalog
from azgpu.profiles import list_profiles

PROFILES = [p.id for p in list_profiles()]
LEGACY_WORDS = re.compile(r"centos|18\.04|1804|7\.9|7_9", re.IGNORECASE)


def remedies(az, profile: str) -> list[tuple[str, str]]:
    out = []
    for image in [None, *catalog()]:
        values = {"profile": profile, "nodes": 2}
        if image:
            values["image"] = image
        for command in ("validate", "create"):
            out += [(f.code, f.remedy) for f in az.findings(command, **values) if f.remedy]
    return out


@pytest.mark.parametrize("profile", PROFILES)
def test_remedies_name_current_images_only(az, profile):
    images = catalog()
    current = {name for name, img in images.items() if not img.legacy}
    legacy = {name for name, img in images.items() if img.legacy}
    assert legacy and current  # the catalog marks both, or this test would hold nothing
    named_any = False
    for code, remedy in remedies(az, profile):
        names = set(re.findall(r"[a-z0-9][a-z0-9.-]*[a-z0-9]", remedy)) & set(images)
        named_any |= bool(names)
        assert not names & legacy, f"{profile}: {code} recommends the legacy image(s) {names & legacy}: {remedy}"
        urns = {img.urn for name, img in images.items() if name in legacy}
        assert not any(urn in remedy for urn in urns), f"{profile}: {code} names a legacy URN: {remedy}"
        suggestion = re.search(r"(?:--image|such as|e\.g\.)\s+([\w.:-]+)", remedy)
        if suggestion and suggestion.group(1) in images:
            assert suggestion.group(1) in current, f"{profile}: {code}: {remedy}"
        assert not LEGACY_WORDS.search(remedy.replace(".1804",
                                                      "")), f"{profile}: {code} recommends a legacy OS: {remedy}"
    assert named_any or profile in ("nd",), f"{profile}: no remedy named an image; the test checked nothing"


def test_no_remedy_in_the_code_names_a_legacy_image():
    """The literal text of every remedy in the source (the error-codes page's), whatever raises it."""
    import sys
    from pathlib import Path

    tools = str(Path(__file__).resolve().parents[1] / "tools")
    sys.path.insert(0, tools)
    try:
        import reference_docs
    finally:
        sys.path.remove(tools)
    legacy = {name for name, img in catalog().items() if img.legacy}
    remedies = [(code, e["remedy"]) for code, entries in reference_docs.error_codes().items() for e in entries]
    assert len(remedies) > 100
    for code, remedy in remedies:
        assert not set(re.findall(r"[a-z0-9][a-z0-9.-]*[a-z0-9]", remedy)) & legacy, f"{code}: {remedy}"
        assert not LEGACY_WORDS.search(remedy), f"{code}: {remedy}"
