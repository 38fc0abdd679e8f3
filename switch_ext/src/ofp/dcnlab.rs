//! The dcnlab experimenter messages (experimenter id [`DCNLAB_EXPERIMENTER_ID`]): their
//! bodies decoded into [`DcnlabRequest`] and the replies encoded, all big-endian
//! (switch_ext/README.md, "Experimenter messages"). Values are checked for their wire
//! form here; whether a mode, balancer or port exists is the datapath's to say.

use super::consts::*;
use super::message::Body;
use super::wire::OfpErr;

/// The select-mode code for "a balancer that has no one-byte code" in
/// GROUP_SELECT_MODE_REPLY (ask GET_GROUP_BALANCER for its spec).
pub const SELECT_MODE_OTHER: u8 = 0xff;

/// The longest balancer spec a message carries.
pub const MAX_SPEC_LEN: usize = 255;

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DcnlabRequest {
    /// `uint32 group_id; uint8 mode; uint8 pad[3]` (mode 0: the switch default).
    SetGroupSelectMode { group_id: u32, mode: u8 },
    /// `uint32 group_id; uint8 pad[4]`.
    GetGroupSelectMode { group_id: u32 },
    /// A port's ABQ settings as the discipline's options.
    SetPortAbq { port_no: u32, options: Vec<(String, String)> },
    /// `uint32 group_id; uint16 spec_len; uint8 pad[2]; char spec[spec_len]`, zero-padded
    /// to a multiple of 8 bytes. An empty spec: back to the switch default.
    SetGroupBalancer { group_id: u32, spec: String },
    /// `uint32 group_id; uint8 pad[4]`.
    GetGroupBalancer { group_id: u32 },
}

fn brc(code: u16) -> OfpErr {
    OfpErr::new(OFPET_BAD_REQUEST, code)
}

fn be32(d: &[u8]) -> u32 {
    u32::from_be_bytes([d[0], d[1], d[2], d[3]])
}

/// Decodes the body of a dcnlab experimenter message of type `exp_type`.
pub fn decode(exp_type: u32, data: &[u8]) -> Result<DcnlabRequest, OfpErr> {
    match exp_type {
        DCNLAB_SET_GROUP_SELECT_MODE => {
            group_and_pad(data)?;
            Ok(DcnlabRequest::SetGroupSelectMode { group_id: be32(data), mode: data[4] })
        }
        DCNLAB_GET_GROUP_SELECT_MODE => {
            Ok(DcnlabRequest::GetGroupSelectMode { group_id: group_and_pad(data)? })
        }
        DCNLAB_SET_PORT_ABQ => {
            let (port_no, options) = decode_set_port_abq(data)?;
            Ok(DcnlabRequest::SetPortAbq { port_no, options })
        }
        DCNLAB_SET_GROUP_BALANCER => {
            let (group_id, spec) = decode_group_spec(data)?;
            Ok(DcnlabRequest::SetGroupBalancer { group_id, spec })
        }
        DCNLAB_GET_GROUP_BALANCER => Ok(DcnlabRequest::GetGroupBalancer { group_id: group_and_pad(data)? }),
        _ => Err(brc(OFPBRC_BAD_EXP_TYPE)),
    }
}

/// An 8-byte body that starts with a group id (the rest is the caller's or padding).
fn group_and_pad(data: &[u8]) -> Result<u32, OfpErr> {
    if data.len() != 8 {
        return Err(brc(OFPBRC_BAD_LEN));
    }
    Ok(be32(data))
}

/// Decodes the SET_PORT_ABQ body (12 bytes, big-endian: `uint32 port_no; uint8 enable;
/// uint8 mode; uint8 k_unit; uint8 pad; uint32 k`) into a port and `abq` options.
pub fn decode_set_port_abq(data: &[u8]) -> Result<(u32, Vec<(String, String)>), OfpErr> {
    if data.len() != 12 {
        return Err(brc(OFPBRC_BAD_LEN));
    }
    let port_no = be32(data);
    let (enable, mode, unit) = (data[4], data[5], data[6]);
    let k = be32(&data[8..]);
    if enable > 1 || mode > 2 || unit > 2 || data[7] != 0 || (unit != 0 && k == 0) {
        return Err(brc(OFPBRC_EPERM));
    }
    let mut o = vec![("enable".to_string(), enable.to_string())];
    match mode {
        1 => o.push(("mode".into(), "ece".into())),
        2 => o.push(("mode".into(), "window".into())),
        _ => {}
    }
    match unit {
        1 => o.push(("k".into(), format!("{k}p"))),
        2 => o.push(("k".into(), format!("{k}b"))),
        _ => {}
    }
    Ok((port_no, o))
}

