//! The decoder's [`Tape`] straight into Python objects: the dicts of `roce.decode` and
//! `roce.read`, without writing JSON text and reading it back.
//!
//! The values are the text's (the decoder's tests check the tape against its text), so the
//! dicts are exactly what `json.loads` of a `roce decode --json` line gives. Making them is
//! most of the cost, so three caches spare CPython work:
//! - key names: the decoder's names are `&'static str`s, so a name's object is found by the
//!   address of its text (interned, made once);
//! - shapes: frames of one capture (or one script) come in a few shapes (the same members in
//!   the same order: an RC SEND over IPv4, a UD SEND over IPv6, an SA MCMemberRecord Set …).
//!   The first frame of a shape is built member by member and its dicts are kept as the
//!   shape's template; a later frame of that shape copies the template's dicts (`dict.copy()`:
//!   one allocation and a copy each, no insert, no resize) and sets only the members whose
//!   value differs from the template's (the addresses, flags and most header fields of a
//!   flow repeat; the PSN, payload and ICRC do not). Members written as JSON text by the
//!   decoder's serde bridge (a MAD's records) are read into the same items first, so they
//!   take part too;
//! - values by position: the string or int made for the n-th item is kept and given again
//!   while the next frame's n-th item has the same value.
//!
//! Strings and ints are immutable, so a shared object is indistinguishable from a new one
//! except by `is`; every dict handed out is new.

use pyo3::ffi;
use pyo3::prelude::*;
use pyo3::types::{PyBool, PyDict, PyFloat, PyList, PyString};
use roce_decode::json_out::{Event, Tape};
use std::cell::RefCell;

use crate::convert::{self, Fnv};

/// Key slots (direct-mapped by the name's address).
const KEY_SLOTS: usize = 512;
/// Names kept in the second level (the decoder has a few hundred).
const MAX_KEYS: usize = 4096;
/// Items whose value is kept for the next tape.
const VALUE_SLOTS: usize = 1024;
/// A longer string is made each time (kept, it would hold memory for little).
const MAX_KEPT_STR: usize = 4096;
/// Shapes kept as templates (a capture has a few dozen).
const MAX_SHAPES: usize = 512;
/// A larger object is built member by member each time.
const MAX_SHAPE_ITEMS: usize = 2048;
/// Nesting of the serde bridge's JSON text read into items (its records are shallow).
const MAX_DEPTH: usize = 64;

/// A kept value: what it was made from, and the object.
enum Kept {
    Str(Vec<u8>, Py<PyAny>),
    Int(u64, Py<PyAny>),
}

