//! The Nicira extensions on the in-memory datapath: flows with learn, resubmit, reg_load,
//! reg_move and output_reg go in through the wire codec, packets go in on ports, and what
//! leaves (frames, flow stats, flow-removed) is checked. The scenario is TCP-Path's: the
//! first copy of a connection's packet learns a drop entry for later copies and a reverse
//! entry that remembers its in_port in reg0; the reply finds that port by resubmit +
//! output_reg.

mod common;

use common::{add as flow_mod, flow, send};
use dcnlab_switch::datapath::{Datapath, FailMode, MAX_RESUBMIT_DEPTH};
use dcnlab_switch::group::SelectMode;
use dcnlab_switch::ofp::codec::*;
use dcnlab_switch::ofp::consts::*;
use dcnlab_switch::packet::inet_csum;

const SEC: u64 = 1_000_000_000;

fn datapath() -> Datapath {
    common::datapath(SelectMode::Hash, FailMode::Secure, 4, 3)
}

const fn nxm0(field: u8, len: u8) -> NxmHeader {
    NxmHeader::new(NXM_CLASS_0, field, len)
}
const fn reg(n: u8) -> NxmHeader {
    NxmHeader::new(NXM_CLASS_1, n, 4)
}
const NXM_IN_PORT: NxmHeader = nxm0(0, 2);
const NXM_ETH_TYPE: NxmHeader = nxm0(3, 2);
const NXM_IP_PROTO: NxmHeader = nxm0(6, 1);
const NXM_IP_SRC: NxmHeader = nxm0(7, 4);
const NXM_IP_DST: NxmHeader = nxm0(8, 4);
const NXM_TCP_SRC: NxmHeader = nxm0(9, 2);
const NXM_TCP_DST: NxmHeader = nxm0(10, 2);
const OXM_IN_PORT: NxmHeader = NxmHeader::new(OFPXMC_OPENFLOW_BASIC, 0, 4);

fn oxm(field: u8, v: &[u8]) -> Oxm {
    Oxm::basic(field, v.to_vec(), None)
}

/// eth_type IPv4, ip_proto TCP: the prerequisites of the TCP fields an action names.
fn tcp4() -> Vec<Oxm> {
    vec![oxm(5, &[8, 0]), oxm(10, &[6])]
}

/// Field prerequisites are checked as Open vSwitch does: against the flow's match for
/// what an action reads or writes, and for a learn's match and load destinations against
/// the constants its earlier specs put in the learned match.
#[test]
fn nx_fields_need_their_prerequisites_like_ovs() {
    let mut dp = datapath();
    let inconsistent = (OFPET_BAD_ACTION, OFPBAC_MATCH_INCONSISTENT);
    let err = |dp: &mut Datapath, fields: Vec<Oxm>, a: Action| match send(
        dp,
        flow_mod(0, 1, fields, apply(vec![a])),
    )
    .as_slice()
    {
        [] => None,
        [Msg { body: Body::Error { typ, code, .. }, .. }] => Some((*typ, *code)),
        other => panic!("{other:?}"),
    };
    let mv = nx(NxAction::RegMove { n_bits: 16, src_ofs: 0, dst_ofs: 0, src: NXM_TCP_DST, dst: reg(1) });
    assert_eq!(err(&mut dp, vec![oxm(5, &[8, 0])], mv.clone()), Some(inconsistent));
    assert_eq!(err(&mut dp, tcp4(), mv), None);
    assert_eq!(err(&mut dp, vec![], load(NXM_IP_DST, 0, 8, 1)), Some(inconsistent));
    let learn_tcp = |specs| learn(1, 1, 0, 0, 0, specs);
    // The learned tcp_src needs eth_type and ip_proto constants before it.
    let late = vec![
        spec_match(NXM_TCP_SRC, 16),
        spec_match_imm(NXM_ETH_TYPE, &[8, 0], 16),
        spec_match_imm(NXM_IP_PROTO, &[0, 6], 8),
    ];
    assert_eq!(err(&mut dp, tcp4(), learn_tcp(late)), Some(inconsistent));
    let early = vec![
        spec_match_imm(NXM_ETH_TYPE, &[8, 0], 16),
        spec_match_imm(NXM_IP_PROTO, &[0, 6], 8),
        spec_match(NXM_TCP_SRC, 16),
    ];
    assert_eq!(err(&mut dp, tcp4(), learn_tcp(early.clone())), None);
    // ... and the learning flow must match TCP for the source.
    assert_eq!(err(&mut dp, vec![], learn_tcp(early)), Some(inconsistent));
}

