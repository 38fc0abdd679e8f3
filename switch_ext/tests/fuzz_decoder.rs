//! Property tests: random and mutated bytes into the decoder and the whole datapath
//! message handler never panic, and every rejected message gets exactly one OFPT_ERROR
//! carrying the request's xid.

mod common;

use dcnlab_switch::datapath::{Datapath, FailMode};
use dcnlab_switch::group::SelectMode;
use dcnlab_switch::ofp::codec::{Body, Msg};
use proptest::prelude::*;

fn datapath() -> Datapath {
    common::datapath(SelectMode::Random, FailMode::Secure, 2, 3)
}

/// The bytes of each entry of `list` in `file` (its `hex`).
fn hex_entries(file: &str, list: &str) -> Vec<Vec<u8>> {
    common::json_list(file, list).iter().map(|v| common::unhex(v["hex"].as_str().unwrap())).collect()
}

/// Ryu's encodings (tests/vectors/of13.json), read once for every case.
fn vectors() -> &'static [Vec<u8>] {
    static VECTORS: std::sync::OnceLock<Vec<Vec<u8>>> = std::sync::OnceLock::new();
    VECTORS.get_or_init(|| hex_entries("tests/vectors/of13.json", "vectors"))
}

/// The Nicira-extension fixtures Ryu encoded (tests/fixtures/nx_of13.json).
fn nx_fixtures() -> Vec<Vec<u8>> {
    hex_entries("tests/fixtures/nx_of13.json", "fixtures")
}

/// A TCP/IPv4 frame, for running whatever actions got installed.
fn tcp_frame(flags: u8) -> Vec<u8> {
    let mut f = vec![0x02, 0, 0, 0, 0, 2, 0x02, 0, 0, 0, 0, 1, 0x08, 0x00];
    f.extend_from_slice(&[0x45, 0, 0, 40, 0, 1, 0x40, 0, 64, 6, 0, 0, 10, 0, 0, 1, 10, 0, 0, 2]);
    f.extend_from_slice(&[0x9c, 0x40, 0, 80, 0, 0, 0, 1, 0, 0, 0, 0, 0x50, flags, 0xff, 0xff, 0, 0, 0, 0]);
    f
}

fn frame(mut b: Vec<u8>, t: u8) -> Vec<u8> {
    if b.len() < 8 {
        b.resize(8, 0);
    }
    b[0] = 4;
    b[1] = t;
    let l = b.len() as u16;
    b[2..4].copy_from_slice(&l.to_be_bytes());
    b
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 3000, ..ProptestConfig::default() })]

    #[test]
    fn random_messages_never_panic(body in proptest::collection::vec(any::<u8>(), 0..300), t in 0u8..32) {
        let mut dp = datapath();
        let b = frame(body, t);
        dp.handle_raw(&b, 0);
        let xid = u32::from_be_bytes([b[4], b[5], b[6], b[7]]);
        for m in &dp.ctrl {
            if let Body::Error { .. } = m.body {
                prop_assert_eq!(m.xid, xid);
            }
        }
        for p in dp.out.drain(..) {
            prop_assert!(p.port == 1 || p.port == 2);
        }
    }

    #[test]
    fn mutated_ryu_vectors_never_panic(idx in 0usize..200, flips in proptest::collection::vec((any::<usize>(), any::<u8>()), 1..6), cut in any::<usize>()) {
        let vs = vectors();
        let mut b = vs[idx % vs.len()].clone();
        for (pos, val) in flips {
            let n = b.len();
            b[pos % n] ^= val;
        }
        let keep = 8 + cut % (b.len() - 7);
        b.truncate(keep);
        let t = b[1];
        let b = frame(b, t);
        let mut dp = datapath();
        dp.handle_raw(&b, 0);
        if let Ok(m) = Msg::decode(&b) {
            let _ = m.encode();
        }
    }

    #[test]
    fn mutated_nx_fixtures_never_panic_when_decoded_installed_or_run(
        picks in proptest::collection::vec(any::<usize>(), 1..6),
        flips in proptest::collection::vec((any::<usize>(), any::<u8>()), 0..4),
        flags in any::<u8>(),
    ) {
        let fs = nx_fixtures();
        let mut dp = datapath();
        for (k, i) in picks.iter().enumerate() {
            let mut b = fs[i % fs.len()].clone();
            // Mutate only the first pick: the others install valid NX programs around it.
            if k == 0 {
                for (pos, val) in &flips {
                    let n = b.len();
                    let at = 8 + pos % (n - 8); // keep the header: test the bodies
                    b[at] ^= val;
                }
            }
            dp.handle_raw(&b, 0);
            if let Ok(m) = Msg::decode(&b) {
                let _ = m.encode();
            }
        }
        // Whatever was accepted runs on packets (learn, resubmit loops, loads into headers).
        for now in [0, 1_000_000_000, 70_000_000_000] {
            dp.process_packet(1, tcp_frame(flags), now);
            dp.process_packet(2, tcp_frame(flags | 1), now);
            dp.tick(now);
        }
        for p in dp.out.drain(..) {
            prop_assert!(p.port == 1 || p.port == 2);
        }
    }

    #[test]
    fn the_length_field_is_never_trusted(body in proptest::collection::vec(any::<u8>(), 8..300), len in any::<u16>(), t in 0u8..32) {
        // Unlike frame(), the length field is whatever it is: the decoder must notice.
        let mut b = body;
        b[0] = 4;
        b[1] = t;
        b[2..4].copy_from_slice(&len.to_be_bytes());
        if len as usize != b.len() {
            prop_assert!(Msg::decode(&b).is_err());
        }
        let mut dp = datapath();
        dp.handle_raw(&b, 0);
        for m in &dp.ctrl {
            if let Body::Error { .. } = m.body {
                prop_assert_eq!(m.xid, u32::from_be_bytes([b[4], b[5], b[6], b[7]]));
            }
        }
    }

    #[test]
    fn random_frames_through_the_pipeline(frame in proptest::collection::vec(any::<u8>(), 0..200)) {
        let mut dp = datapath();
        // A table-miss to the controller plus a select group exercise parse and hash paths.
        for v in vectors() {
            dp.handle_raw(v, 0);
        }
        dp.ctrl.clear();
        dp.out.clear();
        dp.process_packet(1, frame, 0);
    }
}

proptest! {
    // Each case installs every Ryu vector into two datapaths: fewer cases than above.
    #![proptest_config(ProptestConfig { cases: 300, ..ProptestConfig::default() })]

    #[test]
    fn random_and_labelled_frames_through_conga_switches(
        mut frame in proptest::collection::vec(any::<u8>(), 0..200),
        mpls in any::<bool>(),
        label in any::<[u8; 4]>(),
    ) {
        // Frames that look like the overlay's (MPLS ethertype, any label, bottom of stack
        // or not, truncated) into a CONGA leaf and a switch between leaves.
        if mpls && frame.len() >= 18 {
            frame[12..14].copy_from_slice(&[0x88, 0x47]);
            frame[14..18].copy_from_slice(&label);
        }
        for spec in ["conga/leaf=3", "conga"] {
            let mut dp = datapath();
            dp.set_switch_balancer(dcnlab_switch::spec::NamedSpec::parse(spec).unwrap()).unwrap();
            for v in vectors() {
                dp.handle_raw(v, 0);
            }
            dp.ctrl.clear();
            dp.out.clear();
            dp.process_packet(1, frame.clone(), 0);
            dp.process_packet(2, frame.clone(), 1);
            for o in dp.out.drain(..) {
                prop_assert!(o.port == 1 || o.port == 2);
            }
        }
    }
}
