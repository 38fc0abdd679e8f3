//! Codec vectors produced by Ryu's serializer (tests/switch_ext/gen_of13_vectors.py).
//! Every controller-to-switch message must decode and re-encode byte-identically, and the
//! ones marked `dp_ok` must be accepted, in order, by the datapath without an OFPT_ERROR.

use dcnlab_switch::datapath::{Datapath, DpConfig, FailMode};
use dcnlab_switch::group::SelectMode;
use dcnlab_switch::ofp::codec::{Body, Msg, PortDesc};
use dcnlab_switch::ofp::consts::*;

mod common;

fn vectors() -> Vec<(String, Vec<u8>, bool)> {
    common::json_list("tests/vectors/of13.json", "vectors")
        .iter()
        .map(|v| {
            (
                v["name"].as_str().unwrap().to_string(),
                common::unhex(v["hex"].as_str().unwrap()),
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

/// The SET_PORT_ABQ bodies written by the Python encoder (apps/abq.py) decode to the
/// options it meant; the malformed ones get the documented OpenFlow errors.
#[test]
fn abq_experimenter_vectors_from_the_app_encoder() {
    use dcnlab_switch::ofp::dcnlab::decode_set_port_abq;
    let vs = vectors();
    let get = |name: &str| vs.iter().find(|v| v.0 == name).unwrap_or_else(|| panic!("{name}")).1.clone();
    let opts = |v: &[(&str, &str)]| -> Vec<(String, String)> {
        v.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
    };
    let want = [
        ("exp_abq_port2_ece_20p", 2, opts(&[("enable", "1"), ("mode", "ece"), ("k", "20p")])),
        (
            "exp_abq_all_window_30000b",
            OFPP_ALL,
            opts(&[("enable", "1"), ("mode", "window"), ("k", "30000b")]),
        ),
        ("exp_abq_port1_off_keep", 1, opts(&[("enable", "0")])),
    ];
    let mut dp = datapath();
    for (name, port, options) in want {
        let bytes = get(name);
        let Body::Experimenter { experimenter, exp_type, data } = Msg::decode(&bytes).unwrap().body else {
            panic!("{name}: not an experimenter message")
        };
        assert_eq!((experimenter, exp_type), (DCNLAB_EXPERIMENTER_ID, DCNLAB_SET_PORT_ABQ), "{name}");
        assert_eq!(decode_set_port_abq(&data).unwrap(), (port, options.clone()), "{name}");
        dp.handle_raw(&bytes, 0);
        assert!(dp.ctrl.is_empty(), "{name}: {:?}", dp.ctrl);
        let req = dp.ingress_ctl.pop().expect("queued for the ports");
        assert_eq!((req.port_no, req.name, req.options, req.raw), (port, "abq", options, bytes));
    }
    for (name, typ, code) in [
        ("exp_abq_bad_len", OFPET_BAD_REQUEST, OFPBRC_BAD_LEN),
        ("exp_abq_bad_mode", OFPET_BAD_REQUEST, OFPBRC_EPERM),
        ("exp_abq_bad_zero_k", OFPET_BAD_REQUEST, OFPBRC_EPERM),
        ("exp_abq_bad_port", OFPET_PORT_MOD_FAILED, OFPPMFC_BAD_PORT),
    ] {
        dp.handle_raw(&get(name), 0);
        match dp.ctrl.pop().map(|m| m.body) {
            Some(Body::Error { typ: t, code: c, .. }) => assert_eq!((t, c), (typ, code), "{name}"),
            other => panic!("{name}: expected an error, got {other:?}"),
        }
        assert!(dp.ingress_ctl.is_empty(), "{name}: nothing queued");
    }
}

/// The SET_GROUP_BALANCER bodies written by the Python encoder
/// (controller/switch_balancer.py) decode to the group and spec it meant and take effect,
/// as GET_GROUP_BALANCER (and, for the built-in modes, GET_GROUP_SELECT_MODE) then report;
/// the malformed ones get the documented OpenFlow errors.
#[test]
fn balancer_experimenter_vectors_from_the_app_encoder() {
    use dcnlab_switch::ofp::dcnlab::{decode, decode_balancer_reply, DcnlabRequest};
    let vs = vectors();
    let get = |name: &str| vs.iter().find(|v| v.0 == name).unwrap_or_else(|| panic!("{name}")).1.clone();
    let mut dp = datapath();
    let ask = |dp: &mut Datapath, vector: &str| -> (u32, Vec<u8>) {
        dp.handle_raw(&get(vector), 0);
        match dp.ctrl.pop().map(|m| m.body) {
            Some(Body::Experimenter { experimenter: DCNLAB_EXPERIMENTER_ID, exp_type, data }) => {
                (exp_type, data)
            }
            other => panic!("{vector}: expected a dcnlab reply, got {other:?}"),
        }
    };
    // (vector, group and spec it carries, group 2's balancer afterwards, its select-mode code)
    for (name, group_id, spec, group2, code) in [
        ("exp_balancer_group2_rr", 2, "rr", "rr", 2u8),
        ("exp_balancer_all_random", OFPG_ALL, "random", "rr", 2),
        ("exp_balancer_group2_default", 2, "", "random", 3),
    ] {
        let bytes = get(name);
        let Body::Experimenter { experimenter, exp_type, data } = Msg::decode(&bytes).unwrap().body else {
            panic!("{name}: not an experimenter message")
        };
        assert_eq!((experimenter, exp_type), (DCNLAB_EXPERIMENTER_ID, DCNLAB_SET_GROUP_BALANCER), "{name}");
        assert_eq!(
            decode(exp_type, &data),
            Ok(DcnlabRequest::SetGroupBalancer { group_id, spec: spec.into() })
        );
        dp.handle_raw(&bytes, 0);
        assert!(dp.ctrl.is_empty(), "{name}: {:?}", dp.ctrl);
        let (t, reply) = ask(&mut dp, "exp_get_group_balancer");
        assert_eq!(t, DCNLAB_GROUP_BALANCER_REPLY);
        assert_eq!(decode_balancer_reply(&reply), Ok((2, group2.to_string())), "{name}");
        let (t, reply) = ask(&mut dp, "exp_get_group_select_mode");
        assert_eq!((t, reply), (DCNLAB_GROUP_SELECT_MODE_REPLY, vec![0, 0, 0, 2, code, 0, 0, 0]), "{name}");
    }
    for (name, typ, code) in [
        ("exp_balancer_bad_unknown", OFPET_BAD_REQUEST, OFPBRC_EPERM),
        ("exp_balancer_bad_option", OFPET_BAD_REQUEST, OFPBRC_EPERM),
        ("exp_balancer_bad_unpadded", OFPET_BAD_REQUEST, OFPBRC_BAD_LEN),
        ("exp_balancer_bad_group", OFPET_GROUP_MOD_FAILED, OFPGMFC_INVALID_GROUP),
    ] {
        dp.handle_raw(&get(name), 0);
        match dp.ctrl.pop().map(|m| m.body) {
            Some(Body::Error { typ: t, code: c, .. }) => assert_eq!((t, c), (typ, code), "{name}"),
            other => panic!("{name}: expected an error, got {other:?}"),
        }
        let (_, reply) = ask(&mut dp, "exp_get_group_balancer");
        assert_eq!(decode_balancer_reply(&reply), Ok((2, "random".to_string())), "{name} changed nothing");
    }
}