fn reg_match(n: u8, v: u32) -> Oxm {
    Oxm { class: NXM_CLASS_1, field: n, experimenter: None, value: v.to_be_bytes().to_vec(), mask: None }
}

fn apply(a: Vec<Action>) -> Vec<Instruction> {
    vec![Instruction::ApplyActions(a)]
}

fn out(port: u32) -> Action {
    Action::Output { port, max_len: 0xffff }
}

fn nx(a: NxAction) -> Action {
    Action::Nx(a)
}

fn resubmit(table: u8) -> Action {
    nx(NxAction::ResubmitTable { in_port: NX_RESUBMIT_IN_PORT, table_id: table })
}

fn load(field: NxmHeader, ofs: u16, n_bits: u16, value: u64) -> Action {
    nx(NxAction::RegLoad { dst: SubField { field, ofs, n_bits }, value })
}

fn spec_match(field: NxmHeader, n_bits: u16) -> LearnSpec {
    LearnSpec { n_bits, src: LearnSrc::Field { field, ofs: 0 }, dst: LearnDst::Match { field, ofs: 0 } }
}

fn spec_match_from(src: NxmHeader, dst: NxmHeader, n_bits: u16) -> LearnSpec {
    LearnSpec {
        n_bits,
        src: LearnSrc::Field { field: src, ofs: 0 },
        dst: LearnDst::Match { field: dst, ofs: 0 },
    }
}

fn spec_match_imm(dst: NxmHeader, value: &[u8], n_bits: u16) -> LearnSpec {
    LearnSpec {
        n_bits,
        src: LearnSrc::Immediate(value.to_vec()),
        dst: LearnDst::Match { field: dst, ofs: 0 },
    }
}

fn learn(table_id: u8, priority: u16, idle: u16, flags: u16, cookie: u64, specs: Vec<LearnSpec>) -> Action {
    nx(NxAction::Learn(Box::new(Learn {
        idle_timeout: idle,
        hard_timeout: 0,
        priority,
        cookie,
        flags,
        table_id,
        fin_idle_timeout: 0,
        fin_hard_timeout: 0,
        specs,
    })))
}

/// A TCP/IPv4 frame 10.0.0.<src> -> 10.0.0.<dst>, ports sport -> dport.
fn tcp(src: u8, dst: u8, sport: u16, dport: u16, flags: u8) -> Vec<u8> {
    let mut f = vec![0x02, 0, 0, 0, 0, dst, 0x02, 0, 0, 0, 0, src, 0x08, 0x00];
    let mut ip = vec![0x45, 0, 0, 40, 0, 1, 0x40, 0, 64, 6, 0, 0, 10, 0, 0, src, 10, 0, 0, dst];
    let c = inet_csum(&ip);
    ip[10..12].copy_from_slice(&c.to_be_bytes());
    f.extend_from_slice(&ip);
    f.extend_from_slice(&sport.to_be_bytes());
    f.extend_from_slice(&dport.to_be_bytes());
    f.extend_from_slice(&[0, 0, 0, 1, 0, 0, 0, 0, 0x50, flags, 0xff, 0xff, 0, 0, 0, 0]);
    f
}

/// The ports a frame entering on `in_port` at `now` leaves by.
fn run(dp: &mut Datapath, in_port: u32, frame: &[u8], now: u64) -> Vec<u32> {
    dp.out.clear();
    dp.process_packet(in_port, frame.to_vec(), now);
    dp.out.drain(..).map(|o| o.port).collect()
}

fn flow_stats(dp: &mut Datapath, table_id: u8) -> Vec<FlowStats> {
    let req = MpRequest::Flow(FlowStatsRequest {
        table_id,
        out_port: OFPP_ANY,
        out_group: OFPG_ANY,
        cookie: 0,
        cookie_mask: 0,
        matches: Match::default(),
    });
    let replies = send(dp, Body::MultipartRequest { flags: 0, mp_type: OFPMP_FLOW, req });
    replies
        .into_iter()
        .flat_map(|m| match m.body {
            Body::MultipartReply { reply: MpReply::Flow(v), .. } => v,
            other => panic!("expected a flow stats reply, got {other:?}"),
        })
        .collect()
}

