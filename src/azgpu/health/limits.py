"""The health gate's and reporting's numeric limits, apart from the code that uses them, so that
the CLI can show them as defaults without importing that code (every command pays for its imports)."""

# Scale-set VM Run Commands are throttled at 4 per minute per instance (bucket 12) and 500 per minute
# per subscription (bucket 1,500) (Learn compute-throttling-limits, D-compute-throttle), and every POST is
# one of Resource Manager's writes (bucket 200, 10 a second). azgpu paces its own requests under those
# buckets (deploy/pacing.py), so the bound on Run Commands in flight is no longer what keeps it inside
# them: at 500 a minute and 20 s or more per check, keeping up with the subscription's rate takes about
# 170 in flight, and more while Resource Manager's first 200 and Compute's first 1,500 go at once.
PARALLEL = 500
MAX_PARALLEL = 500
NODE_TIMEOUT = 3600.0  # seconds azgpu waits for one node's verdict: AzNHC with -a runs bandwidth tests
MIN_NODE_TIMEOUT = 60.0
MAX_NODE_TIMEOUT = 5400.0  # Run Command's own limit: 90 minutes (Learn linux/run-command)
MAX_ROUNDS = 3  # replacement rounds of `create --replace-unhealthy` unless --max-rounds says otherwise

# How long the gate follows a report's insights before it goes on: Learn's FAQ says they appear
# "typically within minutes"; never longer than an hour, 0 reads them once.
INSIGHT_TIMEOUT = 300.0
MAX_INSIGHT_TIMEOUT = 3600.0
INSIGHT_POLL = 30.0


def check_options(*, parallel: int | None = None, node_timeout: float | None = None,
                  max_rounds: int | None = None) -> None:
    """Raise InputError for an option out of its range, before anything runs (a lock, a request, a file):
    `check --parallel 0`, `--node-timeout nan|inf|0|-1` are refused, never turned into something else."""
    import math

    from ..errors import InputError

    if parallel is not None and (isinstance(parallel, bool) or not isinstance(parallel, int)
                                 or not 1 <= parallel <= MAX_PARALLEL):
        raise InputError(f"--parallel {parallel} is out of range", code="INVALID_PARALLEL",
                         remedy=f"use 1 to {MAX_PARALLEL} Run Commands at a time (default {PARALLEL})")
    # Compared before math.isfinite, which cannot convert an int past a float's range (OverflowError).
    if node_timeout is not None and (isinstance(node_timeout, bool) or not isinstance(node_timeout, (int, float))
                                     or not MIN_NODE_TIMEOUT <= node_timeout <= MAX_NODE_TIMEOUT
                                     or not math.isfinite(node_timeout)):
        raise InputError(f"--node-timeout {node_timeout} is out of range", code="INVALID_NODE_TIMEOUT",
                         remedy=f"use {MIN_NODE_TIMEOUT:g} to {MAX_NODE_TIMEOUT:g} seconds (Run Command stops a "
                                f"script after 90 minutes; default {NODE_TIMEOUT:g})")
    if max_rounds is not None and (isinstance(max_rounds, bool) or not isinstance(max_rounds, int)
                                   or not 1 <= max_rounds <= 10):
        raise InputError(f"--max-rounds {max_rounds} is out of range", code="INVALID_MAX_ROUNDS",
                         remedy=f"use 1 to 10 replacement rounds (default {MAX_ROUNDS})")
