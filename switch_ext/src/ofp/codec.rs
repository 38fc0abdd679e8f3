//! OpenFlow 1.3 message decoder and encoder.
//!
//! The decoder turns one complete message (header included) into a [`Msg`]; it never
//! panics on arbitrary input (see the proptest in [`super::message`] and
//! `tests/fuzz_decoder.rs`) and reports malformed input as the OFPT_ERROR type/code the
//! spec prescribes. The encoder is the exact inverse for everything the decoder accepts:
//! padding is written as zeros and lengths are recomputed, so a message serialized by Ryu
//! re-encodes byte-identically (checked against vectors from Ryu's own serializer in
//! `tests/vectors.rs`).
//!
//! One module per wire format, re-exported here so users import a single path:
//! [`super::wire`] primitives, [`super::oxm`] match fields, [`super::action`] actions, [`super::nx`] Nicira extension actions,
//! [`super::instruction`] instructions, [`super::flowmod`] flow/group mods and
//! flow-removed, [`super::port`] port descriptions, [`super::multipart`] statistics, and
//! [`super::message`] the header and per-type framing.

pub use super::action::*;
pub use super::flowmod::*;
pub use super::instruction::*;
pub use super::message::*;
pub use super::multipart::*;
pub use super::nx::*;
pub use super::oxm::*;
pub use super::port::*;
pub use super::wire::{OfpErr, Res};