/// TCP-Path's first-arrival lock, in switch terms: table 0 sends the reply direction
/// (from port 4) to a resubmit into table 2 and out by reg0; everything else to table 1.
/// Table 1's default entry learns (a) into table 1 a drop entry for the 5-tuple, (b) into
/// table 2 the reverse 5-tuple loading in_port into reg0, and forwards to port 4.
fn tcppath_like(dp: &mut Datapath, idle: u16) {
    let ip_tcp = || vec![oxm(5, &[8, 0]), oxm(10, &[6])];
    let mut reply = ip_tcp();
    reply.insert(0, oxm(0, &4u32.to_be_bytes()));
    flow(
        dp,
        0,
        20,
        reply,
        apply(vec![
            resubmit(2),
            nx(NxAction::OutputReg { src: SubField { field: reg(0), ofs: 0, n_bits: 16 }, max_len: 0 }),
        ]),
    );
    flow(dp, 0, 10, ip_tcp(), vec![Instruction::GotoTable(1)]);
    let tuple = |swap: bool| {
        let (s, d, ts, td) = if swap {
            (NXM_IP_DST, NXM_IP_SRC, NXM_TCP_DST, NXM_TCP_SRC)
        } else {
            (NXM_IP_SRC, NXM_IP_DST, NXM_TCP_SRC, NXM_TCP_DST)
        };
        vec![
            spec_match_imm(NXM_ETH_TYPE, &[8, 0], 16),
            spec_match_imm(NXM_IP_PROTO, &[0, 6], 8),
            spec_match_from(s, NXM_IP_SRC, 32),
            spec_match_from(d, NXM_IP_DST, 32),
            spec_match_from(ts, NXM_TCP_SRC, 16),
            spec_match_from(td, NXM_TCP_DST, 16),
        ]
    };
    let mut reverse = tuple(true);
    reverse.push(LearnSpec {
        n_bits: 16,
        src: LearnSrc::Field { field: NXM_IN_PORT, ofs: 0 },
        dst: LearnDst::Load { field: reg(0), ofs: 0 },
    });
    // The learning flow matches TCP/IPv4: the fields its specs read need it (OVS checks).
    flow(
        dp,
        1,
        0,
        ip_tcp(),
        apply(vec![
            learn(1, 100, idle, NX_LEARN_F_SEND_FLOW_REM, 0xc1, tuple(false)),
            learn(2, 100, idle, 0, 0xc2, reverse),
            out(4),
        ]),
    );
}

#[test]
fn first_copy_learns_a_drop_entry_and_the_reply_leaves_by_its_port() {
    let mut dp = datapath();
    tcppath_like(&mut dp, 2);
    let syn = tcp(1, 9, 40000, 80, 0x02);
    // The copy arriving first (port 2) goes on; the copies behind it (ports 1, 3) are dropped.
    assert_eq!(run(&mut dp, 2, &syn, 0), vec![4]);
    assert_eq!(run(&mut dp, 1, &syn, SEC / 10), Vec::<u32>::new());
    assert_eq!(run(&mut dp, 3, &syn, SEC / 5), Vec::<u32>::new());
    // The SYN-ACK comes back on port 4 and leaves by port 2, the first copy's in_port.
    let synack = tcp(9, 1, 80, 40000, 0x12);
    assert_eq!(run(&mut dp, 4, &synack, SEC / 2), vec![2]);
    // Another connection is not affected by the learned entries: its first copy, on
    // port 3 this time, goes on and its reply goes back to port 3.
    assert_eq!(run(&mut dp, 3, &tcp(1, 9, 40001, 80, 0x02), SEC / 2), vec![4]);
    assert_eq!(run(&mut dp, 4, &tcp(9, 1, 80, 40001, 0x12), SEC / 2), vec![3]);

    // Learned entries are ordinary flows: in flow stats with their table, cookie,
    // priority, timeouts and counters, and their matches as TLVs.
    let t1: Vec<FlowStats> = flow_stats(&mut dp, 1).into_iter().filter(|f| f.priority == 100).collect();
    assert_eq!(t1.len(), 2);
    let first = t1
        .iter()
        .find(|f| f.matches.fields.iter().any(|o| o.field == 13 && o.value == [0x9c, 0x40]))
        .unwrap();
    assert_eq!((first.table_id, first.cookie, first.idle_timeout), (1, 0xc1, 2));
    assert_eq!(first.flags, OFPFF_SEND_FLOW_REM);
    assert_eq!(first.packet_count, 2, "the two dropped copies");
    assert!(first.instructions.is_empty(), "a drop entry");
    let t2 = flow_stats(&mut dp, 2);
    assert_eq!(t2.len(), 2);
    let rev = t2
        .iter()
        .find(|f| f.matches.fields.iter().any(|o| o.field == 14 && o.value == [0x9c, 0x40]))
        .unwrap();
    assert_eq!((rev.table_id, rev.cookie, rev.packet_count), (2, 0xc2, 1));
    assert_eq!(
        rev.instructions,
        vec![Instruction::ApplyActions(vec![load(reg(0), 0, 16, 2)])],
        "loads the first copy's in_port"
    );
    // Idle for 2 s, the entries expire; only the flagged ones send FLOW_REMOVED. The
    // first connection's drop entry was last hit at 0.2 s, everything else at 0.5 s.
    let removed = |dp: &mut Datapath, now: u64| -> Vec<FlowRemoved> {
        dp.ctrl.clear();
        dp.tick(now);
        dp.ctrl
            .drain(..)
            .map(|m| match m.body {
                Body::FlowRemoved(r) => *r,
                other => panic!("{other:?}"),
            })
            .collect()
    };
    assert!(removed(&mut dp, SEC / 5 + 2 * SEC - 1).is_empty());
    let gone = removed(&mut dp, SEC / 5 + 2 * SEC);
    assert_eq!(gone.len(), 1);
    assert_eq!((gone[0].table_id, gone[0].cookie, gone[0].reason), (1, 0xc1, OFPRR_IDLE_TIMEOUT));
    assert_eq!((gone[0].packet_count, gone[0].idle_timeout), (2, 2));
    assert_eq!(flow_stats(&mut dp, 2).len(), 2);
    let gone = removed(&mut dp, SEC / 2 + 2 * SEC);
    assert_eq!(gone.len(), 1, "the second connection's drop entry; table 2's are not flagged");
    assert!(flow_stats(&mut dp, 1).iter().all(|f| f.priority != 100));
    assert!(flow_stats(&mut dp, 2).is_empty());
    // And then the same connection's copy is new again.
    assert_eq!(run(&mut dp, 1, &syn, 4 * SEC), vec![4]);
}

