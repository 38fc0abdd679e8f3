//! Quantities as written on the command line and in discipline and balancer options:
//! rates (`10M`), durations (`250us`) and queue sizes (`20p`, `30kb`). Shared by the
//! command line, the queue disciplines and the load balancers, so each parses its own
//! options with the same syntax and the same error messages.

/// Splits "12.5M" into (12.5, "M").
fn split_unit(s: &str) -> Option<(f64, &str)> {
    let i = s.find(|c: char| !(c.is_ascii_digit() || c == '.')).unwrap_or(s.len());
    let v: f64 = s[..i].parse().ok()?;
    Some((v, &s[i..]))
}

pub fn parse_rate(s: &str) -> Result<u64, String> {
    let err = || format!("rate '{s}': expected e.g. 10M, 500k, 1G, 1000000 (bit/s)");
    let (v, u) = split_unit(s).ok_or_else(err)?;
    let u = u.trim_end_matches("bit").trim_end_matches("bps").trim_end_matches("bit/s");
    let mult = match u {
        "" => 1.0,
        "k" | "K" => 1e3,
        "m" | "M" => 1e6,
        "g" | "G" => 1e9,
        _ => return Err(err()),
    };
    let r = (v * mult).round();
    if !(1.0..=1e12).contains(&r) {
        return Err(format!("rate '{s}' out of range (1 bit/s .. 1 Tbit/s)"));
    }
    Ok(r as u64)
}

pub fn parse_duration_ns(s: &str) -> Result<u64, String> {
    let err = || format!("duration '{s}': expected e.g. 5ms, 250us, 1s, 100ns, 0");
    let (v, u) = split_unit(s).ok_or_else(err)?;
    let mult = match u {
        "" if v == 0.0 => 0.0,
        "ns" => 1.0,
        "us" => 1e3,
        "ms" => 1e6,
        "s" => 1e9,
        _ => return Err(err()),
    };
    let ns = v * mult;
    if ns > 60e9 {
        return Err(format!("duration '{s}' too long (max 60s)"));
    }
    Ok(ns.round() as u64)
}

/// Parses a size: "20p" -> (Some(20), None); "30000b"/"30kb"/"64KiB" -> (None, Some(bytes)).
pub fn parse_size(s: &str) -> Result<(Option<usize>, Option<usize>), String> {
    let err = || format!("size '{s}': expected packets like 20p or bytes like 30000b, 30kb, 64KiB");
    let (v, u) = split_unit(s).ok_or_else(err)?;
    if v.fract() != 0.0 && matches!(u, "p" | "pkt" | "pkts" | "b" | "B") {
        return Err(err());
    }
    let r = match u {
        "p" | "pkt" | "pkts" => (Some(v as usize), None),
        "b" | "B" => (None, Some(v as usize)),
        "kb" | "KB" | "k" | "K" => (None, Some((v * 1e3) as usize)),
        "KiB" | "kib" => (None, Some((v * 1024.0) as usize)),
        "MB" | "mb" => (None, Some((v * 1e6) as usize)),
        "MiB" => (None, Some((v * 1048576.0) as usize)),
        _ => return Err(err()),
    };
    Ok(r)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn units() {
        assert_eq!(parse_rate("1.5G").unwrap(), 1_500_000_000);
        assert_eq!(parse_rate("500kbit").unwrap(), 500_000);
        assert_eq!(parse_duration_ns("250us").unwrap(), 250_000);
        assert_eq!(parse_duration_ns("0").unwrap(), 0);
        assert_eq!(parse_size("64KiB").unwrap(), (None, Some(65536)));
        assert_eq!(parse_size("20p").unwrap(), (Some(20), None));
        assert!(parse_rate("fast").is_err());
        assert!(parse_duration_ns("5").is_err());
    }
}
