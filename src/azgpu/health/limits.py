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
