"""Real clusters: reading a running Pulsar (ZooKeeper and the admin API), advising and executing under
guard, and the sandbox, a simulated cluster that speaks Pulsar's protocols.

Layer 4½: above ``core`` (it drives the simulator and the decision code), below ``spark`` and the CLI.
"""
