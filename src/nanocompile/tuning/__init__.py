"""Autotuning: measuring and choosing among candidate schedules of a kernel."""
