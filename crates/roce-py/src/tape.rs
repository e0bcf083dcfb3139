//! The decoder's [`Tape`] straight into Python objects: the dicts of `roce.decode` and
//! `roce.read`, without writing JSON text and reading it back.
//!
//! The values are the text's (the decoder's tests check the tape against its text), so the
//! dicts are exactly what `json.loads` of a `roce decode --json` line gives. Making them is
//! most of the cost, so two caches spare CPython work:
//! - key names: the decoder's names are `&'static str`s, so a name's object is found by the
//!   address of its text (interned, made once);
//! - values by position: frames of one capture (or one script) repeat their shapes and most of
//!   their strings and numbers (addresses, names, payloads); the string or int made for the
//!   tape's n-th event is kept and given again while the next tape's n-th event has the same
//!   value. Strings and ints are immutable, so a shared object is indistinguishable from a new
//!   one except by `is`.

use pyo3::ffi;
use pyo3::prelude::*;
use pyo3::types::{PyBool, PyDict, PyFloat, PyList, PyString};
use roce_decode::json_out::{Event, Tape};
use std::cell::RefCell;

use crate::convert::TextParser;

/// Key slots (direct-mapped by the name's address).
const KEY_SLOTS: usize = 512;
/// Names kept in the second level (the decoder has a few hundred).
const MAX_KEYS: usize = 4096;
/// Events whose value is kept for the next tape.
const VALUE_SLOTS: usize = 1024;
/// A longer string is made each time (kept, it would hold memory for little).
const MAX_KEPT_STR: usize = 4096;

/// A kept value: what it was made from, and the object.
enum Kept {
    Str(Vec<u8>, Py<PyAny>),
    Int(u64, Py<PyAny>),
}

/// The caches of one thread's builds.
#[derive(Default)]
pub struct Builder {
    keys: Vec<Option<(usize, usize, Py<PyString>)>>,
    more_keys: std::collections::HashMap<(usize, usize), Py<PyString>>,
    values: Vec<Option<Kept>>,
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

impl Builder {
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

    /// The string `text` (event `i` of the tape), kept for the next tape's event `i`.
    fn str<'py>(&mut self, py: Python<'py>, i: usize, text: &[u8]) -> PyResult<Bound<'py, PyAny>> {
        if let Some(Some(Kept::Str(t, o))) = self.values.get(i) {
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

    /// The int `v` (event `i`), kept likewise (CPython keeps the small ones itself).
    fn int<'py>(&mut self, py: Python<'py>, i: usize, v: u64) -> PyResult<Bound<'py, PyAny>> {
        if v <= 256 {
            return Ok(v.into_pyobject(py)?.into_any());
        }
        if let Some(Some(Kept::Int(x, o))) = self.values.get(i) {
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
        if self.values.len() <= i {
            self.values.resize_with(i + 1, || None);
        }
        self.values[i] = Some(k);
    }

    fn build<'py>(
        &mut self,
        py: Python<'py>,
        tape: &Tape,
        range: std::ops::Range<usize>,
        skip: &[&str],
    ) -> PyResult<Bound<'py, PyAny>> {
        let bad = || pyo3::exceptions::PyValueError::new_err("internal: the decoder's tape is unbalanced");
        // The open containers; the first one holds the top-level value.
        let mut stack: Vec<Bound<'py, PyAny>> = vec![PyList::empty(py).into_any()];
        // Depth of a skipped object's members (0: none skipped).
        let mut skipping = 0usize;
        let events = tape.events.get(range.clone()).ok_or_else(bad)?;
        for (i, e) in events.iter().enumerate().map(|(i, e)| (i + range.start, e)) {
            let Some(key) = e.key() else {
                // The end of an object or array.
                if skipping > 0 {
                    skipping -= 1;
                } else if stack.len() > 1 {
                    stack.pop();
                } else {
                    return Err(bad());
                }
                continue;
            };
            let opens = matches!(e, Event::Begin(_) | Event::BeginArray(_) | Event::JsonOpen(..));
            if skipping > 0 || (stack.len() == 2 && skip.contains(&key)) {
                skipping += usize::from(opens);
                continue;
            }
            let v = match *e {
                Event::Begin(_) => PyDict::new(py).into_any(),
                Event::BeginArray(_) => PyList::empty(py).into_any(),
                Event::Uint(_, v) => self.int(py, i, v)?,
                Event::Bool(_, b) => PyBool::new(py, b).to_owned().into_any(),
                Event::Float(_, x) => PyFloat::new(py, x).into_any(),
                Event::Null(_) => py.None().into_bound(py),
                Event::Str(_, a, b) => self.str(py, i, &tape.text[a..b])?,
                Event::Json(_, a, b) | Event::JsonOpen(_, a, b) => TextParser::new(&tape.text[a..b]).value(py, &[])?,
                Event::End => unreachable!("handled above"),
            };
            let parent = stack.last().ok_or_else(bad)?;
            if let Ok(d) = parent.cast::<PyDict>() {
                let k = self.key(py, key);
                // SAFETY: three live objects; PyDict_SetItem borrows them (no reference
                // stolen) and returns -1 with an exception set on failure.
                if unsafe { ffi::PyDict_SetItem(d.as_ptr(), k.as_ptr(), v.as_ptr()) } != 0 {
                    return Err(PyErr::fetch(py));
                }
            } else {
                parent.cast::<PyList>()?.append(&v)?;
            }
            if opens {
                stack.push(v);
            }
        }
        let top = stack.first().ok_or_else(bad)?.cast::<PyList>()?;
        if stack.len() != 1 || top.len() != 1 {
            return Err(bad());
        }
        top.get_item(0)
    }
}
