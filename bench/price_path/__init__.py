"""The price path: line rate beside bare forwarders, end to end, flame graphs, memory in a flood."""
