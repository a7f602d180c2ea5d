"""The health gate's offline half: what runs on a node and what it says back.

- `node_check.sh`: the script Run Command runs on every node (AzNHC, or a documented fallback),
  printing one versioned verdict line.
- `script`: the expectations of a size (from its profile's [sizes.health]) and the Run Command
  body carrying the script with them.
- `results`: reading a verdict out of a Run Command result, and the per-node result model
  (NodeResult, Failure) with the stable finding kinds.
- `impact`: the Guest Health Reporting impact category of a failure, a pure function of it.

Nothing here imports the Azure SDK; azgpu.deploy.health runs the checks against Azure.
"""
