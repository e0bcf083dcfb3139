//! A small JSON writer that appends straight to a byte buffer, for `roce decode --json`: no
//! tree per frame. Numbers above 32 bits (TIDs, GUIDs, service IDs, keys, addresses) are written
//! as `"0x…"` strings so that no consumer (jq, JavaScript) rounds them; the serde bridge
//! ([`Json::serde`]) applies the same rule and the schema's key names (`q_key`, `p_key`,
//! `r_key`) to the wire crate's derived `Serialize` impls.
//!
//! The same calls can instead record a [`Tape`] of [`Event`]s (set [`Json::tape`]): for a
//! consumer that builds its own objects (the Python package's dicts) and would otherwise read
//! the text back. The text of `roce decode --json` does not change with it.

use std::fmt::Write as _;
use std::io::Write as _;

const HEX: &[u8; 16] = b"0123456789abcdef";

/// A JSON text under construction.
#[derive(Debug, Default, Clone)]
pub struct Json {
    /// The text so far.
    pub buf: Vec<u8>,
    comma: bool,
    /// When set, every method does nothing (the summary-only output skips the JSON's cost).
    pub off: bool,
    /// When set (and not `off`), every method records its [`Event`] here instead of writing
    /// text: `buf` stays empty.
    pub tape: Option<Tape>,
    /// Room for an address's text ([`Json::ipv4`], [`Json::ipv6`]).
    scratch: Summary,
}

