//! The path of a frame through a port's queues, free of I/O: received frames go through
//! the port's ingress discipline into the datapath; the datapath's outputs go through the
//! output port's egress discipline and link emulation into its transmit list. The event
//! loop (`switch.rs`) only moves frames between these lists and the sockets, so tests
//! drive the same code with a fake clock.

use std::collections::BTreeMap;

use crate::datapath::Datapath;
use crate::group::Rng;
use crate::linkem::{Egress, Enqueue};
use crate::qdisc::{Arrival, IngressCtx, IngressQdisc};
use crate::qhist::TimeHist;

/// One port's queues.
pub struct PortQueues {
    pub port_no: u32,
    pub egress: Egress,
    pub ingress: Option<Box<dyn IngressQdisc>>,
    /// Frames ready for the wire, in order.
    pub tx: Vec<Vec<u8>>,
    /// `egress.changes()` when the ingress discipline last saw the queue.
    ingress_seen: u64,
    /// Time-weighted histogram of the frames the ingress discipline holds (Q_in), updated
    /// after every call into it (the only times it changes).
    pub qin_hist: TimeHist,
}

impl PortQueues {
    pub fn new(port_no: u32, egress: Egress, ingress: Option<Box<dyn IngressQdisc>>) -> PortQueues {
        PortQueues { port_no, egress, ingress, tx: Vec::new(), ingress_seen: 0, qin_hist: TimeHist::new() }
    }

    fn ingress_ctx(&self, now_ns: u64) -> IngressCtx {
        IngressCtx { now_ns, egress: self.egress.queue() }
    }

    /// Does the ingress discipline want a wake-up at `now_ns`?
    fn ingress_due(&self, now_ns: u64) -> bool {
        self.ingress.as_ref().is_some_and(|q| {
            self.egress.changes() != self.ingress_seen || q.next_deadline().is_some_and(|d| d <= now_ns)
        })
    }

    fn note_qin(&mut self, now_ns: u64) {
        if let Some(q) = &self.ingress {
            self.qin_hist.set(now_ns, q.held().pkts);
        }
    }

    /// When this port next needs [`Ports::service`].
    pub fn next_deadline(&self) -> Option<u64> {
        let ing = self.ingress.as_ref().and_then(|q| {
            // An egress change the discipline has not seen yet is due at once.
            if self.egress.changes() != self.ingress_seen {
                Some(0)
            } else {
                q.next_deadline()
            }
        });
        match (self.egress.next_deadline(), ing) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }
}

/// All ports of a switch, by OpenFlow port number.
pub struct Ports {
    pub queues: Vec<PortQueues>,
    index: BTreeMap<u32, usize>,
    rng: Rng,
    due: Vec<Vec<u8>>,
}

impl Ports {
    /// `rng` drives jitter.
    pub fn new(rng: Rng) -> Ports {
        Ports { queues: Vec::new(), index: BTreeMap::new(), rng, due: Vec::new() }
    }

    /// Adds a port; returns its position in [`Ports::queues`].
    pub fn add(&mut self, q: PortQueues) -> usize {
        let i = self.queues.len();
        self.index.insert(q.port_no, i);
        self.queues.push(q);
        i
    }

    pub fn get(&self, port_no: u32) -> Option<&PortQueues> {
        self.index.get(&port_no).map(|&i| &self.queues[i])
    }

    /// A frame received on `queues[i]`: counted, offered to the port's ingress discipline,
    /// and what it lets through enters the pipeline. Outputs stay in `dp.out` until
    /// [`Ports::route_outputs`].
    pub fn receive(&mut self, dp: &mut Datapath, i: usize, frame: Vec<u8>, now_ns: u64) {
        let q = &mut self.queues[i];
        let port_no = q.port_no;
        if let Some(p) = dp.ports.get_mut(&port_no) {
            p.counters.rx_packets += 1;
            p.counters.rx_bytes += frame.len() as u64;
        }
        let ctx = q.ingress_ctx(now_ns);
        let frame = match q.ingress.as_mut() {
            None => frame,
            Some(ing) => {
                let a = ing.arrive(frame, &ctx);
                q.note_qin(now_ns);
                match a {
                    Arrival::Pass(f) => f,
                    Arrival::Held => return,
                    Arrival::Dropped => {
                        if let Some(p) = dp.ports.get_mut(&port_no) {
                            p.counters.rx_dropped += 1;
                        }
                        return;
                    }
                }
            }
        };
        process(dp, port_no, frame, now_ns);
    }

