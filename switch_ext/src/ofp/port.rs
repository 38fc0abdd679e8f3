//! `ofp_port`: the port description of OFPT_PORT_STATUS and the port-desc multipart reply.

use super::wire::*;

#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct PortDesc {
    pub port_no: u32,
    pub hw_addr: [u8; 6],
    pub name: String,
    pub config: u32,
    pub state: u32,
    pub curr: u32,
    pub advertised: u32,
    pub supported: u32,
    pub peer: u32,
    pub curr_speed: u32,
    pub max_speed: u32,
}

impl PortDesc {
    pub(crate) fn encode(&self, w: &mut Vec<u8>) {
        w.u32(self.port_no);
        w.pad(4);
        w.extend_from_slice(&self.hw_addr);
        w.pad(2);
        put_str(w, &self.name, 16);
        for v in [
            self.config,
            self.state,
            self.curr,
            self.advertised,
            self.supported,
            self.peer,
            self.curr_speed,
            self.max_speed,
        ] {
            w.u32(v);
        }
    }

    pub(crate) fn decode(r: &mut Rd) -> Res<PortDesc> {
        let port_no = r.u32()?;
        r.skip(4)?;
        let mut hw_addr = [0u8; 6];
        hw_addr.copy_from_slice(r.bytes(6)?);
        r.skip(2)?;
        let name = fixed_str(r.bytes(16)?);
        Ok(PortDesc {
            port_no,
            hw_addr,
            name,
            config: r.u32()?,
            state: r.u32()?,
            curr: r.u32()?,
            advertised: r.u32()?,
            supported: r.u32()?,
            peer: r.u32()?,
            curr_speed: r.u32()?,
            max_speed: r.u32()?,
        })
    }
}
