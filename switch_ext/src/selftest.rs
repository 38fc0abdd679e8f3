//! `--selftest-encode FILE`: drives an in-memory datapath through requests and writes
//! every switch-to-controller message it produced, as hex, to a JSON file. The Python
//! test `tests/switch_ext/test_codec_roundtrip.py` parses each with Ryu's own parser, so
//! the encoder is checked against an independent implementation.

use crate::datapath::{Datapath, DpConfig, FailMode};
use crate::group::SelectMode;
use crate::ofp::codec::*;
use crate::ofp::consts::*;
use crate::packet::Field;

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

fn out(port: u32) -> Action {
    Action::Output { port, max_len: 0 }
}

fn flow_mod(priority: u16, fields: Vec<Oxm>, instructions: Vec<Instruction>, flags: u16) -> Body {
    Body::FlowMod(Box::new(FlowMod {
        cookie: 0x1234,
        flags,
        matches: Match { fields },
        instructions,
        ..FlowMod::add(priority)
    }))
}

/// A sample UDP/IPv4 frame from 10.0.0.1 to 10.0.0.2.
pub fn sample_frame() -> Vec<u8> {
    let mut f = vec![0, 0, 0, 0, 0, 2, 0, 0, 0, 0, 0, 1, 0x08, 0x00];
    let payload = [0xabu8; 100];
    let tot = (20 + 8 + payload.len()) as u16;
    let mut ip = vec![0x45, 0];
    ip.extend_from_slice(&tot.to_be_bytes());
    ip.extend_from_slice(&[0, 1, 0x40, 0, 64, 17, 0, 0, 10, 0, 0, 1, 10, 0, 0, 2]);
    let c = crate::packet::inet_csum(&ip);
    ip[10..12].copy_from_slice(&c.to_be_bytes());
    f.extend_from_slice(&ip);
    f.extend_from_slice(&[0x30, 0x39, 0x00, 0x50]);
    f.extend_from_slice(&((8 + payload.len()) as u16).to_be_bytes());
    f.extend_from_slice(&[0, 0]);
    f.extend_from_slice(&payload);
    f
}

