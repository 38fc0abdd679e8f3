//! OXM match fields (`ofp_oxm` TLVs) and `ofp_match` of type OXM.

use super::consts::*;
use super::wire::*;

/// One OXM TLV, kept raw so it re-encodes exactly; [`crate::flow`] interprets it.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Oxm {
    pub class: u16,
    pub field: u8,
    /// Experimenter id for class 0xffff (e.g. ONF's tcp_flags).
    pub experimenter: Option<u32>,
    pub value: Vec<u8>,
    pub mask: Option<Vec<u8>>,
}

impl Oxm {
    pub fn basic(field: u8, value: Vec<u8>, mask: Option<Vec<u8>>) -> Self {
        Oxm { class: OFPXMC_OPENFLOW_BASIC, field, experimenter: None, value, mask }
    }

    pub(crate) fn encoded_len(&self) -> usize {
        4 + self.payload_len()
    }

    fn payload_len(&self) -> usize {
        self.experimenter.map_or(0, |_| 4) + self.value.len() + self.mask.as_ref().map_or(0, |m| m.len())
    }

    pub fn encode(&self, w: &mut Vec<u8>) {
        w.u16(self.class);
        w.u8((self.field << 1) | u8::from(self.mask.is_some()));
        w.u8(self.payload_len() as u8);
        if let Some(e) = self.experimenter {
            w.u32(e);
        }
        w.extend_from_slice(&self.value);
        if let Some(m) = &self.mask {
            w.extend_from_slice(m);
        }
    }

    /// Decodes one TLV; `err_len` is reported for truncated or inconsistent lengths.
    pub(crate) fn decode(r: &mut Rd, err_len: OfpErr) -> Res<Oxm> {
        let class = r.u16()?;
        let fh = r.u8()?;
        let len = r.u8()? as usize;
        let payload = r.bytes(len).map_err(|_| err_len)?;
        let hasmask = fh & 1 == 1;
        let field = fh >> 1;
        let (experimenter, body) = if class == OFPXMC_EXPERIMENTER {
            if payload.len() < 4 {
                return Err(err_len);
            }
            (Some(u32::from_be_bytes([payload[0], payload[1], payload[2], payload[3]])), &payload[4..])
        } else {
            (None, payload)
        };
        if hasmask {
            if body.len() % 2 != 0 || body.is_empty() {
                return Err(err_len);
            }
            let h = body.len() / 2;
            Ok(Oxm { class, field, experimenter, value: body[..h].to_vec(), mask: Some(body[h..].to_vec()) })
        } else {
            Ok(Oxm { class, field, experimenter, value: body.to_vec(), mask: None })
        }
    }
}

/// ofp_match of type OXM.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Match {
    pub fields: Vec<Oxm>,
}

impl Match {
    pub fn encode(&self, w: &mut Vec<u8>) {
        let len = 4 + self.fields.iter().map(Oxm::encoded_len).sum::<usize>();
        w.u16(OFPMT_OXM);
        w.u16(len as u16);
        for f in &self.fields {
            f.encode(w);
        }
        w.pad(pad_to_8(len));
    }

    pub(crate) fn decode(r: &mut Rd) -> Res<Match> {
        let bad_len = OfpErr::new(OFPET_BAD_MATCH, OFPBMC_BAD_LEN);
        let typ = r.u16().map_err(|_| bad_len)?;
        let len = r.u16().map_err(|_| bad_len)? as usize;
        if typ != OFPMT_OXM {
            return Err(OfpErr::new(OFPET_BAD_MATCH, OFPBMC_BAD_TYPE));
        }
        if len < 4 {
            return Err(bad_len);
        }
        let body = r.bytes(len - 4).map_err(|_| bad_len)?;
        r.skip(pad_to_8(len)).map_err(|_| bad_len)?;
        let mut br = Rd::new(body, bad_len);
        let mut fields = Vec::new();
        while br.remaining() > 0 {
            fields.push(Oxm::decode(&mut br, bad_len)?);
        }
        Ok(Match { fields })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ofp::message::{Body, Msg};
    use crate::ofp::multipart::{FlowStatsRequest, MpRequest};

    #[test]
    fn truncated_match_is_bad_match() {
        let mut b = Msg::new(
            1,
            Body::MultipartRequest {
                flags: 0,
                mp_type: OFPMP_FLOW,
                req: MpRequest::Flow(FlowStatsRequest {
                    table_id: 0xff,
                    out_port: OFPP_ANY,
                    out_group: OFPG_ANY,
                    cookie: 0,
                    cookie_mask: 0,
                    matches: Match { fields: vec![Oxm::basic(0, vec![0, 0, 0, 1], None)] },
                }),
            },
        )
        .encode();
        // Claim a longer match than present.
        b[8 + 8 + 32 + 3] = 0x40;
        assert_eq!(Msg::decode(&b).unwrap_err(), OfpErr::new(OFPET_BAD_MATCH, OFPBMC_BAD_LEN));
    }
}
