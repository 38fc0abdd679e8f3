//! Command-line parsing. Everything is validated here, before any socket is opened or any
//! interface is touched, so a typo never leaves a half-started switch behind.

use std::collections::HashSet;
use std::net::{SocketAddr, ToSocketAddrs};

use crate::datapath::FailMode;
use crate::lb;
use crate::linkem::LinkParams;
use crate::qdisc::{self, QdiscSpec};
use crate::spec::NamedSpec;
use crate::units::{parse_duration_ns, parse_rate};

pub const USAGE: &str = "\
dcnlab-switch: OpenFlow 1.3 software switch (dcnlab switch_ext)

USAGE:
  dcnlab-switch --name NAME [--dpid N] [--controller tcp:HOST:PORT]
                --port N=IFNAME[,OPTS] [--port ...] [options]
  dcnlab-switch --selftest-encode FILE
  dcnlab-switch --bench-lookup N[,N...]
                           time flow-table lookups (index vs linear scan) with N
                           learned entries each; print JSON and exit
  dcnlab-switch --check --name NAME --port ... [options]
                           validate the whole command line (port options, queue
                           disciplines) without opening anything; exit 0 or 2

REQUIRED:
  --name NAME              switch name (OFPMP_DESC dp_desc, logs, stats file)
  --port N=IFNAME[,OPTS]   OpenFlow port N (1..65279) on interface IFNAME; repeatable.
     OPTS (comma-separated, all optional; egress of this port):
       rate=R       line rate, bit/s with k/M/G suffix (10M = 10e6 bit/s)
       delay=D      propagation delay: 5ms, 250us, 1s, 0
       jitter=D     uniform jitter +-D around delay (never reorders unless 'reorder')
       reorder      let jitter reorder packets
       buffer=B     drop-tail buffer: 20p (packets) or 30000b / 30kb / 64KiB (bytes);
                    may be given twice to limit both
       ecn=K        mark CE on ECT packets when the queue holds >= K (20p or 30000b)
                    (buffer= and ecn= are shorthand for egress=droptail/buffer=B/ecn=K)
       egress=NAME[/KEY=VALUE]...   egress queue discipline (default droptail), e.g.
                    egress=droptail/buffer=20p/ecn=10p; needs rate=
       ingress=NAME[/KEY=VALUE]...  ingress discipline: sees frames received on this
                    port before the flow tables (default: none)

OPTIONS:
  --dpid N                 datapath id, decimal or 0x-hex (default: digits of --name)
  --controller tcp:H:P     controller address (default: none, run without controller)
  --select-mode NAME[/KEY=VALUE]...
                           load balancer of select groups (default hash): hash (ECMP,
                           per flow), rr (per-packet weighted round-robin), random
                           (per-packet spraying); any group may get its own through
                           the dcnlab experimenter message
  --fail-mode M            on controller loss: secure (default, keep flows) or
                           standalone (MAC-learning switch while disconnected)
  --tables N               number of flow tables, 1..254 (default 16)
  --max-flows N            entries per flow table at most; a flow mod adding one more is
                           refused with FLOW_MOD_FAILED/TABLE_FULL (default: unbounded)
  --stats-file PATH        write one JSON line of per-port counters every interval
  --stats-interval-ms N    stats interval (default 100)
  --seed N                 seed for random select and jitter (default: from time)
  --probe-interval-ms N    echo probe after N ms of controller silence (default 5000);
                           disconnect after 3x this
  --max-backoff-ms N       reconnect backoff cap (default 4000, starts at 100)
  --batch N                frames per recvmmsg/sendmmsg batch (default 64)
  --verbose / -v           log more (repeat for debug)
  --help / -h, --version
";

#[derive(Debug, Clone, PartialEq)]
pub struct PortSpec {
    pub port_no: u32,
    pub ifname: String,
    pub link: LinkParams,
    /// Egress queue discipline: `egress=`, else `droptail` with the `buffer=`/`ecn=` options.
    pub egress: QdiscSpec,
    pub ingress: Option<QdiscSpec>,
}

