"""--custom-data: the user's cloud-init read, recognised and merged with azgpu's own as MIME multipart.

Azure passes osProfile.customData to the node base64-encoded; "the base-64 encoded string is
decoded to a binary array ... The maximum length of the binary array is 65535 bytes" (REST spec,
OSProfile.customData, compute api 2026-04-01; Learn "Custom data on Azure virtual machines": "The
size can't exceed 64 KB"). cloud-init reads several formats, each known by its first line
(cloud-init docs, doc/rtd/explanation/format); a MIME multi-part message carries several of them
(format/mime.rst), built here with Python's email package as cloud-init's own `make-mime` does.
"""

from __future__ import annotations

from pathlib import Path

from .bounded_read import read_bounded
from .errors import Finding
from .sources import cite

MAX_CUSTOM_DATA_BYTES = 65535
CUSTOM_DATA_SOURCE = "D-custom-data"
# cloud-init's header line -> MIME subtype (cloud-init docs, "User-data formats").
FORMATS = (
    ("#cloud-config-archive", "cloud-config-archive"),
    ("#cloud-config", "cloud-config"),
    ("#cloud-boothook", "cloud-boothook"),
    ("#include", "x-include-url"),
    ("#part-handler", "part-handler"),
    ("## template: jinja", "jinja2"),
    ("#!", "x-shellscript"),
)
# Two cloud-configs merge with cloud-init's default rule, under which the later one replaces what the
# earlier set (its runcmd would drop azgpu's OFED install): append lists and keep keys instead.
# cloud-init docs, doc/rtd/reference/merging.rst: the MIME header Merge-Type, and this string form.
MERGE_TYPE = "list(append)+dict(no_replace,recurse_list)+str()"


def read_custom_data(value: str, findings: list[Finding]) -> str | None:
    """--custom-data: a file's path, or the cloud-init text itself (from Python or a cluster file)."""
    text = value
    if not _is_cloud_init(value) and "\n" not in value:
        path = Path(value.strip()).expanduser()
        try:
            # A little more than Azure takes is enough to say the file is too large.
            raw = read_bounded(path, limit=4 * MAX_CUSTOM_DATA_BYTES)
        except FileNotFoundError:
            findings.append(Finding(code="CUSTOM_DATA_NOT_FOUND",
                                    message=f"--custom-data file '{value}' does not exist",
                                    remedy="pass the path of a cloud-config (#cloud-config) or script (#!) file",
                                    field="custom_data"))
            return None
        except IsADirectoryError as exc:
            findings.append(Finding(code="CUSTOM_DATA_UNREADABLE", message=f"--custom-data file '{value}' is "
                                    f"{exc.args[0] if exc.args else 'a directory'}",
                                    remedy="pass the path of a cloud-config (#cloud-config) or script (#!) file",
                                    field="custom_data"))
            return None
        except OSError as exc:
            findings.append(Finding(code="CUSTOM_DATA_UNREADABLE",
                                    message=f"cannot read --custom-data file '{value}': {exc.strerror}",
                                    remedy="check the path and its permissions", field="custom_data"))
            return None
        if len(raw) > 4 * MAX_CUSTOM_DATA_BYTES:
            findings.append(Finding(code="CUSTOM_DATA_TOO_LARGE",
                                    message=f"--custom-data file '{value}' is larger than "
                                    f"{4 * MAX_CUSTOM_DATA_BYTES:,} bytes; Azure takes at most "
                                    f"{MAX_CUSTOM_DATA_BYTES:,} bytes of custom data",
                                    remedy="keep --custom-data small: download larger setup from "
                                    "storage in a script", field="custom_data"))
            return None
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError:
            findings.append(Finding(code="CUSTOM_DATA_NOT_TEXT",
                                    message=f"--custom-data file '{value}' is not UTF-8 text "
                                    "(gzip-compressed user data cannot be merged with azgpu's cloud-init)",
                                    remedy="pass the uncompressed cloud-config or script", field="custom_data"))
            return None
    if not text.strip():
        findings.append(Finding(code="CUSTOM_DATA_EMPTY", message="--custom-data is empty",
                                remedy="pass a cloud-config or a script, "
                                "or drop --custom-data", field="custom_data"))
        return None
    return text


