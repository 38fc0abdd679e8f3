//! `dcnlab-mp`: the multipath transport's command line.
//!
//! ```text
//! dcnlab-mp serve --listen ADDR:PORT [--count N] [--idle SECONDS]
//! dcnlab-mp send  --to ADDR:PORT[,ADDR:PORT...] [--via SRC[,SRC...]] --size SIZE
//!                 [--scheduler NAME] [--window SIZE] [--segment SIZE] [--lowat SIZE]
//!                 [--seed N] [--timeout SECONDS] [--kill INDEX@SIZE] [--warm 1]
//! dcnlab-mp plain-serve --listen ADDR:PORT [--count N]
//! dcnlab-mp plain-send  --to ADDR:PORT --size SIZE [--via SRC]
//! dcnlab-mp schedulers
//! ```
//! Sizes take K/KB (1024), M/MB (1024^2), G/GB (1024^3).  One subflow per `--via` source
//! address (all to the one `--to`), or per `--to` (paired with `--via` when both are
//! lists).  Every command prints JSON lines on stdout; errors go to stderr with exit 2.

use dcnlab_mp::{net, pattern, receiver, sched, sender};
use std::net::{IpAddr, SocketAddr};
use std::process::ExitCode;
use std::time::{Duration, Instant};

fn parse_size(s: &str) -> Result<u64, String> {
    let t = s.trim().to_ascii_uppercase();
    let t = t.strip_suffix('B').unwrap_or(&t);
    let (num, mult) = match t.chars().last() {
        Some('K') => (&t[..t.len() - 1], 1u64 << 10),
        Some('M') => (&t[..t.len() - 1], 1 << 20),
        Some('G') => (&t[..t.len() - 1], 1 << 30),
        _ => (t, 1),
    };
    let v: f64 = num
        .parse()
        .map_err(|_| format!("bad size {s:?} (examples: 64KB, 1MB, 1500)"))?;
    if v.is_nan() || v <= 0.0 || !v.is_finite() {
        return Err(format!("bad size {s:?}: must be positive"));
    }
    Ok((v * mult as f64).round() as u64)
}

fn parse_addr(s: &str) -> Result<SocketAddr, String> {
    s.parse()
        .map_err(|_| format!("bad address {s:?} (expected IP:PORT)"))
}

struct Args {
    opts: Vec<(String, String)>,
}

impl Args {
    fn parse(argv: &[String], flags: &[&str]) -> Result<Self, String> {
        let mut opts = Vec::new();
        let mut i = 0;
        while i < argv.len() {
            let a = &argv[i];
            let Some(name) = a.strip_prefix("--") else {
                return Err(format!("unexpected argument {a:?}"));
            };
            if !flags.contains(&name) {
                return Err(format!(
                    "unknown option --{name}; valid: {}",
                    flags
                        .iter()
                        .map(|f| format!("--{f}"))
                        .collect::<Vec<_>>()
                        .join(" ")
                ));
            }
            let v = argv
                .get(i + 1)
                .ok_or_else(|| format!("--{name} needs a value"))?;
            opts.push((name.to_string(), v.clone()));
            i += 2;
        }
        Ok(Args { opts })
    }

    fn get(&self, name: &str) -> Option<&str> {
        self.opts
            .iter()
            .rev()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
    }

    fn need(&self, name: &str) -> Result<&str, String> {
        self.get(name)
            .ok_or_else(|| format!("--{name} is required"))
    }

    fn num<T: std::str::FromStr>(&self, name: &str, default: T) -> Result<T, String> {
        match self.get(name) {
            None => Ok(default),
            Some(v) => v.parse().map_err(|_| format!("--{name}: bad number {v:?}")),
        }
    }
}

