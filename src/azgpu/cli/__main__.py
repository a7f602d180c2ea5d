"""`python -m azgpu.cli`: the same as `provision`."""

import sys

from . import main

sys.exit(main())
