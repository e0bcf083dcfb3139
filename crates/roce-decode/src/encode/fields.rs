//! Reading one member of a structured JSON object (`mad`, `mcmember`, `cm.fields`, …) into a
//! wire-crate Repr field, under the conventions of `roce decode --json` (spec/decode.md):
//! numbers of up to 32 bits as JSON numbers, 64-bit ones as `"0x…"` strings (either form is
//! accepted for any width), byte strings as hex, GIDs and addresses in their text form.

use std::net::IpAddr;

use roce_wire::cm::{MsgResponse, RejReason, SidrStatus};
use roce_wire::mad::{MadStatus, Method, MgmtClass};
use roce_wire::mcmember::{JoinState, Selector};
use roce_wire::rmpp::{RmppFlags, RmppType};
use roce_wire::Gid;
use serde_json::{Map, Value};

use super::EncodeError;

/// A Repr field type that a JSON value reads into.
pub(crate) trait JsonField: Sized + PartialEq {
    /// Read `v`; `path` names the member in errors.
    fn from_json(v: &Value, path: &str) -> Result<Self, EncodeError>;
}

/// A non-negative integer: a JSON number or a `"0x…"` hex string.
pub(crate) fn unsigned(v: &Value, path: &str) -> Result<u64, EncodeError> {
    match v {
        Value::Number(n) => n.as_u64().ok_or_else(|| EncodeError(format!("{path}: {n} is not a non-negative integer"))),
        Value::String(s) => match s.strip_prefix("0x").or_else(|| s.strip_prefix("0X")) {
            Some(h) if !h.is_empty() => {
                u64::from_str_radix(h, 16).map_err(|_| EncodeError(format!("{path}: {s:?} is not a hex number")))
            }
            _ => Err(EncodeError(format!("{path}: expected a number or a \"0x…\" string, found {s:?}"))),
        },
        other => Err(EncodeError(format!("{path}: expected a number, found {other}"))),
    }
}

macro_rules! integer_field {
    ($($t:ty),*) => {$(
        impl JsonField for $t {
            fn from_json(v: &Value, path: &str) -> Result<Self, EncodeError> {
                let n = unsigned(v, path)?;
                <$t>::try_from(n).map_err(|_| {
                    EncodeError(format!("{path}: {n} is out of range (at most {})", <$t>::MAX))
                })
            }
        }
    )*};
}
integer_field!(u8, u16, u32, u64);

/// Types the wire crate keeps as a number (enums with an `Unknown(code)` variant, bit sets).
macro_rules! coded_field {
    ($($t:ty: $int:ty => $from:expr),* $(,)?) => {$(
        impl JsonField for $t {
            fn from_json(v: &Value, path: &str) -> Result<Self, EncodeError> {
                let f: fn($int) -> $t = $from;
                Ok(f(<$int>::from_json(v, path)?))
            }
        }
    )*};
}
coded_field!(
    MgmtClass: u8 => MgmtClass::from,
    Method: u8 => Method::from,
    MadStatus: u16 => MadStatus,
    RmppType: u8 => RmppType::from,
    RmppFlags: u8 => RmppFlags,
    Selector: u8 => Selector::from,
    JoinState: u8 => JoinState,
    MsgResponse: u8 => MsgResponse::from,
    RejReason: u16 => RejReason::from,
    SidrStatus: u8 => SidrStatus::from,
);

impl JsonField for bool {
    fn from_json(v: &Value, path: &str) -> Result<Self, EncodeError> {
        v.as_bool().ok_or_else(|| EncodeError(format!("{path}: expected true or false, found {v}")))
    }
}

impl JsonField for Gid {
    /// IPv6 text (`fe80::1`, `::ffff:10.0.0.1`); IPv4 text is the IPv4-mapped GID RoCEv2 uses.
    fn from_json(v: &Value, path: &str) -> Result<Self, EncodeError> {
        let s = v.as_str().ok_or_else(|| EncodeError(format!("{path}: expected a GID string, found {v}")))?;
        s.parse::<IpAddr>()
            .map(Gid::from_ip)
            .map_err(|_| EncodeError(format!("{path}: {s:?} is not a GID (IPv6 text, or IPv4 for a mapped one)")))
    }
}

impl JsonField for IpAddr {
    fn from_json(v: &Value, path: &str) -> Result<Self, EncodeError> {
        let s = v.as_str().ok_or_else(|| EncodeError(format!("{path}: expected an address string, found {v}")))?;
        s.parse().map_err(|_| EncodeError(format!("{path}: {s:?} is not an IP address")))
    }
}

