"""The az CLI's configured defaults for the resource group and the location, read as az reads them.

`az config set defaults.group=ml-rg defaults.location=eastus` writes them to the [defaults] section
of the az config file, `config` in az's configuration directory (~/.azure, or AZURE_CONFIG_DIR); the
environment variables AZURE_DEFAULTS_GROUP and AZURE_DEFAULTS_LOCATION override the file (az reads
any setting from AZURE_<SECTION>_<NAME> first). Learn: "Azure CLI configuration". A flag, and a
cluster file's key, win over both; `--verbose` says where a value came from.
"""

from __future__ import annotations

import configparser
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
    parser = configparser.ConfigParser(interpolation=None)
    try:
        parser.read(path, encoding="utf-8")
    except (configparser.Error, OSError, UnicodeDecodeError):
        parser = configparser.ConfigParser()  # az itself would fail on a broken file; azgpu just ignores it
    for param, key in KEYS.items():
        env = f"AZURE_DEFAULTS_{key.upper()}"
        if os.environ.get(env, "").strip():
            found[param] = (os.environ[env].strip(), f"the environment variable {env}")
        elif parser.has_option("defaults", key) and parser.get("defaults", key).strip():
            found[param] = (parser.get("defaults", key).strip(), f"the az CLI's defaults ({path} [defaults] {key})")
    return found
