//! Pipeline behaviour on the in-memory datapath: flow mods and packets in, frames and
//! controller messages out (no sockets, no clock: time is an argument).

use std::collections::HashMap;

mod common;

use common::send;
use dcnlab_switch::datapath::{Datapath, FailMode};
use dcnlab_switch::group::{Rng, SelectMode};
use dcnlab_switch::linkem::{Egress, LinkParams};
use dcnlab_switch::ofp::codec::*;
use dcnlab_switch::ofp::consts::*;
use dcnlab_switch::packet::{set_field, Field, Key};
use dcnlab_switch::ports::{PortQueues, Ports};
use dcnlab_switch::qdisc::droptail::DropTail;
use dcnlab_switch::qdisc::{Arrival, IngressCtx, IngressQdisc, QueueLen};

const SEC: u64 = 1_000_000_000;

fn dp_with(mode: SelectMode, fail: FailMode, ports: u32) -> Datapath {
    common::datapath(mode, fail, ports, 42)
}

fn basic(field: u8, v: &[u8]) -> Oxm {
    Oxm::basic(field, v.to_vec(), None)
}

fn add_flow(dp: &mut Datapath, table: u8, prio: u16, fields: Vec<Oxm>, instrs: Vec<Instruction>) {
    add_flow_ex(dp, table, prio, fields, instrs, 0, 0, 0)
}

#[allow(clippy::too_many_arguments)]
fn add_flow_ex(
    dp: &mut Datapath,
    table: u8,
    prio: u16,
    fields: Vec<Oxm>,
    instrs: Vec<Instruction>,
    idle: u16,
    hard: u16,
    flags: u16,
) {
    let r = send(
        dp,
        Body::FlowMod(Box::new(FlowMod {
            cookie: 5,
            table_id: table,
            idle_timeout: idle,
            hard_timeout: hard,
            flags,
            matches: Match { fields },
            instructions: instrs,
            ..FlowMod::add(prio)
        })),
    );
    assert!(r.is_empty(), "flow mod rejected: {r:?}");
}

fn out(port: u32) -> Action {
    Action::Output { port, max_len: 0 }
}

fn apply(a: Vec<Action>) -> Vec<Instruction> {
    vec![Instruction::ApplyActions(a)]
}

/// UDP/IPv4 frame with the given ports (a "flow").
fn udp(sport: u16, dport: u16) -> Vec<u8> {
    let mut f = vec![0, 0, 0, 0, 0, 2, 0, 0, 0, 0, 0, 1, 0x08, 0x00];
    let mut ip = vec![0x45, 0, 0, 36, 0, 1, 0x40, 0, 64, 17, 0, 0, 10, 0, 0, 1, 10, 0, 0, 2];
    let c = dcnlab_switch::packet::inet_csum(&ip);
    ip[10..12].copy_from_slice(&c.to_be_bytes());
    f.extend_from_slice(&ip);
    f.extend_from_slice(&sport.to_be_bytes());
    f.extend_from_slice(&dport.to_be_bytes());
    f.extend_from_slice(&[0, 16, 0, 0, 1, 2, 3, 4, 5, 6, 7, 8]);
    f
}

fn select_group(dp: &mut Datapath, gid: u32, gtype: u8, buckets: Vec<(u16, u32, u32)>) {
    let r = send(
        dp,
        Body::GroupMod(GroupMod {
            command: OFPGC_ADD,
            group_type: gtype,
            group_id: gid,
            buckets: buckets
                .into_iter()
                .map(|(weight, watch_port, port)| Bucket {
                    weight,
                    watch_port,
                    watch_group: OFPG_ANY,
                    actions: vec![out(port)],
                })
                .collect(),
        }),
    );
    assert!(r.is_empty(), "{r:?}");
}

fn ports_used(dp: &mut Datapath, frames: impl Iterator<Item = Vec<u8>>) -> HashMap<u32, usize> {
    let mut m = HashMap::new();
    for f in frames {
        dp.process_packet(1, f, 0);
        for o in dp.out.drain(..) {
            *m.entry(o.port).or_default() += 1;
        }
    }
    m
}

#[test]
fn select_modes_through_the_pipeline() {
    for (mode, per_packet) in [(SelectMode::Hash, false), (SelectMode::Rr, true), (SelectMode::Random, true)]
    {
        let mut dp = dp_with(mode, FailMode::Secure, 3);
        select_group(&mut dp, 1, OFPGT_SELECT, vec![(1, OFPP_ANY, 2), (1, OFPP_ANY, 3)]);
        add_flow(&mut dp, 0, 10, vec![], apply(vec![Action::Group(1)]));
        // One flow, 1000 packets.
        let used = ports_used(&mut dp, (0..1000).map(|_| udp(1000, 2000)));
        if per_packet {
            assert!(used[&2] > 400 && used[&3] > 400, "{mode:?}: {used:?}");
        } else {
            assert_eq!(used.len(), 1, "hash keeps one flow on one path: {used:?}");
            // ... and spreads many flows.
            let used = ports_used(&mut dp, (0..200).map(|i| udp(1000 + i, 2000)));
            assert_eq!(used.len(), 2, "{used:?}");
        }
    }
}

