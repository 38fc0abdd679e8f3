//! The controller <-> agent wire protocol, version 2, exactly as `protocol.py` defines it:
//! frames `"U3" | 2 | 0 | length (4, BE) | HMAC-SHA256(key, context + header + payload) |
//! payload (JSON)`, per-agent per-direction keys, the hello handshake with nonces, the
//! session context and the bounds.  Error messages are those of `protocol.py` (the
//! controller logs them), Python's reprs included.

use hmac::{KeyInit, Mac};
use serde_json::{Map, Value};
use std::fmt::Write as _;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};

pub const MAGIC: &[u8; 2] = b"U3";
pub const VERSION: u8 = 2;
pub const HEADER_LEN: usize = 8;
pub const MAC_LEN: usize = 32;
pub const MAX_PAYLOAD: usize = 1 << 20;
pub const MAX_FLOWS: usize = 4096;
pub const MIN_WINDOW: i128 = 1;
pub const MAX_WINDOW: i128 = 65535;
pub const MAX_STRING: usize = 256;
pub const MAX_SEQ: i128 = (1 << 63) - 1;
pub const MIN_SECRET: usize = 16;
pub const NONCE_HEX: usize = 32;
pub const MAX_INT_DIGITS: usize = 20;
pub const MAX_FLOAT_CHARS: usize = 32;

/// An HMAC-SHA256 key with its padded blocks already hashed (RustCrypto's `hmac` and
/// `sha2`): a connection clones it for every frame it signs or checks, which saves two
/// compressions a frame over keying afresh.
pub type HmacKey = hmac::Hmac<sha2::Sha256>;

/// `key` prepared for HMAC-SHA256 (any length: a key longer than a block is hashed first).
pub fn hmac_key(key: &[u8]) -> HmacKey {
    HmacKey::new_from_slice(key).expect("HMAC accepts a key of any length")
}

/// HMAC-SHA256 of the concatenation of `parts` (no copy of the message).
pub fn mac(key: &HmacKey, parts: &[&[u8]]) -> [u8; MAC_LEN] {
    let mut h = key.clone();
    for part in parts {
        h.update(part);
    }
    h.finalize().into_bytes().into()
}

/// A frame or message that breaks the protocol; `auth` marks an HMAC mismatch.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProtocolError {
    pub msg: String,
    pub auth: bool,
}

impl ProtocolError {
    pub fn new(msg: impl Into<String>) -> Self {
        ProtocolError {
            msg: msg.into(),
            auth: false,
        }
    }
}

impl std::fmt::Display for ProtocolError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.msg)
    }
}

pub type Result<T> = std::result::Result<T, ProtocolError>;

fn err<T>(msg: impl Into<String>) -> Result<T> {
    Err(ProtocolError::new(msg))
}

pub fn check_secret(secret: &[u8]) -> Result<()> {
    if secret.len() < MIN_SECRET {
        return err(format!("shared secret must be at least {MIN_SECRET} bytes"));
    }
    Ok(())
}

// ---------------------------------------------------------------------------
// Python's text forms (they reach the controller in error messages, and an address's
// text is part of the key derivation)

/// `str(ipaddress.ip_address(...))` of Python 3.11: IPv6 in lower-case hex, the first
/// longest run of two or more zero groups as "::" (IPv4-mapped addresses not special).
pub fn py_ip(ip: &IpAddr) -> String {
    match ip {
        IpAddr::V4(v4) => v4.to_string(),
        IpAddr::V6(v6) => py_ipv6(v6),
    }
}

fn py_ipv6(ip: &Ipv6Addr) -> String {
    let groups = ip.segments();
    let (mut best_start, mut best_len) = (0usize, 0usize);
    let (mut start, mut len) = (0usize, 0usize);
    for (i, g) in groups.iter().enumerate() {
        if *g == 0 {
            if len == 0 {
                start = i;
            }
            len += 1;
            if len > best_len {
                best_start = start;
                best_len = len;
            }
        } else {
            len = 0;
        }
    }
    let hex: Vec<String> = groups.iter().map(|g| format!("{g:x}")).collect();
    if best_len < 2 {
        return hex.join(":");
    }
    let head = hex[..best_start].join(":");
    let tail = hex[best_start + best_len..].join(":");
    format!("{head}::{tail}")
}

/// Python's `repr()` of a str: single quotes unless the text has one and no double.
pub fn py_repr(s: &str) -> String {
    let quote = if s.contains('\'') && !s.contains('"') {
        '"'
    } else {
        '\''
    };
    let mut out = String::with_capacity(s.len() + 2);
    out.push(quote);
    for c in s.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if c == quote => {
                out.push('\\');
                out.push(c);
            }
            c if (c as u32) < 0x20 || (0x7f..0xa0).contains(&(c as u32)) => {
                let _ = write!(out, "\\x{:02x}", c as u32);
            }
            c => out.push(c),
        }
    }
    out.push(quote);
    out
}

