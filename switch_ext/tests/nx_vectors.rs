//! Nicira-extension fixtures encoded by Ryu (`tests/switch_ext/gen_nx_fixtures.py`,
//! `tests/fixtures/nx_of13.json`): each Ryu encoding decodes and re-encodes
//! byte-identically, and replayed in order into a datapath it is accepted or gets exactly
//! the OpenFlow error the fixture names; the hand-edited ones are refused by the decoder.

mod common;

use dcnlab_switch::datapath::{Datapath, FailMode};
use dcnlab_switch::group::SelectMode;
use dcnlab_switch::ofp::codec::*;

struct Fixture {
    name: String,
    ryu: bool,
    error: Option<(u16, u16)>,
    bytes: Vec<u8>,
}

fn fixtures() -> Vec<Fixture> {
    common::json_list("tests/fixtures/nx_of13.json", "fixtures")
        .iter()
        .map(|v| Fixture {
            name: v["name"].as_str().unwrap().to_string(),
            ryu: v["ryu"].as_bool().unwrap(),
            error: v["error"]
                .as_array()
                .map(|e| (e[0].as_u64().unwrap() as u16, e[1].as_u64().unwrap() as u16)),
            bytes: common::unhex(v["hex"].as_str().unwrap()),
        })
        .collect()
}

/// The NX actions of a decoded message (flow mod apply-actions or packet out).
fn nx_actions(m: &Msg) -> Vec<NxAction> {
    let acts: Vec<&Action> = match &m.body {
        Body::FlowMod(fm) => fm
            .instructions
            .iter()
            .flat_map(|i| match i {
                Instruction::ApplyActions(a) => a.iter().collect::<Vec<_>>(),
                _ => vec![],
            })
            .collect(),
        Body::PacketOut { actions, .. } => actions.iter().collect(),
        _ => vec![],
    };
    acts.into_iter()
        .filter_map(|a| match a {
            Action::Nx(n) => Some(n.clone()),
            _ => None,
        })
        .collect()
}

#[test]
fn ryu_nx_fixtures_roundtrip_byte_identical() {
    let fs = fixtures();
    assert!(fs.len() >= 50, "expected the full fixture set");
    let mut subtypes = std::collections::BTreeSet::new();
    for f in fs.iter().filter(|f| f.ryu) {
        let m = Msg::decode(&f.bytes).unwrap_or_else(|e| panic!("{}: decode failed: {e:?}", f.name));
        let again = m.encode();
        assert_eq!(
            again, f.bytes,
            "{}: re-encoding differs\n ryu: {:02x?}\n ours: {again:02x?}",
            f.name, f.bytes
        );
        subtypes.extend(nx_actions(&m).iter().map(NxAction::subtype));
    }
    let want = [
        NXAST_RESUBMIT,
        NXAST_REG_MOVE,
        NXAST_REG_LOAD,
        NXAST_NOTE,
        NXAST_RESUBMIT_TABLE,
        NXAST_OUTPUT_REG,
        NXAST_LEARN,
        NXAST_EXIT,
        NXAST_FIN_TIMEOUT,
    ];
    assert_eq!(
        subtypes.into_iter().collect::<Vec<_>>(),
        want.to_vec(),
        "every implemented subtype is covered"
    );
}