    /// Moves the datapath's outputs into their ports' egress queues (or straight to `tx`
    /// on a port without emulation), counting drops and CE marks.
    pub fn route_outputs(&mut self, dp: &mut Datapath, now_ns: u64) {
        for o in std::mem::take(&mut dp.out) {
            let Some(&i) = self.index.get(&o.port) else { continue };
            let p = &mut self.queues[i];
            let bytes = o.frame.len();
            let passthrough = p.egress.params.is_passthrough();
            let r = if passthrough {
                p.tx.push(o.frame);
                Enqueue::Queued
            } else {
                p.egress.enqueue(o.frame, now_ns, &mut self.rng, &mut self.due)
            };
            p.tx.append(&mut self.due);
            let Some(port) = dp.ports.get_mut(&o.port) else { continue };
            match r {
                Enqueue::Dropped => port.counters.tx_dropped += 1,
                Enqueue::Marked => port.counters.ce_marks += 1,
                Enqueue::Queued => {}
            }
            if r != Enqueue::Dropped {
                port.tx_meter.add(bytes, now_ns);
            }
            port.egress_queue = p.egress.queue();
        }
    }

    /// Does what is due at `now_ns`: egress departures into `tx`, then ingress wake-ups
    /// (deadline passed or the port's egress queue changed); frames an ingress discipline
    /// releases enter the pipeline and their outputs are routed.
    pub fn service(&mut self, dp: &mut Datapath, now_ns: u64) {
        for p in self.queues.iter_mut() {
            if p.egress.next_deadline().is_some_and(|d| d <= now_ns) {
                p.egress.advance(now_ns, &mut self.rng, &mut self.due);
                p.tx.append(&mut self.due);
                if let Some(port) = dp.ports.get_mut(&p.port_no) {
                    port.egress_queue = p.egress.queue();
                }
            }
        }
        // Released frames may queue on other ports and wake their disciplines in turn;
        // a few rounds settle that, and anything left is due at once (next_deadline).
        for _ in 0..4 {
            let mut woke = false;
            for i in 0..self.queues.len() {
                let p = &mut self.queues[i];
                if !p.ingress_due(now_ns) {
                    continue;
                }
                woke = true;
                let ctx = p.ingress_ctx(now_ns);
                p.ingress_seen = p.egress.changes();
                let mut released = Vec::new();
                if let Some(q) = p.ingress.as_mut() {
                    q.wake(&ctx, &mut released);
                }
                p.note_qin(now_ns);
                let port_no = p.port_no;
                for f in released {
                    process(dp, port_no, f, now_ns);
                }
                self.route_outputs(dp, now_ns);
            }
            if !woke {
                break;
            }
        }
    }

    /// Applies a run-time ingress-discipline request: reconfigures the port's discipline
    /// (which must be the one named), or installs one built from the options on a port
    /// without any. Frames it releases enter the pipeline. `OFPP_ALL`: every port whose
    /// discipline has that name. The error says why (the caller turns it into OFPT_ERROR).
    pub fn control_ingress(
        &mut self,
        dp: &mut Datapath,
        req: &crate::datapath::IngressControl,
        now_ns: u64,
    ) -> Result<(), String> {
        let all = req.port_no == crate::ofp::consts::OFPP_ALL;
        let targets: Vec<usize> = if all {
            (0..self.queues.len())
                .filter(|&i| self.queues[i].ingress.as_ref().is_some_and(|q| q.kind() == req.name))
                .collect()
        } else {
            let i = *self.index.get(&req.port_no).ok_or_else(|| format!("no port {}", req.port_no))?;
            vec![i]
        };
        for i in targets {
            let p = &mut self.queues[i];
            let ctx = p.ingress_ctx(now_ns);
            let mut released = Vec::new();
            match p.ingress.as_mut() {
                Some(q) if q.kind() != req.name => {
                    return Err(format!(
                        "port {} has ingress discipline '{}', not '{}'",
                        p.port_no,
                        q.kind(),
                        req.name
                    ))
                }
                Some(q) => q.control(&req.options, &ctx, &mut released)?,
                None => {
                    let spec =
                        crate::qdisc::QdiscSpec { name: req.name.to_string(), options: req.options.clone() };
                    p.ingress = Some(crate::qdisc::build_ingress(&spec)?);
                    p.ingress_seen = p.egress.changes();
                }
            }
            p.note_qin(now_ns);
            let port_no = p.port_no;
            for f in released {
                process(dp, port_no, f, now_ns);
            }
            self.route_outputs(dp, now_ns);
        }
        Ok(())
    }

