//! OpenFlow 1.3.5 conformance for the subset switch_ext claims: every match field, every
//! set-field, every action, instruction and group type, as packet in -> packet(s) out.
//!
//! Each case is written from the specification: a flow (or group) is installed through
//! the wire codec, a packet enters port 1, and what leaves (port, bytes) is checked,
//! including every checksum a rewrite touches.  The supported subset is stated in
//! `switch_ext/README.md` (section "Conformance"); the last test checks that the table
//! there lists exactly the cases below, so the README cannot drift from what is tested.

use std::collections::BTreeSet;

mod common;

use common::{add, flow, send};
use dcnlab_switch::datapath::{Datapath, FailMode};
use dcnlab_switch::group::SelectMode;
use dcnlab_switch::ofp::codec::*;
use dcnlab_switch::ofp::consts::*;
use dcnlab_switch::packet::{crc32c, inet_csum, Field, Key};

// ---------------------------------------------------------------------------- harness

fn datapath(mode: SelectMode) -> Datapath {
    common::datapath(mode, FailMode::Secure, 4, 7)
}

/// The one error a flow mod got, as (type, code).
fn refusal(dp: &mut Datapath, fields: Vec<Oxm>, instrs: Vec<Instruction>) -> (u16, u16) {
    match send(dp, add(0, 1, fields, instrs)).as_slice() {
        [Msg { body: Body::Error { typ, code, .. }, .. }] => (*typ, *code),
        other => panic!("expected one error, got {other:?}"),
    }
}

fn group(dp: &mut Datapath, gid: u32, gtype: u8, buckets: Vec<(u32, Vec<Action>)>) {
    let buckets = buckets
        .into_iter()
        // Weights are for select groups only (others must carry 0: WEIGHT_UNSUPPORTED).
        .map(|(watch_port, actions)| Bucket {
            weight: u16::from(gtype == OFPGT_SELECT),
            watch_port,
            watch_group: OFPG_ANY,
            actions,
        })
        .collect();
    let r =
        send(dp, Body::GroupMod(GroupMod { command: OFPGC_ADD, group_type: gtype, group_id: gid, buckets }));
    assert!(r.is_empty(), "group mod refused: {r:?}");
}

fn oxm(field: Field, v: u128) -> Oxm {
    let w = field.width();
    let bytes = v.to_be_bytes()[16 - w..].to_vec();
    if field == Field::TcpFlags {
        // OpenFlow 1.3 has no tcp_flags; Ryu encodes it as ONF's experimenter OXM (EXT-109).
        return Oxm {
            class: OFPXMC_EXPERIMENTER,
            field: 42,
            experimenter: Some(ONF_EXPERIMENTER_ID),
            value: bytes,
            mask: None,
        };
    }
    Oxm::basic(field as u8, bytes, None)
}

fn out(port: u32) -> Action {
    Action::Output { port, max_len: 0xffff }
}

fn apply(a: Vec<Action>) -> Vec<Instruction> {
    vec![Instruction::ApplyActions(a)]
}

/// What leaves the switch for one packet in: (port, frame) in order.
fn run(dp: &mut Datapath, in_port: u32, frame: &[u8]) -> Vec<(u32, Vec<u8>)> {
    dp.out.clear();
    dp.ctrl.clear();
    dp.process_packet(in_port, frame.to_vec(), 0);
    dp.out.drain(..).map(|o| (o.port, o.frame)).collect()
}

// ---------------------------------------------------------------------------- packets

fn eth(ethertype: u16) -> Vec<u8> {
    let mut f = vec![0x02, 0, 0, 0, 0, 0x22, 0x02, 0, 0, 0, 0, 0x11];
    f.extend_from_slice(&ethertype.to_be_bytes());
    f
}

fn ipv4(proto: u8, l4: Vec<u8>) -> Vec<u8> {
    let mut f = eth(0x0800);
    let mut ip = vec![0x45, 0x2a]; // DSCP 10, ECN 2
    ip.extend_from_slice(&((20 + l4.len()) as u16).to_be_bytes());
    ip.extend_from_slice(&[0, 1, 0x40, 0, 64, proto, 0, 0, 10, 0, 0, 1, 10, 0, 0, 2]);
    let c = inet_csum(&ip);
    ip[10..12].copy_from_slice(&c.to_be_bytes());
    f.extend(ip);
    let mut l4 = l4;
    fill_l4_checksum(&f[14..], proto, &mut l4, false);
    f.extend(l4);
    f
}

fn ipv6(proto: u8, l4: Vec<u8>) -> Vec<u8> {
    let mut f = eth(0x86dd);
    let mut ip = vec![0x62, 0x80, 0x12, 0x34]; // traffic class 0x28, flow label 0x01234
    ip.extend_from_slice(&(l4.len() as u16).to_be_bytes());
    ip.extend_from_slice(&[proto, 64]);
    ip.extend_from_slice(&[0xfd; 16]);
    ip.extend_from_slice(&[0xfe; 16]);
    f.extend(ip);
    let mut l4 = l4;
    fill_l4_checksum(&f[14..], proto, &mut l4, true);
    f.extend(l4);
    f
}

fn pseudo(l3: &[u8], proto: u8, l4: &[u8], v6: bool) -> Vec<u8> {
    let mut p = if v6 { l3[8..40].to_vec() } else { l3[12..20].to_vec() };
    if v6 {
        p.extend_from_slice(&(l4.len() as u32).to_be_bytes());
        p.extend_from_slice(&[0, 0, 0, proto]);
    } else {
        p.extend_from_slice(&[0, proto]);
        p.extend_from_slice(&(l4.len() as u16).to_be_bytes());
    }
    p.extend_from_slice(l4);
    p
}