#[test]
fn experimenter_sets_per_group_mode() {
    let mut dp = dp_with(SelectMode::Hash, FailMode::Secure, 3);
    select_group(&mut dp, 1, OFPGT_SELECT, vec![(1, OFPP_ANY, 2), (1, OFPP_ANY, 3)]);
    add_flow(&mut dp, 0, 10, vec![], apply(vec![Action::Group(1)]));
    let mut data = 1u32.to_be_bytes().to_vec();
    data.extend_from_slice(&[2, 0, 0, 0]); // rr
    let r = send(
        &mut dp,
        Body::Experimenter {
            experimenter: DCNLAB_EXPERIMENTER_ID,
            exp_type: DCNLAB_SET_GROUP_SELECT_MODE,
            data,
        },
    );
    assert!(r.is_empty(), "{r:?}");
    let used = ports_used(&mut dp, (0..10).map(|_| udp(1, 2)));
    assert_eq!((used[&2], used[&3]), (5, 5));
    // Bad mode value and bad length are rejected with an error, nothing changes.
    let r = send(
        &mut dp,
        Body::Experimenter {
            experimenter: DCNLAB_EXPERIMENTER_ID,
            exp_type: DCNLAB_SET_GROUP_SELECT_MODE,
            data: vec![0, 0, 0, 1, 9, 0, 0, 0],
        },
    );
    assert!(matches!(r[0].body, Body::Error { typ: OFPET_BAD_REQUEST, code: OFPBRC_EPERM, .. }));
    let r = send(
        &mut dp,
        Body::Experimenter {
            experimenter: DCNLAB_EXPERIMENTER_ID,
            exp_type: DCNLAB_SET_GROUP_SELECT_MODE,
            data: vec![0; 5],
        },
    );
    assert!(matches!(r[0].body, Body::Error { typ: OFPET_BAD_REQUEST, code: OFPBRC_BAD_LEN, .. }));
}

#[test]
fn weighted_rr_and_dead_buckets() {
    let mut dp = dp_with(SelectMode::Rr, FailMode::Secure, 4);
    select_group(&mut dp, 1, OFPGT_SELECT, vec![(3, 2, 2), (1, 3, 3), (1, 4, 4)]);
    add_flow(&mut dp, 0, 10, vec![], apply(vec![Action::Group(1)]));
    let used = ports_used(&mut dp, (0..500).map(|_| udp(1, 2)));
    assert_eq!((used[&2], used[&3], used[&4]), (300, 100, 100));
    dp.set_link(2, false);
    let st = std::mem::take(&mut dp.ctrl);
    assert!(
        matches!(&st[0].body, Body::PortStatus { reason: OFPPR_MODIFY, desc } if desc.state & OFPPS_LINK_DOWN != 0)
    );
    let used = ports_used(&mut dp, (0..100).map(|_| udp(1, 2)));
    assert_eq!(used.get(&2), None);
    assert_eq!((used[&3], used[&4]), (50, 50));
}

#[test]
fn fast_failover_follows_carrier() {
    let mut dp = dp_with(SelectMode::Hash, FailMode::Secure, 3);
    select_group(&mut dp, 1, OFPGT_FF, vec![(0, 2, 2), (0, 3, 3)]);
    add_flow(&mut dp, 0, 10, vec![], apply(vec![Action::Group(1)]));
    assert_eq!(ports_used(&mut dp, std::iter::once(udp(1, 2))).keys().collect::<Vec<_>>(), vec![&2]);
    dp.set_link(2, false);
    assert_eq!(ports_used(&mut dp, std::iter::once(udp(1, 2))).keys().collect::<Vec<_>>(), vec![&3]);
    dp.set_link(3, false);
    assert!(ports_used(&mut dp, std::iter::once(udp(1, 2))).is_empty());
    dp.set_link(2, true);
    assert_eq!(ports_used(&mut dp, std::iter::once(udp(1, 2))).keys().collect::<Vec<_>>(), vec![&2]);
}

