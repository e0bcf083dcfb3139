//! JSON to Python objects and back: the one bridge every function goes through, so the Python
//! dicts are exactly the objects `roce decode --json` prints (same keys, same values, 64-bit
//! identifiers as the same `"0x…"` strings). The way in reads the decoder's JSON text
//! ([`json_text_to_py`], [`TextParser`]); the way out ([`from_py`]) makes the serde value the
//! encoder reads.

use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyBool, PyByteArray, PyBytes, PyDict, PyFloat, PyInt, PyList, PyMemoryView, PyString, PyTuple};
use serde_json::{Map, Number, Value};
use std::borrow::Cow;

/// The string object of a key: keys repeat on every frame, so each name is made once.
pub fn key<'py>(py: Python<'py>, k: &str) -> Bound<'py, PyString> {
    KEYS.with(|keys| {
        let mut keys = keys.borrow_mut();
        if let Some(s) = keys.get(k) {
            return s.bind(py).clone();
        }
        let s = PyString::intern(py, k);
        if keys.len() < MAX_CACHED_KEYS {
            keys.insert(k.to_owned(), s.clone().unbind());
        }
        s
    })
}

/// The schema has a few hundred names; a bound keeps odd input from growing the cache.
const MAX_CACHED_KEYS: usize = 4096;

/// FNV-1a: the keys are short and trusted (the decoder's own names), SipHash's cost is not
/// needed here.
#[derive(Default, Clone, Copy)]
pub struct Fnv(u64);

impl std::hash::Hasher for Fnv {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        let mut h = if self.0 == 0 { 0xcbf2_9ce4_8422_2325 } else { self.0 };
        for b in bytes {
            h = (h ^ u64::from(*b)).wrapping_mul(0x0100_0000_01b3);
        }
        self.0 = h;
    }
}

/// A map keyed by short trusted names (FNV-hashed).
pub type FastMap<V> = std::collections::HashMap<String, V, std::hash::BuildHasherDefault<Fnv>>;

type KeyCache = FastMap<Py<PyString>>;

thread_local! {
    static KEYS: std::cell::RefCell<KeyCache> = std::cell::RefCell::new(KeyCache::default());
}

/// A Python object (dict, list, str, int, float, bool, None; bytes as hex) as a JSON value;
/// anything else is a TypeError naming where it was found.
pub fn from_py(o: &Bound<'_, PyAny>) -> PyResult<Value> {
    value_from_py(o, &Path::Root)
}

/// Where a value sits in the record, rendered only for an error message.
enum Path<'a> {
    Root,
    Key(&'a Path<'a>, &'a str),
    Index(&'a Path<'a>, usize),
}

impl std::fmt::Display for Path<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Path::Root => f.write_str("record"),
            Path::Key(Path::Root, k) => f.write_str(k),
            Path::Key(p, k) => write!(f, "{p}.{k}"),
            Path::Index(p, i) => write!(f, "{p}[{i}]"),
        }
    }
}

fn value_from_py(o: &Bound<'_, PyAny>, path: &Path<'_>) -> PyResult<Value> {
    // The common types first, by exact type (a bool is an int subclass: it is not exact).
    if let Ok(s) = o.cast_exact::<PyString>() {
        return Ok(Value::String(s.to_cow()?.into_owned()));
    }
    if o.is_exact_instance_of::<PyInt>() {
        if let Ok(u) = o.extract::<u64>() {
            return Ok(Value::from(u));
        }
    }
    if let Ok(d) = o.cast::<PyDict>() {
        let mut m = Map::with_capacity(d.len());
        for (k, x) in d.iter() {
            let Ok(key) = k.cast::<PyString>() else {
                return Err(PyTypeError::new_err(format!("{path}: keys must be str, found {}", type_name(&k))));
            };
            let key = key.to_cow()?;
            let v = value_from_py(&x, &Path::Key(path, &key))?;
            m.insert(key.into_owned(), v);
        }
        return Ok(Value::Object(m));
    }
    if o.is_none() {
        return Ok(Value::Null);
    }
    if let Ok(b) = o.cast::<PyBool>() {
        return Ok(Value::Bool(b.is_true()));
    }
    if o.is_instance_of::<PyInt>() {
        if let Ok(u) = o.extract::<u64>() {
            return Ok(Value::from(u));
        }
        if let Ok(i) = o.extract::<i64>() {
            return Ok(Value::from(i));
        }
        return Err(PyValueError::new_err(format!("{path}: {o} does not fit in 64 bits")));
    }
    if let Ok(f) = o.cast::<PyFloat>() {
        let x = f.value();
        return Number::from_f64(x)
            .map(Value::Number)
            .ok_or_else(|| PyValueError::new_err(format!("{path}: {x} is not a finite number")));
    }
    if let Ok(s) = o.cast::<PyString>() {
        return Ok(Value::String(s.to_cow()?.into_owned()));
    }
    if o.is_instance_of::<PyBytes>() || o.is_instance_of::<PyByteArray>() || o.is_instance_of::<PyMemoryView>() {
        return Ok(Value::String(hex(&bytes_of(o, &path.to_string())?)));
    }
    if o.is_instance_of::<PyList>() || o.is_instance_of::<PyTuple>() {
        let mut a = Vec::new();
        for (i, x) in o.try_iter()?.enumerate() {
            a.push(value_from_py(&x?, &Path::Index(path, i))?);
        }
        return Ok(Value::Array(a));
    }
    Err(PyTypeError::new_err(format!(
        "{path}: expected dict, list, str, int, float, bool, bytes or None, found {}",
        type_name(o)
    )))
}