/// A member name: the decoder's own, or one in a JSON text of the tape (`text[a..b]`).
#[derive(Clone, Copy)]
enum Name {
    Static(&'static str),
    Text(usize, usize),
}

/// One value of the tape, with the serde bridge's JSON text read into values too.
#[derive(Clone, Copy)]
enum Val {
    /// An object opens.
    Object,
    /// An array opens.
    Array,
    /// The innermost object or array closes.
    Close,
    Uint(u64),
    Bool(bool),
    Float(f64),
    Null,
    /// A string of the decoder, `text[a..b]` as it is.
    Str(usize, usize),
    /// A JSON string token's contents, `text[a..b]`, with escapes when the flag says so.
    JsonStr(usize, usize, bool),
    /// A JSON number token, `text[a..b]`.
    Num(usize, usize),
}

/// A member (or array element, or the top-level value) and its value: a [`Name`] and a
/// [`Val`] in plain words (the walks read a few hundred a frame; enums copied through the
/// stack cost more than their use).
#[derive(Clone, Copy)]
struct Item {
    /// The decoder's name; a name of the text is `text[ka..kb]` (`kind` says which).
    key: &'static str,
    ka: usize,
    kb: usize,
    /// The value's kind (`K_*`), plus `TEXT_NAME` for a name of the text.
    kind: usize,
    x: u64,
    y: u64,
}

const K_OBJECT: usize = 0;
const K_ARRAY: usize = 1;
const K_CLOSE: usize = 2;
const K_UINT: usize = 3;
const K_BOOL: usize = 4;
const K_FLOAT: usize = 5;
const K_NULL: usize = 6;
const K_STR: usize = 7;
const K_JSON_STR: usize = 8;
const K_JSON_STR_ESCAPED: usize = 9;
const K_NUM: usize = 10;
const TEXT_NAME: usize = 16;

impl Item {
    #[inline(always)]
    fn new(name: Name, val: Val) -> Item {
        let (key, ka, kb, text) = match name {
            Name::Static(k) => (k, 0, 0, 0),
            Name::Text(a, b) => ("", a, b, TEXT_NAME),
        };
        let (kind, x, y) = match val {
            Val::Object => (K_OBJECT, 0, 0),
            Val::Array => (K_ARRAY, 0, 0),
            Val::Close => (K_CLOSE, 0, 0),
            Val::Uint(u) => (K_UINT, u, 0),
            Val::Bool(b) => (K_BOOL, u64::from(b), 0),
            Val::Float(f) => (K_FLOAT, f.to_bits(), 0),
            Val::Null => (K_NULL, 0, 0),
            Val::Str(a, b) => (K_STR, a as u64, b as u64),
            Val::JsonStr(a, b, false) => (K_JSON_STR, a as u64, b as u64),
            Val::JsonStr(a, b, true) => (K_JSON_STR_ESCAPED, a as u64, b as u64),
            Val::Num(a, b) => (K_NUM, a as u64, b as u64),
        };
        Item { key, ka, kb, kind: kind | text, x, y }
    }

    #[inline(always)]
    fn name(&self) -> Name {
        if self.kind & TEXT_NAME != 0 {
            Name::Text(self.ka, self.kb)
        } else {
            Name::Static(self.key)
        }
    }

    #[inline(always)]
    fn val(&self) -> Val {
        let (x, y) = (self.x, self.y as usize);
        match self.kind & !TEXT_NAME {
            K_OBJECT => Val::Object,
            K_ARRAY => Val::Array,
            K_CLOSE => Val::Close,
            K_UINT => Val::Uint(x),
            K_BOOL => Val::Bool(x != 0),
            K_FLOAT => Val::Float(f64::from_bits(x)),
            K_STR => Val::Str(x as usize, y),
            K_JSON_STR => Val::JsonStr(x as usize, y, false),
            K_JSON_STR_ESCAPED => Val::JsonStr(x as usize, y, true),
            K_NUM => Val::Num(x as usize, y),
            _ => Val::Null,
        }
    }
}

/// What a shape's template holds for an item: for a value, what the template's dict has
/// (an equal value is not set again).
enum Held {
    /// An object: the index of its template dict.
    Object(usize),
    Close,
    Uint(u64),
    Bool(bool),
    Float(u64),
    Null,
    /// A string's (or JSON number's) text.
    Text(Box<[u8]>),
    /// Always set (a long string).
    Never,
}

impl Held {
    fn of(v: Val, text: &[u8]) -> Held {
        match v {
            Val::Object | Val::Array => Held::Never,
            Val::Close => Held::Close,
            Val::Uint(u) => Held::Uint(u),
            Val::Bool(b) => Held::Bool(b),
            Val::Float(x) => Held::Float(x.to_bits()),
            Val::Null => Held::Null,
            Val::Str(a, b) | Val::JsonStr(a, b, _) | Val::Num(a, b) if b - a <= MAX_KEPT_STR => {
                Held::Text(text[a..b].into())
            }
            Val::Str(..) | Val::JsonStr(..) | Val::Num(..) => Held::Never,
        }
    }