#[test]
fn learning_again_refreshes_the_entry_and_its_timeouts() {
    let mut dp = datapath();
    // Every packet learns the same entry (priority, match) into table 1, hard timeout 2 s.
    let l = nx(NxAction::Learn(Box::new(Learn {
        idle_timeout: 0,
        hard_timeout: 2,
        priority: 7,
        cookie: 1,
        flags: 0,
        table_id: 1,
        fin_idle_timeout: 0,
        fin_hard_timeout: 0,
        specs: vec![spec_match(NXM_ETH_TYPE, 16)],
    })));
    flow(&mut dp, 0, 1, vec![], apply(vec![l]));
    let f = tcp(1, 2, 1, 2, 0x10);
    run(&mut dp, 1, &f, 0);
    run(&mut dp, 1, &f, 1500 * SEC / 1000);
    assert_eq!(flow_stats(&mut dp, 1).len(), 1, "one entry, refreshed");
    dp.tick(2500 * SEC / 1000);
    assert_eq!(flow_stats(&mut dp, 1).len(), 1, "the hard timeout restarted at 1.5 s");
    dp.tick(3600 * SEC / 1000);
    assert!(flow_stats(&mut dp, 1).is_empty());
}

#[test]
fn fin_timeout_from_learn_shortens_the_learned_entry_on_fin() {
    let mut dp = datapath();
    let l = nx(NxAction::Learn(Box::new(Learn {
        idle_timeout: 60,
        hard_timeout: 0,
        priority: 7,
        cookie: 1,
        flags: 0,
        table_id: 1,
        fin_idle_timeout: 1,
        fin_hard_timeout: 0,
        specs: vec![
            spec_match_imm(NXM_ETH_TYPE, &[8, 0], 16),
            spec_match_imm(NXM_IP_PROTO, &[0, 6], 8),
            spec_match(NXM_TCP_SRC, 16),
        ],
    })));
    flow(&mut dp, 0, 1, tcp4(), apply(vec![l, resubmit(1)]));
    run(&mut dp, 1, &tcp(1, 2, 5, 6, 0x10), 0);
    assert_eq!(flow_stats(&mut dp, 1)[0].idle_timeout, 60);
    run(&mut dp, 1, &tcp(1, 2, 5, 6, 0x11), SEC); // FIN|ACK, resubmitted into the entry
    assert_eq!(flow_stats(&mut dp, 1)[0].idle_timeout, 1);
}