#[derive(Debug, Clone)]
pub struct Config {
    pub name: String,
    pub dpid: u64,
    pub controller: Option<SocketAddr>,
    pub ports: Vec<PortSpec>,
    /// The switch's load balancer (checked: it builds).
    pub select_mode: NamedSpec,
    pub fail_mode: FailMode,
    pub n_tables: u8,
    pub stats_file: Option<String>,
    pub stats_interval_ms: u64,
    pub seed: Option<u64>,
    pub probe_interval_ms: u64,
    pub max_backoff_ms: u64,
    pub batch: usize,
    pub verbose: u8,
    /// Entries each flow table holds at most (None: unbounded).
    pub max_flows: Option<usize>,
}

pub enum Command {
    Run(Box<Config>),
    Help,
    Version,
    SelftestEncode(String),
    /// `--bench-lookup`: time flow-table lookups with N learned entries, for each N.
    BenchLookup(Vec<usize>),
    /// `--check`: the command line was valid; nothing is opened.
    Check,
}

fn num(s: &str, what: &str) -> Result<u64, String> {
    let r = if let Some(h) = s.strip_prefix("0x").or_else(|| s.strip_prefix("0X")) {
        u64::from_str_radix(h, 16)
    } else {
        s.parse::<u64>()
    };
    r.map_err(|_| format!("{what}: '{s}' is not a number"))
}

pub fn parse_port(s: &str) -> Result<PortSpec, String> {
    let (no, rest) = s
        .split_once('=')
        .ok_or_else(|| format!("--port '{s}': expected N=IFNAME[,opts], e.g. 1=s1-eth1,rate=10M"))?;
    let port_no = num(no, "--port number")?;
    if port_no == 0 || port_no > 0xfeff {
        return Err(format!("--port '{s}': port number must be 1..65279"));
    }
    let mut parts = rest.split(',');
    let ifname = parts.next().unwrap_or("").to_string();
    if ifname.is_empty() || ifname.len() > 15 || ifname.contains('/') || ifname.contains(char::is_whitespace)
    {
        return Err(format!("--port '{s}': bad interface name '{ifname}' (1..15 chars)"));
    }
    let mut link = LinkParams::default();
    // buffer=/ecn= are the default discipline's options, checked by it (as droptail/...).
    let mut shorthand: Vec<(String, String)> = Vec::new();
    let mut egress: Option<QdiscSpec> = None;
    let mut ingress: Option<QdiscSpec> = None;
    for opt in parts {
        let (k, v) = opt.split_once('=').unwrap_or((opt, ""));
        let need = || {
            if v.is_empty() {
                Err(format!("--port '{s}': option '{k}' needs a value"))
            } else {
                Ok(())
            }
        };
        match k {
            "rate" | "bw" => {
                need()?;
                link.rate_bps = Some(parse_rate(v)?)
            }
            "delay" => {
                need()?;
                link.delay_ns = parse_duration_ns(v)?
            }
            "jitter" => {
                need()?;
                link.jitter_ns = parse_duration_ns(v)?
            }
            "reorder" => link.reorder = true,
            "buffer" | "queue" | "ecn" => {
                need()?;
                let key = if k == "ecn" { "ecn" } else { "buffer" };
                shorthand.push((key.to_string(), v.to_string()));
            }
            "egress" | "ingress" => {
                need()?;
                let spec = QdiscSpec::parse(v).map_err(|e| format!("--port '{s}': {k}={e}"))?;
                let slot = if k == "egress" { &mut egress } else { &mut ingress };
                if slot.replace(spec).is_some() {
                    return Err(format!("--port '{s}': {k}= given twice"));
                }
            }
            _ => {
                return Err(format!(
                    "--port '{s}': unknown option '{k}' (rate, delay, jitter, reorder, buffer, ecn, egress, ingress)"
                ))
            }
        }
    }
    if egress.is_some() && !shorthand.is_empty() {
        return Err(format!(
            "--port '{s}': buffer=/ecn= configure the default droptail discipline; with egress= give them \
             as its options (egress=droptail/buffer=20p/ecn=10p)"
        ));
    }
    if link.rate_bps.is_none() {
        if !shorthand.is_empty() {
            return Err(format!("--port '{s}': buffer/ecn need rate= (without a rate no queue ever builds)"));
        }
        if egress.is_some() {
            return Err(format!("--port '{s}': egress= needs rate= (without a rate no queue ever builds)"));
        }
    }
    let egress = egress.unwrap_or(QdiscSpec { name: qdisc::droptail::NAME.to_string(), options: shorthand });
    // Build once now so a bad name or option fails before any socket is opened.
    qdisc::build_egress(&egress).map_err(|e| format!("--port '{s}': {e}"))?;
    if let Some(spec) = &ingress {
        qdisc::build_ingress(spec).map_err(|e| format!("--port '{s}': {e}"))?;
    }
    Ok(PortSpec { port_no: port_no as u32, ifname, link, egress, ingress })
}