/// The name of an object's type, for messages.
pub fn type_name(o: &Bound<'_, PyAny>) -> String {
    o.get_type().name().map(|n| n.to_string()).unwrap_or_else(|_| "?".into())
}

/// Lowercase hex, as the JSON writes bytes.
pub fn hex(b: &[u8]) -> String {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    let mut s = String::with_capacity(b.len() * 2);
    for x in b {
        s.push(HEX[usize::from(x >> 4)] as char);
        s.push(HEX[usize::from(x & 15)] as char);
    }
    s
}

/// The bytes of a bytes, bytearray or memoryview argument (borrowed from bytes, copied
/// otherwise); anything else is a TypeError naming the argument.
pub fn bytes_of<'a>(o: &'a Bound<'_, PyAny>, what: &str) -> PyResult<Cow<'a, [u8]>> {
    if let Ok(b) = o.cast::<PyBytes>() {
        return Ok(Cow::Borrowed(b.as_bytes()));
    }
    if let Ok(b) = o.cast::<PyByteArray>() {
        return Ok(Cow::Owned(b.to_vec()));
    }
    if o.is_instance_of::<PyMemoryView>() {
        let b = o.py().import("builtins")?.getattr("bytes")?.call1((o,))?;
        return Ok(Cow::Owned(b.cast::<PyBytes>()?.as_bytes().to_vec()));
    }
    Err(PyTypeError::new_err(format!("{what}: expected bytes, bytearray or memoryview, found {}", type_name(o))))
}

/// The decoder's JSON text straight into Python objects (what `json.loads` would give), with
/// no intermediate tree: the text is the one the CLI prints, read generically (no schema).
/// Members of the top-level object named in `skip` are left out.
pub fn json_text_to_py<'py>(py: Python<'py>, text: &[u8], skip: &[&str]) -> PyResult<Bound<'py, PyAny>> {
    let mut p = TextParser::new(text);
    let v = p.value(py, skip)?;
    p.ws();
    if p.i != text.len() {
        return Err(p.fail("trailing bytes"));
    }
    Ok(v)
}

/// A scalar of the JSON text (or an already-built object), for the column builder.
pub enum Leaf<'a> {
    /// `null`.
    Null,
    /// `true` / `false`.
    Bool(bool),
    /// An integer that fits i64 (every number the decoder writes as a number does).
    Int(i64),
    /// A number with a fraction or exponent, or an integer too wide for i64.
    Float(f64),
    /// A string.
    Str(Cow<'a, str>),
    /// Anything else, as its Python object (an array).
    Object(Py<PyAny>),
}

impl Leaf<'_> {
    /// The Python object `json.loads` would give.
    pub fn into_py(self, py: Python<'_>) -> PyResult<Py<PyAny>> {
        Ok(match self {
            Leaf::Null => py.None(),
            Leaf::Bool(b) => PyBool::new(py, b).to_owned().into_any().unbind(),
            Leaf::Int(n) => n.into_pyobject(py)?.into_any().unbind(),
            Leaf::Float(x) => PyFloat::new(py, x).into_any().unbind(),
            Leaf::Str(s) => PyString::new(py, &s).into_any().unbind(),
            Leaf::Object(o) => o,
        })
    }
}

/// A reader of the decoder's JSON text (well formed, generic: no schema).
pub struct TextParser<'a> {
    b: &'a [u8],
    i: usize,
}

impl<'a> TextParser<'a> {
    /// A reader at the start of `b`.
    pub fn new(b: &'a [u8]) -> Self {
        TextParser { b, i: 0 }
    }

    /// Step over one byte (the one `peek` gave).
    pub fn advance(&mut self) {
        self.i += 1;
    }