    /// The template's value is `v`'s (same type, same value).
    #[inline]
    fn same(&self, v: Val, text: &[u8]) -> bool {
        match (self, v) {
            (Held::Uint(h), Val::Uint(u)) => *h == u,
            (Held::Bool(h), Val::Bool(b)) => *h == b,
            (Held::Float(h), Val::Float(x)) => *h == x.to_bits(),
            (Held::Null, Val::Null) => true,
            // The kind of a string is the shape's (see `sig_kind`): equal bytes, equal value.
            (Held::Text(h), Val::Str(a, b) | Val::JsonStr(a, b, _) | Val::Num(a, b)) => **h == text[a..b],
            _ => false,
        }
    }
}

/// An item's part of a shape: its kind (object, array, close, number, string, or other
/// scalar) and its name.
#[derive(PartialEq, Eq)]
struct Sig {
    kind: u8,
    /// A static name's address and length, or (0, length) for a name of the text.
    ptr: usize,
    len: usize,
}

fn sig_kind(it: &Item) -> u8 {
    match it.kind & !TEXT_NAME {
        K_OBJECT => 0,
        K_ARRAY => 1,
        K_CLOSE => 2,
        // A string and a number of the same text must not share a template's value.
        K_STR => 3,
        K_JSON_STR | K_JSON_STR_ESCAPED => 4,
        K_NUM => 5,
        _ => 6,
    }
}

/// The dicts of the first frame of a shape, and how each item of a frame of that shape goes
/// into their copies.
struct Shape {
    /// The bytes of the names of the text, in order (the steps' sigs hold only their lengths).
    names: Vec<u8>,
    dicts: Vec<Py<PyDict>>,
    steps: Vec<Step>,
}

struct Step {
    sig: Sig,
    /// The dict the item goes in (`usize::MAX`: the top level).
    parent: usize,
    key: Option<Py<PyString>>,
    held: Held,
}

/// The caches of one thread's builds.
#[derive(Default)]
pub struct Builder {
    values: Values,
    items: Items,
    /// Shape hash ▶ its template (None: a shape that has none).
    shapes: std::collections::HashMap<u64, Option<Shape>, std::hash::BuildHasherDefault<Fnv>>,
}

/// The key and value caches.
#[derive(Default)]
struct Values {
    keys: Vec<Option<(usize, usize, Py<PyString>)>>,
    more_keys: std::collections::HashMap<(usize, usize), Py<PyString>, std::hash::BuildHasherDefault<Fnv>>,
    kept: Vec<Option<Kept>>,
}

thread_local! {
    static BUILDER: RefCell<Builder> = RefCell::new(Builder::default());
}

/// The value `tape` describes, as Python objects; members of the top-level object named in
/// `skip` are left out.
pub fn to_py<'py>(py: Python<'py>, tape: &Tape, skip: &[&str]) -> PyResult<Bound<'py, PyAny>> {
    value_at(py, tape, 0..tape.events.len(), skip)
}

/// The value of the events `range` of `tape` (one whole value), as [`to_py`].
pub fn value_at<'py>(
    py: Python<'py>,
    tape: &Tape,
    range: std::ops::Range<usize>,
    skip: &[&str],
) -> PyResult<Bound<'py, PyAny>> {
    BUILDER.with(|b| match b.try_borrow_mut() {
        Ok(mut b) => b.build(py, tape, range, skip),
        // Re-entered (a finalizer run by a collection during a build decoded a frame): a
        // builder without caches.
        Err(_) => Builder::default().build(py, tape, range, skip),
    })
}

/// Where the value that event `start` opens ends (the index after its [`Event::End`]); the
/// index after `start` for a value that opens nothing.
pub fn value_end(events: &[Event], start: usize) -> usize {
    let mut depth = 0usize;
    for (i, e) in events.iter().enumerate().skip(start) {
        match e {
            Event::Begin(_) | Event::BeginArray(_) | Event::JsonOpen(..) => depth += 1,
            Event::End => depth = depth.saturating_sub(1),
            _ => {}
        }
        if depth == 0 {
            return i + 1;
        }
    }
    events.len()
}

fn unbalanced() -> PyErr {
    pyo3::exceptions::PyValueError::new_err("internal: the decoder's tape is unbalanced")
}

fn bad_json(at: usize, what: &str) -> PyErr {
    pyo3::exceptions::PyValueError::new_err(format!("internal: the decoder's JSON at byte {at}: {what}"))
}

