//! OpenFlow 1.3 wire format.
pub mod codec;
pub mod consts;