#[test]
fn resubmit_runs_the_entry_then_continues_and_restores_in_port() {
    let mut dp = datapath();
    // Table 0: resubmit to table 1 with in_port 3, then output to in_port (by OFPP_IN_PORT).
    flow(
        &mut dp,
        0,
        1,
        vec![],
        apply(vec![nx(NxAction::ResubmitTable { in_port: 3, table_id: 1 }), out(OFPP_IN_PORT)]),
    );
    // Table 1 sees in_port 3 and outputs to 2; a write-actions entry adds to the action set.
    flow(
        &mut dp,
        1,
        1,
        vec![oxm(0, &3u32.to_be_bytes())],
        vec![Instruction::ApplyActions(vec![out(2)]), Instruction::WriteActions(vec![out(4)])],
    );
    assert_eq!(run(&mut dp, 1, &tcp(1, 2, 1, 2, 0x10), 0), vec![2, 1, 4]);
    // A resubmit into a table where nothing matches does nothing; the actions go on.
    let mut dp = datapath();
    flow(&mut dp, 0, 1, vec![], apply(vec![resubmit(3), out(2)]));
    assert_eq!(run(&mut dp, 1, &tcp(1, 2, 1, 2, 0x10), 0), vec![2]);
}

#[test]
fn exit_stops_the_actions_but_not_the_action_set() {
    // As in Open vSwitch: exit ends every action still to come, at every resubmit level
    // and in later tables, but the action set written before still runs.
    let mut dp = datapath();
    flow(&mut dp, 0, 1, vec![], vec![Instruction::WriteActions(vec![out(4)]), Instruction::GotoTable(1)]);
    flow(
        &mut dp,
        1,
        1,
        vec![],
        vec![Instruction::ApplyActions(vec![out(2), resubmit(2), out(3)]), Instruction::GotoTable(3)],
    );
    flow(&mut dp, 2, 1, vec![], apply(vec![nx(NxAction::Exit), out(1)]));
    flow(&mut dp, 3, 1, vec![], apply(vec![out(1)]));
    assert_eq!(run(&mut dp, 1, &tcp(1, 2, 1, 2, 0x10), 0), vec![2, 4]);
}

/// Table 0 counts reg0 up by resubmitting to itself; reg0 = `n` outputs to port 2.
fn resubmit_chain(n: u32) -> Datapath {
    let mut dp = datapath();
    for k in 0..n {
        flow(
            &mut dp,
            0,
            1,
            vec![reg_match(0, k)],
            apply(vec![load(reg(0), 0, 32, k as u64 + 1), resubmit(0)]),
        );
    }
    // An output before the chain: taken back if the packet is dropped.
    flow(&mut dp, 0, 1, vec![reg_match(0, n)], apply(vec![out(2)]));
    dp
}

#[test]
fn resubmit_depth_limit_drops_and_counts() {
    let depth = MAX_RESUBMIT_DEPTH as u32;
    let mut dp = resubmit_chain(depth);
    assert_eq!(run(&mut dp, 1, &tcp(1, 2, 1, 2, 0x10), 0), vec![2]);
    assert_eq!(dp.resubmit_drops, 0);
    let mut dp = resubmit_chain(depth + 1);
    assert_eq!(run(&mut dp, 1, &tcp(1, 2, 1, 2, 0x10), 0), Vec::<u32>::new());
    assert_eq!(dp.resubmit_drops, 1);
    // A loop: output, then resubmit to the same table forever. The packet is dropped,
    // the output it made is taken back, and the switch carries on.
    let mut dp = datapath();
    flow(&mut dp, 0, 1, vec![], apply(vec![out(2), resubmit(0)]));
    assert_eq!(run(&mut dp, 1, &tcp(1, 2, 1, 2, 0x10), 0), Vec::<u32>::new());
    assert_eq!(dp.resubmit_drops, 1);
    assert_eq!(run(&mut dp, 1, &tcp(1, 2, 1, 2, 0x10), 0), Vec::<u32>::new());
    assert_eq!(dp.resubmit_drops, 2);
}