#[test]
fn all_group_and_flood_copy_the_packet() {
    let mut dp = dp_with(SelectMode::Hash, FailMode::Secure, 4);
    select_group(&mut dp, 1, OFPGT_ALL, vec![(0, OFPP_ANY, 2), (0, OFPP_ANY, 3)]);
    add_flow(&mut dp, 0, 10, vec![basic(0, &1u32.to_be_bytes())], apply(vec![Action::Group(1)]));
    add_flow(&mut dp, 0, 10, vec![basic(0, &2u32.to_be_bytes())], apply(vec![out(OFPP_FLOOD)]));
    let used = ports_used(&mut dp, std::iter::once(udp(1, 2)));
    assert_eq!(used.len(), 2);
    dp.process_packet(2, udp(1, 2), 0);
    let mut ports: Vec<u32> = dp.out.drain(..).map(|o| o.port).collect();
    ports.sort();
    assert_eq!(ports, vec![1, 3, 4], "flood excludes the input port");
}

#[test]
fn goto_write_actions_metadata_and_set_field() {
    let mut dp = dp_with(SelectMode::Hash, FailMode::Secure, 3);
    add_flow(
        &mut dp,
        0,
        10,
        vec![],
        vec![
            Instruction::WriteActions(vec![out(2)]),
            Instruction::WriteMetadata { metadata: 0x7, mask: 0xff },
            Instruction::GotoTable(1),
        ],
    );
    // Table 1 matches the metadata, rewrites ip_dscp and replaces the output.
    add_flow(
        &mut dp,
        1,
        10,
        vec![basic(2, &7u64.to_be_bytes())],
        vec![
            Instruction::ApplyActions(vec![Action::SetField(basic(8, &[46]))]),
            Instruction::WriteActions(vec![out(3)]),
        ],
    );
    dp.process_packet(1, udp(1, 2), 0);
    let o: Vec<_> = dp.out.drain(..).collect();
    assert_eq!(o.len(), 1);
    assert_eq!(o[0].port, 3);
    assert_eq!(o[0].frame[15] >> 2, 46);
    assert_eq!(dcnlab_switch::packet::inet_csum(&o[0].frame[14..34]), 0, "IP checksum still valid");
}

#[test]
fn vlan_tags_survive_and_push_pop_work() {
    let mut dp = dp_with(SelectMode::Hash, FailMode::Secure, 3);
    add_flow(&mut dp, 0, 10, vec![basic(6, &[0x10, 0x0a])], apply(vec![out(2)]));
    add_flow(
        &mut dp,
        0,
        5,
        vec![basic(6, &[0, 0])],
        apply(vec![Action::PushVlan(0x8100), Action::SetField(basic(6, &[0x10, 0x0b])), out(3)]),
    );
    let mut tagged = udp(1, 2);
    tagged.splice(12..12, [0x81, 0x00, 0x20, 0x0a]);
    dp.process_packet(1, tagged.clone(), 0);
    let o: Vec<_> = dp.out.drain(..).collect();
    assert_eq!((o[0].port, &o[0].frame), (2, &tagged), "tagged frame forwarded unchanged");
    dp.process_packet(1, udp(1, 2), 0);
    let o: Vec<_> = dp.out.drain(..).collect();
    assert_eq!(o[0].port, 3);
    assert_eq!(&o[0].frame[12..16], &[0x81, 0x00, 0x00, 0x0b]);
    assert_eq!(&o[0].frame[16..], &udp(1, 2)[12..]);
}

#[test]
fn timeouts_send_flow_removed() {
    let mut dp = dp_with(SelectMode::Hash, FailMode::Secure, 2);
    add_flow_ex(
        &mut dp,
        0,
        10,
        vec![basic(0, &1u32.to_be_bytes())],
        apply(vec![out(2)]),
        2,
        0,
        OFPFF_SEND_FLOW_REM,
    );
    add_flow_ex(
        &mut dp,
        0,
        11,
        vec![basic(0, &2u32.to_be_bytes())],
        apply(vec![out(1)]),
        0,
        3,
        OFPFF_SEND_FLOW_REM,
    );
    dp.process_packet(1, udp(1, 2), SEC); // refresh idle at t=1s
    dp.tick(2 * SEC + SEC / 2);
    assert!(dp.ctrl.is_empty());
    dp.tick(3 * SEC);
    let m: Vec<_> = dp.ctrl.drain(..).collect();
    let reasons: Vec<u8> = m
        .iter()
        .map(|m| match &m.body {
            Body::FlowRemoved(f) => f.reason,
            b => panic!("{b:?}"),
        })
        .collect();
    assert_eq!(reasons.len(), 2);
    assert!(reasons.contains(&OFPRR_IDLE_TIMEOUT) && reasons.contains(&OFPRR_HARD_TIMEOUT));
    assert!(dp.tables[0].entries.is_empty());
}