/// `--bench-lookup`'s table sizes: "10,100,1000", each 0..=100000.
fn parse_sizes(s: &str) -> Result<Vec<usize>, String> {
    s.split(',')
        .map(|n| match n.trim().parse::<usize>() {
            Ok(v) if v <= 100_000 => Ok(v),
            _ => Err(format!("--bench-lookup '{s}': expected sizes like 10,100,1000 (each 0..100000)")),
        })
        .collect()
}

fn parse_controller(s: &str) -> Result<SocketAddr, String> {
    let rest = s.strip_prefix("tcp:").ok_or_else(|| format!("--controller '{s}': expected tcp:HOST:PORT"))?;
    let (host, port) =
        rest.rsplit_once(':').ok_or_else(|| format!("--controller '{s}': expected tcp:HOST:PORT"))?;
    let port: u16 = port.parse().map_err(|_| format!("--controller '{s}': bad port"))?;
    let host = host.trim_start_matches('[').trim_end_matches(']');
    (host, port)
        .to_socket_addrs()
        .map_err(|e| format!("--controller '{s}': {e}"))?
        .next()
        .ok_or_else(|| format!("--controller '{s}': no address"))
}

fn dpid_from_name(name: &str) -> Option<u64> {
    let digits: String = name.chars().filter(|c| c.is_ascii_digit()).collect();
    digits.parse().ok()
}