/// Python's `repr()` of bytes: `b'...'`.
pub fn py_bytes_repr(b: &[u8]) -> String {
    let quote = if b.contains(&b'\'') && !b.contains(&b'"') {
        b'"'
    } else {
        b'\''
    };
    let mut out = String::from("b");
    out.push(quote as char);
    for &c in b {
        match c {
            b'\\' => out.push_str("\\\\"),
            b'\n' => out.push_str("\\n"),
            b'\r' => out.push_str("\\r"),
            b'\t' => out.push_str("\\t"),
            c if c == quote => {
                out.push('\\');
                out.push(c as char);
            }
            0x20..=0x7e => out.push(c as char),
            c => {
                let _ = write!(out, "\\x{c:02x}");
            }
        }
    }
    out.push(quote as char);
    out
}

/// An agent's identity: its address as dialled, `ip:port` (IPv6 in brackets).
pub fn identity(addr: &SocketAddr) -> String {
    match addr {
        SocketAddr::V4(a) => format!("{}:{}", a.ip(), a.port()),
        SocketAddr::V6(a) => format!("[{}]:{}", py_ipv6(a.ip()), a.port()),
    }
}

// ---------------------------------------------------------------------------
// Keys, nonces, session

/// One agent's two keys: controller -> agent and agent -> controller.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Keys {
    pub c2a: [u8; 32],
    pub a2c: [u8; 32],
}

impl Keys {
    pub fn derive(secret: &[u8], agent: &str) -> Result<Keys> {
        check_secret(secret)?;
        let base = format!("dcnlab-uc3/2|{agent}|");
        Ok(Keys {
            c2a: mac(&hmac_key(secret), &[base.as_bytes(), b"c2a"]),
            a2c: mac(&hmac_key(secret), &[base.as_bytes(), b"a2c"]),
        })
    }
}

pub fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// Bytes of a hex string (the nonces: already checked to be lower-case hex).
pub fn unhex(text: &str) -> Result<Vec<u8>> {
    if !text.len().is_multiple_of(2) {
        return err(format!("odd-length hex {}", py_repr(text)));
    }
    (0..text.len())
        .step_by(2)
        .map(|i| {
            u8::from_str_radix(&text[i..i + 2], 16)
                .map_err(|_| ProtocolError::new(format!("not hex: {}", py_repr(text))))
        })
        .collect()
}

/// 16 random bytes from the kernel, as 32 hex digits.
pub fn new_nonce() -> String {
    let mut buf = [0u8; NONCE_HEX / 2];
    let mut got = 0;
    while got < buf.len() {
        // SAFETY: writes at most buf.len() - got bytes into buf[got..].
        let n = unsafe { libc::getrandom(buf[got..].as_mut_ptr().cast(), buf.len() - got, 0) };
        if n > 0 {
            got += n as usize;
        } else if std::io::Error::last_os_error().kind() != std::io::ErrorKind::Interrupted {
            panic!("getrandom failed: {}", std::io::Error::last_os_error());
        }
    }
    hex(&buf)
}

pub fn session_context(nonce_c: &str, nonce_a: &str) -> Result<Vec<u8>> {
    let mut out = unhex(nonce_c)?;
    out.extend(unhex(nonce_a)?);
    Ok(out)
}

// ---------------------------------------------------------------------------
// Framing

/// A signed frame of `message` (a JSON object; keys sorted, as `json.dumps(sort_keys)`).
pub fn encode(message: &Map<String, Value>, key: &[u8], context: &[u8]) -> Result<Vec<u8>> {
    let payload = serde_json::to_vec(message)
        .map_err(|e| ProtocolError::new(format!("cannot encode: {e}")))?;
    encode_payload(&payload, key, context)
}

/// A signed frame of a payload already encoded as JSON.
pub fn encode_payload(payload: &[u8], key: &[u8], context: &[u8]) -> Result<Vec<u8>> {
    encode_prepared(payload, &hmac_key(key), context)
}

/// As `encode_payload`, with a prepared key.
pub fn encode_prepared(payload: &[u8], key: &HmacKey, context: &[u8]) -> Result<Vec<u8>> {
    if payload.len() > MAX_PAYLOAD {
        return err(format!(
            "message of {} bytes exceeds {MAX_PAYLOAD}",
            payload.len()
        ));
    }
    let mut frame = Vec::with_capacity(HEADER_LEN + MAC_LEN + payload.len());
    frame.extend_from_slice(MAGIC);
    frame.push(VERSION);
    frame.push(0);
    frame.extend_from_slice(&(payload.len() as u32).to_be_bytes());
    let tag = mac(key, &[context, &frame[..HEADER_LEN], payload]);
    frame.extend_from_slice(&tag);
    frame.extend_from_slice(payload);
    Ok(frame)
}