fn paths(args: &Args) -> Result<Vec<(Option<SocketAddr>, SocketAddr)>, String> {
    let tos: Vec<SocketAddr> = args
        .need("to")?
        .split(',')
        .map(parse_addr)
        .collect::<Result<_, _>>()?;
    let vias: Vec<IpAddr> = match args.get("via") {
        None => Vec::new(),
        Some(v) => v
            .split(',')
            .map(|s| {
                s.parse()
                    .map_err(|_| format!("bad source address {s:?} in --via"))
            })
            .collect::<Result<_, _>>()?,
    };
    let src = |ip: IpAddr| Some(SocketAddr::new(ip, 0));
    Ok(match (tos.len(), vias.len()) {
        (_, 0) => tos.iter().map(|t| (None, *t)).collect(),
        (1, _) => vias.iter().map(|v| (src(*v), tos[0])).collect(),
        (a, b) if a == b => vias.iter().zip(&tos).map(|(v, t)| (src(*v), *t)).collect(),
        (a, b) => {
            return Err(format!(
                "{a} destinations and {b} sources: give one destination, or one per source"
            ))
        }
    })
}

fn cmd_send(argv: &[String]) -> Result<bool, String> {
    let args = Args::parse(
        argv,
        &[
            "to",
            "via",
            "size",
            "scheduler",
            "window",
            "segment",
            "lowat",
            "seed",
            "timeout",
            "kill",
            "warm",
        ],
    )?;
    let size = parse_size(args.need("size")?)?;
    let mut cfg = sender::SendConfig::new(
        paths(&args)?,
        size,
        args.get("scheduler").unwrap_or("minrtt"),
    );
    sched::by_name(&cfg.scheduler)?;
    if let Some(w) = args.get("window") {
        cfg.window = parse_size(w)?;
    }
    if let Some(s) = args.get("segment") {
        let v = parse_size(s)?;
        if v > dcnlab_mp::wire::MAX_PAYLOAD as u64 {
            return Err(format!(
                "--segment at most {} bytes",
                dcnlab_mp::wire::MAX_PAYLOAD
            ));
        }
        cfg.max_segment = v as u32;
    }
    if let Some(s) = args.get("lowat") {
        // 0: no TCP_NOTSENT_LOWAT (a deep kernel send queue)
        let v = if s.trim() == "0" { 0 } else { parse_size(s)? };
        cfg.lowat = u32::try_from(v).map_err(|_| "--lowat too large".to_string())?;
    }
    cfg.seed = args.num("seed", 1u64)?;
    cfg.timeout = Duration::from_secs_f64(args.num("timeout", 120.0f64)?);
    if let Some(k) = args.get("kill") {
        let (i, at) = k
            .split_once('@')
            .ok_or_else(|| format!("--kill {k:?}: expected INDEX@SIZE"))?;
        let i: usize = i.parse().map_err(|_| format!("--kill {k:?}: bad index"))?;
        if i >= cfg.paths.len() {
            return Err(format!(
                "--kill {k:?}: there are {} subflows",
                cfg.paths.len()
            ));
        }
        cfg.kill = Some((i, parse_size(at)?));
    }
    cfg.warm = match args.get("warm") {
        None | Some("0") => false,
        Some("1") => true,
        Some(v) => return Err(format!("--warm {v:?}: 1 or 0")),
    };
    let rep = sender::send(&cfg)?;
    println!("{}", rep.json());
    Ok(rep.intact())
}

fn cmd_serve(argv: &[String]) -> Result<bool, String> {
    let args = Args::parse(argv, &["listen", "count", "idle"])?;
    let cfg = receiver::ServeConfig {
        listen: parse_addr(args.need("listen")?)?,
        count: args.num("count", 0u64)?,
        idle: Duration::from_secs_f64(args.num("idle", 30.0f64)?),
    };
    let failed = receiver::serve(&cfg, &mut |line| {
        use std::io::Write;
        let mut o = std::io::stdout().lock();
        let _ = writeln!(o, "{line}");
        let _ = o.flush();
    })
    .map_err(|e| e.to_string())?;
    Ok(failed == 0)
}

/// `--mptcp 1`: the kernel's MPTCP instead of TCP (its own default scheduler).
fn mptcp_flag(args: &Args) -> Result<libc::c_int, String> {
    match args.get("mptcp") {
        None | Some("0") => Ok(0),
        Some("1") => Ok(net::IPPROTO_MPTCP),
        Some(v) => Err(format!("--mptcp {v:?}: 1 or 0")),
    }
}