fn fill_l4_checksum(l3: &[u8], proto: u8, l4: &mut [u8], v6: bool) {
    match proto {
        6 | 17 | 58 => {
            let at = match proto {
                6 => 16,
                17 => 6,
                _ => 2,
            };
            let c = inet_csum(&pseudo(l3, proto, l4, v6));
            l4[at..at + 2].copy_from_slice(&c.to_be_bytes());
        }
        1 => {
            let c = inet_csum(l4);
            l4[2..4].copy_from_slice(&c.to_be_bytes());
        }
        132 => {
            let c = crc32c(l4);
            l4[8..12].copy_from_slice(&c.to_le_bytes());
        }
        _ => {}
    }
}

fn tcp() -> Vec<u8> {
    let mut t = vec![0x9c, 0x40, 0x00, 0x50, 0, 0, 0, 1, 0, 0, 0, 0, 0x50, 0x12, 0xff, 0xff, 0, 0, 0, 0];
    t.extend_from_slice(b"data");
    t
}
fn udp() -> Vec<u8> {
    vec![0x04, 0xd2, 0x16, 0x2e, 0, 12, 0, 0, 1, 2, 3, 4]
}
fn sctp() -> Vec<u8> {
    vec![0x0b, 0xb8, 0x0f, 0xa0, 0, 0, 0, 9, 0, 0, 0, 0, 0, 0, 0, 4]
}
fn icmp() -> Vec<u8> {
    vec![8, 0, 0, 0, 0, 7, 0, 1, b'h', b'i']
}
fn icmp6() -> Vec<u8> {
    vec![128, 0, 0, 0, 0, 7, 0, 1, b'h', b'i']
}
fn arp() -> Vec<u8> {
    let mut f = eth(0x0806);
    f.extend_from_slice(&[0, 1, 0x08, 0, 6, 4, 0, 1]);
    f.extend_from_slice(&[0x02, 0, 0, 0, 0, 0x11, 10, 0, 0, 1]);
    f.extend_from_slice(&[0, 0, 0, 0, 0, 0, 10, 0, 0, 2]);
    f
}
fn vlan(mut f: Vec<u8>) -> Vec<u8> {
    f.splice(12..12, [0x81, 0x00, 0xa0, 0x64]); // PCP 5, VID 100
    f
}

/// Every checksum in the frame is right (IPv4 header, TCP/UDP/ICMP/ICMPv6, SCTP CRC32c).
fn checksums_ok(f: &[u8]) -> bool {
    let k = Key::parse(f, 1);
    let (Some(l4), Some(proto)) = (k.l4, k.ip_proto) else { return true };
    let l3 = &f[k.l3..];
    if k.is_ipv4 && inet_csum(&l3[..20]) != 0 {
        return false;
    }
    let end = if k.is_ipv4 {
        k.l3 + u16::from_be_bytes([l3[2], l3[3]]) as usize
    } else {
        k.l3 + 40 + u16::from_be_bytes([l3[4], l3[5]]) as usize
    };
    let seg = &f[l4..end];
    match proto {
        6 | 17 | 58 => inet_csum(&pseudo(l3, proto, seg, k.is_ipv6)) == 0,
        1 => inet_csum(seg) == 0,
        132 => {
            let mut z = seg.to_vec();
            z[8..12].copy_from_slice(&[0; 4]);
            seg[8..12] == crc32c(&z).to_le_bytes()
        }
        _ => true,
    }
}

// ---------------------------------------------------------------------------- match fields

struct MatchCase {
    field: Field,
    packet: fn() -> Vec<u8>,
    prereqs: Vec<(Field, u128)>,
}

fn match_cases() -> Vec<MatchCase> {
    use Field::*;
    let ip4 = vec![(EthType, 0x0800)];
    let ip6 = vec![(EthType, 0x86dd)];
    let with = |base: &Vec<(Field, u128)>, p: u128| [base.clone(), vec![(IpProto, p)]].concat();
    let c = |field, packet, prereqs| MatchCase { field, packet, prereqs };
    vec![
        c(InPort, || ipv4(17, udp()), vec![]),
        c(EthDst, || ipv4(17, udp()), vec![]),
        c(EthSrc, || ipv4(17, udp()), vec![]),
        c(EthType, || ipv4(17, udp()), vec![]),
        c(VlanVid, || vlan(ipv4(17, udp())), vec![]),
        c(VlanPcp, || vlan(ipv4(17, udp())), vec![(VlanVid, 0x1064)]),
        c(IpDscp, || ipv4(17, udp()), ip4.clone()),
        c(IpEcn, || ipv4(17, udp()), ip4.clone()),
        c(IpProto, || ipv4(17, udp()), ip4.clone()),
        c(Ipv4Src, || ipv4(17, udp()), ip4.clone()),
        c(Ipv4Dst, || ipv4(17, udp()), ip4.clone()),
        c(TcpSrc, || ipv4(6, tcp()), with(&ip4, 6)),
        c(TcpDst, || ipv4(6, tcp()), with(&ip4, 6)),
        c(TcpFlags, || ipv4(6, tcp()), with(&ip4, 6)),
        c(UdpSrc, || ipv4(17, udp()), with(&ip4, 17)),
        c(UdpDst, || ipv4(17, udp()), with(&ip4, 17)),
        c(SctpSrc, || ipv4(132, sctp()), with(&ip4, 132)),
        c(SctpDst, || ipv4(132, sctp()), with(&ip4, 132)),
        c(Icmpv4Type, || ipv4(1, icmp()), with(&ip4, 1)),
        c(Icmpv4Code, || ipv4(1, icmp()), with(&ip4, 1)),
        c(ArpOp, arp, vec![(EthType, 0x0806)]),
        c(ArpSpa, arp, vec![(EthType, 0x0806)]),
        c(ArpTpa, arp, vec![(EthType, 0x0806)]),
        c(ArpSha, arp, vec![(EthType, 0x0806)]),
        c(ArpTha, arp, vec![(EthType, 0x0806)]),
        c(Ipv6Src, || ipv6(17, udp()), ip6.clone()),
        c(Ipv6Dst, || ipv6(17, udp()), ip6.clone()),
        c(Ipv6Flabel, || ipv6(17, udp()), ip6.clone()),
        c(Icmpv6Type, || ipv6(58, icmp6()), with(&ip6, 58)),
        c(Icmpv6Code, || ipv6(58, icmp6()), with(&ip6, 58)),
    ]
}