/// `group_id, spec_len, pad, spec, zero padding to 8`: the SET_GROUP_BALANCER body and
/// the GROUP_BALANCER_REPLY body.
fn decode_group_spec(data: &[u8]) -> Result<(u32, String), OfpErr> {
    if data.len() < 8 || !data.len().is_multiple_of(8) {
        return Err(brc(OFPBRC_BAD_LEN));
    }
    let n = u16::from_be_bytes([data[4], data[5]]) as usize;
    if n > MAX_SPEC_LEN || 8 + n > data.len() || data.len() - (8 + n) >= 8 {
        return Err(brc(OFPBRC_BAD_LEN));
    }
    if data[6..8] != [0, 0] || data[8 + n..].iter().any(|&b| b != 0) {
        return Err(brc(OFPBRC_EPERM));
    }
    let spec = &data[8..8 + n];
    if !spec.iter().all(|b| b.is_ascii_graphic()) {
        return Err(brc(OFPBRC_EPERM));
    }
    Ok((be32(data), String::from_utf8(spec.to_vec()).expect("ASCII")))
}

/// Encodes a group id and balancer spec as SET_GROUP_BALANCER and GROUP_BALANCER_REPLY
/// carry them.
pub fn encode_group_spec(group_id: u32, spec: &str) -> Vec<u8> {
    let mut d = group_id.to_be_bytes().to_vec();
    d.extend_from_slice(&(spec.len() as u16).to_be_bytes());
    d.extend_from_slice(&[0, 0]);
    d.extend_from_slice(spec.as_bytes());
    d.resize(d.len().div_ceil(8) * 8, 0);
    d
}

/// GROUP_SELECT_MODE_REPLY: `uint32 group_id; uint8 mode; uint8 pad[3]`.
pub fn select_mode_reply(group_id: u32, mode: u8) -> Body {
    let mut data = group_id.to_be_bytes().to_vec();
    data.extend_from_slice(&[mode, 0, 0, 0]);
    Body::Experimenter {
        experimenter: DCNLAB_EXPERIMENTER_ID,
        exp_type: DCNLAB_GROUP_SELECT_MODE_REPLY,
        data,
    }
}

/// GROUP_BALANCER_REPLY: the balancer group `group_id` uses (for `OFPG_ALL`, the switch's
/// default), laid out as SET_GROUP_BALANCER.
pub fn balancer_reply(group_id: u32, spec: &str) -> Body {
    Body::Experimenter {
        experimenter: DCNLAB_EXPERIMENTER_ID,
        exp_type: DCNLAB_GROUP_BALANCER_REPLY,
        data: encode_group_spec(group_id, spec),
    }
}

/// Decodes a GROUP_BALANCER_REPLY body (for controllers and tests).
pub fn decode_balancer_reply(data: &[u8]) -> Result<(u32, String), OfpErr> {
    decode_group_spec(data)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn balancer_spec_bodies_round_trip_and_pad_to_eight() {
        for spec in ["", "rr", "letflow/timeout=500us", &"x".repeat(MAX_SPEC_LEN)] {
            let d = encode_group_spec(7, spec);
            assert_eq!(d.len() % 8, 0);
            assert_eq!(d.len(), 8 + spec.len().div_ceil(8) * 8);
            assert_eq!(
                decode(DCNLAB_SET_GROUP_BALANCER, &d),
                Ok(DcnlabRequest::SetGroupBalancer { group_id: 7, spec: spec.to_string() })
            );
            assert_eq!(decode_balancer_reply(&d), Ok((7, spec.to_string())));
        }
        assert_eq!(encode_group_spec(1, "rr"), [0, 0, 0, 1, 0, 2, 0, 0, b'r', b'r', 0, 0, 0, 0, 0, 0]);
    }

    #[test]
    fn malformed_balancer_bodies_are_refused() {
        let len = Err(brc(OFPBRC_BAD_LEN));
        let eperm = Err(brc(OFPBRC_EPERM));
        let set = |d: &[u8]| decode(DCNLAB_SET_GROUP_BALANCER, d).map(|_| ());
        let good = encode_group_spec(1, "rr");
        assert_eq!(set(&good[..12]), len, "not a multiple of 8");
        assert_eq!(set(&good[..8]), len, "spec_len says 2, body has none");
        assert_eq!(set(&[good.clone(), vec![0; 8]].concat()), len, "8 bytes of padding too many");
        let mut d = good.clone();
        d[6] = 1;
        assert_eq!(set(&d), eperm, "pad");
        let mut d = good.clone();
        d[15] = 1;
        assert_eq!(set(&d), eperm, "trailing pad");
        let mut d = good.clone();
        d[8] = b' ';
        assert_eq!(set(&d), eperm, "space in spec");
        let mut d = encode_group_spec(1, &"x".repeat(256));
        d[4..6].copy_from_slice(&256u16.to_be_bytes());
        assert_eq!(set(&d), len, "spec over 255 bytes");
        assert_eq!(decode(DCNLAB_GET_GROUP_BALANCER, &[0; 4]).map(|_| ()), len);
        assert_eq!(decode(99, &[]).map(|_| ()), Err(brc(OFPBRC_BAD_EXP_TYPE)));
    }
}