/// Plain TCP with the same payload and check, the reference for the benchmark.
fn cmd_plain_send(argv: &[String]) -> Result<bool, String> {
    let args = Args::parse(argv, &["to", "via", "size", "seed", "mptcp"])?;
    let proto = mptcp_flag(&args)?;
    let size = parse_size(args.need("size")?)?;
    let seed: u64 = args.num("seed", 1u64)?;
    let p = paths(&args)?;
    if p.len() != 1 {
        return Err("plain-send takes one path".into());
    }
    let cpu0 = net::cpu_seconds();
    let start = Instant::now();
    let fd = net::connect_proto(p[0].0, p[0].1, 0, proto).map_err(|e| e.to_string())?;
    let mut pfd = [libc::pollfd {
        fd,
        events: libc::POLLOUT,
        revents: 0,
    }];
    let mut buf = vec![0u8; 256 * 1024];
    let mut sent = 0u64;
    let mut filled = 0usize;
    let mut pos = 0usize;
    let res = (|| -> Result<Vec<u8>, String> {
        net::poll(&mut pfd, 10_000).map_err(|e| e.to_string())?;
        net::so_error(fd).map_err(|e| format!("connect: {e}"))?;
        while sent < size {
            if pos == filled {
                filled = (size - sent).min(buf.len() as u64) as usize;
                pattern::fill(seed, sent, &mut buf[..filled]);
                pos = 0;
            }
            let n = net::write(fd, &buf[pos..filled]).map_err(|e| e.to_string())?;
            if n == 0 {
                net::poll(&mut pfd, 1000).map_err(|e| e.to_string())?;
            }
            pos += n;
            sent += n as u64;
        }
        net::shutdown_write(fd);
        // the receiver answers with its verdict after reading everything, then closes:
        // the FCT ends there
        pfd[0].events = libc::POLLIN;
        let mut reply = Vec::new();
        loop {
            net::poll(&mut pfd, 10_000).map_err(|e| e.to_string())?;
            match net::read(fd, &mut buf) {
                Ok(Some(0)) | Err(_) => return Ok(reply),
                Ok(Some(n)) => reply.extend_from_slice(&buf[..n]),
                Ok(None) => {}
            }
        }
    })();
    net::close(fd);
    let reply = res?;
    let secs = start.elapsed().as_secs_f64();
    let (intact, delivered) = parse_verdict(&reply)?;
    let intact = intact && delivered == size;
    println!(
        "{{\"role\":\"sender\",\"scheduler\":\"{}\",\"size\":{size},\"fct_ms\":{:.3},\"goodput_mbps\":{:.3},\"intact\":{intact},\"delivered\":{delivered},\"cpu_s\":{:.4}}}",
        if proto == 0 { "plain-tcp" } else { "kernel-mptcp" },
        secs * 1e3,
        size as f64 * 8.0 / secs / 1e6,
        net::cpu_seconds() - cpu0
    );
    Ok(intact)
}

/// plain-serve's verdict, the last bytes it sends before closing: intact u8 (1 or 0),
/// bytes received u64 (big-endian).
const VERDICT_LEN: usize = 9;

fn verdict(intact: bool, got: u64) -> [u8; VERDICT_LEN] {
    let mut v = [0u8; VERDICT_LEN];
    v[0] = u8::from(intact);
    v[1..].copy_from_slice(&got.to_be_bytes());
    v
}

fn parse_verdict(reply: &[u8]) -> Result<(bool, u64), String> {
    if reply.len() != VERDICT_LEN || reply[0] > 1 {
        return Err(format!(
            "plain-serve's verdict: {} bytes {:02x?}, expected {VERDICT_LEN} (intact u8, \
             received u64)",
            reply.len(),
            &reply[..reply.len().min(16)]
        ));
    }
    let mut got = [0u8; 8];
    got.copy_from_slice(&reply[1..]);
    Ok((reply[0] == 1, u64::from_be_bytes(got)))
}