#[test]
fn group_delete_removes_its_flows() {
    let mut dp = dp_with(SelectMode::Hash, FailMode::Secure, 3);
    select_group(&mut dp, 1, OFPGT_INDIRECT, vec![(0, OFPP_ANY, 2)]);
    add_flow_ex(&mut dp, 0, 10, vec![], apply(vec![Action::Group(1)]), 0, 0, OFPFF_SEND_FLOW_REM);
    let r = send(
        &mut dp,
        Body::GroupMod(GroupMod { command: OFPGC_DELETE, group_type: 0, group_id: 1, buckets: vec![] }),
    );
    assert!(matches!(&r[0].body, Body::FlowRemoved(f) if f.reason == OFPRR_GROUP_DELETE));
    assert!(dp.tables[0].entries.is_empty());
    // A flow pointing at a missing group is refused.
    let r = send(
        &mut dp,
        Body::FlowMod(Box::new(FlowMod { instructions: apply(vec![Action::Group(1)]), ..FlowMod::add(1) })),
    );
    assert!(matches!(r[0].body, Body::Error { typ: OFPET_BAD_ACTION, code: OFPBAC_BAD_OUT_GROUP, .. }));
}

#[test]
fn standalone_learns_when_disconnected_secure_does_not() {
    let mut dp = dp_with(SelectMode::Hash, FailMode::Standalone, 3);
    dp.connected = false;
    let mut a_to_b = udp(1, 2); // src ..01 dst ..02
    dp.process_packet(1, a_to_b.clone(), 0);
    assert_eq!(dp.out.drain(..).count(), 2, "unknown destination floods");
    let mut b_to_a = udp(2, 1);
    b_to_a[0..6].copy_from_slice(&[0, 0, 0, 0, 0, 1]);
    b_to_a[6..12].copy_from_slice(&[0, 0, 0, 0, 0, 2]);
    dp.process_packet(2, b_to_a, 0);
    assert_eq!(dp.out.drain(..).map(|o| o.port).collect::<Vec<_>>(), vec![1], "learned");
    dp.process_packet(1, a_to_b.clone(), 0);
    assert_eq!(dp.out.drain(..).map(|o| o.port).collect::<Vec<_>>(), vec![2]);

    let mut secure = dp_with(SelectMode::Hash, FailMode::Secure, 3);
    add_flow(&mut secure, 0, 10, vec![], apply(vec![out(3)]));
    secure.connected = false;
    a_to_b[0] = 0;
    secure.process_packet(1, a_to_b, 0);
    assert_eq!(secure.out.drain(..).map(|o| o.port).collect::<Vec<_>>(), vec![3], "flows kept and used");
}

#[test]
fn packet_out_and_packet_in() {
    let mut dp = dp_with(SelectMode::Hash, FailMode::Secure, 3);
    add_flow(&mut dp, 0, 0, vec![], apply(vec![Action::Output { port: OFPP_CONTROLLER, max_len: 20 }]));
    dp.process_packet(3, udp(1, 2), 0);
    let m = dp.ctrl.pop().unwrap();
    match m.body {
        Body::PacketIn { reason, data, total_len, matches, buffer_id, .. } => {
            assert_eq!(reason, OFPR_NO_MATCH);
            assert_eq!(buffer_id, OFP_NO_BUFFER);
            assert_eq!(data.len(), 20);
            assert_eq!(total_len as usize, udp(1, 2).len());
            assert_eq!(matches.fields[0].value, 3u32.to_be_bytes().to_vec());
        }
        b => panic!("{b:?}"),
    }
    let r = send(
        &mut dp,
        Body::PacketOut {
            buffer_id: OFP_NO_BUFFER,
            in_port: OFPP_CONTROLLER,
            actions: vec![out(2)],
            data: udp(5, 6),
        },
    );
    assert!(r.is_empty());
    assert_eq!(dp.out.drain(..).map(|o| o.port).collect::<Vec<_>>(), vec![2]);
    // A buffer id we never handed out.
    let r = send(&mut dp, Body::PacketOut { buffer_id: 7, in_port: 1, actions: vec![out(2)], data: vec![] });
    assert!(matches!(r[0].body, Body::Error { typ: OFPET_BAD_REQUEST, code: OFPBRC_BUFFER_UNKNOWN, .. }));
}