/// The packet with `field` changed (and nothing else that a flow could match on).
fn other_value(pkt: &[u8], field: Field) -> (u32, Vec<u8>) {
    if field == Field::InPort {
        return (2, pkt.to_vec());
    }
    if field == Field::TcpFlags {
        // No set_field for tcp_flags: flip ACK in place (checksums do not matter to a match).
        let mut f = pkt.to_vec();
        let l4 = Key::parse(pkt, 1).l4.unwrap();
        f[l4 + 13] ^= 0x10;
        return (1, f);
    }
    let k = Key::parse(pkt, 1);
    let v = k.get(field).unwrap();
    let flipped = v ^ 1; // vlan_vid keeps its OFPVID_PRESENT bit
    let mut f = pkt.to_vec();
    let w = field.width();
    let bytes = flipped.to_be_bytes()[16 - w..].to_vec();
    assert!(dcnlab_switch::packet::set_field(&mut f, &k, field, &bytes), "{field:?}");
    (1, f)
}

#[test]
fn every_match_field_matches_its_value_and_nothing_else() {
    for case in match_cases() {
        let mut dp = datapath(SelectMode::Hash);
        let pkt = (case.packet)();
        let value = Key::parse(&pkt, 1).get(case.field).unwrap_or_else(|| panic!("{:?}", case.field));
        let mut fields: Vec<Oxm> = case.prereqs.iter().map(|&(f, v)| oxm(f, v)).collect();
        fields.push(oxm(case.field, value));
        flow(&mut dp, 0, 10, fields, apply(vec![out(3)]));
        let got = run(&mut dp, 1, &pkt);
        assert_eq!(got.iter().map(|o| o.0).collect::<Vec<_>>(), vec![3], "{:?} did not match", case.field);
        assert_eq!(got[0].1, pkt, "{:?}: forwarding changed the packet", case.field);
        let (port, other) = other_value(&pkt, case.field);
        assert!(run(&mut dp, port, &other).is_empty(), "{:?} matched another value", case.field);
    }
}

#[test]
fn masked_fields_match_under_their_mask() {
    let mut dp = datapath(SelectMode::Hash);
    let net = Oxm::basic(Field::Ipv4Dst as u8, vec![10, 0, 0, 0], Some(vec![255, 255, 255, 0]));
    flow(&mut dp, 0, 10, vec![oxm(Field::EthType, 0x0800), net], apply(vec![out(3)]));
    assert_eq!(run(&mut dp, 1, &ipv4(17, udp())).len(), 1);
    let mut elsewhere = ipv4(17, udp());
    let k = Key::parse(&elsewhere, 1);
    dcnlab_switch::packet::set_field(&mut elsewhere, &k, Field::Ipv4Dst, &[10, 0, 1, 2]);
    assert!(run(&mut dp, 1, &elsewhere).is_empty());
}

// ---------------------------------------------------------------------------- set-field

/// (field, the packet to rewrite, the value to write)
type SetCase = (Field, fn() -> Vec<u8>, u128);

fn set_cases() -> Vec<SetCase> {
    use Field::*;
    vec![
        (EthDst, || ipv4(17, udp()), 0x0200_0000_0099),
        (EthSrc, || ipv4(17, udp()), 0x0200_0000_0098),
        (EthType, || ipv4(17, udp()), 0x88b5),
        (VlanVid, || vlan(ipv4(17, udp())), 0x1000 | 200),
        (VlanPcp, || vlan(ipv4(17, udp())), 3),
        (IpDscp, || ipv4(17, udp()), 46),
        (IpEcn, || ipv4(17, udp()), 3),
        (IpProto, || ipv4(17, udp()), 6),
        (Ipv4Src, || ipv4(6, tcp()), 0xc0a8_0001),
        (Ipv4Dst, || ipv4(17, udp()), 0xc0a8_0002),
        (TcpSrc, || ipv4(6, tcp()), 1111),
        (TcpDst, || ipv4(6, tcp()), 2222),
        (UdpSrc, || ipv4(17, udp()), 3333),
        (UdpDst, || ipv6(17, udp()), 4444),
        (SctpSrc, || ipv4(132, sctp()), 5555),
        (SctpDst, || ipv4(132, sctp()), 6666),
        (Icmpv4Type, || ipv4(1, icmp()), 0),
        (Icmpv4Code, || ipv4(1, icmp()), 1),
        (ArpOp, arp, 2),
        (ArpSpa, arp, 0x0a09_0909),
        (ArpTpa, arp, 0x0a08_0808),
        (ArpSha, arp, 0x0200_0000_0077),
        (ArpTha, arp, 0x0200_0000_0066),
        (Ipv6Src, || ipv6(6, tcp()), 0xfc00 << 112 | 1),
        (Ipv6Dst, || ipv6(58, icmp6()), 0xfc00 << 112 | 2),
        (Ipv6Flabel, || ipv6(17, udp()), 0xbeef),
        (Icmpv6Type, || ipv6(58, icmp6()), 129),
        (Icmpv6Code, || ipv6(58, icmp6()), 4),
    ]
}

