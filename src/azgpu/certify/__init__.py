"""`provision certify`: burn a cluster in before hand-over, and name the bad node, link or rack.

The offline half, free of Azure: what each tool a node runs prints, read by a bounded typed parser
(nccl_tests, perftest, dcgm, nvbandwidth, clocks; the node's own answer in node_output), what a size is
expected to measure (figures, from the profiles' [sizes.certify]), how a measurement is judged
(judge: floors and bands, outliers: fleet-relative), how a slow collective is traced to its culprit
(localise), the stages and their cost (levels, timeline), the run over any runner (suite) and what it
hands back (certificate, chart). azgpu.deploy.certify runs the suite through Run Command; the fake
Azure (azgpu.testing.fabric) answers the same steps from its hardware model.
"""