/// Set `d[k] = v`.
#[inline]
fn set(d: &Bound<'_, PyAny>, k: &Bound<'_, PyString>, v: &Bound<'_, PyAny>) -> PyResult<()> {
    // SAFETY: three live objects; PyDict_SetItem borrows them (no reference stolen) and
    // returns -1 with an exception set on failure. `d` is a dict (made here).
    if unsafe { ffi::PyDict_SetItem(d.as_ptr(), k.as_ptr(), v.as_ptr()) } != 0 {
        return Err(PyErr::fetch(d.py()));
    }
    Ok(())
}

/// Read the JSON text `t[i..]` (one value, named `name`) into items; an object's close is
/// left out when `open` (the tape's own end closes it). Returns where the value ends.
fn json_items(t: &[u8], mut i: usize, name: Name, open: bool, depth: usize, out: &mut Items) -> PyResult<usize> {
    let ws = |mut i: usize| {
        while i < t.len() && matches!(t[i], b' ' | b'\n' | b'\r' | b'\t') {
            i += 1;
        }
        i
    };
    // A string token from its opening quote: its contents' range, whether it has escapes,
    // and where it ends.
    let string = |i: usize| -> PyResult<(usize, usize, bool, usize)> {
        let mut j = i + 1;
        let mut escaped = false;
        loop {
            match t.get(j) {
                Some(b'"') => return Ok((i + 1, j, escaped, j + 1)),
                Some(b'\\') => {
                    escaped = true;
                    j += 2;
                }
                Some(_) => j += 1,
                None => return Err(bad_json(i, "unterminated string")),
            }
        }
    };
    if depth > MAX_DEPTH {
        return Err(bad_json(i, "nested too deep"));
    }
    i = ws(i);
    match t.get(i) {
        Some(&c @ (b'{' | b'[')) => {
            let object = c == b'{';
            let close = if object { b'}' } else { b']' };
            out.push(name, if object { Val::Object } else { Val::Array }, t);
            i = ws(i + 1);
            if t.get(i) == Some(&close) {
                i += 1;
            } else {
                loop {
                    let member = if object {
                        if t.get(i) != Some(&b'"') {
                            return Err(bad_json(i, "expected a key"));
                        }
                        let (a, b, _, end) = string(i)?;
                        i = ws(end);
                        if t.get(i) != Some(&b':') {
                            return Err(bad_json(i, "expected ':'"));
                        }
                        i += 1;
                        Name::Text(a, b)
                    } else {
                        Name::Static("")
                    };
                    i = ws(json_items(t, i, member, false, depth + 1, out)?);
                    match t.get(i) {
                        Some(b',') => i = ws(i + 1),
                        Some(&x) if x == close => {
                            i += 1;
                            break;
                        }
                        _ => return Err(bad_json(i, "expected ',' or a closing bracket")),
                    }
                }
            }
            if !(open && object) {
                out.push(name, Val::Close, t);
            }
            Ok(i)
        }
        Some(b'"') => {
            let (a, b, escaped, end) = string(i)?;
            out.push(name, Val::JsonStr(a, b, escaped), t);
            Ok(end)
        }
        Some(b't') if t[i..].starts_with(b"true") => {
            out.push(name, Val::Bool(true), t);
            Ok(i + 4)
        }
        Some(b'f') if t[i..].starts_with(b"false") => {
            out.push(name, Val::Bool(false), t);
            Ok(i + 5)
        }
        Some(b'n') if t[i..].starts_with(b"null") => {
            out.push(name, Val::Null, t);
            Ok(i + 4)
        }
        Some(b'-' | b'0'..=b'9') => {
            let n = t[i..].iter().position(|c| !matches!(c, b'0'..=b'9' | b'-' | b'+' | b'.' | b'e' | b'E'));
            let end = i + n.unwrap_or(t.len() - i);
            out.push(name, Val::Num(i, end), t);
            Ok(end)
        }
        _ => Err(bad_json(i, "expected a value")),
    }
}