/// A finite float as JSON text that parses back to the same value (Rust's shortest
/// round-trip form: `2500.0`, `1e16`, `1.5e-7`); non-finite values, which no figure
/// reaches, as `0.0`.
pub fn write_float(out: &mut String, x: f64) {
    if x.is_finite() {
        let _ = write!(out, "{x:?}");
    } else {
        out.push_str("0.0");
    }
}

/// Every number token of a payload within the bounds `protocol.py` puts on the text as
/// it parses (integers of at most 20 digits, floats of at most 32 characters and
/// finite), checked on the bytes as sent (serde_json rewrites exponents).
fn check_numbers(text: &str) -> Result<()> {
    let bytes = text.as_bytes();
    let (mut i, mut in_string) = (0, false);
    while i < bytes.len() {
        let c = bytes[i];
        if in_string {
            match c {
                b'\\' => i += 1, // skip the escaped character
                b'"' => in_string = false,
                _ => {}
            }
            i += 1;
            continue;
        }
        if c == b'"' {
            in_string = true;
            i += 1;
            continue;
        }
        if c != b'-' && !c.is_ascii_digit() {
            i += 1;
            continue;
        }
        let start = i;
        while i < bytes.len() && matches!(bytes[i], b'0'..=b'9' | b'-' | b'+' | b'.' | b'e' | b'E')
        {
            i += 1;
        }
        let token = &text[start..i];
        if token.contains(['.', 'e', 'E']) {
            if token.len() > MAX_FLOAT_CHARS {
                return err(format!(
                    "number {}... is too long",
                    &token[..MAX_FLOAT_CHARS]
                ));
            }
            if token.parse::<f64>().is_ok_and(|v| !v.is_finite()) {
                return err(format!("number {token} is not finite"));
            }
        } else if token.trim_start_matches('-').len() > MAX_INT_DIGITS {
            return err(format!(
                "integer of {} digits exceeds {MAX_INT_DIGITS}",
                token.len()
            ));
        }
    }
    Ok(())
}

/// A verified payload as a JSON object; every failure is a ProtocolError.
pub fn decode_payload(payload: &[u8]) -> Result<Map<String, Value>> {
    let text = std::str::from_utf8(payload)
        .map_err(|e| ProtocolError::new(format!("payload is not UTF-8 JSON: {e}")))?;
    check_numbers(text)?;
    let value: Value = serde_json::from_str(text)
        .map_err(|e| ProtocolError::new(format!("payload is not UTF-8 JSON: {e}")))?;
    match value {
        Value::Object(map) => Ok(map),
        _ => err("payload must be a JSON object"),
    }
}

/// Incremental decoder: push bytes, pop verified JSON objects one at a time.  Errors in
/// the header or the MAC lose the framing: the caller must close the connection.
pub struct FrameReader {
    key: HmacKey,
    pub context: Vec<u8>,
    buf: Vec<u8>,
}

impl FrameReader {
    pub fn new(key: [u8; 32], context: Vec<u8>) -> Self {
        FrameReader {
            key: hmac_key(&key),
            context,
            buf: Vec::new(),
        }
    }

    pub fn buffered(&self) -> usize {
        self.buf.len()
    }

    pub fn push(&mut self, data: &[u8]) -> Result<()> {
        self.buf.extend_from_slice(data);
        if self.buf.len() > HEADER_LEN + MAC_LEN + MAX_PAYLOAD {
            self.header()?; // a peer cannot make us buffer more than one frame's worth
        }
        Ok(())
    }

    fn header(&self) -> Result<usize> {
        let magic = &self.buf[..2];
        if magic != MAGIC {
            return err(format!(
                "bad magic {}: not a dcnlab agent peer",
                py_bytes_repr(magic)
            ));
        }
        let version = self.buf[2];
        if version != VERSION {
            return err(format!(
                "unsupported protocol version {version} (speak {VERSION})"
            ));
        }
        let length = u32::from_be_bytes([self.buf[4], self.buf[5], self.buf[6], self.buf[7]]);
        if length as usize > MAX_PAYLOAD {
            return err(format!("frame length {length} exceeds {MAX_PAYLOAD}"));
        }
        Ok(HEADER_LEN + MAC_LEN + length as usize)
    }

    /// The next complete frame's message, verified with the current context.
    pub fn pop(&mut self) -> Result<Option<Map<String, Value>>> {
        if self.buf.len() < HEADER_LEN {
            return Ok(None);
        }
        let total = self.header()?;
        if self.buf.len() < total {
            return Ok(None);
        }
        let frame: Vec<u8> = self.buf.drain(..total).collect();
        let (header, rest) = frame.split_at(HEADER_LEN);
        let (tag, payload) = rest.split_at(MAC_LEN);
        let mut check = self.key.clone();
        check.update(&self.context);
        check.update(header);
        check.update(payload);
        // verify_slice: a comparison whose time does not depend on where the tags differ
        if check.verify_slice(tag).is_err() {
            return Err(ProtocolError {
                msg: "HMAC mismatch: wrong key or session, or a tampered frame".into(),
                auth: true,
            });
        }
        decode_payload(payload).map(Some)
    }
}