impl<const N: usize> JsonField for [u8; N] {
    /// Exactly `N` bytes of lowercase or uppercase hex.
    fn from_json(v: &Value, path: &str) -> Result<Self, EncodeError> {
        let s = v.as_str().ok_or_else(|| EncodeError(format!("{path}: expected a hex string, found {v}")))?;
        let bytes = hex_bytes(s, path)?;
        let n = bytes.len();
        bytes.try_into().map_err(|_| EncodeError(format!("{path}: {n} bytes, the field holds {N}")))
    }
}

/// Arrays of numbers (ServiceRecord's ServiceData16/32/64).
macro_rules! number_array_field {
    ($($t:ty),*) => {$(
        impl<const N: usize> JsonField for [$t; N] {
            fn from_json(v: &Value, path: &str) -> Result<Self, EncodeError> {
                let a = v.as_array().ok_or_else(|| EncodeError(format!("{path}: expected an array of {N} numbers")))?;
                if a.len() != N {
                    return Err(EncodeError(format!("{path}: {} elements, the field holds {N}", a.len())));
                }
                let mut out = [0; N];
                for (i, (o, x)) in out.iter_mut().zip(a).enumerate() {
                    *o = <$t>::from_json(x, &format!("{path}[{i}]"))?;
                }
                Ok(out)
            }
        }
    )*};
}
number_array_field!(u16, u32, u64);

/// Hex digits to bytes.
pub(crate) fn hex_bytes(s: &str, path: &str) -> Result<Vec<u8>, EncodeError> {
    if !s.len().is_multiple_of(2) || !s.bytes().all(|b| b.is_ascii_hexdigit()) {
        return Err(EncodeError(format!("{path}: not an even number of hex digits")));
    }
    Ok((0..s.len()).step_by(2).map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap_or(0)).collect())
}

/// Applies the members of one JSON object to a Repr's fields, keeping track of which members
/// it knows (any other is an error: a misspelt field is never silently ignored) and of the
/// fields whose value differs from the one the base (the `payload` bytes) held.
pub(crate) struct Overlay<'a> {
    obj: &'a Map<String, Value>,
    path: String,
    known: Vec<&'static str>,
    /// Whether the base came from `payload` (only then is a difference an override).
    from_payload: bool,
    /// The paths of fields whose JSON value differs from the base.
    pub(crate) differs: Vec<String>,
}

impl<'a> Overlay<'a> {
    /// The object at `path` (dotted, e.g. `cm.fields`) of `obj`.
    pub(crate) fn new(obj: &'a Map<String, Value>, path: &str, from_payload: bool) -> Self {
        Overlay { obj, path: path.to_string(), known: Vec::new(), from_payload, differs: Vec::new() }
    }

    /// The dotted path of member `key`.
    pub(crate) fn path_of(&self, key: &str) -> String {
        format!("{}.{key}", self.path)
    }

    /// The member `key`, if present and not null (marked as known).
    pub(crate) fn get(&mut self, key: &'static str) -> Option<&'a Value> {
        self.known.push(key);
        self.obj.get(key).filter(|v| !v.is_null())
    }

    /// A member that is derived from others and not applied (a name beside a number).
    pub(crate) fn derived(&mut self, keys: &[&'static str]) {
        self.known.extend_from_slice(keys);
    }

    /// Read member `key` into `slot` when present.
    pub(crate) fn set<T: JsonField>(&mut self, key: &'static str, slot: &mut T) -> Result<(), EncodeError> {
        let Some(v) = self.get(key) else { return Ok(()) };
        let new = T::from_json(v, &self.path_of(key))?;
        if self.from_payload && new != *slot {
            self.differs.push(self.path_of(key));
        }
        *slot = new;
        Ok(())
    }

    /// The members of a nested object, when present.
    pub(crate) fn object(&mut self, key: &'static str) -> Result<Option<&'a Map<String, Value>>, EncodeError> {
        match self.get(key) {
            None => Ok(None),
            Some(Value::Object(o)) => Ok(Some(o)),
            Some(other) => Err(EncodeError(format!("{}: expected an object, found {other}", self.path_of(key)))),
        }
    }

    /// Fail on members that name no field; return the fields that differ from the base.
    pub(crate) fn finish(self) -> Result<Vec<String>, EncodeError> {
        if let Some(k) = self.obj.keys().find(|k| !self.known.contains(&k.as_str())) {
            return Err(EncodeError(format!("{}.{k}: no such field", self.path)));
        }
        Ok(self.differs)
    }
}

/// Set the fields named in the list from the object (`name` or `name as "json_key"`).
macro_rules! overlay {
    (@key $field:ident $key:literal) => { $key };
    (@key $field:ident) => { stringify!($field) };
    ($o:expr, $r:expr; $($field:ident $(as $key:literal)?),* $(,)?) => {
        $( $o.set(overlay!(@key $field $($key)?), &mut $r.$field)?; )*
    };
}
pub(crate) use overlay;
