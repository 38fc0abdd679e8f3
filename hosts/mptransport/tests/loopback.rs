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

#[test]
fn a_subflow_that_joins_after_its_connection_ended_is_closed_quietly() {
    // Subflow 0 carries a whole connection; subflow 1's HELLO (a slow path's handshake)
    // arrives only afterwards, followed by the FIN the sender puts on every subflow.  The
    // receiver must report that connection once, intact, and not start a second one from
    // the late HELLO (which would find 0 of 100 bytes delivered and count as a failure).
    use dcnlab_mp::wire::{data_header, encode_hello, encode_u64, Hello};
    use std::io::{Read, Write};
    let (addr, h) = server(2);
    let hello = |conn_id: u64, subflow: u8| {
        let mut b = Vec::new();
        encode_hello(
            &Hello {
                conn_id,
                subflow,
                seed: 9,
                total: 100,
                window: 1000,
            },
            &mut b,
        );
        b
    };
    let whole = |conn_id: u64| {
        let mut s = std::net::TcpStream::connect(addr).unwrap();
        let mut payload = [0u8; 100];
        dcnlab_mp::pattern::fill(9, 0, &mut payload);
        s.write_all(&hello(conn_id, 0)).unwrap();
        s.write_all(&data_header(0, 100)).unwrap();
        s.write_all(&payload).unwrap();
        let mut fin = Vec::new();
        encode_u64(b'F', 100, &mut fin);
        s.write_all(&fin).unwrap();
        let mut answer = Vec::new();
        s.read_to_end(&mut answer).unwrap(); // DATA_ACK, FIN_ACK, then closed
        assert!(!answer.is_empty());
    };
    whole(7);
    let mut late = std::net::TcpStream::connect(addr).unwrap();
    late.write_all(&hello(7, 1)).unwrap();
    let mut fin = Vec::new();
    encode_u64(b'F', 100, &mut fin);
    late.write_all(&fin).unwrap();
    let mut rest = Vec::new();
    let _ = late.read_to_end(&mut rest);
    assert!(rest.is_empty(), "a late subflow gets no answer: {rest:?}");
    whole(8); // the server stops after two connections
    let lines = h.join().unwrap();
    assert_eq!(lines.len(), 2, "{lines:?}");
    for (line, conn) in lines.iter().zip(["\"conn\":7,", "\"conn\":8,"]) {
        assert!(
            line.contains(conn) && line.contains("\"intact\":true"),
            "{lines:?}"
        );
    }
}

#[test]
fn a_warm_connection_starts_once_every_subflow_connected() {
    let (addr, h) = server(1);
    let mut cfg = SendConfig::new(two_paths(addr), 1 << 20, "roundrobin");
    cfg.warm = true;
    cfg.timeout = Duration::from_secs(60);
    let rep = send(&cfg).unwrap();
    assert!(rep.intact(), "{}", rep.json());
    assert!(rep.connect.is_some(), "{}", rep.json());
    assert!(
        rep.json().contains("\"warm\":true,\"connect_ms\":"),
        "{}",
        rep.json()
    );
    // both subflows were up when the first segment was scheduled: round-robin used both
    assert!(rep.subflows.iter().all(|s| s.bytes > 0), "{}", rep.json());
    assert!(h.join().unwrap()[0].contains("\"intact\":true"));
}

#[test]
fn a_warm_subflow_that_cannot_connect_is_closed_and_the_others_carry_the_flow() {
    let (addr, h) = server(1);
    let closed = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap() // dropped: nothing listens there any more
    };
    let paths = vec![(Some("127.0.0.1:0".parse().unwrap()), addr), (None, closed)];
    let mut cfg = SendConfig::new(paths, 256 << 10, "minrtt");
    cfg.warm = true;
    cfg.timeout = Duration::from_secs(60);
    let rep = send(&cfg).unwrap();
    assert!(rep.intact(), "{}", rep.json());
    let err = rep.subflows[1].error.clone().unwrap_or_default();
    assert!(err.starts_with("connect "), "{}", rep.json());
    assert_eq!(rep.subflows[0].bytes, 256 << 10);
    h.join().unwrap();

    let mut none = SendConfig::new(vec![(None, closed)], 1000, "minrtt");
    none.warm = true;
    let e = send(&none).unwrap_err();
    assert!(
        e.starts_with("every subflow failed to connect: connect "),
        "{e}"
    );
}
