//! OpenFlow 1.3 wire format, one module per message family; [`codec`] re-exports them.
pub mod action;
pub mod codec;
pub mod consts;
pub mod dcnlab;
pub mod flowmod;
pub mod instruction;
pub mod message;
pub mod multipart;
pub mod nx;
pub mod oxm;
pub mod port;
pub mod wire;
