"""azgpu as Slurm's power-saving programs: CLOUD node names per InfiniBand domain, the slurm.conf
fragment that maps them to azgpu's scale sets, and resume/suspend/resume-fail.

Slurm's "Power Saving Guide" (slurm.schedmd.com/power_save.html) and slurm.conf(5) define the
interface: slurmctld runs ResumeProgram, SuspendProgram and ResumeFailProgram as SlurmUser with a
hostlist expression as the argument; a resumed CLOUD node's address reaches slurmctld through
`scontrol update nodename=... nodeaddr=... nodehostname=...`.
"""