#[test]
fn flow_mod_errors_follow_the_spec() {
    let mut dp = dp_with(SelectMode::Hash, FailMode::Secure, 2);
    let base = FlowMod::add(1);
    let cases: Vec<(FlowMod, u16, u16)> = vec![
        (FlowMod { table_id: 7, ..base.clone() }, OFPET_FLOW_MOD_FAILED, OFPFMFC_BAD_TABLE_ID),
        (FlowMod { command: 9, ..base.clone() }, OFPET_FLOW_MOD_FAILED, OFPFMFC_BAD_COMMAND),
        (
            FlowMod { instructions: vec![Instruction::GotoTable(0)], ..base.clone() },
            OFPET_BAD_INSTRUCTION,
            OFPBIC_BAD_TABLE_ID,
        ),
        (
            FlowMod { instructions: apply(vec![out(0)]), ..base.clone() },
            OFPET_BAD_ACTION,
            OFPBAC_BAD_OUT_PORT,
        ),
        (
            FlowMod { instructions: apply(vec![Action::SetField(basic(0, &[0, 0, 0, 1]))]), ..base.clone() },
            OFPET_BAD_ACTION,
            OFPBAC_BAD_SET_TYPE,
        ),
        (
            FlowMod { instructions: apply(vec![Action::PushVlan(0x0800)]), ..base.clone() },
            OFPET_BAD_ACTION,
            OFPBAC_BAD_ARGUMENT,
        ),
        (
            FlowMod { matches: Match { fields: vec![basic(13, &[0, 80])] }, ..base.clone() },
            OFPET_BAD_MATCH,
            OFPBMC_BAD_PREREQ,
        ),
        (
            FlowMod { matches: Match { fields: vec![Oxm::basic(99, vec![1], None)] }, ..base.clone() },
            OFPET_BAD_MATCH,
            OFPBMC_BAD_FIELD,
        ),
    ];
    for (fm, typ, code) in cases {
        let r = send(&mut dp, Body::FlowMod(Box::new(fm.clone())));
        match &r[..] {
            [Msg { body: Body::Error { typ: t, code: c, .. }, xid: 9 }] => {
                assert_eq!((*t, *c), (typ, code), "{fm:?}")
            }
            other => panic!("{fm:?}: {other:?}"),
        }
    }
    // Overlap check.
    let a = FlowMod {
        flags: OFPFF_CHECK_OVERLAP,
        matches: Match { fields: vec![basic(0, &1u32.to_be_bytes())] },
        ..base.clone()
    };
    assert!(send(&mut dp, Body::FlowMod(Box::new(a))).is_empty());
    let b = FlowMod { flags: OFPFF_CHECK_OVERLAP, ..base };
    let r = send(&mut dp, Body::FlowMod(Box::new(b)));
    assert!(matches!(r[0].body, Body::Error { typ: OFPET_FLOW_MOD_FAILED, code: OFPFMFC_OVERLAP, .. }));
}

// ---------------------------------------------------------------------------------------
// Ingress queue disciplines: frames received on a port pass its ingress discipline before
// the flow tables (the path `switch.rs` runs, through `ports::Ports`).

/// Holds frames that arrive while the port's own egress queue is not empty, releases them
/// (in order, with the IPv4 DSCP set to 10 to show a release may modify the frame) when
/// that queue has drained, and drops arrivals beyond `limit` held frames.
struct HoldWhileBacklogged {
    limit: usize,
    held: std::collections::VecDeque<Vec<u8>>,
    arrivals: u64,
    drops: u64,
}

impl IngressQdisc for HoldWhileBacklogged {
    fn kind(&self) -> &'static str {
        "hold"
    }
    fn arrive(&mut self, frame: Vec<u8>, ctx: &IngressCtx) -> Arrival {
        self.arrivals += 1;
        if ctx.egress.pkts == 0 && self.held.is_empty() {
            Arrival::Pass(frame)
        } else if self.held.len() >= self.limit {
            self.drops += 1;
            Arrival::Dropped
        } else {
            self.held.push_back(frame);
            Arrival::Held
        }
    }
    fn wake(&mut self, ctx: &IngressCtx, release: &mut Vec<Vec<u8>>) {
        if ctx.egress.pkts == 0 {
            for mut f in self.held.drain(..) {
                let k = Key::parse(&f, 0);
                set_field(&mut f, &k, Field::IpDscp, &[10]);
                release.push(f);
            }
        }
    }
    fn next_deadline(&self) -> Option<u64> {
        None
    }
    fn held(&self) -> QueueLen {
        QueueLen { pkts: self.held.len(), bytes: self.held.iter().map(Vec::len).sum() }
    }
    fn counters(&self) -> Vec<(&'static str, u64)> {
        vec![("arrivals", self.arrivals), ("drops", self.drops)]
    }
}