fn cmd_plain_serve(argv: &[String]) -> Result<bool, String> {
    let args = Args::parse(argv, &["listen", "count", "seed", "mptcp"])?;
    let proto = mptcp_flag(&args)?;
    let addr = parse_addr(args.need("listen")?)?;
    let count: u64 = args.num("count", 0u64)?;
    let seed: u64 = args.num("seed", 1u64)?;
    let lfd = net::listen_proto(addr, proto).map_err(|e| e.to_string())?;
    println!(
        "{{\"role\":\"receiver\",\"listening\":\"{}\"}}",
        net::local_addr(lfd).map_err(|e| e.to_string())?
    );
    let mut ok = true;
    let mut done = 0u64;
    let mut buf = vec![0u8; 256 * 1024];
    while count == 0 || done < count {
        let mut pfd = [libc::pollfd {
            fd: lfd,
            events: libc::POLLIN,
            revents: 0,
        }];
        net::poll(&mut pfd, 1000).map_err(|e| e.to_string())?;
        let Some((fd, _)) = net::accept(lfd).map_err(|e| e.to_string())? else {
            continue;
        };
        let mut got = 0u64;
        let mut intact = true;
        let mut p = [libc::pollfd {
            fd,
            events: libc::POLLIN,
            revents: 0,
        }];
        loop {
            match net::read(fd, &mut buf) {
                Ok(Some(0)) | Err(_) => break,
                Ok(Some(n)) => {
                    if intact && pattern::first_mismatch(seed, got, &buf[..n]).is_some() {
                        intact = false;
                    }
                    got += n as u64;
                }
                Ok(None) => {
                    net::poll(&mut p, 1000).map_err(|e| e.to_string())?;
                }
            }
        }
        let v = verdict(intact, got);
        let mut off = 0;
        p[0].events = libc::POLLOUT;
        while off < v.len() {
            match net::write(fd, &v[off..]) {
                Ok(0) => {
                    if net::poll(&mut p, 1000).is_err() {
                        break;
                    }
                }
                Ok(n) => off += n,
                Err(_) => break, // the sender went away: it learns nothing, we log
            }
        }
        net::close(fd);
        println!("{{\"role\":\"receiver\",\"bytes\":{got},\"intact\":{intact}}}");
        ok &= intact;
        done += 1;
    }
    net::close(lfd);
    Ok(ok)
}

fn main() -> ExitCode {
    let argv: Vec<String> = std::env::args().skip(1).collect();
    let usage =
        "usage: dcnlab-mp serve|send|plain-serve|plain-send|schedulers [options] (see --help)";
    let Some(cmd) = argv.first() else {
        eprintln!("{usage}");
        return ExitCode::from(2);
    };
    let rest = &argv[1..];
    let r = match cmd.as_str() {
        "send" => cmd_send(rest),
        "serve" => cmd_serve(rest),
        "plain-send" => cmd_plain_send(rest),
        "plain-serve" => cmd_plain_serve(rest),
        "schedulers" => {
            println!("{}", sched::NAMES.join("\n"));
            Ok(true)
        }
        "-h" | "--help" | "help" => {
            print!("{}", include_str!("usage.txt"));
            Ok(true)
        }
        other => Err(format!("unknown command {other:?}; {usage}")),
    };
    match r {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::from(1),
        Err(e) => {
            eprintln!("dcnlab-mp: {e}");
            ExitCode::from(2)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn verdict_round_trips_and_bad_replies_are_errors() {
        assert_eq!(parse_verdict(&verdict(true, 65536)).unwrap(), (true, 65536));
        assert_eq!(parse_verdict(&verdict(false, 7)).unwrap(), (false, 7));
        // nothing (a peer that closed without a verdict), too long, a bad flag
        assert!(parse_verdict(&[]).is_err());
        assert!(parse_verdict(&[1u8; 10]).is_err());
        let mut bad = verdict(true, 1);
        bad[0] = 2;
        assert!(parse_verdict(&bad).unwrap_err().contains("verdict"));
    }
}