#[test]
fn every_set_field_rewrites_its_field_and_keeps_checksums_valid() {
    for (field, packet, value) in set_cases() {
        let mut dp = datapath(SelectMode::Hash);
        let pkt = packet();
        assert!(checksums_ok(&pkt), "{field:?}: the test packet itself is broken");
        flow(&mut dp, 0, 10, vec![], apply(vec![Action::SetField(oxm(field, value)), out(3)]));
        let got = run(&mut dp, 1, &pkt);
        assert_eq!(got.len(), 1, "{field:?}");
        let frame = &got[0].1;
        if field == Field::EthType {
            assert_eq!(u16::from_be_bytes([frame[12], frame[13]]), 0x88b5);
            continue;
        }
        assert_eq!(Key::parse(frame, 1).get(field), Some(value), "{field:?} not rewritten");
        assert!(checksums_ok(frame), "{field:?}: a checksum is wrong after the rewrite");
    }
}

#[test]
fn set_field_outside_the_subset_is_refused_with_bad_set_type() {
    let mut dp = datapath(SelectMode::Hash);
    let got = refusal(&mut dp, vec![], apply(vec![Action::SetField(oxm(Field::InPort, 2))]));
    assert_eq!(got, (OFPET_BAD_ACTION, OFPBAC_BAD_SET_TYPE));
}

#[test]
fn what_lies_outside_the_subset_is_refused_with_the_specs_error() {
    let mut dp = datapath(SelectMode::Hash);
    let eth = |t: u16| Oxm::basic(Field::EthType as u8, t.to_be_bytes().to_vec(), None);
    // MPLS label (34), PBB I-SID (37), tunnel id (38), IPv6 ND target (31), IPv6 extension
    // headers (39): match fields outside the subset.
    for (field, prereq, value) in [
        (34u8, 0x8847u16, vec![0, 0, 0, 1]),
        (37, 0x88e7, vec![0, 0, 1]),
        (38, 0x0800, vec![0; 8]),
        (31, 0x86dd, vec![0; 16]),
        (39, 0x86dd, vec![0, 1]),
    ] {
        let got = refusal(&mut dp, vec![eth(prereq), Oxm::basic(field, value, None)], vec![]);
        assert_eq!(got.0, OFPET_BAD_MATCH, "OXM field {field}: {got:?}");
    }
    for action in [
        Action::PushMpls(0x8847),
        Action::PopMpls(0x0800),
        Action::PushPbb(0x88e7),
        Action::SetMplsTtl(3),
        Action::CopyTtlOut,
    ] {
        assert_eq!(
            refusal(&mut dp, vec![], apply(vec![action.clone()])),
            (OFPET_BAD_ACTION, OFPBAC_BAD_TYPE),
            "{action:?}"
        );
    }
    assert_eq!(
        refusal(&mut dp, vec![], vec![Instruction::Meter(1)]),
        (OFPET_BAD_INSTRUCTION, OFPBIC_UNSUP_INST)
    );
}

// ---------------------------------------------------------------------------- actions

#[test]
fn output_actions_reach_the_ports_the_spec_names() {
    let pkt = ipv4(17, udp());
    let cases: Vec<(u32, Vec<u32>)> =
        vec![(3, vec![3]), (OFPP_IN_PORT, vec![1]), (OFPP_ALL, vec![2, 3, 4]), (OFPP_FLOOD, vec![2, 3, 4])];
    for (port, want) in cases {
        let mut dp = datapath(SelectMode::Hash);
        flow(&mut dp, 0, 10, vec![], apply(vec![out(port)]));
        let mut got: Vec<u32> = run(&mut dp, 1, &pkt).into_iter().map(|o| o.0).collect();
        got.sort();
        assert_eq!(got, want, "output:{port:#x}");
    }
    let mut dp = datapath(SelectMode::Hash);
    flow(&mut dp, 0, 10, vec![], apply(vec![out(OFPP_CONTROLLER)]));
    dp.process_packet(1, pkt.clone(), 0);
    assert!(dp.ctrl.iter().any(|m| matches!(m.body, Body::PacketIn { .. })), "no packet-in");
}

#[test]
fn vlan_ttl_and_queue_actions() {
    let mut dp = datapath(SelectMode::Hash);
    flow(
        &mut dp,
        0,
        10,
        vec![],
        apply(vec![
            Action::PushVlan(0x8100),
            Action::SetField(oxm(Field::VlanVid, 0x1000 | 7)),
            Action::DecNwTtl,
            Action::SetQueue(1),
            out(3),
        ]),
    );
    let got = run(&mut dp, 1, &ipv4(17, udp()));
    let k = Key::parse(&got[0].1, 1);
    assert_eq!((k.get(Field::VlanVid), k.ip_ttl), (Some(0x1007), 63));
    assert!(checksums_ok(&got[0].1));
    let mut dp = datapath(SelectMode::Hash);
    flow(&mut dp, 0, 10, vec![], apply(vec![Action::PopVlan, Action::SetNwTtl(9), out(3)]));
    let got = run(&mut dp, 1, &vlan(ipv4(17, udp())));
    let k = Key::parse(&got[0].1, 1);
    assert_eq!((k.vlan_tci, k.ip_ttl), (None, 9));
    assert!(checksums_ok(&got[0].1));
}

