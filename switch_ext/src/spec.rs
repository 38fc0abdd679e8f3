//! A plug-in chosen by name with its options, as written on the command line and in the
//! dcnlab experimenter messages: `NAME[/KEY=VALUE]...`, e.g. `droptail/buffer=20p/ecn=10p`
//! (a queue discipline) or `rr` (a load balancer). `/` separates, so the whole thing is
//! one `--port` option (commas separate those) and needs no shell quoting.
//!
//! Queue disciplines ([`crate::qdisc`]) and load balancers ([`crate::lb`]) share this
//! syntax and the registry lookup, so both refuse unknown names and options the same way.

use std::fmt;

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct NamedSpec {
    pub name: String,
    /// In the order given; a key may repeat when the plug-in allows it.
    pub options: Vec<(String, String)>,
}

impl NamedSpec {
    /// A spec without options.
    pub fn named(name: &str) -> NamedSpec {
        NamedSpec { name: name.to_string(), options: Vec::new() }
    }

    pub fn parse(s: &str) -> Result<NamedSpec, String> {
        let mut parts = s.split('/');
        let name = parts.next().unwrap_or("");
        if name.is_empty()
            || !name.starts_with(|c: char| c.is_ascii_lowercase())
            || !name.chars().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_' || c == '-')
        {
            return Err(format!(
                "'{s}': expected NAME[/KEY=VALUE]... with a lower-case NAME, e.g. droptail/buffer=20p"
            ));
        }
        let mut options = Vec::new();
        for opt in parts {
            match opt.split_once('=') {
                Some((k, v)) if !k.is_empty() && !v.is_empty() => {
                    options.push((k.to_string(), v.to_string()))
                }
                _ => return Err(format!("'{s}': option '{opt}' is not KEY=VALUE")),
            }
        }
        Ok(NamedSpec { name: name.to_string(), options })
    }
}

impl fmt::Display for NamedSpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.name)?;
        for (k, v) in &self.options {
            write!(f, "/{k}={v}")?;
        }
        Ok(())
    }
}

/// The error a constructor returns for an option it does not know.
pub fn unknown_option(key: &str, known: &[&str]) -> String {
    format!(
        "unknown option '{key}' (known: {})",
        if known.is_empty() { "none".into() } else { known.join(", ") }
    )
}

/// Finds `name` in a registry table; the error names `what` ("egress discipline",
/// "load balancer") and every registered name.
pub fn lookup<C: Copy>(table: &[(&str, C)], what: &str, name: &str) -> Result<C, String> {
    table.iter().find(|(n, _)| *n == name).map(|(_, c)| *c).ok_or_else(|| {
        let known: Vec<&str> = table.iter().map(|(n, _)| *n).collect();
        format!(
            "unknown {what} '{name}' (known: {})",
            if known.is_empty() { "none".into() } else { known.join(", ") }
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spec_syntax() {
        let s = NamedSpec::parse("droptail/buffer=20p/ecn=10p/buffer=30000b").unwrap();
        assert_eq!(s.name, "droptail");
        assert_eq!(s.options.len(), 3);
        assert_eq!(s.options[2], ("buffer".into(), "30000b".into()));
        assert_eq!(s.to_string(), "droptail/buffer=20p/ecn=10p/buffer=30000b");
        assert_eq!(NamedSpec::parse("abq").unwrap().options, vec![]);
        assert_eq!(NamedSpec::parse("rr").unwrap(), NamedSpec::named("rr"));
        for bad in ["", "/k=1", "Abq", "abq/k", "abq/=1", "abq/k=", "abq//k=1", "a b"] {
            assert!(NamedSpec::parse(bad).is_err(), "accepted '{bad}'");
        }
    }

    #[test]
    fn lookup_names_every_registered_entry() {
        let table: &[(&str, u8)] = &[("a", 1), ("b", 2)];
        assert_eq!(lookup(table, "thing", "b"), Ok(2));
        assert_eq!(lookup(table, "thing", "c"), Err("unknown thing 'c' (known: a, b)".to_string()));
        assert_eq!(lookup::<u8>(&[], "thing", "c"), Err("unknown thing 'c' (known: none)".to_string()));
    }
}
