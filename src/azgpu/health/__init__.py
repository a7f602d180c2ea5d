"""The health gate's offline half: what runs on a node and what it says back.

- `node_check.sh`: the script Run Command runs on every node (AzNHC, or a documented fallback),
  printing one versioned verdict line.
- `script`: the expectations of a size (from its profile's [sizes.health]) and the Run Command
  body carrying the script with them.
- `results`: reading a verdict out of a Run Command result, and the per-node result model
  (NodeResult, Failure) with the stable finding kinds.
- `impact`: the Guest Health Reporting impact category of a failure, a pure function of it.

- `judging`: one node's captured output judged as the gate judges it (`azgpu.health.judge(output, size)`),
  and `node_script(size)`: the on-node script with a size's expectations, to run by hand.

Nothing here imports the Azure SDK; azgpu.deploy.health_gate runs the checks against Azure
(through the Run Command client, azgpu.deploy.run_command).
"""

__all__ = ["judge", "node_script"]


def __getattr__(name: str):
    # Loaded on first use: commands that only read azgpu.health.limits pay for nothing else.
    if name == "judge":
        from .judging import judge
        return judge
    if name == "node_script":
        from .script import node_script
        return node_script
    raise AttributeError(name)