// ---------------------------------------------------------------------------- instructions

#[test]
fn instructions_apply_write_clear_metadata_and_goto() {
    let pkt = ipv4(17, udp());
    let mut dp = datapath(SelectMode::Hash);
    // Table 0: write-actions out(4), write metadata 0x5, go to table 1.
    flow(
        &mut dp,
        0,
        10,
        vec![],
        vec![
            Instruction::WriteActions(vec![out(4)]),
            Instruction::WriteMetadata { metadata: 5, mask: 0xff },
            Instruction::GotoTable(1),
        ],
    );
    // Table 1 matches the metadata: apply out(2) now; the action set's out(4) at the end.
    flow(&mut dp, 1, 10, vec![oxm(Field::Metadata, 5)], apply(vec![out(2)]));
    let got: Vec<u32> = run(&mut dp, 1, &pkt).into_iter().map(|o| o.0).collect();
    assert_eq!(got, vec![2, 4]);
    // Clear-actions empties the action set: only the applied output remains.
    flow(
        &mut dp,
        1,
        20,
        vec![oxm(Field::Metadata, 5)],
        vec![Instruction::ApplyActions(vec![out(3)]), Instruction::ClearActions],
    );
    let got: Vec<u32> = run(&mut dp, 1, &pkt).into_iter().map(|o| o.0).collect();
    assert_eq!(got, vec![3]);
}

// ---------------------------------------------------------------------------- groups

#[test]
fn group_types_all_select_indirect_fast_failover() {
    let pkt = ipv4(17, udp());
    let mut dp = datapath(SelectMode::Hash);
    group(&mut dp, 1, OFPGT_ALL, vec![(OFPP_ANY, vec![out(2)]), (OFPP_ANY, vec![out(3)])]);
    group(&mut dp, 2, OFPGT_INDIRECT, vec![(OFPP_ANY, vec![out(4)])]);
    group(&mut dp, 3, OFPGT_FF, vec![(2, vec![out(2)]), (3, vec![out(3)])]);
    group(&mut dp, 4, OFPGT_SELECT, vec![(OFPP_ANY, vec![out(2)]), (OFPP_ANY, vec![out(3)])]);
    let ports = |dp: &mut Datapath, gid: u32, f: &[u8]| {
        dp.tables[0].entries.clear();
        flow(dp, 0, 10, vec![], apply(vec![Action::Group(gid)]));
        let mut p: Vec<u32> = run(dp, 1, f).into_iter().map(|o| o.0).collect();
        p.sort();
        p
    };
    assert_eq!(ports(&mut dp, 1, &pkt), vec![2, 3]);
    assert_eq!(ports(&mut dp, 2, &pkt), vec![4]);
    assert_eq!(ports(&mut dp, 3, &pkt), vec![2]); // first live bucket
    let one = ports(&mut dp, 4, &pkt);
    assert_eq!(one.len(), 1); // select: exactly one bucket, the same for the same flow
    for _ in 0..10 {
        assert_eq!(ports(&mut dp, 4, &pkt), one);
    }
    // Fast failover: the watched port goes down, the next live bucket takes over.
    dp.set_link(2, false);
    dp.ctrl.clear(); // the port-status message it announces
    assert_eq!(ports(&mut dp, 3, &pkt), vec![3]);
}

// ---------------------------------------------------------------------------- Nicira extensions
//
// Semantics from Open vSwitch's ovs-actions(7) and ovs-fields(7): registers are pipeline
// fields, zero when a packet enters; resubmit runs the matched entry at once and comes
// back; learn adds a flow built from the packet. The packet is the TCP one above
// (10.0.0.1:40000 -> 10.0.0.2:80).

const fn nxm0(field: u8, len: u8) -> NxmHeader {
    NxmHeader::new(NXM_CLASS_0, field, len)
}
const fn nx_reg(n: u8) -> NxmHeader {
    NxmHeader::new(NXM_CLASS_1, n, 4)
}

fn nx(a: NxAction) -> Action {
    Action::Nx(a)
}

fn nx_load(field: NxmHeader, ofs: u16, n_bits: u16, value: u64) -> Action {
    nx(NxAction::RegLoad { dst: SubField { field, ofs, n_bits }, value })
}

fn nx_resubmit_table(table_id: u8) -> Action {
    nx(NxAction::ResubmitTable { in_port: NX_RESUBMIT_IN_PORT, table_id })
}

fn nx_output_reg(field: NxmHeader, ofs: u16, n_bits: u16) -> Action {
    nx(NxAction::OutputReg { src: SubField { field, ofs, n_bits }, max_len: 0 })
}

fn ports(got: Vec<(u32, Vec<u8>)>) -> Vec<u32> {
    got.into_iter().map(|o| o.0).collect()
}

