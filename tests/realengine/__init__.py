"""This repository's program under the real Pulumi engine, against the emulated NUMA machine and
the real control plane: the stack driver (`stack.py`), what a cluster's node agents do around it
(`agent.py`) and the one-command demo (`demo.py`, `make demo`)."""
