//! End to end on loopback: two subflows from 127.0.0.1 and 127.0.0.2, every scheduler,
//! the receiver checking every byte; a subflow killed mid-transfer loses nothing.

use dcnlab_mp::receiver::{serve, ServeConfig};
use dcnlab_mp::sched::NAMES;
use dcnlab_mp::sender::{send, SendConfig};
use std::net::SocketAddr;
use std::sync::mpsc;
use std::time::Duration;

fn server(count: u64) -> (SocketAddr, std::thread::JoinHandle<Vec<String>>) {
    let (tx, rx) = mpsc::channel();
    let h = std::thread::spawn(move || {
        let mut lines = Vec::new();
        let cfg = ServeConfig {
            listen: "127.0.0.1:0".parse().unwrap(),
            count,
            idle: Duration::from_secs(30),
        };
        serve(&cfg, &mut |l| {
            if l.contains("listening") {
                let addr = l.split('"').nth(7).unwrap().to_string();
                tx.send(addr).unwrap();
            } else {
                lines.push(l.to_string());
            }
        })
        .unwrap();
        lines
    });
    let addr = rx.recv_timeout(Duration::from_secs(10)).unwrap();
    (addr.parse().unwrap(), h)
}

fn two_paths(dst: SocketAddr) -> Vec<(Option<SocketAddr>, SocketAddr)> {
    vec![
        (Some("127.0.0.1:0".parse().unwrap()), dst),
        (Some("127.0.0.2:0".parse().unwrap()), dst),
    ]
}

#[test]
fn every_scheduler_transfers_intact_over_two_subflows() {
    let (addr, h) = server(NAMES.len() as u64);
    for name in NAMES {
        let mut cfg = SendConfig::new(two_paths(addr), 1 << 20, name);
        cfg.timeout = Duration::from_secs(60);
        let rep = send(&cfg).unwrap_or_else(|e| panic!("{name}: {e}"));
        assert!(rep.intact(), "{name}: {}", rep.json());
        assert_eq!(rep.fin.delivered, 1 << 20);
        let carried: u64 = rep.subflows.iter().map(|s| s.bytes).sum();
        assert_eq!(carried, (1 << 20) + rep.dup_bytes, "{name}");
        if *name == "cfs" || *name == "minrtt" || *name == "ecf" || *name == "blest" {
            // only CFS duplicates, and only once no new data is left
            assert_eq!(rep.dup_before_tail, 0, "{name}: {}", rep.json());
        }
        if *name != "cfs" && *name != "redundant" {
            assert_eq!(rep.dup_bytes, 0, "{name}: {}", rep.json());
        }
    }
    let lines = h.join().unwrap();
    assert_eq!(lines.len(), NAMES.len());
    assert!(
        lines.iter().all(|l| l.contains("\"intact\":true")),
        "{lines:?}"
    );
}

#[test]
fn a_subflow_killed_mid_transfer_loses_nothing() {
    let (addr, h) = server(1);
    let mut cfg = SendConfig::new(two_paths(addr), 8 << 20, "roundrobin");
    cfg.kill = Some((0, 1 << 20));
    cfg.window = 4 << 20;
    cfg.timeout = Duration::from_secs(60);
    let rep = send(&cfg).unwrap();
    assert!(rep.intact(), "{}", rep.json());
    assert!(!rep.subflows[0].alive);
    assert!(rep.subflows[1].alive);
    let lines = h.join().unwrap();
    assert!(lines[0].contains("\"intact\":true"), "{lines:?}");
}

#[test]
fn a_bad_peer_gets_a_clear_error() {
    use std::io::{Read, Write};
    let (addr, h) = server(1);
    let mut s = std::net::TcpStream::connect(addr).unwrap();
    let mut hello = Vec::new();
    dcnlab_mp::wire::encode_hello(
        &dcnlab_mp::wire::Hello {
            conn_id: 1,
            subflow: 0,
            seed: 1,
            total: 100,
            window: 1000,
        },
        &mut hello,
    );
    s.write_all(&hello).unwrap();
    // out of window
    s.write_all(&dcnlab_mp::wire::data_header(5000, 10))
        .unwrap();
    s.write_all(&[0u8; 10]).unwrap();
    let mut rest = Vec::new();
    let _ = s.read_to_end(&mut rest); // closed (reset) by the receiver
    let lines = h.join().unwrap();
    assert!(lines[0].contains("out-of-window"), "{lines:?}");
    assert!(lines[0].contains("\"intact\":false"), "{lines:?}");
}
