//! Codec vectors produced by Ryu's serializer (tests/switch_ext/gen_of13_vectors.py).
//! Every controller-to-switch message must decode and re-encode byte-identically, and the
//! ones marked `dp_ok` must be accepted, in order, by the datapath without an OFPT_ERROR.

use dcnlab_switch::datapath::{Datapath, DpConfig, FailMode};
use dcnlab_switch::group::SelectMode;
use dcnlab_switch::ofp::codec::{Body, Msg, PortDesc};
use dcnlab_switch::ofp::consts::*;

fn unhex(s: &str) -> Vec<u8> {
    (0..s.len()).step_by(2).map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap()).collect()
}

fn vectors() -> Vec<(String, Vec<u8>, bool)> {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/vectors/of13.json");
    let doc: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    doc["vectors"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| {
            (
                v["name"].as_str().unwrap().to_string(),
                unhex(v["hex"].as_str().unwrap()),
                v["dp_ok"].as_bool().unwrap(),
            )
        })
        .collect()
}

#[test]
fn ryu_vectors_roundtrip_byte_identical() {
    let vs = vectors();
    assert!(vs.len() > 100, "expected the full vector set");
    for (name, bytes, _) in &vs {
        let m = Msg::decode(bytes).unwrap_or_else(|e| panic!("{name}: decode failed: {e:?}"));
        let again = m.encode();
        assert_eq!(&again, bytes, "{name}: re-encoding differs\n ryu: {bytes:02x?}\n ours: {again:02x?}");
    }
}

fn datapath() -> Datapath {
    let mut dp = Datapath::new(DpConfig {
        name: "s1".into(),
        dpid: 1,
        n_tables: 4,
        select_mode: SelectMode::Hash,
        fail_mode: FailMode::Secure,
        seed: 1,
    });
    for p in 1..=3u32 {
        dp.add_port(
            PortDesc {
                port_no: p,
                hw_addr: [2, 0, 0, 0, 0, p as u8],
                name: format!("s1-eth{p}"),
                ..Default::default()
            },
            true,
            0,
        );
    }
    dp.connected = true;
    dp
}

#[test]
fn ryu_vectors_accepted_by_datapath() {
    let mut dp = datapath();
    for (name, bytes, ok) in vectors() {
        dp.handle_raw(&bytes, 1_000);
        let errors: Vec<_> =
            dp.ctrl.drain(..).filter(|m| matches!(m.body, Body::Error { .. })).map(|m| m.body).collect();
        if ok {
            assert!(errors.is_empty(), "{name}: unexpected error {errors:?}");
        } else {
            assert_eq!(errors.len(), 1, "{name}: expected exactly one error, got {errors:?}");
        }
        dp.out.clear();
    }
}

#[test]
fn unsupported_vectors_get_the_spec_error() {
    let mut dp = datapath();
    let want = [
        ("flow_mpls_pbb_ttl_copy", OFPET_BAD_ACTION, OFPBAC_BAD_TYPE),
        ("flow_meter", OFPET_BAD_INSTRUCTION, OFPBIC_UNSUP_INST),
        ("mp_meter_unsupported", OFPET_BAD_REQUEST, OFPBRC_BAD_MULTIPART),
        ("exp_unknown", OFPET_BAD_REQUEST, OFPBRC_BAD_EXPERIMENTER),
        ("port_mod_bad_hw", OFPET_PORT_MOD_FAILED, OFPPMFC_BAD_HW_ADDR),
    ];
    let vs = vectors();
    for (name, typ, code) in want {
        let (_, bytes, _) = vs.iter().find(|v| v.0 == name).unwrap();
        dp.handle_raw(bytes, 0);
        let m = dp.ctrl.pop().unwrap_or_else(|| panic!("{name}: no reply"));
        match m.body {
            Body::Error { typ: t, code: c, data } => {
                assert_eq!((t, c), (typ, code), "{name}");
                assert_eq!(&data[..], &bytes[..bytes.len().min(64)], "{name}: error data echoes the request");
                assert_eq!(m.xid, u32::from_be_bytes(bytes[4..8].try_into().unwrap()));
            }
            other => panic!("{name}: expected error, got {other:?}"),
        }
    }
}