impl Values {
    /// The interned object of a decoder's name.
    fn key<'py>(&mut self, py: Python<'py>, k: &'static str) -> Bound<'py, PyString> {
        if self.keys.is_empty() {
            self.keys.resize_with(KEY_SLOTS, || None);
        }
        let (ptr, len) = (k.as_ptr() as usize, k.len());
        let slot = ((ptr ^ len).wrapping_mul(0x9e37_79b9_7f4a_7c15) >> 48) % KEY_SLOTS;
        if let Some((p, l, s)) = &self.keys[slot] {
            if *p == ptr && *l == len {
                return s.bind(py).clone();
            }
        }
        // Two names may share a slot: the second level finds either without interning again.
        let s = match self.more_keys.get(&(ptr, len)) {
            Some(s) => s.bind(py).clone(),
            None => {
                let s = PyString::intern(py, k);
                if self.more_keys.len() < MAX_KEYS {
                    self.more_keys.insert((ptr, len), s.clone().unbind());
                }
                s
            }
        };
        self.keys[slot] = Some((ptr, len, s.clone().unbind()));
        s
    }

    /// The object of a member name.
    fn name<'py>(&mut self, py: Python<'py>, n: Name, text: &[u8]) -> PyResult<Bound<'py, PyString>> {
        match n {
            Name::Static(k) => Ok(self.key(py, k)),
            // The serde bridge's names are the wire crate's field names: no escapes.
            Name::Text(a, b) => {
                Ok(convert::key(py, std::str::from_utf8(&text[a..b]).map_err(|e| bad_json(a, &e.to_string()))?))
            }
        }
    }

    /// The string `text` (item `i`), kept for the next tape's item `i`.
    fn str<'py>(&mut self, py: Python<'py>, i: usize, text: &[u8]) -> PyResult<Bound<'py, PyAny>> {
        if let Some(Some(Kept::Str(t, o))) = self.kept.get(i) {
            if t.as_slice() == text {
                return Ok(o.bind(py).clone());
            }
        }
        let s = std::str::from_utf8(text).map_err(|e| pyo3::exceptions::PyValueError::new_err(e.to_string()))?;
        let o = PyString::new(py, s).into_any();
        if i < VALUE_SLOTS && text.len() <= MAX_KEPT_STR {
            self.keep(i, Kept::Str(text.to_vec(), o.clone().unbind()));
        }
        Ok(o)
    }

    /// The int `v` (item `i`), kept likewise (CPython keeps the small ones itself).
    fn int<'py>(&mut self, py: Python<'py>, i: usize, v: u64) -> PyResult<Bound<'py, PyAny>> {
        if v <= 256 {
            return Ok(v.into_pyobject(py)?.into_any());
        }
        if let Some(Some(Kept::Int(x, o))) = self.kept.get(i) {
            if *x == v {
                return Ok(o.bind(py).clone());
            }
        }
        let o = v.into_pyobject(py)?.into_any();
        if i < VALUE_SLOTS {
            self.keep(i, Kept::Int(v, o.clone().unbind()));
        }
        Ok(o)
    }

    fn keep(&mut self, i: usize, k: Kept) {
        if self.kept.len() <= i {
            self.kept.resize_with(i + 1, || None);
        }
        self.kept[i] = Some(k);
    }

    /// The object of a scalar item `i`, or a new empty object or list.
    fn make<'py>(&mut self, py: Python<'py>, i: usize, v: Val, text: &[u8]) -> PyResult<Bound<'py, PyAny>> {
        Ok(match v {
            Val::Object => PyDict::new(py).into_any(),
            Val::Array => PyList::empty(py).into_any(),
            Val::Uint(u) => self.int(py, i, u)?,
            Val::Bool(b) => PyBool::new(py, b).to_owned().into_any(),
            Val::Float(x) => PyFloat::new(py, x).into_any(),
            Val::Null => py.None().into_bound(py),
            Val::Str(a, b) | Val::JsonStr(a, b, false) => self.str(py, i, &text[a..b])?,
            Val::JsonStr(a, b, true) => {
                let s: String = serde_json::from_slice(&text[a - 1..b + 1]).map_err(|e| bad_json(a, &e.to_string()))?;
                PyString::new(py, &s).into_any()
            }
            Val::Num(a, b) => {
                let t = std::str::from_utf8(&text[a..b]).map_err(|e| bad_json(a, &e.to_string()))?;
                convert::number(py, t).ok_or_else(|| bad_json(a, "bad number"))?
            }
            Val::Close => return Err(unbalanced()),
        })
    }
}

