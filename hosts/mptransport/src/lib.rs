//! dcnlab-mp: a user-space multipath transport.
//!
//! One connection runs over N kernel TCP subflows (one per path, each bound to its own
//! source address).  The sender keeps a connection-level send buffer, cuts it into
//! segments with data sequence numbers (DSN), and a [`sched::Scheduler`] decides which
//! subflow carries each segment (or carries it again).  The receiver reassembles by DSN,
//! suppresses duplicates and acknowledges at the connection level what it delivered to
//! the application, so the sender may drop it from its buffer.  The wire format is in
//! [`wire`]; per-subflow state comes from `TCP_INFO` ([`net::tcp_info`]).

pub mod net;
pub mod pattern;
pub mod reasm;
pub mod receiver;
pub mod sched;
pub mod sender;
pub mod wire;