// ---------------------------------------------------------------------------
// Field validation (the checks and messages of protocol.py, in its order)

fn type_name(v: &Value) -> &'static str {
    match v {
        Value::Null => "NoneType",
        Value::Bool(_) => "bool",
        Value::Number(n) if n.as_str().contains(['.', 'e', 'E']) => "float",
        Value::Number(_) => "int",
        Value::String(_) => "str",
        Value::Array(_) => "list",
        Value::Object(_) => "dict",
    }
}

fn field<'a>(
    msg: &'a Map<String, Value>,
    name: &str,
    kind: &str,
    where_: &str,
) -> Result<&'a Value> {
    let Some(value) = msg.get(name) else {
        return err(format!("{where_}: missing field {}", py_repr(name)));
    };
    let got = type_name(value);
    if got != kind {
        return err(format!(
            "{where_}: field {} must be {kind}, got {got}",
            py_repr(name)
        ));
    }
    Ok(value)
}

fn int_field(
    msg: &Map<String, Value>,
    name: &str,
    lo: i128,
    hi: i128,
    where_: &str,
) -> Result<i128> {
    let Value::Number(n) = field(msg, name, "int", where_)? else {
        unreachable!("field() checked the type")
    };
    // At most 20 digits (checked at decoding): always fits an i128.
    let value: i128 = n
        .as_str()
        .parse()
        .map_err(|_| ProtocolError::new(format!("{where_}: {name} is no integer")))?;
    if !(lo..=hi).contains(&value) {
        return err(format!("{where_}: {name}={value} outside [{lo}, {hi}]"));
    }
    Ok(value)
}

fn str_field<'a>(msg: &'a Map<String, Value>, name: &str, where_: &str) -> Result<&'a str> {
    let Value::String(s) = field(msg, name, "str", where_)? else {
        unreachable!("field() checked the type")
    };
    if s.chars().count() > MAX_STRING {
        return err(format!(
            "{where_}: {name} longer than {MAX_STRING} characters"
        ));
    }
    Ok(s)
}

fn list_field<'a>(msg: &'a Map<String, Value>, name: &str, where_: &str) -> Result<&'a [Value]> {
    let Value::Array(items) = field(msg, name, "list", where_)? else {
        unreachable!("field() checked the type")
    };
    if items.len() > MAX_FLOWS {
        return err(format!(
            "{where_}: {} {name} exceed the limit of {MAX_FLOWS}",
            items.len()
        ));
    }
    Ok(items)
}

/// `ipaddress.ip_address(text)`: dotted IPv4 (no leading zeros) or IPv6 (a `%scope`
/// suffix allowed, as Python allows it; the scope is not part of the address bytes).
pub fn parse_ip(text: &str) -> Option<IpAddr> {
    if let Ok(v4) = text.parse::<Ipv4Addr>() {
        return Some(IpAddr::V4(v4));
    }
    let addr = match text.split_once('%') {
        Some((addr, scope)) if !scope.is_empty() && !scope.contains('%') => addr,
        Some(_) => return None,
        None => text,
    };
    addr.parse::<Ipv6Addr>().ok().map(IpAddr::V6)
}

fn ip_field(msg: &Map<String, Value>, name: &str, where_: &str) -> Result<IpAddr> {
    let text = str_field(msg, name, where_)?;
    parse_ip(text).ok_or_else(|| {
        ProtocolError::new(format!(
            "{where_}: {name}={} is not an IP address",
            py_repr(text)
        ))
    })
}

/// A TCP flow seen from this host: local address/port, remote address/port.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Tuple4 {
    pub local: IpAddr,
    pub lport: u16,
    pub remote: IpAddr,
    pub rport: u16,
}

impl std::fmt::Display for Tuple4 {
    /// As Python prints the dataclass.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "Tuple4(local={}, lport={}, remote={}, rport={})",
            py_repr(&py_ip(&self.local)),
            self.lport,
            py_repr(&py_ip(&self.remote)),
            self.rport
        )
    }
}

impl Tuple4 {
    pub fn to_json(&self) -> Value {
        let mut m = Map::new();
        m.insert("local".into(), Value::String(py_ip(&self.local)));
        m.insert("lport".into(), Value::from(self.lport));
        m.insert("remote".into(), Value::String(py_ip(&self.remote)));
        m.insert("rport".into(), Value::from(self.rport));
        Value::Object(m)
    }
}