impl Builder {
    fn build<'py>(
        &mut self,
        py: Python<'py>,
        tape: &Tape,
        range: std::ops::Range<usize>,
        skip: &[&str],
    ) -> PyResult<Bound<'py, PyAny>> {
        let mut items = std::mem::take(&mut self.items);
        items.clear();
        let r = flatten(tape, range, skip, &mut items).and_then(|arrays| {
            let (text, h, items) = (&tape.text, items.hash, &items.v);
            if arrays || items.len() > MAX_SHAPE_ITEMS || items.first().is_none_or(|i| i.kind != K_OBJECT) {
                return self.members(py, items, text, None);
            }
            match self.shapes.get(&h) {
                Some(Some(s)) => {
                    return match s.fill(py, &mut self.values, items, text)? {
                        Some(v) => Ok(v),
                        // Another shape of the same hash (it never happened): member by member.
                        None => self.members(py, items, text, None),
                    };
                }
                // A shape without template.
                Some(None) => return self.members(py, items, text, None),
                None => {}
            }
            let mut made = Vec::new();
            let v = self.members(py, items, text, Some(&mut made))?;
            if self.shapes.len() < MAX_SHAPES {
                let shape = Shape::new(py, items, text, made)?;
                self.shapes.insert(h, shape);
            }
            Ok(v)
        });
        self.items = items;
        r
    }

    /// Build the value of `items` member by member; `made` (when given) gets each object
    /// and the key object of each item, for a template.
    #[allow(clippy::type_complexity)]
    fn members<'py>(
        &mut self,
        py: Python<'py>,
        items: &[Item],
        text: &[u8],
        mut made: Option<&mut Vec<(Bound<'py, PyAny>, Option<Bound<'py, PyString>>)>>,
    ) -> PyResult<Bound<'py, PyAny>> {
        // The open containers; the first one holds the top-level value.
        let mut stack: Vec<Bound<'py, PyAny>> = vec![PyList::empty(py).into_any()];
        for (i, item) in items.iter().enumerate() {
            if let Val::Close = item.val() {
                if stack.len() <= 1 {
                    return Err(unbalanced());
                }
                stack.pop();
                if let Some(m) = made.as_deref_mut() {
                    m.push((py.None().into_bound(py), None));
                }
                continue;
            }
            let v = self.values.make(py, i, item.val(), text)?;
            let parent = stack.last().ok_or_else(unbalanced)?;
            let key = if stack.len() > 1 && parent.is_instance_of::<PyDict>() {
                let k = self.values.name(py, item.name(), text)?;
                set(parent, &k, &v)?;
                Some(k)
            } else {
                parent.cast::<PyList>()?.append(&v)?;
                None
            };
            if let Some(m) = made.as_deref_mut() {
                m.push((v.clone(), key));
            }
            if matches!(item.val(), Val::Object | Val::Array) {
                stack.push(v);
            }
        }
        let top = stack.first().ok_or_else(unbalanced)?.cast::<PyList>()?;
        if stack.len() != 1 || top.len() != 1 {
            return Err(unbalanced());
        }
        top.get_item(0)
    }
}

/// Whether `key` is one of `skip` (most keys differ in length or first letter: no compare).
#[inline]
fn skipped(key: &str, skip: &[&str]) -> bool {
    skip.iter().any(|s| s.len() == key.len() && s.as_bytes().first() == key.as_bytes().first() && *s == key)
}