#[test]
fn ingress_discipline_holds_frames_until_its_port_egress_drains() {
    const MS: u64 = 1_000_000;
    let mut dp = dp_with(SelectMode::Hash, FailMode::Secure, 2);
    add_flow(&mut dp, 0, 10, vec![basic(0, &1u32.to_be_bytes())], apply(vec![out(2)]));
    add_flow(&mut dp, 0, 10, vec![basic(0, &2u32.to_be_bytes())], apply(vec![out(1)]));
    let mut ports = Ports::new(Rng::new(1));
    for p in 1..=2u32 {
        // Port 1: 64-byte frames at 512 kbit/s = 1 ms each on its egress.
        let rate = if p == 1 { Some(512_000) } else { None };
        let egress =
            Egress::new(LinkParams { rate_bps: rate, ..Default::default() }, Box::new(DropTail::default()));
        let ingress: Option<Box<dyn IngressQdisc>> = if p == 1 {
            Some(Box::new(HoldWhileBacklogged { limit: 2, held: Default::default(), arrivals: 0, drops: 0 }))
        } else {
            None
        };
        ports.add(PortQueues::new(p, egress, ingress));
    }
    let frame = |sport: u16| {
        let mut f = udp(sport, 9);
        f.resize(64, 0);
        f
    };
    let sports = |ports: &mut Ports, i: usize| -> Vec<(u16, u8)> {
        std::mem::take(&mut ports.queues[i].tx)
            .iter()
            .map(|f| (u16::from_be_bytes([f[34], f[35]]), f[15] >> 2))
            .collect()
    };
    // Nothing queued on port 1: its arrivals go straight through the flow table to 2.
    ports.receive(&mut dp, 0, frame(1), 0);
    ports.route_outputs(&mut dp, 0);
    assert_eq!(sports(&mut ports, 1), vec![(1, 0)]);
    // Port 2 -> port 1 backs up port 1's egress (3 frames, 3 ms).
    for s in 100..103 {
        ports.receive(&mut dp, 1, frame(s), 0);
    }
    ports.route_outputs(&mut dp, 0);
    assert_eq!(ports.get(1).unwrap().egress.qlen_pkts(), 3);
    // Now port 1's arrivals are held; the third is one too many.
    for s in 2..5 {
        ports.receive(&mut dp, 0, frame(s), MS / 2);
    }
    ports.service(&mut dp, MS / 2);
    assert!(sports(&mut ports, 1).is_empty());
    assert_eq!(dp.ports[&1].counters.rx_dropped, 1);
    assert_eq!(dp.ports[&1].counters.rx_packets, 4);
    // Departures wake the discipline; only the last one (3 ms) empties the queue.
    let mut t = MS / 2;
    while let Some(d) = ports.next_deadline() {
        t = d;
        ports.service(&mut dp, t);
        if !ports.queues[1].tx.is_empty() {
            break;
        }
    }
    assert_eq!(t, 3 * MS);
    assert_eq!(sports(&mut ports, 0).len(), 3, "port 1 sent the backlog");
    assert_eq!(sports(&mut ports, 1), vec![(2, 10), (3, 10)], "released in order, modified");
    assert_eq!(ports.next_deadline(), None);
    let q = ports.get(1).unwrap().ingress.as_ref().unwrap();
    assert_eq!((q.held(), q.counters()), (QueueLen::default(), vec![("arrivals", 4), ("drops", 1)]));
}

/// A datapath whose ports 2 and 3 (the select group's buckets) run at `rate_bps`, as the
/// switch describes them (`curr_speed`), with their egress queues in `Ports`.
fn balanced_datapath(spec: &str, rate_bps: u64) -> (Datapath, Ports) {
    let mut dp = dp_with(SelectMode::Hash, FailMode::Secure, 1);
    let mut ports = Ports::new(Rng::new(1));
    ports.add(PortQueues::new(1, Egress::new(LinkParams::default(), Box::new(DropTail::default())), None));
    for p in 2..=3u32 {
        let desc = PortDesc { port_no: p, curr_speed: (rate_bps / 1000) as u32, ..Default::default() };
        dp.add_port(desc, true, 0);
        let link = LinkParams { rate_bps: Some(rate_bps), ..Default::default() };
        ports.add(PortQueues::new(p, Egress::new(link, Box::new(DropTail::default())), None));
    }
    select_group(&mut dp, 1, OFPGT_SELECT, vec![(1, OFPP_ANY, 2), (1, OFPP_ANY, 3)]);
    add_flow(&mut dp, 0, 10, vec![basic(0, &1u32.to_be_bytes())], apply(vec![Action::Group(1)]));
    let body = dcnlab_switch::ofp::dcnlab::encode_group_spec(1, spec);
    let r = send(
        &mut dp,
        Body::Experimenter {
            experimenter: DCNLAB_EXPERIMENTER_ID,
            exp_type: DCNLAB_SET_GROUP_BALANCER,
            data: body,
        },
    );
    assert!(r.is_empty(), "{spec}: {r:?}");
    (dp, ports)
}