def _is_cloud_init(text: str) -> bool:
    return subtype(text) is not None or _is_mime(text)


def _is_mime(text: str) -> bool:
    return text.lstrip().lower().startswith("content-type:") and "multipart/" in text.lower().split("\n", 1)[0]


def subtype(text: str) -> str | None:
    """The MIME subtype of one cloud-init part, from its first line; None when it has no known header."""
    first = text.lstrip("\ufeff").split("\n", 1)[0].strip()
    for header, kind in FORMATS:
        if first.startswith(header):
            return kind
    return None


def compose(azgpu_part: str | None, user_part: str | None) -> str | None:
    """The custom data to send: azgpu's part and the user's merged as MIME multipart, or the one given.

    The user's data alone goes unchanged (it need not be cloud-init at all). azgpu's part comes
    first, so the OFED install runs before the user's commands that may need InfiniBand.
    """
    if user_part is None:
        return azgpu_part
    if azgpu_part is None:
        return user_part
    from email.message import Message
    from email.mime.multipart import MIMEMultipart
    from email.mime.text import MIMEText

    parts: list[Message] = []

    def add(text: str, kind: str) -> None:
        part = MIMEText(text, kind, "us-ascii" if text.isascii() else "utf-8")
        if kind == "cloud-config":
            part["Merge-Type"] = MERGE_TYPE
        part.add_header("Content-Disposition", "attachment", filename=f"part-{len(parts) + 1:03d}")
        parts.append(part)

    add(azgpu_part, subtype(azgpu_part) or "cloud-config")
    if _is_mime(user_part):
        import email

        message = email.message_from_string(user_part)
        for part in message.walk():
            if not part.is_multipart():
                parts.append(part)
    else:
        add(user_part, subtype(user_part) or "x-shellscript")
    document = MIMEMultipart()
    for part in parts:
        document.attach(part)
    # A fixed boundary, so a re-run renders the same template and sends the same scale-set model.
    import hashlib  # only with --custom-data: not on every render

    digest = hashlib.sha256((azgpu_part + "\0" + user_part).encode()).hexdigest()[:24]
    document.set_boundary(f"===============azgpu{digest}==")
    return document.as_string()


def check(azgpu_part: str | None, user_part: str | None) -> tuple[str | None, list[Finding]]:
    """The composed custom data and what is wrong with it; nothing is composed without the user's part."""
    if user_part is None:
        return None, []
    findings: list[Finding] = []
    if azgpu_part is not None and not _is_cloud_init(user_part):
        first = user_part.lstrip().split("\n", 1)[0][:60]
        findings.append(Finding(
            code="CUSTOM_DATA_FORMAT",
            message=f"--custom-data starts with {first!r}: cloud-init "
            "would not recognise it, and azgpu must merge it with "
            "its own cloud-init (the OFED install) as MIME multipart",
            remedy="start the file with #cloud-config (a cloud-config) or #! (a script, e.g. #!/bin/bash)",
            source=cite(("U-cloud-init-formats",)), field="custom_data"))
        return None, findings
    composed = compose(azgpu_part, user_part)
    size = len(composed.encode("utf-8"))
    if size > MAX_CUSTOM_DATA_BYTES:
        merged = " merged with azgpu's cloud-init" if azgpu_part is not None else ""
        findings.append(Finding(
            code="CUSTOM_DATA_TOO_LARGE",
            message=f"--custom-data{merged} is {size:,} bytes; Azure takes "
            f"at most {MAX_CUSTOM_DATA_BYTES:,} bytes of custom data (before base64)",
            remedy="move large files out of the cloud-config (download "
            "them at boot, e.g. from a storage account with the nodes' "
            "managed identity), or bake them into a gallery image", source=cite((CUSTOM_DATA_SOURCE,)),
            field="custom_data"))
    return composed, findings
