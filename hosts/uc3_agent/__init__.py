"""UC3 host agent: report TCP flows, enforce cwnd clamps with BPF sock_ops (seed 004)."""