#[test]
fn registers_start_at_zero_load_move_and_match() {
    let mut dp = datapath();
    // reg0 = in_port (OXM in_port, 32 bits); reg1[8..23] = tcp_dst; reg2 = 0x55 then goto.
    flow(
        &mut dp,
        0,
        1,
        tcp4(),
        vec![
            Instruction::ApplyActions(vec![
                nx(NxAction::RegMove { n_bits: 32, src_ofs: 0, dst_ofs: 0, src: OXM_IN_PORT, dst: reg(0) }),
                nx(NxAction::RegMove { n_bits: 16, src_ofs: 0, dst_ofs: 8, src: NXM_TCP_DST, dst: reg(1) }),
                load(reg(2), 0, 8, 0x55),
            ]),
            Instruction::GotoTable(1),
        ],
    );
    let masked_reg1 = Oxm {
        class: NXM_CLASS_1,
        field: 1,
        experimenter: None,
        value: (80u32 << 8).to_be_bytes().to_vec(),
        mask: Some(0x00ff_ff00u32.to_be_bytes().to_vec()),
    };
    flow(&mut dp, 1, 5, vec![reg_match(0, 3), masked_reg1, reg_match(2, 0x55)], apply(vec![out(4)]));
    // A register match in table 0 never sees values from an earlier packet.
    flow(&mut dp, 1, 1, vec![], apply(vec![out(1)]));
    assert_eq!(run(&mut dp, 3, &tcp(1, 2, 1, 80, 0x10), 0), vec![4]);
    assert_eq!(run(&mut dp, 2, &tcp(1, 2, 1, 80, 0x10), 0), vec![1]);
    assert_eq!(run(&mut dp, 3, &tcp(1, 2, 1, 81, 0x10), 0), vec![1]);
    let mut dp2 = datapath();
    flow(&mut dp2, 0, 5, vec![reg_match(2, 0x55)], apply(vec![out(4)]));
    flow(&mut dp2, 0, 1, vec![], apply(vec![load(reg(2), 0, 8, 0x55), out(2)]));
    assert_eq!(run(&mut dp2, 1, &tcp(1, 2, 1, 80, 0x10), 0), vec![2]);
    assert_eq!(run(&mut dp2, 1, &tcp(1, 2, 1, 80, 0x10), 0), vec![2]);
}

#[test]
fn set_field_writes_a_register_and_is_accepted_in_the_action_set() {
    let mut dp = datapath();
    let set_reg = |n: u8, v: u32| {
        Action::SetField(Oxm {
            class: NXM_CLASS_1,
            field: n,
            experimenter: None,
            value: v.to_be_bytes().to_vec(),
            mask: None,
        })
    };
    flow(
        &mut dp,
        0,
        1,
        vec![],
        vec![
            Instruction::ApplyActions(vec![set_reg(4, 3)]),
            Instruction::WriteActions(vec![set_reg(5, 9)]),
            Instruction::GotoTable(1),
        ],
    );
    flow(
        &mut dp,
        1,
        1,
        vec![reg_match(4, 3)],
        apply(vec![nx(NxAction::OutputReg {
            src: SubField { field: reg(4), ofs: 0, n_bits: 16 },
            max_len: 0,
        })]),
    );
    assert_eq!(run(&mut dp, 1, &tcp(1, 2, 1, 2, 0x10), 0), vec![3]);
}

#[test]
fn writing_vlan_tci_pushes_rewrites_and_pops_the_tag() {
    let mut dp = datapath();
    let tci = nxm0(4, 2);
    // Untagged in: CFI set with VID 5, PCP 3 -> a tag is pushed.
    flow(&mut dp, 0, 1, vec![oxm(0, &1u32.to_be_bytes())], apply(vec![load(tci, 0, 16, 0x7005), out(2)]));
    // Tagged in: the VID bits only -> rewritten; clearing CFI -> popped.
    flow(
        &mut dp,
        0,
        1,
        vec![oxm(0, &2u32.to_be_bytes())],
        apply(vec![load(tci, 0, 12, 9), out(3), load(tci, 12, 1, 0), out(4)]),
    );
    let plain = tcp(1, 2, 1, 2, 0x10);
    dp.out.clear();
    dp.process_packet(1, plain.clone(), 0);
    let tagged = dp.out.pop().unwrap().frame;
    assert_eq!(&tagged[12..16], &[0x81, 0x00, 0x60, 0x05]);
    assert_eq!(&tagged[16..], &plain[12..]);
    dp.process_packet(2, tagged, 0);
    let (retagged, popped) = (dp.out[0].frame.clone(), dp.out[1].frame.clone());
    assert_eq!(&retagged[12..16], &[0x81, 0x00, 0x60, 0x09]);
    assert_eq!(popped, plain);
}

#[test]
fn reg_load_into_a_header_rewrites_the_packet() {
    let mut dp = datapath();
    // Load 10.0.0.77 into the IPv4 destination's low byte, via NXM_OF_IP_DST[0..7].
    flow(&mut dp, 0, 1, vec![oxm(5, &[8, 0])], apply(vec![load(NXM_IP_DST, 0, 8, 77), out(2)]));
    dp.out.clear();
    dp.process_packet(1, tcp(1, 2, 1, 80, 0x10), 0);
    let f = &dp.out[0].frame;
    assert_eq!(&f[30..34], &[10, 0, 0, 77]);
    assert_eq!(inet_csum(&f[14..34]), 0, "IPv4 checksum kept valid");
}