/// The items of the events `range` of `tape` (the serde bridge's JSON text read into items
/// too), members of the top-level object named in `skip` left out; whether there is an array.
fn flatten(tape: &Tape, range: std::ops::Range<usize>, skip: &[&str], out: &mut Items) -> PyResult<bool> {
    let events = tape.events.get(range).ok_or_else(unbalanced)?;
    let mut depth = 0usize;
    // Depth of a skipped value's members (0: none skipped).
    let mut skipping = 0usize;
    let mut arrays = false;
    for e in events {
        let Some(key) = e.key() else {
            if skipping > 0 {
                skipping -= 1;
            } else {
                depth = depth.checked_sub(1).ok_or_else(unbalanced)?;
                out.push(Name::Static(""), Val::Close, &tape.text);
            }
            continue;
        };
        let opens = matches!(e, Event::Begin(_) | Event::BeginArray(_) | Event::JsonOpen(..));
        if skipping > 0 || (depth == 1 && skipped(key, skip)) {
            skipping += usize::from(opens);
            continue;
        }
        let name = Name::Static(key);
        let val = match *e {
            Event::Begin(_) => Val::Object,
            Event::BeginArray(_) => {
                arrays = true;
                Val::Array
            }
            Event::Uint(_, v) => Val::Uint(v),
            Event::Bool(_, b) => Val::Bool(b),
            Event::Float(_, x) => Val::Float(x),
            Event::Null(_) => Val::Null,
            Event::Str(_, a, b) => Val::Str(a, b),
            Event::Json(_, a, b) | Event::JsonOpen(_, a, b) => {
                let open = matches!(e, Event::JsonOpen(..));
                let t = tape.text.get(..b).ok_or_else(unbalanced)?;
                let first = out.v.len();
                let end = json_items(t, a, name, open, 0, out)?;
                if t[end..].iter().any(|c| !c.is_ascii_whitespace()) {
                    return Err(bad_json(end, "trailing bytes"));
                }
                arrays |= out.v[first..].iter().any(|i| i.kind & !TEXT_NAME == K_ARRAY);
                if open {
                    if out.v[first].kind & !TEXT_NAME != K_OBJECT {
                        return Err(bad_json(a, "expected an object"));
                    }
                    depth += 1;
                }
                continue;
            }
            Event::End => unreachable!("handled above"),
        };
        out.push(name, val, &tape.text);
        depth += usize::from(opens);
    }
    Ok(arrays)
}

/// The items of a frame and the hash of its shape (their names and kinds; a name of the text
/// by its length and first bytes: [`Shape::fill`] compares the whole), made as they come.
struct Items {
    v: Vec<Item>,
    hash: u64,
}

impl Default for Items {
    fn default() -> Self {
        Items { v: Vec::new(), hash: SHAPE_SEED }
    }
}

const SHAPE_SEED: u64 = 0xcbf2_9ce4_8422_2325;

impl Items {
    fn clear(&mut self) {
        self.v.clear();
        self.hash = SHAPE_SEED;
    }

    #[inline(always)]
    fn push(&mut self, name: Name, val: Val, text: &[u8]) {
        let it = Item::new(name, val);
        let n = match name {
            Name::Static(s) => (s.as_ptr() as u64).wrapping_add(s.len() as u64),
            Name::Text(a, b) => {
                let mut first = [0u8; 8];
                let n = (b - a).min(8);
                first[..n].copy_from_slice(&text[a..a + n]);
                u64::from_le_bytes(first) ^ (((b - a) as u64) << 56)
            }
        };
        self.hash = (self.hash ^ n ^ u64::from(sig_kind(&it))).wrapping_mul(0x0100_0000_01b3).rotate_left(29);
        self.v.push(it);
    }
}