pub fn flow_from_json(obj: Option<&Value>, where_: &str) -> Result<Tuple4> {
    let Some(Value::Object(obj)) = obj else {
        return err(format!("{where_}: flow must be an object"));
    };
    let local = ip_field(obj, "local", where_)?;
    let remote = ip_field(obj, "remote", where_)?;
    if local.is_ipv4() != remote.is_ipv4() {
        return err(format!(
            "{where_}: local and remote address families differ"
        ));
    }
    Ok(Tuple4 {
        local,
        lport: int_field(obj, "lport", 1, 65535, where_)? as u16,
        remote,
        rport: int_field(obj, "rport", 1, 65535, where_)? as u16,
    })
}

// ---------------------------------------------------------------------------
// Messages

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    Hello,
    Alloc,
    Keepalive,
    Clear,
}

impl Kind {
    pub fn name(self) -> &'static str {
        match self {
            Kind::Hello => "hello",
            Kind::Alloc => "alloc",
            Kind::Keepalive => "keepalive",
            Kind::Clear => "clear",
        }
    }
}

/// A validated message from the controller.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ControllerMessage {
    pub kind: Kind,
    pub seq: u64,
    pub nonce: String,
    pub clamps: Vec<(Tuple4, u32)>,
    pub replace: bool,
}

fn nonce_field(msg: &Map<String, Value>, where_: &str) -> Result<String> {
    let text = str_field(msg, "nonce", where_)?;
    if text.len() != NONCE_HEX || !text.bytes().all(|c| matches!(c, b'0'..=b'9' | b'a'..=b'f')) {
        return err(format!(
            "{where_}: nonce must be {NONCE_HEX} lower-case hex digits"
        ));
    }
    Ok(text.to_string())
}

pub fn parse_controller(msg: &Map<String, Value>) -> Result<ControllerMessage> {
    let kind_text = str_field(msg, "type", "message")?;
    let kind = match kind_text {
        "hello" => Kind::Hello,
        "alloc" => Kind::Alloc,
        "keepalive" => Kind::Keepalive,
        "clear" => Kind::Clear,
        other => {
            return err(format!(
                "unknown controller message type {}",
                py_repr(other)
            ))
        }
    };
    let where_ = kind.name();
    let seq = int_field(msg, "seq", 1, MAX_SEQ, where_)? as u64;
    let mut out = ControllerMessage {
        kind,
        seq,
        nonce: String::new(),
        clamps: Vec::new(),
        replace: true,
    };
    match kind {
        Kind::Hello => out.nonce = nonce_field(msg, where_)?,
        Kind::Alloc => {
            for (i, obj) in list_field(msg, "clamps", where_)?.iter().enumerate() {
                let at = format!("alloc.clamps[{i}]");
                let Value::Object(obj) = obj else {
                    return err(format!("{at}: must be an object"));
                };
                let flow = flow_from_json(obj.get("flow"), &at)?;
                let window = int_field(obj, "window", MIN_WINDOW, MAX_WINDOW, &at)? as u32;
                out.clamps.push((flow, window));
            }
            out.replace = match field(msg, "replace", "bool", where_)? {
                Value::Bool(b) => *b,
                _ => unreachable!("field() checked the type"),
            };
        }
        Kind::Keepalive | Kind::Clear => {}
    }
    Ok(out)
}

/// Strictly increasing sequence numbers within one connection (replay guard).
#[derive(Clone, Copy, Debug, Default)]
pub struct SeqCheck {
    pub last: u64,
}