/// Sends `frame` in on port 1 at `now_ns` through the ports, after the departures due
/// by then (as the event loop's timer would); returns the output port.
fn through(dp: &mut Datapath, ports: &mut Ports, frame: Vec<u8>, now_ns: u64) -> u32 {
    ports.service(dp, now_ns);
    ports.receive(dp, 0, frame, now_ns);
    let port = dp.out.first().map(|o| o.port).expect("forwarded");
    ports.route_outputs(dp, now_ns);
    port
}

#[test]
fn drill_follows_the_egress_queues_the_ports_report() {
    // 1000-byte frames at 8 Mbit/s take 1 ms each. d=2 over two buckets compares both.
    let (mut dp, mut ports) = balanced_datapath("drill", 8_000_000);
    let big = || {
        let mut f = udp(1, 2);
        f.resize(1000, 0);
        f
    };
    // Build a queue of 5 frames on port 2 on purpose (straight into its egress).
    for _ in 0..5 {
        dp.out.push(dcnlab_switch::datapath::Output { port: 2, frame: big(), queue: 0 });
    }
    ports.route_outputs(&mut dp, 0);
    assert_eq!(dp.ports[&2].egress_queue.pkts, 5);
    // Packets of one flow (no time passes, nothing drains) go to port 3 while it holds
    // fewer bytes: five of them, until the two queues are even ...
    let picks: Vec<u32> = (0..5).map(|i| through(&mut dp, &mut ports, big(), i)).collect();
    assert_eq!(picks, vec![3, 3, 3, 3, 3]);
    assert_eq!(dp.ports[&2].egress_queue, dp.ports[&3].egress_queue);
    // ... and at a tie the remembered port keeps the next one.
    assert_eq!(through(&mut dp, &mut ports, big(), 5), 3);
    // At 5.5 ms port 2 has sent its 5 frames and port 3 is still on its 6th: port 2 is
    // the shorter now and takes the next.
    assert_eq!(through(&mut dp, &mut ports, big(), 5_500_000), 2);
    assert_eq!(dp.ports[&2].egress_queue.pkts, 1);
}

#[test]
fn letflow_keeps_a_flowlet_for_the_timeout_scaled_to_the_ports_rate() {
    // At 10 Mbit/s the default timeout is 500 ms: packets 100 ms apart are one flowlet.
    let (mut dp, mut ports) = balanced_datapath("letflow", 10_000_000);
    const MS: u64 = 1_000_000;
    let picks: Vec<u32> = (0..50).map(|i| through(&mut dp, &mut ports, udp(7, 9), i * 100 * MS)).collect();
    assert!(picks.iter().all(|&p| p == picks[0]), "{picks:?}");
    // Gaps of 600 ms start a new flowlet each time: both ports get some.
    let picks: Vec<u32> =
        (0..50).map(|i| through(&mut dp, &mut ports, udp(7, 9), 10_000 * MS + i * 600 * MS)).collect();
    assert!(picks.contains(&2) && picks.contains(&3), "{picks:?}");
    // An explicit timeout overrides the default.
    let (mut dp, mut ports) = balanced_datapath("letflow/timeout=50ms", 10_000_000);
    let picks: Vec<u32> = (0..50).map(|i| through(&mut dp, &mut ports, udp(7, 9), i * 100 * MS)).collect();
    assert!(picks.contains(&2) && picks.contains(&3), "{picks:?}");
}

/// A switch with ports 1..=3 at 10 Mbit/s and the switch default balancer `spec`: port
/// 1 faces a host (its packets take select group 1 over ports 2 and 3), and what comes in
/// on 2 or 3 goes out on 1 (a leaf; read 1 as "down" and 2, 3 as "up" for a spine).
fn conga_switch(spec: &str) -> Datapath {
    let mut dp = dp_with(SelectMode::Hash, FailMode::Secure, 0);
    for p in 1..=3u32 {
        let desc = PortDesc { port_no: p, curr_speed: 10_000, ..Default::default() };
        dp.add_port(desc, true, 0);
    }
    dp.set_switch_balancer(dcnlab_switch::spec::NamedSpec::parse(spec).unwrap()).unwrap();
    select_group(&mut dp, 1, OFPGT_SELECT, vec![(1, OFPP_ANY, 2), (1, OFPP_ANY, 3)]);
    add_flow(&mut dp, 0, 10, vec![basic(0, &1u32.to_be_bytes())], apply(vec![Action::Group(1)]));
    for p in 2..=3u32 {
        add_flow(&mut dp, 0, 10, vec![basic(0, &p.to_be_bytes())], apply(vec![out(1)]));
    }
    dp
}

/// UDP/IPv4 from 10.0.0.`src` to 10.0.0.`dst`, source port `sport`.
fn udp_between(src: u8, dst: u8, sport: u16) -> Vec<u8> {
    let mut f = udp(sport, 9);
    f[29] = src;
    f[33] = dst;
    f[24..26].copy_from_slice(&[0, 0]);
    let c = dcnlab_switch::packet::inet_csum(&f[14..34]);
    f[24..26].copy_from_slice(&c.to_be_bytes());
    f
}

