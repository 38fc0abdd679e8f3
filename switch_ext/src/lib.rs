//! dcnlab-switch: an OpenFlow 1.3 userspace software switch for dcnlab experiments.
//!
//! Module map: [`ofp`] wire codec, [`packet`] frame parsing and rewrites, [`flow`] flow
//! tables and [`flowindex`] their lookup index, [`nx`] Nicira extensions (datapath side),
//! [`group`] groups, [`lb`] load balancers (a select group's bucket choice), [`conga`]
//! CONGA's in-band congestion labels and leaf tables, [`datapath`]
//! the I/O-free switch logic, [`linkem`] egress link emulation, [`qdisc`] queue
//! disciplines, [`spec`] plug-ins chosen by name with options, [`units`] rates, durations
//! and sizes, [`qhist`] time-weighted queue-length histograms, [`ports`] a frame's path
//! through a port's queues, [`conn`] controller channel, [`sys`] Linux syscalls,
//! [`switch`] the event loop, [`cli`] command line, [`selftest`] encoder samples, [`bench`]
//! the flow-table lookup benchmark.

pub mod bench;
pub mod cli;
pub mod conga;
pub mod conn;
pub mod datapath;
pub mod flow;
pub mod flowindex;
pub mod group;
pub mod lb;
pub mod linkem;
pub mod nx;
pub mod ofp;
pub mod packet;
pub mod ports;
pub mod qdisc;
pub mod qhist;
pub mod selftest;
pub mod spec;
pub mod switch;
pub mod sys;
pub mod units;
