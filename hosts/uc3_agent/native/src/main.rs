//! `dcnlab-uc3-agentd`: parse the options, open the maps, run the agent until a signal.

use std::io::Read;
use std::os::fd::FromRawFd;
use std::process::ExitCode;
use uc3_agentd::agent::{log, Agent, Config, Maps};
use uc3_agentd::bpf::{self, Map};

const USAGE: &str = include_str!("usage.txt");

const OPTIONS: &[&str] = &[
    "listen",
    "port",
    "secret-fd",
    "secret-file",
    "clamps-map",
    "flows-map",
    "stats-map",
    "cgroup",
    "pins",
    "interval",
    "timeout",
    "auth-timeout",
    "max-connections",
    "state-file",
    "name",
];

fn options(argv: &[String]) -> Result<Vec<(String, String)>, String> {
    let mut out = Vec::new();
    let mut it = argv.iter();
    while let Some(arg) = it.next() {
        let Some(name) = arg.strip_prefix("--") else {
            return Err(format!("unexpected argument {arg:?}"));
        };
        if !OPTIONS.contains(&name) {
            return Err(format!("unknown option --{name}"));
        }
        let value = it.next().ok_or(format!("--{name} needs a value"))?;
        out.push((name.to_string(), value.clone()));
    }
    Ok(out)
}

fn get<'a>(opts: &'a [(String, String)], name: &str) -> Option<&'a str> {
    opts.iter()
        .rev()
        .find(|(n, _)| n == name)
        .map(|(_, v)| v.as_str())
}

fn need<'a>(opts: &'a [(String, String)], name: &str) -> Result<&'a str, String> {
    get(opts, name).ok_or(format!("--{name} is required"))
}

fn seconds(opts: &[(String, String)], name: &str, default: f64) -> Result<f64, String> {
    let Some(text) = get(opts, name) else {
        return Ok(default);
    };
    match text.parse::<f64>() {
        Ok(v) if v.is_finite() && v > 0.0 => Ok(v),
        _ => Err(format!(
            "--{name} {text:?}: give a positive number of seconds"
        )),
    }
}

fn secret(opts: &[(String, String)]) -> Result<Vec<u8>, String> {
    let mut raw = Vec::new();
    if let Some(fd) = get(opts, "secret-fd") {
        let fd: i32 = fd.parse().map_err(|_| format!("bad --secret-fd {fd:?}"))?;
        // SAFETY: fcntl only queries the number.
        if fd < 0 || unsafe { libc::fcntl(fd, libc::F_GETFD) } < 0 {
            return Err(format!("--secret-fd {fd}: no such open file descriptor"));
        }
        // SAFETY: an fd the parent handed us for this purpose; read to EOF, then closed.
        let mut file = unsafe { std::fs::File::from_raw_fd(fd) };
        file.read_to_end(&mut raw)
            .map_err(|e| format!("reading the secret from fd {fd}: {e}"))?;
    } else if let Some(path) = get(opts, "secret-file") {
        raw = std::fs::read(path).map_err(|e| format!("reading {path}: {e}"))?;
    } else {
        return Err("give --secret-fd or --secret-file".into());
    }
    let secret = raw.trim_ascii().to_vec();
    uc3_agentd::proto::check_secret(&secret).map_err(|e| e.msg)?;
    Ok(secret)
}

fn config(opts: &[(String, String)]) -> Result<Config, String> {
    let port = need(opts, "port")?;
    let port: u16 = port.parse().map_err(|_| format!("bad --port {port:?}"))?;
    let max = get(opts, "max-connections").unwrap_or("4");
    let max_connections: usize = max
        .parse()
        .ok()
        .filter(|n| *n > 0)
        .ok_or(format!("bad --max-connections {max:?}"))?;
    Ok(Config {
        secret: secret(opts)?,
        listen: get(opts, "listen").unwrap_or("127.0.0.1").to_string(),
        port,
        interval_s: seconds(opts, "interval", 0.2)?,
        timeout_s: seconds(opts, "timeout", 2.0)?,
        auth_timeout_s: seconds(opts, "auth-timeout", 5.0)?,
        max_connections,
        name: get(opts, "name").unwrap_or("").to_string(),
        cgroup: need(opts, "cgroup")?.to_string(),
        pins: get(opts, "pins").map(str::to_string),
        state_file: get(opts, "state-file").map(Into::into),
    })
}

fn run(argv: &[String]) -> Result<(), String> {
    let opts = options(argv)?;
    let cfg = config(&opts)?;
    let open = |name: &str, key: usize, value: usize| -> Result<Map, String> {
        Map::open(need(&opts, name)?, key, value).map_err(|e| format!("--{name}: {e}"))
    };
    let maps = Maps {
        clamps: open("clamps-map", bpf::KEY_LEN, bpf::CLAMP_VALUE_LEN)?,
        flows: open("flows-map", bpf::KEY_LEN, bpf::FLOW_VALUE_LEN)?,
        stats: open("stats-map", bpf::STATS_KEY_LEN, bpf::STATS_VALUE_LEN)?,
    };
    // The Python parent owns the program, the cgroup and the pins: without it, stop.
    // SAFETY: prctl with plain integer arguments.
    unsafe { libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGTERM) };
    let mut agent = Agent::new(cfg, maps).map_err(|e| e.to_string())?;
    agent.run().map_err(|e| e.to_string())
}

fn main() -> ExitCode {
    let argv: Vec<String> = std::env::args().skip(1).collect();
    if argv.iter().any(|a| a == "--help" || a == "-h") {
        print!("{USAGE}");
        return ExitCode::SUCCESS;
    }
    match run(&argv) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            log("ERROR", &format!("dcnlab-uc3-agentd: {e}"));
            ExitCode::from(1)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(text: &str) -> Vec<String> {
        text.split_whitespace().map(str::to_string).collect()
    }

    #[test]
    fn options_are_checked() {
        assert!(options(&args("--port"))
            .unwrap_err()
            .contains("needs a value"));
        assert!(options(&args("--bogus 1"))
            .unwrap_err()
            .contains("unknown option"));
        assert!(options(&args("port 1")).unwrap_err().contains("unexpected"));
        let dir = std::env::temp_dir().join(format!("uc3-agentd-test-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let secret = dir.join("secret");
        std::fs::write(&secret, "0123456789abcdef0123\n").unwrap();
        let base = format!(
            "--port 6690 --cgroup /cg --secret-file {}",
            secret.display()
        );
        let cfg = config(&options(&args(&base)).unwrap()).unwrap();
        assert_eq!(cfg.secret, b"0123456789abcdef0123"); // stripped, as Python does
        assert_eq!(
            (cfg.interval_s, cfg.timeout_s, cfg.auth_timeout_s),
            (0.2, 2.0, 5.0)
        );
        assert_eq!((cfg.max_connections, cfg.listen.as_str()), (4, "127.0.0.1"));
        for bad in [
            "--interval 0",
            "--timeout -1",
            "--interval nan",
            "--port 70000",
            "--max-connections 0",
        ] {
            let opts = options(&args(&format!("{base} {bad}"))).unwrap();
            assert!(config(&opts).is_err(), "{bad}");
        }
        let opts = options(&args("--port 1 --cgroup /cg")).unwrap();
        assert!(config(&opts)
            .unwrap_err()
            .contains("--secret-fd or --secret-file"));
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