/// Sends `frame` in on `port` at `now_ns`; the one frame out and its port.
fn one_out(dp: &mut Datapath, port: u32, frame: Vec<u8>, now_ns: u64) -> (u32, Vec<u8>) {
    dp.process_packet(port, frame, now_ns);
    let mut out: Vec<_> = dp.out.drain(..).collect();
    assert_eq!(out.len(), 1, "one frame out");
    let o = out.pop().unwrap();
    (o.port, o.frame)
}

fn label_of(frame: &[u8]) -> dcnlab_switch::conga::Label {
    assert_eq!(&frame[12..14], &[0x88, 0x47], "an MPLS-labelled frame");
    dcnlab_switch::conga::Label::decode([frame[14], frame[15], frame[16], frame[17]])
}

#[test]
fn conga_labels_carry_congestion_to_the_destination_leaf_and_feedback_back() {
    const MS: u64 = 1_000_000;
    let mut leaf1 = conga_switch("conga/leaf=1/timeout=1ms");
    let mut spine = conga_switch("conga");
    let mut leaf2 = conga_switch("conga/leaf=2/timeout=1ms");
    // 10.0.0.1 (behind leaf 1) to 10.0.0.2 (behind leaf 2): leaf 1 labels it with its id
    // and the bucket it chose; it knows nothing of leaf 2 yet, so no feedback.
    let plain = udp_between(1, 2, 7);
    let (up, f) = one_out(&mut leaf1, 1, plain.clone(), 0);
    let tag = (up - 2) as u8;
    assert_eq!(label_of(&f), dcnlab_switch::conga::Label { src_leaf: 1, lbtag: tag, ce: 0, feedback: None });
    assert_eq!(f.len(), plain.len() + 4);
    // The spine's ways on (it hashes; the path was leaf 1's to choose) are busy: 100 kB
    // admitted in the last moments at 10 Mbit/s, about two thirds of the rate (metric 5
    // of 7); CE takes it.
    for p in 2..=3 {
        spine.ports.get_mut(&p).unwrap().tx_meter.add(100_000, MS);
    }
    let (_, f) = one_out(&mut spine, 1, f, MS);
    assert_eq!(label_of(&f).ce, 5);
    // Leaf 2 ends the label: the host gets the frame as it was sent.
    let (down, f) = one_out(&mut leaf2, 2, f, MS);
    assert_eq!((down, f), (1, plain));
    // Its answer carries leaf 1's path metric back as feedback.
    let (_, back) = one_out(&mut leaf2, 1, udp_between(2, 1, 9), 2 * MS);
    let l = label_of(&back);
    assert_eq!((l.src_leaf, l.feedback), (2, Some((tag, 5))));
    let (_, f) = one_out(&mut leaf1, 2, back, 2 * MS);
    assert_eq!(f, udp_between(2, 1, 9));
    // Leaf 1's next flowlets to leaf 2 avoid the congested bucket.
    for (i, sport) in (100..120u16).enumerate() {
        let (up2, f) = one_out(&mut leaf1, 1, udp_between(1, 2, sport), (3 + i as u64) * MS);
        assert_ne!(up2, up, "flow {sport}");
        assert_eq!(label_of(&f).feedback, Some((l.lbtag, 0)), "leaf 2's uplink as leaf 1 saw it");
    }
    let overlay = leaf1.conga.as_ref().unwrap();
    assert_eq!((overlay.labels_in, overlay.feedback_in), (1, 1));
    assert!(spine.conga.as_ref().unwrap().leaf.is_none());
}

#[test]
fn a_switch_without_conga_neither_labels_nor_pops() {
    let mut dp = conga_switch("hash");
    let plain = udp_between(1, 2, 7);
    let (_, f) = one_out(&mut dp, 1, plain.clone(), 0);
    assert_eq!(f, plain);
    assert!(dp.conga.is_none());
    // Another default balancer ends the overlay; the same spec again keeps what it learned.
    let mut leaf = conga_switch("conga/leaf=1");
    let (_, f) = one_out(&mut leaf, 1, plain.clone(), 0);
    let mut far = conga_switch("conga/leaf=2");
    one_out(&mut far, 2, f, 0);
    far.set_switch_balancer(dcnlab_switch::spec::NamedSpec::parse("conga/leaf=2").unwrap()).unwrap();
    assert_eq!(far.conga.as_ref().unwrap().labels_in, 1);
    far.set_switch_balancer(dcnlab_switch::spec::NamedSpec::parse("hash").unwrap()).unwrap();
    assert!(far.conga.is_none());
}
