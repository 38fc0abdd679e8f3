//! dcnlab's UC3 host agent, steady state (`dcnlab-uc3-agentd`): the native loop that
//! `python -m dcnlab.hosts.uc3_agent` hands over to once it has loaded, attached and
//! pinned the BPF program.  See `agent.py` and `protocol.py` for the reference.

pub mod agent;
pub mod bpf;
pub mod proto;