#[test]
fn ryu_nx_fixtures_decode_to_what_the_app_meant() {
    let fs = fixtures();
    let get = |name: &str| {
        let f = fs.iter().find(|f| f.name == name).unwrap_or_else(|| panic!("{name}"));
        nx_actions(&Msg::decode(&f.bytes).unwrap())
    };
    let reg = |n| NxmHeader::new(NXM_CLASS_1, n, 4);
    assert_eq!(get("resubmit"), vec![NxAction::Resubmit { in_port: NX_RESUBMIT_IN_PORT }]);
    assert_eq!(get("resubmit_table"), vec![NxAction::ResubmitTable { in_port: 0xfff8, table_id: 2 }]);
    assert_eq!(
        get("resubmit_table_current"),
        vec![NxAction::ResubmitTable { in_port: 0xfff8, table_id: 0xff }]
    );
    assert_eq!(
        get("reg_load_bits"),
        vec![NxAction::RegLoad { dst: SubField { field: reg(3), ofs: 4, n_bits: 8 }, value: 0xab }]
    );
    assert_eq!(
        get("reg_move_tcp_src_bits"),
        vec![NxAction::RegMove {
            n_bits: 8,
            src_ofs: 8,
            dst_ofs: 24,
            src: NxmHeader::new(NXM_CLASS_0, 9, 2),
            dst: reg(2)
        }]
    );
    assert_eq!(
        get("output_reg"),
        vec![NxAction::OutputReg { src: SubField { field: reg(0), ofs: 0, n_bits: 16 }, max_len: 0 }]
    );
    assert_eq!(get("fin_timeout"), vec![NxAction::FinTimeout { fin_idle_timeout: 1, fin_hard_timeout: 5 }]);
    let NxAction::Learn(l) = &get("learn_everything")[0] else { panic!("not a learn") };
    assert_eq!(
        (l.table_id, l.priority, l.idle_timeout, l.hard_timeout, l.cookie, l.flags),
        (3, 0x1234, 7, 9, 0x0102_0304_0506_0708, NX_LEARN_F_SEND_FLOW_REM)
    );
    assert_eq!((l.fin_idle_timeout, l.fin_hard_timeout), (2, 3));
    let in_port = NxmHeader::new(0x8000, 0, 4);
    assert_eq!(
        l.specs,
        vec![
            LearnSpec {
                n_bits: 16,
                src: LearnSrc::Immediate(vec![8, 0]),
                dst: LearnDst::Match { field: NxmHeader::new(NXM_CLASS_0, 3, 2), ofs: 0 }
            },
            LearnSpec {
                n_bits: 32,
                src: LearnSrc::Field { field: in_port, ofs: 0 },
                dst: LearnDst::Match { field: in_port, ofs: 0 }
            },
            LearnSpec {
                n_bits: 16,
                src: LearnSrc::Field { field: reg(1), ofs: 0 },
                dst: LearnDst::Match { field: reg(2), ofs: 8 }
            },
            LearnSpec {
                n_bits: 16,
                src: LearnSrc::Field { field: NxmHeader::new(NXM_CLASS_0, 0, 2), ofs: 0 },
                dst: LearnDst::Load { field: reg(0), ofs: 0 }
            },
            LearnSpec {
                n_bits: 8,
                src: LearnSrc::Immediate(vec![0, 0x2a]),
                dst: LearnDst::Load { field: reg(3), ofs: 4 }
            },
            LearnSpec { n_bits: 32, src: LearnSrc::Field { field: in_port, ofs: 0 }, dst: LearnDst::Output },
        ]
    );
}

#[test]
fn ryu_nx_fixtures_accepted_or_refused_by_the_datapath() {
    let mut dp: Datapath = common::datapath(SelectMode::Hash, FailMode::Secure, 4, 1);
    for f in fixtures() {
        dp.handle_raw(&f.bytes, 1_000);
        let errors: Vec<(u16, u16)> = dp
            .ctrl
            .drain(..)
            .filter_map(|m| match m.body {
                Body::Error { typ, code, data } => {
                    assert_eq!(
                        data,
                        f.bytes[..f.bytes.len().min(64)],
                        "{}: error echoes the request",
                        f.name
                    );
                    Some((typ, code))
                }
                _ => None,
            })
            .collect();
        match f.error {
            None => assert!(errors.is_empty(), "{}: unexpected error {errors:?}", f.name),
            Some(e) => assert_eq!(errors, vec![e], "{}", f.name),
        }
        if !f.ryu {
            assert_eq!(Msg::decode(&f.bytes).err(), f.error.map(|(t, c)| OfpErr::new(t, c)), "{}", f.name);
        }
        dp.out.clear();
    }
    // Everything that was accepted is in the tables (one flow mod per fixture, some with
    // identical match and priority replacing an earlier one).
    assert!(dp.tables.iter().map(|t| t.entries.len()).sum::<usize>() >= 15);
}