/// Builds the labelled samples: (name, encoded message).
pub fn samples() -> Vec<(String, Vec<u8>)> {
    let mut dp = Datapath::new(DpConfig {
        name: "s1".into(),
        dpid: 0x1,
        n_tables: 4,
        select_mode: SelectMode::Random,
        fail_mode: FailMode::Secure,
        seed: 1,
    });
    for p in 1..=2u32 {
        dp.add_port(
            PortDesc {
                port_no: p,
                hw_addr: [2, 0, 0, 0, 0, p as u8],
                name: format!("s1-eth{p}"),
                curr: OFPPF_10GB_FD | OFPPF_COPPER,
                curr_speed: 10_000_000,
                max_speed: 10_000_000,
                ..Default::default()
            },
            true,
            0,
        );
    }
    dp.connected = true;
    let now = 1_500_000_000u64;
    let mut res: Vec<(String, Vec<u8>)> = vec![("hello".into(), our_hello(1).encode())];
    fn req(res: &mut Vec<(String, Vec<u8>)>, dp: &mut Datapath, now: u64, name: &str, xid: u32, body: Body) {
        dp.handle_raw(&Msg::new(xid, body).encode(), now);
        let msgs = std::mem::take(&mut dp.ctrl);
        let n = msgs.len();
        for (i, m) in msgs.into_iter().enumerate() {
            let label = if n == 1 { name.to_string() } else { format!("{name}.{i}") };
            res.push((label, m.encode()));
        }
        dp.out.clear();
    }
    req(&mut res, &mut dp, now, "features_reply", 10, Body::FeaturesRequest);
    req(&mut res, &mut dp, now, "get_config_reply", 11, Body::GetConfigRequest);
    req(&mut res, &mut dp, now, "echo_reply", 12, Body::EchoRequest(b"ping".to_vec()));
    req(&mut res, &mut dp, now, "barrier_reply", 13, Body::BarrierRequest);
    let mp = |req: MpRequest, mp_type: u16| Body::MultipartRequest { flags: 0, mp_type, req };
    req(&mut res, &mut dp, now, "desc_reply", 14, mp(MpRequest::Desc, OFPMP_DESC));
    req(&mut res, &mut dp, now, "port_desc_reply", 15, mp(MpRequest::PortDesc, OFPMP_PORT_DESC));
    // Group and flows, then their stats.
    let bucket =
        |w: u16, p: u32| Bucket { weight: w, watch_port: p, watch_group: OFPG_ANY, actions: vec![out(p)] };
    req(
        &mut res,
        &mut dp,
        now,
        "group_mod_ok",
        16,
        Body::GroupMod(GroupMod {
            command: OFPGC_ADD,
            group_type: OFPGT_SELECT,
            group_id: 7,
            buckets: vec![bucket(1, 1), bucket(2, 2)],
        }),
    );
    req(
        &mut res,
        &mut dp,
        now,
        "flow_mod_ok",
        17,
        flow_mod(
            0,
            vec![],
            vec![Instruction::ApplyActions(vec![Action::Output {
                port: OFPP_CONTROLLER,
                max_len: OFPCML_NO_BUFFER,
            }])],
            0,
        ),
    );
    req(
        &mut res,
        &mut dp,
        now,
        "flow_mod_ok2",
        18,
        flow_mod(
            100,
            vec![
                Oxm::basic(Field::InPort as u8, 2u32.to_be_bytes().to_vec(), None),
                Oxm::basic(Field::EthType as u8, vec![8, 0], None),
                Oxm::basic(Field::Ipv4Dst as u8, vec![10, 0, 0, 0], Some(vec![255, 255, 255, 0])),
            ],
            vec![
                Instruction::ApplyActions(vec![
                    Action::SetField(Oxm::basic(Field::IpDscp as u8, vec![10], None)),
                    Action::Output { port: OFPP_CONTROLLER, max_len: 64 },
                ]),
                Instruction::WriteActions(vec![Action::Group(7)]),
            ],
            OFPFF_SEND_FLOW_REM,
        ),
    );
    // Packet-ins: table miss on port 1 (full frame), action on port 2 (64 bytes).
    dp.process_packet(1, sample_frame(), now);
    dp.process_packet(2, sample_frame(), now);
    for (i, m) in std::mem::take(&mut dp.ctrl).into_iter().enumerate() {
        res.push((format!("packet_in.{i}"), m.encode()));
    }
    dp.out.clear();
    let fsr = FlowStatsRequest {
        table_id: OFPTT_ALL,
        out_port: OFPP_ANY,
        out_group: OFPG_ANY,
        cookie: 0,
        cookie_mask: 0,
        matches: Match::default(),
    };
    req(&mut res, &mut dp, now, "flow_stats_reply", 19, mp(MpRequest::Flow(fsr.clone()), OFPMP_FLOW));
    req(&mut res, &mut dp, now, "aggregate_reply", 20, mp(MpRequest::Aggregate(fsr), OFPMP_AGGREGATE));
    req(&mut res, &mut dp, now, "table_stats_reply", 21, mp(MpRequest::Table, OFPMP_TABLE));
    req(
        &mut res,
        &mut dp,
        now,
        "port_stats_reply",
        22,
        mp(MpRequest::PortStats { port_no: OFPP_ANY }, OFPMP_PORT_STATS),
    );
    req(
        &mut res,
        &mut dp,
        now,
        "group_stats_reply",
        23,
        mp(MpRequest::Group { group_id: OFPG_ALL }, OFPMP_GROUP),
    );
    req(&mut res, &mut dp, now, "group_desc_reply", 24, mp(MpRequest::GroupDesc, OFPMP_GROUP_DESC));
    req(
        &mut res,
        &mut dp,
        now,
        "group_features_reply",
        25,
        mp(MpRequest::GroupFeatures, OFPMP_GROUP_FEATURES),
    );
    req(
        &mut res,
        &mut dp,
        now,
        "role_reply",
        26,
        Body::RoleRequest { role: OFPCR_ROLE_MASTER, generation_id: 5 },
    );
    req(&mut res, &mut dp, now, "get_async_reply", 27, Body::GetAsyncRequest);
    req(&mut res, &mut dp, now, "queue_get_config_reply", 28, Body::QueueGetConfigRequest { port: 1 });
    req(
        &mut res,
        &mut dp,
        now,
        "experimenter_reply",
        29,
        Body::Experimenter {
            experimenter: DCNLAB_EXPERIMENTER_ID,
            exp_type: DCNLAB_GET_GROUP_SELECT_MODE,
            data: vec![0, 0, 0, 7, 0, 0, 0, 0],
        },
    );
    // Errors.
    let mut bad = flow_mod(1, vec![], vec![], 0);
    if let Body::FlowMod(f) = &mut bad {
        f.table_id = 9;
    }
    req(&mut res, &mut dp, now, "error_flow_mod_failed", 30, bad);
    req(
        &mut res,
        &mut dp,
        now,
        "error_bad_match",
        31,
        flow_mod(1, vec![Oxm::basic(Field::Ipv4Src as u8, vec![1, 2, 3, 4], None)], vec![], 0),
    );
    res.push(("error_bad_type".into(), {
        dp.handle_raw(&[4, 99, 0, 8, 0, 0, 0, 32], now);
        dp.ctrl.pop().expect("error").encode()
    }));
    // Port status and flow removed.
    dp.set_link(2, false);
    for m in std::mem::take(&mut dp.ctrl) {
        res.push(("port_status".into(), m.encode()));
    }
    let mut del = flow_mod(100, vec![], vec![], 0);
    if let Body::FlowMod(f) = &mut del {
        f.command = OFPFC_DELETE;
        f.table_id = OFPTT_ALL;
    }
    req(&mut res, &mut dp, now, "flow_removed", 32, del);

    // Nicira extensions: a learning flow in table 0 (learn, resubmit, output_reg; a
    // register match) and the flow it learns in table 1, as flow stats and flow-removed.
    let nxm = |class, field, len| NxmHeader::new(class, field, len);
    let imm = |field, v: &[u8], n_bits| LearnSpec {
        n_bits,
        src: LearnSrc::Immediate(v.to_vec()),
        dst: LearnDst::Match { field, ofs: 0 },
    };
    let learn = Learn {
        idle_timeout: 9,
        hard_timeout: 0,
        priority: 7,
        cookie: 0xbeef,
        flags: NX_LEARN_F_SEND_FLOW_REM,
        table_id: 1,
        fin_idle_timeout: 0,
        fin_hard_timeout: 0,
        specs: vec![
            imm(nxm(NXM_CLASS_0, 3, 2), &[8, 0], 16),
            imm(nxm(NXM_CLASS_0, 6, 1), &[0, 17], 8),
            LearnSpec {
                n_bits: 32,
                src: LearnSrc::Field { field: nxm(NXM_CLASS_0, 7, 4), ofs: 0 },
                dst: LearnDst::Match { field: nxm(NXM_CLASS_0, 7, 4), ofs: 0 },
            },
            LearnSpec {
                n_bits: 16,
                src: LearnSrc::Field { field: nxm(NXM_CLASS_0, 0, 2), ofs: 0 },
                dst: LearnDst::Load { field: nxm(NXM_CLASS_1, 0, 4), ofs: 0 },
            },
            LearnSpec {
                n_bits: 16,
                src: LearnSrc::Field { field: nxm(NXM_CLASS_0, 0, 2), ofs: 0 },
                dst: LearnDst::Output,
            },
        ],
    };
    let reg0 = Oxm {
        class: NXM_CLASS_1,
        field: 0,
        experimenter: None,
        value: vec![0; 4],
        mask: Some(vec![0, 0, 0xff, 0xff]),
    };
    let learner = flow_mod(
        50,
        vec![
            Oxm::basic(Field::EthType as u8, vec![8, 0], None),
            Oxm::basic(Field::IpProto as u8, vec![17], None),
            reg0,
        ],
        vec![Instruction::ApplyActions(vec![
            Action::Nx(NxAction::Learn(Box::new(learn))),
            Action::Nx(NxAction::ResubmitTable { in_port: NX_RESUBMIT_IN_PORT, table_id: 1 }),
            Action::Nx(NxAction::OutputReg {
                src: SubField { field: nxm(NXM_CLASS_1, 1, 4), ofs: 0, n_bits: 16 },
                max_len: 0,
            }),
        ])],
        0,
    );
    req(&mut res, &mut dp, now, "nx_flow_mod_ok", 33, learner);
    dp.process_packet(1, sample_frame(), now);
    dp.out.clear();
    for (name, xid, table_id) in [("nx_flow_stats_learner", 34, 0), ("nx_flow_stats_learned", 35, 1)] {
        let fsr = FlowStatsRequest {
            table_id,
            out_port: OFPP_ANY,
            out_group: OFPG_ANY,
            cookie: 0,
            cookie_mask: 0,
            matches: Match::default(),
        };
        req(&mut res, &mut dp, now, name, xid, mp(MpRequest::Flow(fsr), OFPMP_FLOW));
    }
    dp.tick(now + 10_000_000_000); // the learned flow's idle timeout
    for m in std::mem::take(&mut dp.ctrl) {
        res.push(("nx_flow_removed".into(), m.encode()));
    }
    res
}

pub fn write_samples(path: &str) -> std::io::Result<()> {
    let mut s = String::from("{\n");
    let v = samples();
    for (i, (name, bytes)) in v.iter().enumerate() {
        s.push_str(&format!("  \"{name}\": \"{}\"{}\n", hex(bytes), if i + 1 < v.len() { "," } else { "" }));
    }
    s.push_str("}\n");
    std::fs::write(path, s)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn samples_decode_with_our_decoder() {
        for (name, b) in samples() {
            // Multipart and queue-config replies are only encoded by us (Ryu parses them).
            if b[1] == OFPT_MULTIPART_REPLY || b[1] == OFPT_QUEUE_GET_CONFIG_REPLY {
                continue;
            }
            let m = Msg::decode(&b).unwrap_or_else(|e| panic!("{name}: {e:?}"));
            assert_eq!(m.encode(), b, "{name}");
        }
    }
}