    /// The earliest deadline of any port (egress departure or ingress wake-up).
    pub fn next_deadline(&self) -> Option<u64> {
        self.queues.iter().filter_map(PortQueues::next_deadline).min()
    }
}

/// Runs one frame through the pipeline. Defence in depth: a bug on one odd frame must
/// not take the switch down, so a panic costs that frame (counted as an rx error).
fn process(dp: &mut Datapath, port_no: u32, frame: Vec<u8>, now_ns: u64) {
    if std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| dp.process_packet(port_no, frame, now_ns)))
        .is_err()
    {
        dp.out.clear();
        if let Some(p) = dp.ports.get_mut(&port_no) {
            p.counters.rx_errors += 1;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::datapath::{DpConfig, FailMode};
    use crate::group::SelectMode;
    use crate::linkem::LinkParams;
    use crate::ofp::codec::PortDesc;
    use crate::packet::testpkt::ipv4_udp;
    use crate::qdisc::droptail::DropTail;
    use crate::qdisc::testing::Gate;

    const MS: u64 = 1_000_000;

    /// Two ports, standalone MAC learning without a controller (floods: 1 <-> 2), port 1
    /// at `rate1` with the test discipline `gate` on its ingress.
    fn setup(rate1: u64, gate: Gate) -> (Datapath, Ports) {
        let mut dp = Datapath::new(DpConfig {
            name: "s1".into(),
            dpid: 1,
            n_tables: 1,
            select_mode: SelectMode::Hash,
            fail_mode: FailMode::Standalone,
            seed: 1,
        });
        let mut ports = Ports::new(Rng::new(1));
        for p in 1..=2u32 {
            dp.add_port(PortDesc { port_no: p, ..Default::default() }, true, 0);
            let rate = if p == 1 { Some(rate1) } else { None };
            let egress = Egress::new(
                LinkParams { rate_bps: rate, ..Default::default() },
                Box::new(DropTail::default()),
            );
            let ingress: Option<Box<dyn IngressQdisc>> =
                if p == 1 { Some(Box::new(gate_clone(&gate))) } else { None };
            ports.add(PortQueues::new(p, egress, ingress));
        }
        (dp, ports)
    }

    fn gate_clone(g: &Gate) -> Gate {
        Gate::new(g.gate, g.max_hold_ns, g.limit)
    }

    fn pkt(seq: u8) -> Vec<u8> {
        ipv4_udp([10, 0, 0, 1], [10, 0, 0, 2], 1, 2, 0, &[seq, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0])
    }

    /// The test frames' sequence numbers seen in port `i`'s transmit list.
    fn sent(ports: &mut Ports, i: usize) -> Vec<(u8, u8)> {
        std::mem::take(&mut ports.queues[i].tx).iter().map(|f| (f[42], *f.last().unwrap())).collect()
    }

    #[test]
    fn without_a_backlog_frames_pass_straight_through() {
        let (mut dp, mut ports) = setup(8_000_000, Gate::new(1, 10 * MS, 8));
        ports.receive(&mut dp, 0, pkt(1), 0);
        ports.route_outputs(&mut dp, 0);
        assert_eq!(sent(&mut ports, 1), vec![(1, 0)]);
        assert_eq!(ports.next_deadline(), None);
    }

    #[test]
    fn the_datapath_sees_each_ports_egress_queue_and_admitted_rate() {
        // 1000-byte frames at 8 Mbit/s: 1 ms each on port 1's egress.
        let (mut dp, mut ports) = setup(8_000_000, Gate::new(100, 100 * MS, 8));
        let big = ipv4_udp([10, 0, 0, 2], [10, 0, 0, 1], 3, 4, 0, &[0u8; 958]);
        for _ in 0..3 {
            ports.receive(&mut dp, 1, big.clone(), 0);
        }
        ports.route_outputs(&mut dp, 0);
        let q = ports.queues[0].egress.queue();
        assert_eq!(q.pkts, 3);
        assert_eq!(dp.ports[&1].egress_queue, q);
        assert!(dp.ports[&1].tx_meter.bytes_per_s(0) > 0.0);
        // A departure updates what the datapath sees.
        ports.service(&mut dp, MS + 1);
        assert_eq!(dp.ports[&1].egress_queue.pkts, ports.queues[0].egress.queue().pkts);
        assert!(dp.ports[&1].egress_queue.pkts < 3);
        // The unshaped port 2 has no queue but a rate.
        assert_eq!(dp.ports[&2].tx_meter.bytes_per_s(2 * MS), 0.0);
        ports.receive(&mut dp, 0, pkt(1), 2 * MS);
        ports.route_outputs(&mut dp, 2 * MS);
        assert_eq!(dp.ports[&2].egress_queue.pkts, 0);
        assert!(dp.ports[&2].tx_meter.bytes_per_s(2 * MS) > 0.0);
    }

    #[test]
    fn held_frames_are_released_when_the_own_egress_queue_drains() {
        // 1000-byte frames at 8 Mbit/s: 1 ms each on port 1's egress.
        let (mut dp, mut ports) = setup(8_000_000, Gate::new(1, 100 * MS, 8));
        // Port 2 -> port 1 builds a backlog of 2 on port 1's egress.
        let big = ipv4_udp([10, 0, 0, 2], [10, 0, 0, 1], 3, 4, 0, &[0u8; 958]);
        ports.receive(&mut dp, 1, big.clone(), 0);
        ports.receive(&mut dp, 1, big, 0);
        ports.route_outputs(&mut dp, 0);
        assert_eq!(ports.queues[0].egress.qlen_pkts(), 2);
        // Frames arriving on port 1 now are held: its own egress is backed up.
        ports.receive(&mut dp, 0, pkt(1), 0);
        ports.receive(&mut dp, 0, pkt(2), 0);
        ports.service(&mut dp, 0);
        assert!(sent(&mut ports, 1).is_empty());
        assert_eq!(ports.queues[0].ingress.as_ref().unwrap().held().pkts, 2);
        // The first departure (1 ms) still leaves one queued: still held.
        assert_eq!(ports.next_deadline(), Some(MS));
        ports.service(&mut dp, MS);
        assert!(sent(&mut ports, 1).is_empty());
        // At 2 ms the queue is empty: the egress change wakes the discipline, which
        // releases both in order, modified, into the pipeline and out of port 2.
        ports.service(&mut dp, 2 * MS);
        assert_eq!(sent(&mut ports, 1), vec![(1, 0xee), (2, 0xee)]);
        assert_eq!(ports.queues[0].ingress.as_ref().unwrap().held().pkts, 0);
        assert_eq!(dp.ports[&1].counters.rx_packets, 2);
    }

    #[test]
    fn a_deadline_wakes_the_discipline_and_drops_are_rx_dropped() {
        // 1 bit/s: port 1's egress never drains within the test.
        let (mut dp, mut ports) = setup(1, Gate::new(1, 5 * MS, 1));
        let back = ipv4_udp([10, 0, 0, 2], [10, 0, 0, 1], 3, 4, 0, &[0u8; 8]);
        ports.receive(&mut dp, 1, back, 0);
        ports.route_outputs(&mut dp, 0);
        ports.service(&mut dp, 0);
        ports.receive(&mut dp, 0, pkt(7), MS);
        ports.receive(&mut dp, 0, pkt(8), MS); // over the limit of 1 held frame
        assert_eq!(dp.ports[&1].counters.rx_dropped, 1);
        assert_eq!(ports.next_deadline(), Some(6 * MS));
        ports.service(&mut dp, 6 * MS - 1);
        assert!(sent(&mut ports, 1).is_empty());
        ports.service(&mut dp, 6 * MS);
        assert_eq!(sent(&mut ports, 1), vec![(7, 0xee)]);
        let c = ports.queues[0].ingress.as_ref().unwrap().counters();
        assert_eq!(c, vec![("passed", 0), ("released", 1), ("drops", 1)]);
    }

    fn counter(ports: &Ports, i: usize, name: &str) -> u64 {
        let c = ports.queues[i].ingress.as_ref().unwrap().counters();
        c.iter().find(|(k, _)| *k == name).unwrap().1
    }

    #[test]
    fn abq_holds_acks_while_its_egress_is_above_k_with_exact_queue_histograms() {
        use crate::qdisc::abq::tests::{inspect, tcp};
        // Port 1 at 8 Mbit/s: a 1000-byte frame takes 1 ms.
        let (mut dp, mut ports) = setup(8_000_000, Gate::new(1, MS, 8));
        ports.queues[0].ingress = Some(
            crate::qdisc::abq::build(&[("k".into(), "2p".into()), ("hold".into(), "10ms".into())]).unwrap(),
        );
        let big = ipv4_udp([10, 0, 0, 2], [10, 0, 0, 1], 3, 4, 0, &[0u8; 958]);
        for _ in 0..4 {
            ports.receive(&mut dp, 1, big.clone(), 0);
        }
        ports.route_outputs(&mut dp, 0);
        ports.service(&mut dp, 0);
        assert_eq!(ports.queues[0].egress.qlen_pkts(), 4);
        // A pure ACK from the receiver on port 1: Q_out = 4 > K = 2, held.
        let ack = tcp(9, 0x10, 77, 500, &[], &[]);
        ports.receive(&mut dp, 0, ack.clone(), 0);
        ports.service(&mut dp, 0);
        assert!(ports.queues[1].tx.is_empty());
        ports.service(&mut dp, MS); // Q_out 3
        assert!(ports.queues[1].tx.is_empty());
        ports.service(&mut dp, 2 * MS); // Q_out 2 = X: released with ECE, out of port 2
        let out = std::mem::take(&mut ports.queues[1].tx);
        assert_eq!(out.len(), 1);
        assert_eq!(inspect(&out[0]).0, 0x10 | 0x40);
        assert_eq!(inspect(&out[0]).2, inspect(&out[0]).3);
        ports.service(&mut dp, 4 * MS);
        let qout = ports.queues[0].egress.qhist.summary();
        // 4, 3, 2, 1 frames for 1 ms each.
        assert_eq!((qout.total_ns, qout.p5, qout.p95, qout.max), (4 * MS, 1, 4, 4));
        assert!((qout.mean - 2.5).abs() < 1e-9);
        ports.queues[0].qin_hist.advance(4 * MS);
        let qin = ports.queues[0].qin_hist.summary();
        assert_eq!((qin.total_ns, qin.max), (4 * MS, 1));
        assert!((qin.mean - 0.5).abs() < 1e-9, "held 1 ACK for 2 of 4 ms");
        assert_eq!((counter(&ports, 0, "acks_held"), counter(&ports, 0, "released")), (1, 1));
    }

    #[test]
    fn ingress_control_reconfigures_installs_and_refuses() {
        use crate::datapath::IngressControl;
        let (mut dp, mut ports) = setup(8_000_000, Gate::new(1, MS, 8));
        ports.queues[0].ingress = Some(crate::qdisc::abq::build(&[]).unwrap());
        let req = |port_no: u32, opts: &[(&str, &str)]| IngressControl {
            xid: 1,
            port_no,
            name: "abq",
            options: opts.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect(),
            raw: vec![],
        };
        ports.control_ingress(&mut dp, &req(1, &[("k", "7p")]), 0).unwrap();
        assert_eq!(counter(&ports, 0, "k"), 7);
        // Port 2 has none: one is installed with the options.
        ports.control_ingress(&mut dp, &req(2, &[("enable", "1"), ("k", "9p")]), 0).unwrap();
        assert_eq!(counter(&ports, 1, "k"), 9);
        // OFPP_ALL reaches both.
        ports.control_ingress(&mut dp, &req(crate::ofp::consts::OFPP_ALL, &[("k", "3p")]), 0).unwrap();
        assert_eq!((counter(&ports, 0, "k"), counter(&ports, 1, "k")), (3, 3));
        let e = ports.control_ingress(&mut dp, &req(1, &[("k", "0p")]), 0).unwrap_err();
        assert_eq!(e, "option k=0p: must be at least 1");
        assert_eq!(counter(&ports, 0, "k"), 3, "a refused request changes nothing");
        ports.queues[0].ingress = Some(Box::new(Gate::new(1, MS, 8)));
        let e = ports.control_ingress(&mut dp, &req(1, &[("k", "3p")]), 0).unwrap_err();
        assert_eq!(e, "port 1 has ingress discipline 'gate', not 'abq'");
        assert!(ports.control_ingress(&mut dp, &req(5, &[]), 0).is_err());
    }
}
