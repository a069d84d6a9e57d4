"""Whole-topology runs: the fault drill, the demo, soaks, the AZ rehearsal."""