impl SeqCheck {
    pub fn check(&mut self, seq: u64) -> Result<()> {
        if seq <= self.last {
            return err(format!(
                "sequence number {seq} not above {} (replay?)",
                self.last
            ));
        }
        self.last = seq;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    const SECRET: &[u8] = b"kkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkk";

    fn obj(v: Value) -> Map<String, Value> {
        match v {
            Value::Object(m) => m,
            _ => panic!("not an object"),
        }
    }

    /// The vectors `tests/unit/test_uc3_protocol.py` asserts on protocol.py too: both
    /// sides must produce these bytes.
    fn vectors() -> Value {
        serde_json::from_str(include_str!("../tests/protocol_vectors.json")).unwrap()
    }

    fn hex_field(v: &Value, name: &str) -> Vec<u8> {
        unhex(v[name].as_str().unwrap()).unwrap()
    }

    #[test]
    fn rfc_4231_vectors() {
        let vectors = vectors();
        let cases = vectors["rfc4231"].as_array().unwrap();
        assert_eq!(cases.len(), 6);
        for case in cases {
            let (key, data) = (hex_field(case, "key"), hex_field(case, "data"));
            let want = case["mac"].as_str().unwrap();
            let prepared = hmac_key(&key);
            assert_eq!(hex(&mac(&prepared, &[&data])), want);
            // the same message in parts, with the same prepared key again
            let (a, b) = data.split_at(data.len() / 3);
            assert_eq!(hex(&mac(&prepared, &[a, &[], b])), want);
        }
    }

    #[test]
    fn keys_and_frames_match_protocol_py() {
        let vectors = vectors();
        let keys = vectors["keys"].as_array().unwrap();
        assert_eq!(keys.len(), 2);
        for case in keys {
            let got = Keys::derive(&hex_field(case, "secret"), case["agent"].as_str().unwrap());
            let got = got.unwrap();
            assert_eq!(hex(&got.c2a), case["c2a"].as_str().unwrap());
            assert_eq!(hex(&got.a2c), case["a2c"].as_str().unwrap());
            assert_ne!(got.c2a, got.a2c);
        }
        let first = &keys[0];
        let frames = vectors["frames"].as_array().unwrap();
        assert_eq!(frames.len(), 2);
        for case in frames {
            let key: [u8; 32] = hex_field(first, case["key"].as_str().unwrap())
                .try_into()
                .unwrap();
            let context = hex_field(case, "context");
            let msg = case["message"].as_object().unwrap();
            // the same bytes, MAC included, as protocol.encode
            let frame = encode(msg, &key, &context).unwrap();
            assert_eq!(hex(&frame), case["frame"].as_str().unwrap());
            let mut reader = FrameReader::new(key, context);
            reader.push(&hex_field(case, "frame")).unwrap();
            assert_eq!(reader.pop().unwrap().as_ref(), Some(msg));
        }
        assert!(Keys::derive(b"short", "x").is_err());
    }

    #[test]
    fn a_tampered_tag_or_payload_is_rejected() {
        let keys = Keys::derive(SECRET, "127.0.0.1:6690").unwrap();
        let msg = obj(json!({"type": "clear", "seq": 4}));
        let ctx: Vec<u8> = (0..32).collect();
        let frame = encode(&msg, &keys.c2a, &ctx).unwrap();
        let mut reader = FrameReader::new(keys.c2a, ctx.clone());
        reader.push(&frame).unwrap();
        assert_eq!(reader.pop().unwrap(), Some(msg));
        // every byte after the header: the 32 of the tag and those of the payload
        for at in HEADER_LEN..frame.len() {
            for bit in [0x01, 0x80] {
                let mut tampered = frame.clone();
                tampered[at] ^= bit;
                let mut reader = FrameReader::new(keys.c2a, ctx.clone());
                reader.push(&tampered).unwrap();
                let e = reader.pop().unwrap_err();
                assert!(e.auth, "byte {at} ^ {bit:#x}: {e}");
            }
        }
        // the other direction's key, and a truncated tag (as a shorter frame) neither
        let mut reader = FrameReader::new(keys.a2c, ctx.clone());
        reader.push(&frame).unwrap();
        assert!(reader.pop().unwrap_err().auth);
        let mut short = frame.clone();
        short.remove(HEADER_LEN);
        short[7] -= 1; // the length now ends the frame where it did
        let mut reader = FrameReader::new(keys.c2a, ctx);
        reader.push(&short).unwrap();
        assert!(reader.pop().unwrap_err().auth);
    }

    #[test]
    fn identities_and_python_ip_text() {
        assert_eq!(identity(&"10.0.0.1:6690".parse().unwrap()), "10.0.0.1:6690");
        assert_eq!(identity(&"[::1]:6690".parse().unwrap()), "[::1]:6690");
        let ip = |s: &str| py_ip(&s.parse().unwrap());
        assert_eq!(ip("2001:db8:0:0:1:0:0:1"), "2001:db8::1:0:0:1");
        assert_eq!(ip("2001:0:0:1:0:0:0:1"), "2001:0:0:1::1");
        assert_eq!(ip("::"), "::");
        assert_eq!(ip("1::"), "1::");
        assert_eq!(ip("1:0:2:3:4:5:6:7"), "1:0:2:3:4:5:6:7");
        assert_eq!(ip("::ffff:127.0.0.1"), "::ffff:7f00:1"); // Python 3.11's str()
        assert_eq!(parse_ip("fe80::1%eth0"), Some("fe80::1".parse().unwrap()));
        assert_eq!(parse_ip("01.2.3.4"), None); // as Python: no leading zeros
        assert_eq!(parse_ip("fe80::1%"), None);
        assert_eq!(parse_ip("host"), None);
    }

    #[test]
    fn python_reprs() {
        assert_eq!(py_repr("alloc"), "'alloc'");
        assert_eq!(py_repr("it's"), "\"it's\"");
        assert_eq!(py_repr("a\nb\\"), "'a\\nb\\\\'");
        assert_eq!(py_bytes_repr(b"GE"), "b'GE'");
        assert_eq!(py_bytes_repr(b"\x00\xff"), "b'\\x00\\xff'");
    }

    #[test]
    fn frames_round_trip_and_bind_key_and_context() {
        let msg = obj(json!({"type": "hello", "seq": 1, "nonce": "ab"}));
        let frame = encode(&msg, &[7; 32], b"ctx").unwrap();
        assert_eq!(&frame[..4], b"U3\x02\x00");
        // sorted keys, compact separators (json.dumps(sort_keys, separators))
        assert_eq!(&frame[40..], br#"{"nonce":"ab","seq":1,"type":"hello"}"#);
        let mut reader = FrameReader::new([7; 32], b"ctx".to_vec());
        // byte by byte: nothing before the frame is complete
        for b in &frame[..frame.len() - 1] {
            reader.push(&[*b]).unwrap();
            assert_eq!(reader.pop().unwrap(), None);
        }
        reader.push(&frame[frame.len() - 1..]).unwrap();
        assert_eq!(reader.pop().unwrap(), Some(msg.clone()));
        assert_eq!(reader.buffered(), 0);
        for (key, ctx) in [([8u8; 32], &b"ctx"[..]), ([7u8; 32], &b"other"[..])] {
            let mut reader = FrameReader::new(key, ctx.to_vec());
            reader.push(&frame).unwrap();
            let e = reader.pop().unwrap_err();
            assert!(e.auth && e.msg.starts_with("HMAC mismatch"), "{e}");
        }
        let mut tampered = frame.clone();
        let last = tampered.len() - 2;
        tampered[last] ^= 1;
        let mut reader = FrameReader::new([7; 32], b"ctx".to_vec());
        reader.push(&tampered).unwrap();
        assert!(reader.pop().unwrap_err().auth);
    }

    #[test]
    fn header_bounds() {
        let mut r = FrameReader::new([0; 32], vec![]);
        r.push(b"GET / HTTP/1.0\r\n\r\n").unwrap();
        assert_eq!(
            r.pop().unwrap_err().msg,
            "bad magic b'GE': not a dcnlab agent peer"
        );
        let mut r = FrameReader::new([0; 32], vec![]);
        r.push(b"U3\x01\x00\x00\x00\x00\x02").unwrap();
        assert_eq!(
            r.pop().unwrap_err().msg,
            "unsupported protocol version 1 (speak 2)"
        );
        let mut r = FrameReader::new([0; 32], vec![]);
        r.push(&[b'U', b'3', 2, 0, 0, 0x10, 0, 1]).unwrap();
        assert_eq!(
            r.pop().unwrap_err().msg,
            "frame length 1048577 exceeds 1048576"
        );
        // a peer cannot make us buffer more than a frame's worth of garbage
        let mut r = FrameReader::new([0; 32], vec![]);
        assert!(r
            .push(&vec![b'x'; HEADER_LEN + MAC_LEN + MAX_PAYLOAD + 1])
            .is_err());
        let mut r = FrameReader::new([0; 32], vec![]);
        let big = [
            &[b'U', b'3', 2, 0, 0, 0x10, 0, 0][..],
            &vec![0; 32 + MAX_PAYLOAD + 1],
        ]
        .concat();
        assert!(r.push(&big).is_ok()); // a maximal frame and one byte of the next
    }

    #[test]
    fn payload_bounds() {
        let bad = |text: &str| decode_payload(text.as_bytes()).unwrap_err().msg;
        assert_eq!(bad("[1]"), "payload must be a JSON object");
        assert!(bad("{").starts_with("payload is not UTF-8 JSON"));
        assert!(decode_payload(b"{\"a\": \"\xff\"}").is_err());
        assert!(bad("{\"a\": NaN}").starts_with("payload is not UTF-8 JSON"));
        assert_eq!(
            bad(r#"{"a": 123456789012345678901}"#),
            "integer of 21 digits exceeds 20"
        );
        assert!(decode_payload(br#"{"a": -12345678901234567890}"#).is_ok());
        assert_eq!(bad(r#"{"a": 1e999}"#), "number 1e999 is not finite");
        assert_eq!(
            bad(r#"{"a": [1.00000000000000000000000000000001]}"#),
            "number 1.000000000000000000000000000000... is too long"
        );
        assert_eq!(bad("{\"a\": {\"b\": 1E400}}"), "number 1E400 is not finite");
        // numbers inside strings are text, not numbers
        assert!(decode_payload(br#"{"a": "123456789012345678901234 \" 1e999"}"#).is_ok());
        // 32 characters with an exponent: within the bound as sent
        assert!(decode_payload(br#"{"a": 1.0000000000000000000000000000e5}"#).is_ok());
    }

    fn parse(v: Value) -> Result<ControllerMessage> {
        parse_controller(&obj(v))
    }

    #[test]
    fn controller_messages_parse_and_bound() {
        let flow =
            json!({"local": "10.0.0.1", "lport": 40000, "remote": "10.0.1.1", "rport": 5201});
        let m = parse(json!({"type": "alloc", "seq": 2, "replace": false,
                             "clamps": [{"flow": flow, "window": 12}]}))
        .unwrap();
        assert_eq!((m.kind, m.seq, m.replace), (Kind::Alloc, 2, false));
        assert_eq!(m.clamps[0].1, 12);
        assert_eq!(m.clamps[0].0.to_json(), flow);
        let nonce = "0123456789abcdef0123456789abcdef";
        assert_eq!(
            parse(json!({"type": "hello", "seq": 1, "nonce": nonce}))
                .unwrap()
                .nonce,
            nonce
        );
        let e = |v: Value| parse(v).unwrap_err().msg;
        assert_eq!(e(json!({"seq": 1})), "message: missing field 'type'");
        assert_eq!(
            e(json!({"type": 3})),
            "message: field 'type' must be str, got int"
        );
        assert_eq!(
            e(json!({"type": "ack", "seq": 1})),
            "unknown controller message type 'ack'"
        );
        assert_eq!(
            e(json!({"type": "clear", "seq": true})),
            "clear: field 'seq' must be int, got bool"
        );
        assert_eq!(
            e(json!({"type": "clear", "seq": 1.0})),
            "clear: field 'seq' must be int, got float"
        );
        assert_eq!(
            e(json!({"type": "clear", "seq": 0})),
            "clear: seq=0 outside [1, 9223372036854775807]"
        );
        assert_eq!(
            e(json!({"type": "hello", "seq": 1, "nonce": "ABCDEF0123456789ABCDEF0123456789"})),
            "hello: nonce must be 32 lower-case hex digits"
        );
        assert_eq!(
            e(
                json!({"type": "alloc", "seq": 2, "clamps": [{"flow": flow, "window": 0}],
                     "replace": true})
            ),
            "alloc.clamps[0]: window=0 outside [1, 65535]"
        );
        assert_eq!(
            e(
                json!({"type": "alloc", "seq": 2, "clamps": [{"flow": flow, "window": 70000}],
                     "replace": true})
            ),
            "alloc.clamps[0]: window=70000 outside [1, 65535]"
        );
        assert_eq!(
            e(json!({"type": "alloc", "seq": 2, "clamps": [5], "replace": true})),
            "alloc.clamps[0]: must be an object"
        );
        assert_eq!(
            e(json!({"type": "alloc", "seq": 2, "clamps": [{"window": 5}], "replace": true})),
            "alloc.clamps[0]: flow must be an object"
        );
        let v6 = json!({"local": "::1", "lport": 1, "remote": "10.0.0.1", "rport": 2});
        assert_eq!(
            e(
                json!({"type": "alloc", "seq": 2, "clamps": [{"flow": v6, "window": 5}],
                     "replace": true})
            ),
            "alloc.clamps[0]: local and remote address families differ"
        );
        let bad_ip = json!({"local": "10.0.0.300", "lport": 1, "remote": "10.0.0.1", "rport": 2});
        assert_eq!(
            e(
                json!({"type": "alloc", "seq": 2, "clamps": [{"flow": bad_ip, "window": 5}],
                     "replace": true})
            ),
            "alloc.clamps[0]: local='10.0.0.300' is not an IP address"
        );
        assert_eq!(
            e(json!({"type": "alloc", "seq": 2, "clamps": []})),
            "alloc: missing field 'replace'"
        );
        let many = vec![json!({}); MAX_FLOWS + 1];
        assert_eq!(
            e(json!({"type": "alloc", "seq": 2, "clamps": many, "replace": true})),
            "alloc: 4097 clamps exceed the limit of 4096"
        );
        let long = "x".repeat(MAX_STRING + 1);
        assert_eq!(
            e(json!({"type": long})),
            "message: type longer than 256 characters"
        );
    }

    #[test]
    fn sequence_numbers_strictly_increase() {
        let mut s = SeqCheck { last: 1 };
        s.check(2).unwrap();
        s.check(5).unwrap();
        assert_eq!(
            s.check(5).unwrap_err().msg,
            "sequence number 5 not above 5 (replay?)"
        );
        assert!(s.check(3).is_err());
        s.check(6).unwrap();
    }

    #[test]
    fn nonces_and_session() {
        let a = new_nonce();
        assert_eq!(a.len(), NONCE_HEX);
        assert_ne!(a, new_nonce());
        let ctx = session_context(&a, "00ff00ff00ff00ff00ff00ff00ff00ff").unwrap();
        assert_eq!(ctx.len(), 32);
        assert_eq!(&ctx[16..18], &[0, 255]);
    }

    #[test]
    fn written_floats_are_json_that_parses_back() {
        for x in [
            0.0,
            2500.0,
            1e16,
            1.5e-7,
            115_840_000.5,
            123456.789,
            f64::MAX,
            5e-324,
        ] {
            let mut text = String::new();
            write_float(&mut text, x);
            let v: Value = serde_json::from_str(&text).unwrap();
            assert_eq!(v.as_f64(), Some(x), "{text}");
            assert!(text.contains(['.', 'e']), "{text} would parse as an int");
        }
        let mut text = String::new();
        write_float(&mut text, f64::NAN);
        assert_eq!(text, "0.0");
    }
}