pub fn parse_args(args: &[String]) -> Result<Command, String> {
    let mut name = None;
    let mut dpid = None;
    let mut controller = None;
    let mut ports = Vec::new();
    let mut select_mode = NamedSpec::named(lb::names()[0]);
    let mut fail_mode = FailMode::Secure;
    // 16: TCP-Path with ARP-Path as its default forwarding uses 15 (tables 0..14)
    let mut n_tables = 16u8;
    let mut stats_file = None;
    let mut stats_interval_ms = 100;
    let mut seed = None;
    let mut probe_interval_ms = 5000;
    let mut max_backoff_ms = 4000;
    let mut max_flows = None;
    let mut batch = 64;
    let mut verbose = 0;
    let mut check = false;
    let mut i = 0;
    while i < args.len() {
        let a = args[i].as_str();
        // Accept both "--opt value" and "--opt=value".
        let (flag, inline) = match a.split_once('=') {
            Some((f, v)) if f.starts_with("--") => (f, Some(v.to_string())),
            _ => (a, None),
        };
        let mut val = || -> Result<String, String> {
            if let Some(v) = inline.clone() {
                return Ok(v);
            }
            i += 1;
            args.get(i).cloned().ok_or_else(|| format!("{flag} needs a value"))
        };
        match flag {
            "-h" | "--help" => return Ok(Command::Help),
            "--version" => return Ok(Command::Version),
            "--selftest-encode" => return Ok(Command::SelftestEncode(val()?)),
            "--bench-lookup" => return parse_sizes(&val()?).map(Command::BenchLookup),
            "--check" => check = true,
            "-v" | "--verbose" => verbose += 1,
            "-vv" => verbose += 2,
            "--name" => {
                let v = val()?;
                if v.is_empty() || v.len() > 255 {
                    return Err("--name must be 1..255 characters".into());
                }
                name = Some(v)
            }
            "--dpid" => dpid = Some(num(&val()?, "--dpid")?),
            "--controller" => controller = Some(parse_controller(&val()?)?),
            "--port" => ports.push(parse_port(&val()?)?),
            "--select-mode" => {
                let v = val()?;
                let spec = NamedSpec::parse(&v).map_err(|e| format!("--select-mode {e}"))?;
                lb::build(&spec).map_err(|e| format!("--select-mode '{v}': {e}"))?;
                select_mode = spec
            }
            "--fail-mode" => {
                fail_mode = match val()?.as_str() {
                    "secure" => FailMode::Secure,
                    "standalone" => FailMode::Standalone,
                    v => return Err(format!("--fail-mode '{v}': expected secure or standalone")),
                }
            }
            "--tables" => {
                let n = num(&val()?, "--tables")?;
                if !(1..=254).contains(&n) {
                    return Err("--tables must be 1..254".into());
                }
                n_tables = n as u8
            }
            "--stats-file" => stats_file = Some(val()?),
            "--stats-interval-ms" => {
                stats_interval_ms = num(&val()?, "--stats-interval-ms")?;
                if stats_interval_ms == 0 {
                    return Err("--stats-interval-ms must be > 0".into());
                }
            }
            "--seed" => seed = Some(num(&val()?, "--seed")?),
            "--probe-interval-ms" => {
                probe_interval_ms = num(&val()?, "--probe-interval-ms")?.max(100);
            }
            "--max-backoff-ms" => max_backoff_ms = num(&val()?, "--max-backoff-ms")?.max(100),
            "--max-flows" => {
                let n = num(&val()?, "--max-flows")?;
                if n == 0 {
                    return Err("--max-flows must be at least 1".into());
                }
                max_flows = Some(n as usize)
            }
            "--batch" => {
                let n = num(&val()?, "--batch")?;
                if !(1..=1024).contains(&n) {
                    return Err("--batch must be 1..1024".into());
                }
                batch = n as usize
            }
            _ => return Err(format!("unknown argument '{a}' (see --help)")),
        }
        i += 1;
    }
    let name = name.ok_or("--name is required")?;
    let dpid = match dpid {
        Some(d) => d,
        None => dpid_from_name(&name)
            .ok_or_else(|| format!("--dpid is required: name '{name}' has no digits to derive it from"))?,
    };
    if ports.is_empty() {
        return Err("at least one --port N=IFNAME is required".into());
    }
    let mut nos = HashSet::new();
    let mut ifs = HashSet::new();
    for p in &ports {
        if !nos.insert(p.port_no) {
            return Err(format!("port number {} given twice", p.port_no));
        }
        if !ifs.insert(p.ifname.clone()) {
            return Err(format!("interface {} given twice", p.ifname));
        }
    }
    if check {
        return Ok(Command::Check);
    }
    Ok(Command::Run(Box::new(Config {
        name,
        dpid,
        controller,
        ports,
        select_mode,
        fail_mode,
        n_tables,
        stats_file,
        stats_interval_ms,
        seed,
        probe_interval_ms,
        max_backoff_ms,
        batch,
        verbose,
        max_flows,
    })))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(s: &str) -> Vec<String> {
        s.split_whitespace().map(String::from).collect()
    }

    #[test]
    fn full_command_line() {
        let c = match parse_args(&args(
            "--name s1 --controller tcp:127.0.0.1:6653 --port 1=s1-eth1 \
             --port 2=s1-eth2,rate=10M,delay=5ms,jitter=1ms,buffer=20p,ecn=10p --select-mode random --stats-file /tmp/x",
        ))
        .unwrap()
        {
            Command::Run(c) => c,
            _ => panic!(),
        };
        assert_eq!(c.dpid, 1);
        assert_eq!(c.select_mode.to_string(), "random");
        let l = &c.ports[1].link;
        assert_eq!(l.rate_bps, Some(10_000_000));
        assert_eq!(l.delay_ns, 5_000_000);
        assert_eq!(l.jitter_ns, 1_000_000);
        assert_eq!(c.ports[1].egress.to_string(), "droptail/buffer=20p/ecn=10p");
        assert!(c.ports[0].link.is_passthrough());
        assert_eq!(c.ports[0].egress.to_string(), "droptail");
        assert_eq!(c.ports[0].ingress, None);
    }

    #[test]
    fn bench_lookup_sizes() {
        match parse_args(&args("--bench-lookup 10,100,5000")).unwrap() {
            Command::BenchLookup(sizes) => assert_eq!(sizes, vec![10, 100, 5000]),
            _ => panic!("not a benchmark command"),
        }
        for bad in ["--bench-lookup 10,x", "--bench-lookup 200000", "--bench-lookup ,", "--bench-lookup"] {
            let Err(e) = parse_args(&args(bad)) else { panic!("{bad} accepted") };
            assert!(e.contains("--bench-lookup"), "{bad}: {e}");
        }
    }

    #[test]
    fn disciplines_by_name() {
        let port = |s: &str| parse_port(s);
        let p = port("2=s1-eth2,rate=10M,egress=droptail/buffer=20p/buffer=30kb/ecn=10p").unwrap();
        assert_eq!(p.egress.name, "droptail");
        assert_eq!(p.egress.options.len(), 3);
        // The shorthand and the explicit form configure the same discipline.
        let a = port("1=a,rate=1M,buffer=20p,ecn=5p").unwrap();
        let b = port("1=a,rate=1M,egress=droptail/buffer=20p/ecn=5p").unwrap();
        assert_eq!(a, b);
        let err = |s: &str| port(s).unwrap_err();
        let e = err("3=s1-eth3,rate=1M,egress=red/min=5p");
        assert!(e.starts_with("--port '3=s1-eth3,") && e.contains("unknown egress discipline 'red'"), "{e}");
        let e = err("3=s1-eth3,rate=1M,egress=droptail/k=5p");
        assert!(e.contains("egress discipline 'droptail': unknown option 'k' (known: buffer, ecn)"), "{e}");
        let e = err("3=s1-eth3,ingress=fifo/k=20p");
        assert!(
            e.starts_with("--port '3=s1-eth3,") && e.contains("unknown ingress discipline 'fifo'"),
            "{e}"
        );
        let e = err("3=s1-eth3,ingress=abq/k=20p/mode=lifo");
        assert!(e.contains("ingress discipline 'abq': option mode=lifo: expected ece or window"), "{e}");
        assert!(port("3=s1-eth3,ingress=abq/k=20p/mode=window").is_ok());
        assert!(err("1=a,ingress=abq/k").contains("ingress='abq/k': option 'k' is not KEY=VALUE"));
        assert!(
            err("1=a,rate=1M,buffer=5p,egress=droptail").contains("with egress= give them as its options")
        );
        assert!(err("1=a,egress=droptail").contains("egress= needs rate="));
        assert!(err("1=a,rate=1M,egress=droptail,egress=droptail").contains("given twice"));
    }

    #[test]
    fn check_validates_everything_and_opens_nothing() {
        let ok = parse_args(&args("--check --name s1 --port 1=nosuch0,rate=1M,ingress=abq/k=20p"));
        assert!(matches!(ok, Ok(Command::Check)));
        let bad = parse_args(&args("--check --name s1 --port 1=nosuch0,rate=1M,ingress=abq/k=lots"));
        assert!(bad.err().unwrap().contains("ingress discipline 'abq': option k=lots"));
    }

    #[test]
    fn errors_are_clear() {
        let e = |s: &str| match parse_args(&args(s)) {
            Err(e) => e,
            Ok(_) => panic!("accepted {s}"),
        };
        assert!(e("--port 1=a").contains("--name"));
        assert!(e("--name sw").contains("--dpid"));
        assert!(e("--name s1 --port 1=a --port 1=b").contains("twice"));
        assert!(e("--name s1 --port 1=a,rate=10Q").contains("rate"));
        assert!(e("--name s1 --port 1=a,speed=1").contains("unknown option"));
        assert!(e("--name s1 --port 1=a,buffer=20p").contains("need rate"));
        assert!(
            e("--name s1 --port 1=a,rate=1M,buffer=20p,buffer=30p").contains("given twice in the same unit")
        );
        assert!(e("--name s1 --port 1=a,rate=1M,buffer=0p").contains("at least 1"));
        assert!(e("--name s1 --port 1=a --select-mode spray").contains(
            "--select-mode 'spray': unknown load balancer 'spray' (known: hash, rr, random, letflow, drill, flowcell, conga)"
        ));
        assert!(
            e("--name s1 --port 1=a --select-mode rr/k=1").contains("load balancer 'rr': unknown option 'k'")
        );
        assert!(e("--name s1 --port 1=a --select-mode RR").contains("--select-mode 'RR': expected NAME"));
        assert!(e("--name s1 --port 1=a --controller 127.0.0.1:6653").contains("tcp:"));
        assert!(e("--name s1 --port 1=a --bogus").contains("unknown argument"));
    }
}