#[test]
fn every_register_matches_its_value_and_nothing_else() {
    for r in 0..8u8 {
        let reg_oxm = |v: u32, mask: Option<u32>| Oxm {
            class: NXM_CLASS_1,
            field: r,
            experimenter: None,
            value: v.to_be_bytes().to_vec(),
            mask: mask.map(|m| m.to_be_bytes().to_vec()),
        };
        for (loaded, want) in [(0x1234_5678u64, vec![3]), (0x1234_5679, vec![])] {
            let mut dp = datapath(SelectMode::Hash);
            flow(
                &mut dp,
                0,
                1,
                vec![],
                vec![
                    Instruction::ApplyActions(vec![nx_load(nx_reg(r), 0, 32, loaded)]),
                    Instruction::GotoTable(1),
                ],
            );
            flow(&mut dp, 1, 10, vec![reg_oxm(0x1234_5678, None)], apply(vec![out(3)]));
            assert_eq!(ports(run(&mut dp, 1, &ipv4(6, tcp()))), want, "reg{r} = {loaded:#x}");
        }
        // Masked, and zero when the packet enters (a match on reg = 0 in table 0).
        let mut dp = datapath(SelectMode::Hash);
        flow(
            &mut dp,
            0,
            10,
            vec![reg_oxm(0, None)],
            apply(vec![nx_load(nx_reg(r), 8, 8, 0xab), nx_resubmit_table(1)]),
        );
        flow(&mut dp, 1, 10, vec![reg_oxm(0xab00, Some(0xff00))], apply(vec![out(4)]));
        assert_eq!(ports(run(&mut dp, 1, &ipv4(6, tcp()))), vec![4], "reg{r} masked");
        assert_eq!(ports(run(&mut dp, 1, &ipv4(6, tcp()))), vec![4], "reg{r} starts at zero again");
    }
}

