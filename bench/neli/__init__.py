"""NELI: takeover time after SIGKILL and the cost of asking "do I lead this?"."""
