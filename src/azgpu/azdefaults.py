"""The az CLI's configured defaults for the resource group and the location, read as az reads them.

`az config set defaults.group=ml-rg defaults.location=eastus` writes them to the [defaults] section
of the az config file, `config` in az's configuration directory (~/.azure, or AZURE_CONFIG_DIR); the
environment variables AZURE_DEFAULTS_GROUP and AZURE_DEFAULTS_LOCATION override the file (az reads
any setting from AZURE_<SECTION>_<NAME> first). Learn: "Azure CLI configuration". A flag, and a
cluster file's key, win over both; `--verbose` says where a value came from.
"""

from __future__ import annotations

import os
from pathlib import Path

# azgpu's parameter -> the az config key in [defaults]
KEYS = {"resource_group": "group", "location": "location"}


def config_file() -> Path:
    folder = os.environ.get("AZURE_CONFIG_DIR") or str(Path.home() / ".azure")
    return Path(folder).expanduser() / "config"


def defaults() -> dict[str, tuple[str, str]]:
    """{parameter: (value, where it came from)} for the defaults az has configured."""
    found: dict[str, tuple[str, str]] = {}
    path = config_file()
    settings = _read_defaults(path) if path.is_file() else {}
    for param, key in KEYS.items():
        env = f"AZURE_DEFAULTS_{key.upper()}"
        if os.environ.get(env, "").strip():
            found[param] = (os.environ[env].strip(), f"the environment variable {env}")
        elif settings.get(key, "").strip():
            found[param] = (settings[key].strip(), f"the az CLI's defaults ({path} [defaults] {key})")
    return found


def _read_defaults(path: Path) -> dict[str, str]:
    """The [defaults] section of az's config file. configparser is imported here, not at the top:
    most machines that run the offline commands have no az config file, and every command reads this."""
    import configparser

    parser = configparser.ConfigParser(interpolation=None)
    try:
        parser.read(path, encoding="utf-8")
    except (configparser.Error, OSError, UnicodeDecodeError):
        return {}  # az itself would fail on a broken file; azgpu just ignores it
    return {key: parser.get("defaults", key) for key in KEYS.values() if parser.has_option("defaults", key)}
