//! Shared by the integration tests: an in-memory datapath with a controller attached.

use dcnlab_switch::datapath::{Datapath, DpConfig, FailMode};
use dcnlab_switch::group::SelectMode;
use dcnlab_switch::ofp::codec::{Body, FlowMod, Instruction, Match, Msg, Oxm, PortDesc};

/// A datapath with 4 tables and ports 1..=`ports` (MAC 02:00:00:00:00:<port>), up and
/// connected to a controller.
#[allow(dead_code)] // not every test binary builds one this way
pub fn datapath(mode: SelectMode, fail: FailMode, ports: u32, seed: u64) -> Datapath {
    let mut dp = Datapath::new(DpConfig {
        name: "s1".into(),
        dpid: 1,
        n_tables: 4,
        select_mode: mode,
        fail_mode: fail,
        seed,
    });
    for p in 1..=ports {
        dp.add_port(
            PortDesc { port_no: p, hw_addr: [2, 0, 0, 0, 0, p as u8], ..Default::default() },
            true,
            0,
        );
    }
    dp.connected = true;
    dp
}

/// A controller message through the wire codec; what the datapath answered.
#[allow(dead_code)] // not every test binary sends messages
pub fn send(dp: &mut Datapath, body: Body) -> Vec<Msg> {
    dp.handle_raw(&Msg::new(9, body).encode(), 0);
    std::mem::take(&mut dp.ctrl)
}

/// An OFPFC_ADD flow mod (the fields the cases vary; the rest as a controller sends).
#[allow(dead_code)] // not every test binary installs flows
pub fn add(table: u8, prio: u16, fields: Vec<Oxm>, instrs: Vec<Instruction>) -> Body {
    Body::FlowMod(Box::new(FlowMod {
        table_id: table,
        matches: Match { fields },
        instructions: instrs,
        ..FlowMod::add(prio)
    }))
}

/// Installs a flow; fails the test if the datapath refuses it.
#[allow(dead_code)] // not every test binary installs flows
pub fn flow(dp: &mut Datapath, table: u8, prio: u16, fields: Vec<Oxm>, instrs: Vec<Instruction>) {
    let r = send(dp, add(table, prio, fields, instrs));
    assert!(r.is_empty(), "flow mod refused: {r:?}");
}

/// The entries of list `list` in the JSON test data file `file` (a path under the crate,
/// `tests/vectors/of13.json` say): Ryu's encodings the generators under
/// `tests/switch_ext/` wrote.
#[allow(dead_code)] // not every test binary reads them
pub fn json_list(file: &str, list: &str) -> Vec<serde_json::Value> {
    let path = format!("{}/{file}", env!("CARGO_MANIFEST_DIR"));
    let doc: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    doc[list].as_array().unwrap_or_else(|| panic!("{path}: no list {list:?}")).clone()
}

/// Hex text as bytes.
#[allow(dead_code)]
pub fn unhex(s: &str) -> Vec<u8> {
    (0..s.len()).step_by(2).map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap()).collect()
}