impl Shape {
    /// The template of the shape of `items`, from the objects its first frame was built with;
    /// None for a shape with a name twice in one object (the last value stays, which the
    /// fill's skip of equal values could not keep).
    #[allow(clippy::type_complexity)]
    fn new<'py>(
        py: Python<'py>,
        items: &[Item],
        text: &[u8],
        made: Vec<(Bound<'py, PyAny>, Option<Bound<'py, PyString>>)>,
    ) -> PyResult<Option<Shape>> {
        let mut names = Vec::new();
        let mut dicts: Vec<Py<PyDict>> = Vec::new();
        let mut steps = Vec::with_capacity(items.len());
        // The template dicts of the open objects.
        let mut open: Vec<usize> = Vec::new();
        for (it, (obj, key)) in items.iter().zip(made) {
            let sig = match it.name() {
                Name::Static(s) => Sig { kind: sig_kind(it), ptr: s.as_ptr() as usize, len: s.len() },
                Name::Text(a, b) => {
                    names.extend_from_slice(&text[a..b]);
                    Sig { kind: sig_kind(it), ptr: 0, len: b - a }
                }
            };
            let parent = open.last().copied().unwrap_or(usize::MAX);
            let held = match it.val() {
                Val::Object => {
                    let me = dicts.len();
                    // The template's own copy; a nested object in it is replaced on each fill.
                    let copy = obj.cast::<PyDict>()?.copy()?;
                    if let Some(p) = dicts.get(parent) {
                        set(p.bind(py).as_any(), key.as_ref().ok_or_else(unbalanced)?, py.None().bind(py))?;
                    }
                    dicts.push(copy.unbind());
                    open.push(me);
                    Held::Object(me)
                }
                Val::Close => {
                    open.pop();
                    Held::Close
                }
                v => Held::of(v, text),
            };
            steps.push(Step { sig, parent, key: key.map(Bound::unbind), held });
        }
        let mut members = vec![0usize; dicts.len()];
        for st in &steps {
            if let (Some(n), false) = (members.get_mut(st.parent), matches!(st.held, Held::Close)) {
                *n += 1;
            }
        }
        if dicts.iter().zip(&members).any(|(d, &n)| d.bind(py).len() != n) {
            return Ok(None);
        }
        Ok(Some(Shape { names, dicts, steps }))
    }

    /// A frame of this shape: copies of the template's dicts, the values that differ set;
    /// None if `items` are not of this shape after all (the hash said so; a name or kind
    /// does not agree).
    fn fill<'py>(
        &self,
        py: Python<'py>,
        values: &mut Values,
        items: &[Item],
        text: &[u8],
    ) -> PyResult<Option<Bound<'py, PyAny>>> {
        if items.len() != self.steps.len() {
            return Ok(None);
        }
        let mut made: Vec<Bound<'py, PyAny>> = Vec::with_capacity(self.dicts.len());
        // Where the next name of the text is in `names`.
        let mut at = 0;
        for (i, (step, it)) in self.steps.iter().zip(items).enumerate() {
            let s = &step.sig;
            let same_name = match it.name() {
                Name::Static(n) => s.ptr == n.as_ptr() as usize && s.len == n.len(),
                Name::Text(a, b) => {
                    let same = s.ptr == 0 && s.len == b - a && self.names.get(at..at + s.len) == Some(&text[a..b]);
                    at += s.len;
                    same
                }
            };
            if !same_name || s.kind != sig_kind(it) {
                return Ok(None);
            }
            match step.held {
                Held::Object(me) => {
                    let copy = self.dicts[me].bind(py).copy()?.into_any();
                    if let (Some(p), Some(k)) = (made.get(step.parent), &step.key) {
                        set(p, k.bind(py), &copy)?;
                    }
                    made.push(copy);
                }
                Held::Close => {}
                ref held => {
                    if held.same(it.val(), text) {
                        continue;
                    }
                    let v = values.make(py, i, it.val(), text)?;
                    match (made.get(step.parent), &step.key) {
                        (Some(p), Some(k)) => set(p, k.bind(py), &v)?,
                        _ => return Err(unbalanced()),
                    }
                }
            }
        }
        made.into_iter().next().map(Some).ok_or_else(unbalanced)
    }
}
