"""The broker: where the cores go with no fault, broker and AZ faults, the local broker's cost."""