#[test]
fn bad_nx_actions_are_refused_with_ovs_errors_and_the_switch_carries_on() {
    let mut dp = datapath();
    let refuse = |dp: &mut Datapath, a: Action| -> (u16, u16) {
        match send(dp, flow_mod(0, 1, vec![], apply(vec![a]))).as_slice() {
            [Msg { body: Body::Error { typ, code, .. }, .. }] => (*typ, *code),
            other => panic!("expected one error, got {other:?}"),
        }
    };
    let bad_field = NxmHeader::new(NXM_CLASS_1, 99, 4);
    assert_eq!(refuse(&mut dp, load(bad_field, 0, 8, 1)), (OFPET_BAD_MATCH, OFPBMC_BAD_FIELD));
    assert_eq!(refuse(&mut dp, load(reg(0), 30, 8, 1)), (OFPET_BAD_ACTION, OFPBAC_BAD_SET_LEN));
    assert_eq!(refuse(&mut dp, load(reg(0), 0, 4, 16)), (OFPET_BAD_ACTION, OFPBAC_BAD_ARGUMENT));
    // tcp_flags is read-only (in a TCP flow: prerequisites are checked first).
    let flags = NxmHeader::new(NXM_CLASS_1, 34, 2);
    match send(&mut dp, flow_mod(0, 1, tcp4(), apply(vec![load(flags, 0, 4, 1)]))).as_slice() {
        [Msg { body: Body::Error { typ, code, .. }, .. }] => {
            assert_eq!((*typ, *code), (OFPET_BAD_ACTION, OFPBAC_BAD_SET_ARGUMENT))
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(refuse(&mut dp, load(flags, 0, 4, 1)), (OFPET_BAD_ACTION, OFPBAC_MATCH_INCONSISTENT));
    assert_eq!(refuse(&mut dp, learn(9, 1, 0, 0, 0, vec![])), (OFPET_BAD_ACTION, OFPBAC_BAD_ARGUMENT));
    // Malformed on the wire: an unknown subtype, a short fixed-size action.
    let mut raw = Msg::new(5, flow_mod(0, 1, vec![], apply(vec![nx(NxAction::Exit)]))).encode();
    let at = raw.len() - 16;
    raw[at + 9] = 200; // subtype
    dp.handle_raw(&raw, 0);
    match dp.ctrl.pop().map(|m| m.body) {
        Some(Body::Error { typ, code, data }) => {
            assert_eq!((typ, code), (OFPET_BAD_ACTION, OFPBAC_BAD_EXP_TYPE));
            assert_eq!(data, raw[..64.min(raw.len())].to_vec());
        }
        other => panic!("{other:?}"),
    }
    // Write-actions have no slot for an extension action.
    let r = send(&mut dp, flow_mod(0, 1, vec![], vec![Instruction::WriteActions(vec![resubmit(1)])]));
    assert!(matches!(r.as_slice(), [Msg { body: Body::Error { typ: OFPET_BAD_ACTION, .. }, .. }]), "{r:?}");
    // Nothing was installed and the switch still works.
    assert!(dp.tables.iter().all(|t| t.entries.is_empty()));
    flow(&mut dp, 0, 1, vec![], apply(vec![resubmit(1), out(2)]));
    assert_eq!(run(&mut dp, 1, &tcp(1, 2, 1, 2, 0x10), 0), vec![2]);
}

#[test]
fn packet_out_nx_fields_need_their_prerequisites_in_the_packet() {
    let mut dp = datapath();
    let po = |data: Vec<u8>| Body::PacketOut {
        buffer_id: OFP_NO_BUFFER,
        in_port: OFPP_CONTROLLER,
        actions: vec![nx(NxAction::RegMove {
            n_bits: 16,
            src_ofs: 0,
            dst_ofs: 0,
            src: NXM_TCP_DST,
            dst: reg(0),
        })],
        data,
    };
    assert!(send(&mut dp, po(tcp(1, 2, 1, 2, 0x10))).is_empty());
    let mut arp = tcp(1, 2, 1, 2, 0x10);
    arp[12..14].copy_from_slice(&[0x08, 0x06]);
    match send(&mut dp, po(arp)).as_slice() {
        [Msg { body: Body::Error { typ, code, .. }, .. }] => {
            assert_eq!((*typ, *code), (OFPET_BAD_ACTION, OFPBAC_MATCH_INCONSISTENT))
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn packet_out_runs_nx_actions_from_a_fresh_register_file() {
    let mut dp = datapath();
    flow(&mut dp, 1, 5, vec![reg_match(3, 0)], apply(vec![out(3)]));
    flow(&mut dp, 1, 1, vec![], apply(vec![out(4)]));
    let po = |acts: Vec<Action>| Body::PacketOut {
        buffer_id: OFP_NO_BUFFER,
        in_port: OFPP_CONTROLLER,
        actions: acts,
        data: tcp(1, 2, 1, 2, 0x10),
    };
    dp.out.clear();
    assert!(send(&mut dp, po(vec![resubmit(1)])).is_empty());
    assert_eq!(dp.out.drain(..).map(|o| o.port).collect::<Vec<_>>(), vec![3]);
    assert!(send(
        &mut dp,
        po(vec![
            load(reg(3), 0, 32, 9),
            resubmit(1),
            load(reg(0), 0, 16, 2),
            nx(NxAction::OutputReg { src: SubField { field: reg(0), ofs: 0, n_bits: 16 }, max_len: 0 })
        ])
    )
    .is_empty());
    assert_eq!(dp.out.drain(..).map(|o| o.port).collect::<Vec<_>>(), vec![4, 2]);
}

#[test]
fn delete_learned_removes_the_learned_flows_with_the_last_learning_flow() {
    let mut dp = datapath();
    let learner = || {
        nx(NxAction::Learn(Box::new(Learn {
            idle_timeout: 0,
            hard_timeout: 0,
            priority: 5,
            cookie: 0x77,
            flags: NX_LEARN_F_DELETE_LEARNED | NX_LEARN_F_SEND_FLOW_REM,
            table_id: 1,
            fin_idle_timeout: 0,
            fin_hard_timeout: 0,
            specs: vec![
                spec_match_imm(NXM_ETH_TYPE, &[8, 0], 16),
                spec_match_imm(NXM_IP_PROTO, &[0, 6], 8),
                spec_match(NXM_TCP_SRC, 16),
            ],
        })))
    };
    let from = |p: u32| [vec![oxm(0, &p.to_be_bytes())], tcp4()].concat();
    flow(&mut dp, 0, 1, from(1), apply(vec![learner()]));
    flow(&mut dp, 0, 1, from(2), apply(vec![learner()]));
    run(&mut dp, 1, &tcp(1, 2, 10, 80, 0x02), 0);
    run(&mut dp, 2, &tcp(1, 2, 11, 80, 0x02), 0);
    // An unrelated flow in the learned table with another cookie stays throughout.
    flow(&mut dp, 1, 1, vec![], apply(vec![out(3)]));
    assert_eq!(flow_stats(&mut dp, 1).len(), 3);
    let delete = |p: u32| {
        Body::FlowMod(Box::new(FlowMod {
            command: OFPFC_DELETE_STRICT,
            ..match flow_mod(0, 1, from(p), vec![]) {
                Body::FlowMod(fm) => *fm,
                _ => unreachable!(),
            }
        }))
    };
    // One learning flow goes: the other still holds (cookie 0x77, table 1).
    assert!(send(&mut dp, delete(1)).is_empty());
    assert_eq!(flow_stats(&mut dp, 1).len(), 3);
    // The last one goes: its learned flows go with it, each with a FLOW_REMOVED (DELETE).
    let msgs = send(&mut dp, delete(2));
    let gone: Vec<_> = msgs
        .iter()
        .filter_map(|m| match &m.body {
            Body::FlowRemoved(r) => Some((r.table_id, r.cookie, r.reason)),
            _ => None,
        })
        .collect();
    assert_eq!(gone, vec![(1, 0x77, OFPRR_DELETE); 2], "{msgs:?}");
    let left = flow_stats(&mut dp, 1);
    assert_eq!((left.len(), left[0].cookie), (1, 0));
    // A modify that drops the learn action counts as the learning flow going, too.
    flow(&mut dp, 0, 1, from(1), apply(vec![learner()]));
    run(&mut dp, 1, &tcp(1, 2, 12, 80, 0x02), 0);
    assert_eq!(flow_stats(&mut dp, 1).len(), 2);
    let modify = Body::FlowMod(Box::new(FlowMod {
        command: OFPFC_MODIFY_STRICT,
        ..match flow_mod(0, 1, from(1), apply(vec![out(2)])) {
            Body::FlowMod(fm) => *fm,
            _ => unreachable!(),
        }
    }));
    assert_eq!(send(&mut dp, modify).len(), 1, "the learned flow's FLOW_REMOVED");
    assert_eq!(flow_stats(&mut dp, 1).len(), 1);
}
