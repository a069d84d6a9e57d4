"""Hostile records (issue 45) written into running members, judged from outside."""