    /// A number, string, `true`, `false` or `null`.
    pub fn scalar(&mut self) -> PyResult<Leaf<'a>> {
        self.ws();
        match self.peek() {
            Some(b'"') => self.string().map(Leaf::Str),
            Some(b't') => self.literal(b"true").map(|()| Leaf::Bool(true)),
            Some(b'f') => self.literal(b"false").map(|()| Leaf::Bool(false)),
            Some(b'n') => self.literal(b"null").map(|()| Leaf::Null),
            Some(_) => {
                let (t, float) = self.number_token()?;
                if !float {
                    if let Ok(n) = t.parse::<i64>() {
                        return Ok(Leaf::Int(n));
                    }
                }
                t.parse().map(Leaf::Float).map_err(|_| self.fail("bad number"))
            }
            None => Err(self.fail("unexpected end")),
        }
    }

    /// An error at the current byte.
    pub fn fail(&self, what: &str) -> PyErr {
        PyValueError::new_err(format!("internal: the decoder's JSON at byte {}: {what}", self.i))
    }

    /// Skip white space.
    pub fn ws(&mut self) {
        while self.i < self.b.len() && matches!(self.b[self.i], b' ' | b'\n' | b'\r' | b'\t') {
            self.i += 1;
        }
    }

    /// The next byte.
    pub fn peek(&self) -> Option<u8> {
        self.b.get(self.i).copied()
    }

    /// Skip white space and one `c`.
    pub fn expect(&mut self, c: u8) -> PyResult<()> {
        self.ws();
        if self.peek() != Some(c) {
            return Err(self.fail(&format!("expected {:?}", c as char)));
        }
        self.i += 1;
        Ok(())
    }

    fn literal(&mut self, word: &[u8]) -> PyResult<()> {
        if self.b.get(self.i..self.i + word.len()) != Some(word) {
            return Err(self.fail("bad literal"));
        }
        self.i += word.len();
        Ok(())
    }

    /// Any value as its Python object; `skip` names members of an object to leave out.
    pub fn value<'py>(&mut self, py: Python<'py>, skip: &[&str]) -> PyResult<Bound<'py, PyAny>> {
        self.ws();
        match self.peek() {
            Some(b'{') => self.object(py, skip).map(Bound::into_any),
            Some(b'[') => {
                self.i += 1;
                let l = PyList::empty(py);
                self.ws();
                if self.peek() == Some(b']') {
                    self.i += 1;
                    return Ok(l.into_any());
                }
                loop {
                    l.append(self.value(py, &[])?)?;
                    self.ws();
                    match self.peek() {
                        Some(b',') => self.i += 1,
                        Some(b']') => {
                            self.i += 1;
                            return Ok(l.into_any());
                        }
                        _ => return Err(self.fail("expected ',' or ']'")),
                    }
                }
            }
            Some(b'"') => Ok(PyString::new(py, &self.string()?).into_any()),
            Some(b't') => self.literal(b"true").map(|()| PyBool::new(py, true).to_owned().into_any()),
            Some(b'f') => self.literal(b"false").map(|()| PyBool::new(py, false).to_owned().into_any()),
            Some(b'n') => self.literal(b"null").map(|()| py.None().into_bound(py)),
            Some(_) => self.number(py),
            None => Err(self.fail("unexpected end")),
        }
    }

    fn object<'py>(&mut self, py: Python<'py>, skip: &[&str]) -> PyResult<Bound<'py, PyDict>> {
        self.i += 1;
        let d = PyDict::new(py);
        self.ws();
        if self.peek() == Some(b'}') {
            self.i += 1;
            return Ok(d);
        }
        loop {
            self.ws();
            if self.peek() != Some(b'"') {
                return Err(self.fail("expected a key"));
            }
            let k = self.string()?;
            self.expect(b':')?;
            let v = self.value(py, &[])?;
            if !skip.contains(&k.as_ref()) {
                d.set_item(key(py, &k), v)?;
            }
            self.ws();
            match self.peek() {
                Some(b',') => self.i += 1,
                Some(b'}') => {
                    self.i += 1;
                    return Ok(d);
                }
                _ => return Err(self.fail("expected ',' or '}'")),
            }
        }
    }

    /// A reader at byte `at` of `b`.
    pub fn at(b: &'a [u8], at: usize) -> Self {
        TextParser { b, i: at }
    }

    /// Step over one value of any kind (nothing is made).
    pub fn skip_value(&mut self) -> PyResult<()> {
        self.ws();
        match self.peek() {
            Some(b'"') => {
                // To the closing quote, over escaped characters.
                let mut at = self.i + 1;
                loop {
                    let rest = self.b.get(at..).unwrap_or_default();
                    match rest.iter().position(|c| matches!(c, b'"' | b'\\')) {
                        Some(n) if rest[n] == b'"' => {
                            self.i = at + n + 1;
                            return Ok(());
                        }
                        Some(n) => at += n + 2,
                        None => return Err(self.fail("unterminated string")),
                    }
                }
            }
            Some(open @ (b'{' | b'[')) => {
                let close = if open == b'{' { b'}' } else { b']' };
                self.i += 1;
                self.ws();
                if self.peek() == Some(close) {
                    self.i += 1;
                    return Ok(());
                }
                loop {
                    if open == b'{' {
                        self.ws();
                        self.skip_value()?;
                        self.expect(b':')?;
                    }
                    self.skip_value()?;
                    self.ws();
                    match self.peek() {
                        Some(b',') => self.i += 1,
                        Some(c) if c == close => {
                            self.i += 1;
                            return Ok(());
                        }
                        _ => return Err(self.fail("expected ',' or a closing bracket")),
                    }
                }
            }
            Some(_) => {
                // A number or a literal: to the next delimiter.
                let rest = &self.b[self.i..];
                let n = rest.iter().position(|c| matches!(c, b',' | b'}' | b']' | b' ' | b'\n' | b'\r' | b'\t'));
                self.i += n.unwrap_or(rest.len());
                Ok(())
            }
            None => Err(self.fail("unexpected end")),
        }
    }

    /// The members of the object at the reader, as (key, where its value starts); `f` sees
    /// each and returns true to stop there (the value is not read then). Keys come as their
    /// raw bytes (the decoder's names need no escapes).
    pub fn members(&mut self, mut f: impl FnMut(&'a [u8], usize) -> bool) -> PyResult<()> {
        let b: &'a [u8] = self.b;
        self.expect(b'{')?;
        self.ws();
        if self.peek() == Some(b'}') {
            return Ok(());
        }
        loop {
            self.ws();
            let key_start = self.i + 1;
            self.skip_value()?;
            let key = b.get(key_start..self.i - 1).ok_or_else(|| self.fail("expected a key"))?;
            self.expect(b':')?;
            self.ws();
            if f(key, self.i) {
                return Ok(());
            }
            self.skip_value()?;
            self.ws();
            match self.peek() {
                Some(b',') => self.i += 1,
                Some(b'}') => return Ok(()),
                _ => return Err(self.fail("expected ',' or '}'")),
            }
        }
    }

    /// A string token; escapes are rare (messages), and left to serde_json.
    pub fn string(&mut self) -> PyResult<Cow<'a, str>> {
        let b: &'a [u8] = self.b;
        let start = self.i;
        self.i += 1;
        let mut escaped = false;
        loop {
            match self.peek() {
                Some(b'"') => break,
                Some(b'\\') => {
                    escaped = true;
                    self.i += 2;
                }
                Some(_) => self.i += 1,
                None => return Err(self.fail("unterminated string")),
            }
        }
        self.i += 1;
        let token = &b[start..self.i];
        if escaped {
            let s: String = serde_json::from_slice(token).map_err(|e| self.fail(&e.to_string()))?;
            Ok(Cow::Owned(s))
        } else {
            std::str::from_utf8(&token[1..token.len() - 1]).map(Cow::Borrowed).map_err(|e| self.fail(&e.to_string()))
        }
    }

    /// The text of a number, and whether it has a fraction or exponent.
    fn number_token(&mut self) -> PyResult<(&'a str, bool)> {
        let b: &'a [u8] = self.b;
        let start = self.i;
        let mut float = false;
        while let Some(c) = self.peek() {
            match c {
                b'0'..=b'9' | b'-' | b'+' => {}
                b'.' | b'e' | b'E' => float = true,
                _ => break,
            }
            self.i += 1;
        }
        let t = std::str::from_utf8(&b[start..self.i]).map_err(|e| self.fail(&e.to_string()))?;
        Ok((t, float))
    }

    fn number<'py>(&mut self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        let (t, _) = self.number_token()?;
        number(py, t).ok_or_else(|| self.fail("bad number"))
    }
}

/// The object of a JSON number token, as json.loads makes it (None: not a number).
pub fn number<'py>(py: Python<'py>, t: &str) -> Option<Bound<'py, PyAny>> {
    if !t.bytes().any(|c| matches!(c, b'.' | b'e' | b'E')) {
        if let Ok(u) = t.parse::<u64>() {
            return u.into_pyobject(py).ok().map(|o| o.into_any());
        }
        if let Ok(i) = t.parse::<i64>() {
            return i.into_pyobject(py).ok().map(|o| o.into_any());
        }
    }
    // Correctly rounded, as json.loads reads the CLI's text.
    t.parse::<f64>().ok().map(|f| PyFloat::new(py, f).into_any())
}