/// One call of the writer, as [`Json::tape`] records it. Keys are the decoder's own names
/// (`""` for an array element or the top level); strings are ranges of [`Tape::text`].
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Event {
    /// An object opens (member `key`).
    Begin(&'static str),
    /// The innermost open object or array closes.
    End,
    /// An array opens (member `key`).
    BeginArray(&'static str),
    /// An unsigned integer (the text's numbers other than floats).
    Uint(&'static str, u64),
    /// A boolean.
    Bool(&'static str, bool),
    /// A finite float with a fraction (a whole one is [`Event::Uint`] and a non-finite one
    /// [`Event::Null`], as the text reads back).
    Float(&'static str, f64),
    /// `null`.
    Null(&'static str),
    /// A string: `text[start..end]` (not escaped).
    Str(&'static str, usize, usize),
    /// A value as JSON text, `text[start..end]` (what a `Serialize` impl wrote, with the
    /// schema's conventions).
    Json(&'static str, usize, usize),
    /// An object as JSON text, `text[start..end]`, that stays open: the members up to the
    /// matching [`Event::End`] belong to it too.
    JsonOpen(&'static str, usize, usize),
}

impl Event {
    /// The member name the event starts (`""` for an array element or the top level); `None`
    /// for [`Event::End`].
    pub fn key(&self) -> Option<&'static str> {
        match *self {
            Event::End => None,
            Event::Begin(k)
            | Event::BeginArray(k)
            | Event::Uint(k, _)
            | Event::Bool(k, _)
            | Event::Float(k, _)
            | Event::Null(k)
            | Event::Str(k, ..)
            | Event::Json(k, ..)
            | Event::JsonOpen(k, ..) => Some(k),
        }
    }
}

/// The events of one JSON value and the text of its strings.
#[derive(Debug, Default, Clone)]
pub struct Tape {
    /// The calls, in order.
    pub events: Vec<Event>,
    /// The strings' text (UTF-8), which [`Event::Str`] and the JSON events point into.
    pub text: Vec<u8>,
}

impl Tape {
    /// Empty (the allocations kept).
    pub fn clear(&mut self) {
        self.events.clear();
        self.text.clear();
    }

    /// A string or JSON text of an event, as text.
    pub fn str(&self, start: usize, end: usize) -> &str {
        // Only `Json` writes the text, from `&str`s and ASCII digits: always UTF-8.
        std::str::from_utf8(&self.text[start..end]).unwrap_or("")
    }

    fn push_str(&mut self, k: &'static str, v: &str) {
        let start = self.text.len();
        self.text.extend_from_slice(v.as_bytes());
        self.events.push(Event::Str(k, start, self.text.len()));
    }

    /// Record a string that `f` appends to the text.
    fn push_with(&mut self, k: &'static str, f: impl FnOnce(&mut Vec<u8>)) {
        let start = self.text.len();
        f(&mut self.text);
        self.events.push(Event::Str(k, start, self.text.len()));
    }
}

/// Append the decimal digits of `v`.
#[inline]
pub fn push_u64(out: &mut Vec<u8>, mut v: u64) {
    let mut tmp = [0u8; 20];
    let mut i = tmp.len();
    loop {
        i -= 1;
        tmp[i] = b'0' + (v % 10) as u8;
        v /= 10;
        if v == 0 {
            break;
        }
    }
    out.extend_from_slice(&tmp[i..]);
}

/// Every byte's two hex digits.
const PAIRS: [[u8; 2]; 256] = {
    let mut t = [[0u8; 2]; 256];
    let mut i = 0;
    while i < 256 {
        t[i] = [HEX[i >> 4], HEX[i & 15]];
        i += 1;
    }
    t
};

/// Append `bytes` as lowercase hex.
pub fn push_hex(out: &mut Vec<u8>, bytes: &[u8]) {
    let start = out.len();
    out.resize(start + bytes.len() * 2, 0);
    for (d, &b) in out[start..].chunks_exact_mut(2).zip(bytes) {
        d.copy_from_slice(&PAIRS[usize::from(b)]);
    }
}

/// A summary line under construction; when `off` (JSON output), nothing is formatted.
#[derive(Debug, Default, Clone)]
pub struct Summary {
    /// The text so far.
    pub text: String,
    /// When set, every method does nothing.
    pub off: bool,
}

impl Summary {
    /// Empty.
    pub fn clear(&mut self) {
        self.text.clear();
    }

    /// Append text.
    #[inline]
    pub fn push_str(&mut self, t: &str) {
        if !self.off {
            self.text.push_str(t);
        }
    }

    /// Append a character.
    #[inline]
    pub fn push(&mut self, c: char) {
        if !self.off {
            self.text.push(c);
        }
    }

    /// Append formatted text (the arguments are formatted only when on).
    #[inline]
    pub fn fmt(&mut self, args: std::fmt::Arguments<'_>) {
        if !self.off {
            let _ = self.text.write_fmt(args);
        }
    }

    /// Append `v` as at least `digits` hex digits.
    #[inline]
    pub fn hex(&mut self, v: u64, digits: usize) {
        if !self.off {
            push_hex_fixed(&mut self.text, v, digits);
        }
    }

    /// Append an IPv4 address (dotted decimal, without the formatter).
    #[inline]
    pub fn ipv4(&mut self, a: [u8; 4]) {
        if !self.off {
            for (i, o) in a.iter().enumerate() {
                if i > 0 {
                    self.text.push('.');
                }
                push_dec(&mut self.text, u64::from(*o));
            }
        }
    }

    /// Append an IPv6 address as `Ipv6Addr`'s `Display` writes it (RFC 5952: the first
    /// longest run of two or more zero groups as `::`, IPv4-mapped as `::ffff:a.b.c.d`),
    /// without the formatter.
    pub fn ipv6(&mut self, a: [u8; 16]) {
        if self.off {
            return;
        }
        if a[..10] == [0; 10] && a[10..12] == [0xff, 0xff] {
            self.text.push_str("::ffff:");
            self.ipv4([a[12], a[13], a[14], a[15]]);
            return;
        }
        let g: [u16; 8] = core::array::from_fn(|i| u16::from_be_bytes([a[2 * i], a[2 * i + 1]]));
        let (mut best, mut best_len, mut cur, mut cur_len) = (0, 0, 0, 0);
        for (i, &x) in g.iter().enumerate() {
            if x == 0 {
                if cur_len == 0 {
                    cur = i;
                }
                cur_len += 1;
                if cur_len > best_len {
                    best = cur;
                    best_len = cur_len;
                }
            } else {
                cur_len = 0;
            }
        }
        let group = |t: &mut String, x: u16| push_hex_fixed(t, u64::from(x), 1);
        if best_len > 1 {
            for (i, &x) in g[..best].iter().enumerate() {
                if i > 0 {
                    self.text.push(':');
                }
                group(&mut self.text, x);
            }
            self.text.push_str("::");
            for (i, &x) in g[best + best_len..].iter().enumerate() {
                if i > 0 {
                    self.text.push(':');
                }
                group(&mut self.text, x);
            }
        } else {
            for (i, &x) in g.iter().enumerate() {
                if i > 0 {
                    self.text.push(':');
                }
                group(&mut self.text, x);
            }
        }
    }

    /// Append `v` in decimal.
    #[inline]
    pub fn dec(&mut self, v: u64) {
        if !self.off {
            push_dec(&mut self.text, v);
        }
    }
}

/// Append `s` JSON-escaped (without quotes).
fn push_escaped(out: &mut Vec<u8>, s: &str) {
    for &b in s.as_bytes() {
        match b {
            b'"' => out.extend_from_slice(b"\\\""),
            b'\\' => out.extend_from_slice(b"\\\\"),
            b'\n' => out.extend_from_slice(b"\\n"),
            b'\r' => out.extend_from_slice(b"\\r"),
            b'\t' => out.extend_from_slice(b"\\t"),
            0..=0x1f => {
                out.extend_from_slice(b"\\u00");
                out.push(HEX[usize::from(b >> 4)]);
                out.push(HEX[usize::from(b & 15)]);
            }
            _ => out.push(b),
        }
    }
}

/// Key names of the wire crate's structs renamed to the schema's convention.
fn rename(k: &str) -> &str {
    match k {
        "qkey" => "q_key",
        "pkey" => "p_key",
        "rkey" => "r_key",
        _ => k,
    }
}

impl Json {
    /// Empty.
    pub fn clear(&mut self) {
        self.buf.clear();
        self.comma = false;
        if let Some(t) = &mut self.tape {
            t.clear();
        }
    }

    /// The tape to record into, when recording.
    #[inline]
    fn tape(&mut self) -> Option<&mut Tape> {
        self.tape.as_mut()
    }

    /// Whether the writer is switched off.
    pub fn is_off(&self) -> bool {
        self.off
    }

    /// Start a member `k` (or an array element when `k` is empty).
    #[inline]
    fn key(&mut self, k: &str) {
        if self.comma {
            self.buf.push(b',');
        }
        if !k.is_empty() {
            self.buf.push(b'"');
            self.buf.extend_from_slice(k.as_bytes());
            self.buf.extend_from_slice(b"\":");
        }
        self.comma = true;
    }

    /// Open an object (member `k`, or an element/top level when `k` is empty).
    pub fn begin(&mut self, k: &'static str) {
        if self.off {
            return;
        }
        if let Some(t) = self.tape() {
            return t.events.push(Event::Begin(k));
        }
        self.key(k);
        self.buf.push(b'{');
        self.comma = false;
    }

    /// Close an object.
    pub fn end(&mut self) {
        if self.off {
            return;
        }
        if let Some(t) = self.tape() {
            return t.events.push(Event::End);
        }
        self.buf.push(b'}');
        self.comma = true;
    }

    /// Open an array.
    pub fn begin_array(&mut self, k: &'static str) {
        if self.off {
            return;
        }
        if let Some(t) = self.tape() {
            return t.events.push(Event::BeginArray(k));
        }
        self.key(k);
        self.buf.push(b'[');
        self.comma = false;
    }

    /// Close an array.
    pub fn end_array(&mut self) {
        if self.off {
            return;
        }
        if let Some(t) = self.tape() {
            return t.events.push(Event::End);
        }
        self.buf.push(b']');
        self.comma = true;
    }

    /// An array of displayed values (addresses and the like).
    pub fn display_array<T: std::fmt::Display>(&mut self, k: &'static str, items: impl IntoIterator<Item = T>) {
        if self.off {
            return;
        }
        self.begin_array(k);
        for v in items {
            self.display("", v);
        }
        self.end_array();
    }

    /// A number that fits 32 bits (always exact in JSON).
    #[inline]
    pub fn num(&mut self, k: &'static str, v: u32) {
        self.count(k, u64::from(v));
    }

    /// A byte count or frame number (exact in JSON below 2^53).
    #[inline]
    pub fn count(&mut self, k: &'static str, v: u64) {
        if self.off {
            return;
        }
        if let Some(t) = self.tape() {
            return t.events.push(Event::Uint(k, v));
        }
        self.key(k);
        push_u64(&mut self.buf, v);
    }

    /// A 64-bit identifier as a `"0x…"` string of 16 hex digits.
    pub fn id64(&mut self, k: &'static str, v: u64) {
        if self.off {
            return;
        }
        if let Some(t) = self.tape() {
            return t.push_with(k, |b| {
                b.extend_from_slice(b"0x");
                push_hex(b, &v.to_be_bytes());
            });
        }
        self.key(k);
        self.buf.extend_from_slice(b"\"0x");
        push_hex(&mut self.buf, &v.to_be_bytes());
        self.buf.push(b'"');
    }

    /// A boolean.
    pub fn bool(&mut self, k: &'static str, v: bool) {
        if self.off {
            return;
        }
        if let Some(t) = self.tape() {
            return t.events.push(Event::Bool(k, v));
        }
        self.key(k);
        self.buf.extend_from_slice(if v { b"true" } else { b"false" });
    }

    /// A number with a fraction (seconds).
    pub fn float(&mut self, k: &'static str, v: f64) {
        if self.off {
            return;
        }
        if let Some(t) = self.tape() {
            // As the text reads back: `{v}` writes a whole number without a fraction.
            return t.events.push(match v {
                _ if !v.is_finite() => Event::Null(k),
                _ if v.fract() == 0.0 && (0.0..1.8e19).contains(&v) => Event::Uint(k, v as u64),
                _ => Event::Float(k, v),
            });
        }
        self.key(k);
        if v.is_finite() {
            let _ = write!(self.buf, "{v}");
        } else {
            self.buf.extend_from_slice(b"null");
        }
    }

    /// A string.
    pub fn str(&mut self, k: &'static str, v: &str) {
        if self.off {
            return;
        }
        if let Some(t) = self.tape() {
            return t.push_str(k, v);
        }
        self.key(k);
        self.buf.push(b'"');
        push_escaped(&mut self.buf, v);
        self.buf.push(b'"');
    }

    /// An IPv4 address, as `Ipv4Addr`'s `Display` writes it (by [`Summary::ipv4`]: the
    /// formatter is several times slower, and every RoCEv2 frame has two).
    pub fn ipv4(&mut self, k: &'static str, a: [u8; 4]) {
        self.scratched(k, |s| s.ipv4(a));
    }

    /// An IPv6 address, as `Ipv6Addr`'s `Display` writes it (by [`Summary::ipv6`]).
    pub fn ipv6(&mut self, k: &'static str, a: [u8; 16]) {
        self.scratched(k, |s| s.ipv6(a));
    }

    /// A timestamp as epoch seconds and nine digits of nanoseconds (tshark's
    /// `frame.time_epoch`).
    pub fn epoch(&mut self, k: &'static str, d: std::time::Duration) {
        self.scratched(k, |s| {
            s.dec(d.as_secs());
            let ns = d.subsec_nanos();
            s.push('.');
            for p in [100_000_000, 10_000_000, 1_000_000, 100_000, 10_000, 1_000, 100, 10, 1] {
                s.push(char::from(b'0' + (ns / p % 10) as u8));
            }
        });
    }

    /// The string `f` writes into the scratch summary.
    fn scratched(&mut self, k: &'static str, f: impl FnOnce(&mut Summary)) {
        if self.off {
            return;
        }
        let mut s = std::mem::take(&mut self.scratch);
        s.clear();
        s.off = false;
        f(&mut s);
        self.str(k, &s.text);
        self.scratch = s;
    }

    /// A string from `Display` (addresses, names).
    pub fn display(&mut self, k: &'static str, v: impl std::fmt::Display) {
        if self.off {
            return;
        }
        if let Some(t) = self.tape() {
            return t.push_with(k, |b| {
                let _ = write!(b, "{v}");
            });
        }
        self.key(k);
        self.buf.push(b'"');
        let start = self.buf.len();
        let _ = write!(self.buf, "{v}");
        if self.buf[start..].iter().any(|&b| b == b'"' || b == b'\\' || b < 0x20) {
            let s = String::from_utf8_lossy(&self.buf[start..]).into_owned();
            self.buf.truncate(start);
            push_escaped(&mut self.buf, &s);
        }
        self.buf.push(b'"');
    }

    /// Bytes as one lowercase hex string.
    pub fn hex(&mut self, k: &'static str, v: &[u8]) {
        if self.off {
            return;
        }
        if let Some(t) = self.tape() {
            return t.push_with(k, |b| push_hex(b, v));
        }
        self.key(k);
        self.buf.push(b'"');
        push_hex(&mut self.buf, v);
        self.buf.push(b'"');
    }

    /// A MAC address as `aa:bb:cc:dd:ee:ff`.
    pub fn mac(&mut self, k: &'static str, m: &[u8]) {
        if self.off {
            return;
        }
        if let Some(t) = self.tape() {
            return t.push_with(k, |b| push_mac(b, m));
        }
        self.key(k);
        self.buf.push(b'"');
        push_mac(&mut self.buf, m);
        self.buf.push(b'"');
    }

    /// `null`.
    pub fn null(&mut self, k: &'static str) {
        if self.off {
            return;
        }
        if let Some(t) = self.tape() {
            return t.events.push(Event::Null(k));
        }
        self.key(k);
        self.buf.extend_from_slice(b"null");
    }

    /// A value from a `Serialize` impl, with the schema's conventions (see the module docs).
    pub fn serde<T: serde::Serialize + ?Sized>(&mut self, k: &'static str, v: &T) {
        if self.off {
            return;
        }
        if let Some(t) = self.tape() {
            let start = t.text.len();
            serde_text(&mut t.text, v);
            return t.events.push(Event::Json(k, start, t.text.len()));
        }
        self.key(k);
        serde_text(&mut self.buf, v);
    }

    /// An object from a `Serialize` impl (as [`Json::serde`]) that stays open: the members
    /// written next, up to [`Json::end`], go into it too.
    pub fn serde_open<T: serde::Serialize + ?Sized>(&mut self, k: &'static str, v: &T) {
        if self.off {
            return;
        }
        if let Some(t) = self.tape() {
            let start = t.text.len();
            serde_text(&mut t.text, v);
            return t.events.push(Event::JsonOpen(k, start, t.text.len()));
        }
        self.serde(k, v);
        if self.buf.last() == Some(&b'}') {
            self.buf.pop();
        }
    }

    /// An enum variant from a `Serialize` impl, which serde writes as `{"Variant":{…}}`, as
    /// the variant's own object `{…}` (as [`Json::serde`] otherwise).
    pub fn serde_variant<T: serde::Serialize + ?Sized>(&mut self, k: &'static str, v: &T) {
        if self.off {
            return;
        }
        if let Some(t) = self.tape() {
            let start = t.text.len();
            serde_text(&mut t.text, v);
            let end = unwrap_variant(&mut t.text, start);
            return t.events.push(Event::Json(k, start, end));
        }
        self.key(k);
        let start = self.buf.len();
        serde_text(&mut self.buf, v);
        unwrap_variant(&mut self.buf, start);
    }
}

/// `v` as JSON text with the schema's conventions (`null` when it cannot be serialized).
fn serde_text<T: serde::Serialize + ?Sized>(out: &mut Vec<u8>, v: &T) {
    let mut ser = serde_json::Serializer::with_formatter(&mut *out, Conventions::default());
    if v.serialize(&mut ser).is_err() {
        out.extend_from_slice(b"null");
    }
}

/// `out[start..]` is `{"Name":{…}}`: drop `{"Name":` and the last `}` (anything else stays as
/// it is). Returns the text's new end.
fn unwrap_variant(out: &mut Vec<u8>, start: usize) -> usize {
    let open = out[start..].iter().position(|&b| b == b'{').map(|p| start + p);
    let colon = open.and_then(|o| out[o..].iter().position(|&b| b == b':').map(|p| o + p));
    if let (Some(open), Some(colon)) = (open, colon) {
        if out.ends_with(b"}}") {
            out.pop();
            out.drain(open..=colon);
        }
    }
    out.len()
}

/// Append a MAC address as `aa:bb:cc:dd:ee:ff`.
fn push_mac(out: &mut Vec<u8>, m: &[u8]) {
    for (i, &b) in m.iter().enumerate() {
        if i > 0 {
            out.push(b':');
        }
        out.extend_from_slice(&PAIRS[usize::from(b)]);
    }
}

/// serde_json formatting with the schema's rules: 64-bit integers as `"0x…"` strings (all
/// of the wire crate's u64 fields are identifiers or keys), keys renamed by [`rename`].
#[derive(Default)]
struct Conventions {
    in_key: bool,
}

impl serde_json::ser::Formatter for Conventions {
    fn write_u64<W: ?Sized + std::io::Write>(&mut self, w: &mut W, v: u64) -> std::io::Result<()> {
        if self.in_key {
            return write!(w, "{v}");
        }
        write!(w, "\"0x{v:016x}\"")
    }

    fn write_i64<W: ?Sized + std::io::Write>(&mut self, w: &mut W, v: i64) -> std::io::Result<()> {
        if self.in_key {
            return write!(w, "{v}");
        }
        write!(w, "\"0x{:016x}\"", v as u64)
    }

    fn begin_object_key<W: ?Sized + std::io::Write>(&mut self, w: &mut W, first: bool) -> std::io::Result<()> {
        self.in_key = true;
        if first {
            Ok(())
        } else {
            w.write_all(b",")
        }
    }

    fn end_object_key<W: ?Sized + std::io::Write>(&mut self, _w: &mut W) -> std::io::Result<()> {
        self.in_key = false;
        Ok(())
    }

    fn write_string_fragment<W: ?Sized + std::io::Write>(&mut self, w: &mut W, fragment: &str) -> std::io::Result<()> {
        if self.in_key {
            w.write_all(rename(fragment).as_bytes())
        } else {
            w.write_all(fragment.as_bytes())
        }
    }
}

/// Append `v` as `digits` lowercase hex digits (zero-padded; more if `v` needs them).
#[inline]
pub fn push_hex_fixed(s: &mut String, v: u64, digits: usize) {
    let need = ((64 - v.leading_zeros() as usize).div_ceil(4)).max(digits).max(1);
    for i in (0..need).rev() {
        s.push(char::from(HEX[((v >> (i * 4)) & 15) as usize]));
    }
}

/// Append `v` in decimal.
#[inline]
pub fn push_dec(s: &mut String, v: u64) {
    let mut b = [0u8; 20];
    let mut i = b.len();
    let mut v = v;
    loop {
        i -= 1;
        b[i] = b'0' + (v % 10) as u8;
        v /= 10;
        if v == 0 {
            break;
        }
    }
    for &d in &b[i..] {
        s.push(char::from(d));
    }
}

/// Format into a summary.
#[inline]
pub fn push_fmt(s: &mut Summary, args: std::fmt::Arguments<'_>) {
    s.fmt(args);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn objects_arrays_and_ids_are_valid_json() {
        let mut j = Json::default();
        j.begin("");
        j.num("a", 7);
        j.id64("tid", u64::MAX);
        j.begin_array("xs");
        j.num("", 1);
        j.begin("");
        j.str("s", "q\"\n");
        j.end();
        j.end_array();
        j.hex("h", &[0xde, 0xad]);
        j.end();
        let v: serde_json::Value = serde_json::from_slice(&j.buf).unwrap();
        assert_eq!(v["tid"], "0xffffffffffffffff");
        assert_eq!(v["xs"][1]["s"], "q\"\n");
        assert_eq!(v["h"], "dead");
    }

    #[test]
    fn ipv6_text_is_displays() {
        let mut rng = 0x9e37_79b9_7f4a_7c15u64;
        let mut next = || {
            rng ^= rng << 13;
            rng ^= rng >> 7;
            rng ^= rng << 17;
            rng
        };
        let mut cases: Vec<[u8; 16]> = vec![
            [0; 16],
            std::net::Ipv6Addr::LOCALHOST.octets(),
            "::ffff:1.2.3.4".parse::<std::net::Ipv6Addr>().unwrap().octets(),
            "::1.2.3.4".parse::<std::net::Ipv6Addr>().unwrap().octets(),
            "fe80::ff:fe00:1".parse::<std::net::Ipv6Addr>().unwrap().octets(),
            "1:0:0:2:0:0:0:3".parse::<std::net::Ipv6Addr>().unwrap().octets(),
            "1:0:2:0:3:0:4:0".parse::<std::net::Ipv6Addr>().unwrap().octets(),
        ];
        for _ in 0..20_000 {
            // Random groups, many of them zero.
            let mut a = [0u8; 16];
            for i in 0..8 {
                let r = next();
                if r % 3 != 0 {
                    a[2 * i..2 * i + 2].copy_from_slice(&((r >> 8) as u16 >> (r % 13)).to_be_bytes());
                }
            }
            cases.push(a);
        }
        for a in cases {
            let mut s = Summary::default();
            s.ipv6(a);
            assert_eq!(s.text, std::net::Ipv6Addr::from(a).to_string());
        }
    }

    #[test]
    fn addresses_and_epochs_are_displays() {
        let mut j = Json::default();
        j.begin("");
        j.ipv4("a", [198, 18, 0, 255]);
        j.ipv6("b", [0xfd, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1]);
        for (i, d) in [0, 1, 999_999_999, 1_764_460_800_000_000_001, 12_345_678_900].into_iter().enumerate() {
            let d = std::time::Duration::from_nanos(d);
            j.epoch(["c", "d", "e", "f", "g"][i], d);
        }
        j.end();
        let v: serde_json::Value = serde_json::from_slice(&j.buf).unwrap();
        assert_eq!(v["a"], "198.18.0.255");
        assert_eq!(v["b"], "fd00::1");
        for (k, d) in [("c", 0), ("d", 1), ("e", 999_999_999), ("f", 1_764_460_800_000_000_001), ("g", 12_345_678_900)]
        {
            let d = std::time::Duration::from_nanos(d);
            assert_eq!(v[k], format!("{}.{:09}", d.as_secs(), d.subsec_nanos()), "{k}");
        }
    }

    #[test]
    fn serde_values_follow_the_conventions() {
        #[derive(serde::Serialize)]
        struct S {
            qkey: u32,
            guid: u64,
        }
        let mut j = Json::default();
        j.begin("");
        j.serde("s", &S { qkey: 5, guid: 1 });
        j.end();
        let v: serde_json::Value = serde_json::from_slice(&j.buf).unwrap();
        assert_eq!(v["s"]["q_key"], 5);
        assert_eq!(v["s"]["guid"], "0x0000000000000001");
    }
}