/// (name in the README, what it sets up, the ports the packet leaves by)
type NxCase = (&'static str, fn(&mut Datapath), Vec<u32>);

fn nx_action_cases() -> Vec<NxCase> {
    vec![
        // NXAST_RESUBMIT: the current table again, with in_port 2.
        (
            "resubmit",
            |dp| {
                flow(
                    dp,
                    0,
                    10,
                    vec![oxm(Field::InPort, 1)],
                    apply(vec![nx(NxAction::Resubmit { in_port: 2 }), out(OFPP_IN_PORT)]),
                );
                flow(dp, 0, 10, vec![oxm(Field::InPort, 2)], apply(vec![out(3)]));
            },
            vec![3, 1],
        ),
        // NXAST_RESUBMIT_TABLE: another table, its entry's actions now, then the rest.
        (
            "resubmit_table",
            |dp| {
                flow(dp, 0, 10, vec![], apply(vec![nx_resubmit_table(2), out(4)]));
                flow(dp, 2, 10, vec![], apply(vec![out(3)]));
            },
            vec![3, 4],
        ),
        // NXAST_REG_LOAD into a header field: tcp_dst 80 -> 8080 (checked below).
        (
            "reg_load",
            |dp| {
                flow(
                    dp,
                    0,
                    10,
                    // Open vSwitch checks a field's prerequisites against the flow's match.
                    vec![oxm(Field::EthType, 0x800), oxm(Field::IpProto, 6)],
                    apply(vec![nx_load(nxm0(10, 2), 0, 16, 8080), out(2)]),
                );
            },
            vec![2],
        ),
        // NXAST_REG_MOVE: the IPv4 source into the destination (checked below).
        (
            "reg_move",
            |dp| {
                let mv = NxAction::RegMove {
                    n_bits: 32,
                    src_ofs: 0,
                    dst_ofs: 0,
                    src: nxm0(7, 4),
                    dst: nxm0(8, 4),
                };
                flow(dp, 0, 10, vec![oxm(Field::EthType, 0x800)], apply(vec![nx(mv), out(2)]));
            },
            vec![2],
        ),
        // NXAST_OUTPUT_REG: the port in reg5[8..23].
        (
            "output_reg",
            |dp| {
                flow(
                    dp,
                    0,
                    10,
                    vec![],
                    apply(vec![nx_load(nx_reg(5), 8, 16, 4), nx_output_reg(nx_reg(5), 8, 16)]),
                );
            },
            vec![4],
        ),
        // NXAST_LEARN: the learned entry (table 1) is used by the resubmit after it.
        (
            "learn",
            |dp| {
                let l = Learn {
                    idle_timeout: 0,
                    hard_timeout: 0,
                    priority: 5,
                    cookie: 0,
                    flags: 0,
                    table_id: 1,
                    fin_idle_timeout: 0,
                    fin_hard_timeout: 0,
                    specs: vec![LearnSpec {
                        n_bits: 16,
                        src: LearnSrc::Immediate(vec![0, 3]),
                        dst: LearnDst::Load { field: nx_reg(0), ofs: 0 },
                    }],
                };
                flow(
                    dp,
                    0,
                    10,
                    vec![],
                    apply(vec![
                        nx(NxAction::Learn(Box::new(l))),
                        nx_resubmit_table(1),
                        nx_output_reg(nx_reg(0), 0, 16),
                    ]),
                );
            },
            vec![3],
        ),
        // NXAST_FIN_TIMEOUT: a FIN lowers the entry's idle timeout (checked below).
        (
            "fin_timeout",
            |dp| {
                let fin = NxAction::FinTimeout { fin_idle_timeout: 2, fin_hard_timeout: 0 };
                let r = send(
                    dp,
                    Body::FlowMod(Box::new(FlowMod {
                        idle_timeout: 60,
                        // A TCP flow: Open vSwitch refuses fin_timeout on others.
                        ..match add(
                            0,
                            10,
                            vec![oxm(Field::EthType, 0x800), oxm(Field::IpProto, 6)],
                            apply(vec![nx(fin), out(2)]),
                        ) {
                            Body::FlowMod(fm) => *fm,
                            _ => unreachable!(),
                        }
                    })),
                );
                assert!(r.is_empty(), "{r:?}");
            },
            vec![2],
        ),
        (
            "note",
            |dp| flow(dp, 0, 10, vec![], apply(vec![nx(NxAction::Note(vec![1, 2, 3, 0, 0, 0])), out(2)])),
            vec![2],
        ),
        // NXAST_EXIT: nothing after it, at any resubmit level.
        (
            "exit",
            |dp| {
                flow(dp, 0, 10, vec![], apply(vec![out(2), nx_resubmit_table(1), out(3)]));
                flow(dp, 1, 10, vec![], apply(vec![nx(NxAction::Exit), out(4)]));
            },
            vec![2],
        ),
    ]
}

#[test]
fn every_nx_action_does_what_ovs_documents() {
    for (name, setup, want) in nx_action_cases() {
        let mut dp = datapath(SelectMode::Hash);
        setup(&mut dp);
        let mut pkt = ipv4(6, tcp());
        if name == "fin_timeout" {
            let l4 = Key::parse(&pkt, 1).l4.unwrap();
            pkt[l4 + 13] |= 0x01; // FIN (the checksum does not matter here)
        }
        let got = run(&mut dp, 1, &pkt);
        assert_eq!(ports(got.clone()), want, "{name}");
        let k = Key::parse(&got[0].1, 1);
        match name {
            "reg_load" => {
                assert_eq!(k.tp_dst, 8080);
                assert!(checksums_ok(&got[0].1), "reg_load: checksums");
            }
            "reg_move" => {
                assert_eq!(k.ipv4_dst, k.ipv4_src);
                assert!(checksums_ok(&got[0].1), "reg_move: checksums");
            }
            "fin_timeout" => assert_eq!(dp.tables[0].entries[0].idle_timeout, 2),
            "learn" => assert_eq!(dp.tables[1].entries.len(), 1),
            _ => assert_eq!(got[0].1, pkt, "{name}: the packet is unchanged"),
        }
    }
    // Resubmits nest 64 deep at most (Open vSwitch): deeper drops the packet.
    let mut dp = datapath(SelectMode::Hash);
    flow(
        &mut dp,
        0,
        10,
        vec![],
        apply(vec![out(2), nx(NxAction::Resubmit { in_port: NX_RESUBMIT_IN_PORT })]),
    );
    assert!(run(&mut dp, 1, &ipv4(6, tcp())).is_empty());
    assert_eq!(dp.resubmit_drops, 1);
}

/// (name in the README, the spec, a second packet's changes, the ports it leaves by)
type SpecCase = (&'static str, Vec<LearnSpec>, fn(&mut Vec<u8>) -> u32, Vec<u32>);

/// Each flow-spec kind: the first packet (port 1) learns into table 1, a second one
/// (port 2) is resubmitted there; reg0 = 3 at learn time and every learned entry outputs
/// to reg0[0..15] unless the case is the output spec itself.
fn learn_spec_cases() -> Vec<SpecCase> {
    let out_reg0 =
        LearnSpec { n_bits: 16, src: LearnSrc::Field { field: nx_reg(0), ofs: 0 }, dst: LearnDst::Output };
    let same = |_: &mut Vec<u8>| 2;
    let other_sport = |f: &mut Vec<u8>| {
        let l4 = Key::parse(f, 1).l4.unwrap();
        f[l4 + 1] ^= 1;
        2
    };
    vec![
        (
            "match-from-field",
            vec![
                LearnSpec {
                    n_bits: 16,
                    src: LearnSrc::Field { field: nxm0(9, 2), ofs: 0 },
                    dst: LearnDst::Match { field: nxm0(9, 2), ofs: 0 },
                },
                out_reg0.clone(),
            ],
            same,
            vec![3],
        ),
        (
            "match-from-field",
            vec![
                LearnSpec {
                    n_bits: 16,
                    src: LearnSrc::Field { field: nxm0(9, 2), ofs: 0 },
                    dst: LearnDst::Match { field: nxm0(9, 2), ofs: 0 },
                },
                out_reg0.clone(),
            ],
            other_sport,
            vec![],
        ),
        (
            "match-immediate",
            vec![
                LearnSpec {
                    n_bits: 16,
                    src: LearnSrc::Immediate(vec![0, 80]),
                    dst: LearnDst::Match { field: nxm0(10, 2), ofs: 0 },
                },
                out_reg0.clone(),
            ],
            same,
            vec![3],
        ),
        (
            "match-immediate",
            vec![
                LearnSpec {
                    n_bits: 16,
                    src: LearnSrc::Immediate(vec![0, 81]),
                    dst: LearnDst::Match { field: nxm0(10, 2), ofs: 0 },
                },
                out_reg0.clone(),
            ],
            same,
            vec![],
        ),
        (
            "load-from-field",
            vec![
                LearnSpec {
                    n_bits: 16,
                    src: LearnSrc::Field { field: nxm0(0, 2), ofs: 0 },
                    dst: LearnDst::Load { field: nx_reg(1), ofs: 0 },
                },
                out_reg0.clone(),
            ],
            same,
            vec![3, 1],
        ),
        (
            "load-immediate",
            vec![
                LearnSpec {
                    n_bits: 16,
                    src: LearnSrc::Immediate(vec![0, 4]),
                    dst: LearnDst::Load { field: nx_reg(1), ofs: 0 },
                },
                out_reg0.clone(),
            ],
            same,
            vec![3, 4],
        ),
        (
            "output-to-port-in-field",
            vec![LearnSpec {
                n_bits: 16,
                src: LearnSrc::Field { field: nxm0(0, 2), ofs: 0 },
                dst: LearnDst::Output,
            }],
            same,
            vec![1],
        ),
    ]
}

#[test]
fn every_learn_spec_kind_builds_what_ovs_documents() {
    for (name, specs, second, want) in learn_spec_cases() {
        let mut dp = datapath(SelectMode::Hash);
        // As Open vSwitch requires: the learned TCP fields' prerequisites come first as
        // constants, the learning flow matches those its sources need.
        let imm = |field, v: &[u8], n_bits| LearnSpec {
            n_bits,
            src: LearnSrc::Immediate(v.to_vec()),
            dst: LearnDst::Match { field, ofs: 0 },
        };
        let prereqs = vec![imm(nxm0(3, 2), &[8, 0], 16), imm(nxm0(6, 1), &[0, 6], 8)];
        let l = Learn {
            idle_timeout: 0,
            hard_timeout: 0,
            priority: 5,
            cookie: 0,
            flags: 0,
            table_id: 1,
            fin_idle_timeout: 0,
            fin_hard_timeout: 0,
            specs: [prereqs, specs].concat(),
        };
        flow(
            &mut dp,
            0,
            10,
            vec![oxm(Field::InPort, 1), oxm(Field::EthType, 0x800), oxm(Field::IpProto, 6)],
            apply(vec![nx_load(nx_reg(0), 0, 16, 3), nx(NxAction::Learn(Box::new(l)))]),
        );
        // The second packet: resubmit to the learned entry, then out by reg1 (if loaded).
        flow(
            &mut dp,
            0,
            10,
            vec![oxm(Field::InPort, 2)],
            apply(vec![nx_resubmit_table(1), nx_output_reg(nx_reg(1), 0, 16)]),
        );
        assert!(run(&mut dp, 1, &ipv4(6, tcp())).is_empty(), "{name}: the first packet only learns");
        let mut pkt = ipv4(6, tcp());
        let port = second(&mut pkt);
        assert_eq!(ports(run(&mut dp, port, &pkt)), want, "{name}");
    }
}

// ---------------------------------------------------------------------------- the README

/// What the README's conformance table must list: every case above, by OXM/spec name.
fn tested() -> BTreeSet<String> {
    let mut s = BTreeSet::new();
    for c in match_cases() {
        s.insert(format!("match | {}", spec_name(c.field)));
    }
    for (f, _, _) in set_cases() {
        s.insert(format!("set_field | {}", spec_name(f)));
    }
    for a in [
        "output (port, IN_PORT, ALL, FLOOD, CONTROLLER)",
        "group",
        "push_vlan",
        "pop_vlan",
        "set_queue",
        "dec_nw_ttl",
        "set_nw_ttl",
    ] {
        s.insert(format!("action | {a}"));
    }
    for i in ["apply_actions", "write_actions", "clear_actions", "write_metadata", "goto_table"] {
        s.insert(format!("instruction | {i}"));
    }
    for g in ["all", "select", "indirect", "fast_failover"] {
        s.insert(format!("group | {g}"));
    }
    for r in 0..8 {
        s.insert(format!("nx_match | reg{r}"));
    }
    for (a, _, _) in nx_action_cases() {
        s.insert(format!("nx_action | {a}"));
    }
    for (k, _, _, _) in learn_spec_cases() {
        s.insert(format!("learn_spec | {k}"));
    }
    s
}

fn spec_name(f: Field) -> &'static str {
    use Field::*;
    match f {
        InPort => "in_port",
        InPhyPort => "in_phy_port",
        Metadata => "metadata",
        EthDst => "eth_dst",
        EthSrc => "eth_src",
        EthType => "eth_type",
        VlanVid => "vlan_vid",
        VlanPcp => "vlan_pcp",
        IpDscp => "ip_dscp",
        IpEcn => "ip_ecn",
        IpProto => "ip_proto",
        Ipv4Src => "ipv4_src",
        Ipv4Dst => "ipv4_dst",
        TcpSrc => "tcp_src",
        TcpDst => "tcp_dst",
        UdpSrc => "udp_src",
        UdpDst => "udp_dst",
        SctpSrc => "sctp_src",
        SctpDst => "sctp_dst",
        Icmpv4Type => "icmpv4_type",
        Icmpv4Code => "icmpv4_code",
        ArpOp => "arp_op",
        ArpSpa => "arp_spa",
        ArpTpa => "arp_tpa",
        ArpSha => "arp_sha",
        ArpTha => "arp_tha",
        Ipv6Src => "ipv6_src",
        Ipv6Dst => "ipv6_dst",
        Ipv6Flabel => "ipv6_flabel",
        Icmpv6Type => "icmpv6_type",
        Icmpv6Code => "icmpv6_code",
        TcpFlags => "tcp_flags",
        Reg0 => "reg0",
        Reg1 => "reg1",
        Reg2 => "reg2",
        Reg3 => "reg3",
        Reg4 => "reg4",
        Reg5 => "reg5",
        Reg6 => "reg6",
        Reg7 => "reg7",
        VlanTci => "vlan_tci",
    }
}

#[test]
fn the_readme_table_lists_exactly_what_is_tested() {
    let readme = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/README.md")).unwrap();
    let start = readme.find("<!-- conformance:begin -->").expect("README: conformance table start marker");
    let end = readme.find("<!-- conformance:end -->").expect("README: conformance table end marker");
    let listed: BTreeSet<String> = readme[start..end]
        .lines()
        .filter(|l| l.starts_with("| ") && !l.starts_with("| kind") && !l.starts_with("|--"))
        .map(|l| {
            let cells: Vec<&str> = l.trim_matches('|').split('|').map(str::trim).collect();
            format!("{} | {}", cells[0], cells[1].trim_matches('`'))
        })
        .collect();
    let want = tested();
    let missing: Vec<_> = want.difference(&listed).collect();
    let extra: Vec<_> = listed.difference(&want).collect();
    assert!(
        missing.is_empty() && extra.is_empty(),
        "README conformance table drifted: missing {missing:?}, not tested {extra:?}"
    );
}
