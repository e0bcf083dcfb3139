//! Captures: `read` (an iterator of the CLI's objects, one frame in memory at a time) and
//! `read_columns` (the flat fields of every frame as typed columns, for `roce.dataframe`).

use std::fs::File;
use std::io::{self, BufReader, Read};
use std::time::Duration;

use pyo3::exceptions::{PyOSError, PyTypeError};
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict, PyList, PyString};
use roce_decode::capture::{ReadError, Reader};
use roce_decode::decode::{Decoder, Meta};
use roce_decode::json_out::{Event, Tape};

use crate::convert::{json_text_to_py, type_name, Leaf, TextParser};
use crate::frame::Frame;
use crate::CaptureError;

/// A binary file object (anything with `read(n) -> bytes`) as a `Read`.
struct PyFile(Py<PyAny>);

impl Read for PyFile {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        Python::attach(|py| {
            let got = self.0.call_method1(py, "read", (buf.len(),)).map_err(io::Error::other)?;
            let got = got.bind(py);
            let b = got.cast::<PyBytes>().map_err(|_| {
                io::Error::new(
                    io::ErrorKind::InvalidData,
                    format!("read() returned {}, not bytes: open the file in binary mode", type_name(got)),
                )
            })?;
            let b = b.as_bytes();
            let n = b.len().min(buf.len());
            buf[..n].copy_from_slice(&b[..n]);
            Ok(n)
        })
    }
}

/// Open a path (str or os.PathLike) or wrap a binary file object.
fn open(source: &Bound<'_, PyAny>) -> PyResult<(Box<dyn Read>, String)> {
    let py = source.py();
    if source.is_instance_of::<PyString>() || source.hasattr("__fspath__")? {
        let p: std::path::PathBuf = py.import("os")?.getattr("fspath")?.call1((source,))?.extract()?;
        let f = File::open(&p).map_err(|e| {
            PyOSError::new_err((e.raw_os_error().unwrap_or(0), format!("cannot open {}: {e}", p.display())))
        })?;
        return Ok((Box::new(BufReader::with_capacity(1 << 16, f)), p.display().to_string()));
    }
    if source.hasattr("read")? {
        let name = source.getattr("name").map(|n| n.to_string()).unwrap_or_else(|_| "<file>".into());
        return Ok((Box::new(BufReader::with_capacity(1 << 16, PyFile(source.clone().unbind()))), name));
    }
    Err(PyTypeError::new_err(format!(
        "expected a path (str or os.PathLike) or a binary file object, found {}",
        type_name(source)
    )))
}

fn capture_error(name: &str, e: &ReadError, frames: u64) -> PyErr {
    CaptureError::new_err(format!("{name}: {e} (after {frames} frames)"))
}

/// The streaming decoder behind `read` and `read_columns`: numbers and relative times as
/// `roce decode` gives them.
struct Frames {
    reader: Reader<Box<dyn Read>>,
    dec: Decoder,
    name: String,
    n: u64,
    t0: Option<Duration>,
}

impl Frames {
    fn new(source: &Bound<'_, PyAny>) -> PyResult<Frames> {
        let (r, name) = open(source)?;
        let reader = Reader::new(r).map_err(|e| CaptureError::new_err(format!("cannot read {name}: {e}")))?;
        let mut dec = Decoder::new();
        dec.summary.off = true;
        Ok(Frames { reader, dec, name, n: 0, t0: None })
    }

    /// Decode the next frame into `dec.json`; `false` at the end.
    fn next(&mut self) -> PyResult<bool> {
        Ok(self.next_with(|dec, meta, data| dec.decode(meta, data))?.is_some())
    }

    /// Hand the next frame (the decoder, its capture facts, its bytes) to `f`; `None` at the end.
    fn next_with<R>(&mut self, f: impl FnOnce(&mut Decoder, &Meta, &[u8]) -> R) -> PyResult<Option<R>> {
        match self.reader.next_frame() {
            Ok(Some((rec, data))) => {
                self.n += 1;
                let t0 = *self.t0.get_or_insert(rec.timestamp);
                let meta = Meta {
                    number: self.n,
                    timestamp: rec.timestamp,
                    relative: rec.timestamp.saturating_sub(t0),
                    linktype: rec.linktype,
                    interface: rec.interface,
                    orig_len: rec.orig_len,
                };
                Ok(Some(f(&mut self.dec, &meta, data)))
            }
            Ok(None) => Ok(None),
            Err(ReadError::Io(e)) if e.get_ref().is_some_and(|i| i.is::<PyErr>()) => {
                // The file object's own exception, as it raised it.
                Err(e.into_inner().and_then(|i| i.downcast::<PyErr>().ok()).map(|b| *b).unwrap_or_else(|| {
                    CaptureError::new_err(format!("{}: read failed (after {} frames)", self.name, self.n))
                }))
            }
            Err(e) => Err(capture_error(&self.name, &e, self.n)),
        }
    }
}

/// The iterator `read` returns: the capture's frames as `roce decode --json` objects (dicts),
/// or as `roce.Frame`s (`read(..., lazy=True)`, `frames(...)`).
#[pyclass(unsendable, module = "roce")]
struct CaptureReader {
    frames: Option<Frames>,
    lazy: bool,
}

#[pymethods]
impl CaptureReader {
    fn __iter__(slf: PyRef<'_, Self>) -> PyRef<'_, Self> {
        slf
    }

    fn __next__<'py>(&mut self, py: Python<'py>) -> PyResult<Option<Bound<'py, PyAny>>> {
        let Some(f) = self.frames.as_mut() else { return Ok(None) };
        let lazy = self.lazy;
        let next = f.next_with(|dec, meta, data| {
            if lazy {
                let data = PyBytes::new(py, data).unbind();
                return Ok(Bound::new(py, Frame::make(py, data, *meta, false, dec))?.into_any());
            }
            dec.decode(meta, data);
            match &dec.json.tape {
                Some(tape) => crate::tape::to_py(py, tape, &[]),
                None => json_text_to_py(py, &dec.json.buf, &[]),
            }
        });
        match next {
            Ok(Some(v)) => v.map(Some),
            Ok(None) => {
                self.frames = None;
                Ok(None)
            }
            Err(e) => {
                self.frames = None;
                Err(e)
            }
        }
    }

    /// Frames read so far.
    #[getter]
    fn frames_read(&self) -> u64 {
        self.frames.as_ref().map_or(0, |f| f.n)
    }
}

/// read(path_or_binary_file, lazy=False) -> iterator of dict (or of Frame)
///
/// Every frame of a pcap or pcapng capture (any link type `roce decode` reads) as exactly the
/// object `roce decode --json` prints for it, one frame in memory at a time. With lazy=True,
/// each as a `roce.Frame` (checked at once, its values made when read; `to_dict()` is that
/// object). A capture cut short raises CaptureError after the last complete frame.
#[pyfunction]
#[pyo3(signature = (source, lazy = false))]
fn read(source: &Bound<'_, PyAny>, lazy: bool) -> PyResult<CaptureReader> {
    let mut frames = Frames::new(source)?;
    if !lazy {
        // The dicts are made from the decoder's calls (a lazy Frame keeps the text instead).
        frames.dec.json.tape = Some(Default::default());
    }
    Ok(CaptureReader { frames: Some(frames), lazy })
}

/// frames(path_or_binary_file) -> iterator of Frame
///
/// `read(path_or_binary_file, lazy=True)`: every frame of a capture as a `roce.Frame`.
#[pyfunction]
fn frames(source: &Bound<'_, PyAny>) -> PyResult<CaptureReader> {
    read(source, true)
}

/// One column of flat values; it widens as values arrive (int ▶ float ▶ object).
enum Column {
    Int(Vec<i64>, Vec<bool>),
    Float(Vec<f64>),
    Bool(Vec<u8>, Vec<bool>),
    Object(Vec<Py<PyAny>>),
}

impl Column {
    fn len(&self) -> usize {
        match self {
            Column::Int(v, _) => v.len(),
            Column::Float(v) => v.len(),
            Column::Bool(v, _) => v.len(),
            Column::Object(v) => v.len(),
        }
    }

    fn push_missing(&mut self, py: Python<'_>) {
        match self {
            Column::Int(v, m) => {
                v.push(0);
                m.push(false)
            }
            Column::Float(v) => v.push(f64::NAN),
            Column::Bool(v, m) => {
                v.push(0);
                m.push(false)
            }
            Column::Object(v) => v.push(py.None()),
        }
    }

    /// This column as Python objects (for a value that fits no typed column).
    fn into_objects(self, py: Python<'_>) -> PyResult<Vec<Py<PyAny>>> {
        Ok(match self {
            Column::Int(v, m) => v
                .into_iter()
                .zip(m)
                .map(
                    |(x, ok)| if ok { Ok::<_, PyErr>(x.into_pyobject(py)?.into_any().unbind()) } else { Ok(py.None()) },
                )
                .collect::<PyResult<_>>()?,
            Column::Float(v) => v
                .into_iter()
                .map(|x| Ok::<_, PyErr>(x.into_pyobject(py)?.into_any().unbind()))
                .collect::<PyResult<_>>()?,
            Column::Bool(v, m) => v
                .into_iter()
                .zip(m)
                .map(|(x, ok)| {
                    if ok {
                        Ok(pyo3::types::PyBool::new(py, x != 0).to_owned().into_any().unbind())
                    } else {
                        Ok(py.None())
                    }
                })
                .collect::<PyResult<_>>()?,
            Column::Object(v) => v,
        })
    }

    fn push(&mut self, py: Python<'_>, v: Leaf<'_>) -> PyResult<()> {
        match (&mut *self, v) {
            (_, Leaf::Null) => self.push_missing(py),
            (Column::Int(c, m), Leaf::Int(n)) => {
                c.push(n);
                m.push(true)
            }
            (Column::Float(c), Leaf::Int(n)) => c.push(n as f64),
            (Column::Float(c), Leaf::Float(x)) => c.push(x),
            (Column::Bool(c, m), Leaf::Bool(b)) => {
                c.push(u8::from(b));
                m.push(true)
            }
            (Column::Object(c), v) => c.push(v.into_py(py)?),
            (Column::Int(c, m), Leaf::Float(x)) if m.iter().all(|ok| *ok) => {
                // A float in an int column (a time of 0 then 0.001): widen to floats.
                let mut f: Vec<f64> = c.iter().map(|n| *n as f64).collect();
                f.push(x);
                *self = Column::Float(f);
            }
            (_, v) => {
                let old = std::mem::replace(self, Column::Object(Vec::new()));
                let mut objs = old.into_objects(py)?;
                objs.push(v.into_py(py)?);
                *self = Column::Object(objs);
            }
        }
        Ok(())
    }

    fn new_for(v: &Leaf<'_>) -> Column {
        match v {
            Leaf::Int(_) => Column::Int(Vec::new(), Vec::new()),
            Leaf::Float(_) => Column::Float(Vec::new()),
            Leaf::Bool(_) => Column::Bool(Vec::new(), Vec::new()),
            _ => Column::Object(Vec::new()),
        }
    }

    /// ("i", int64 bytes, valid mask bytes) | ("f", float64 bytes, None) | ("b", bytes, mask) | ("o", list, None)
    fn into_py(self, py: Python<'_>) -> PyResult<Py<PyAny>> {
        fn mask(py: Python<'_>, m: &[bool]) -> Py<PyAny> {
            let b: Vec<u8> = m.iter().map(|x| u8::from(*x)).collect();
            PyBytes::new(py, &b).into_any().unbind()
        }
        let t = match self {
            Column::Int(v, m) => {
                let b: Vec<u8> = v.iter().flat_map(|x| x.to_le_bytes()).collect();
                ("i", PyBytes::new(py, &b).into_any().unbind(), mask(py, &m))
            }
            Column::Float(v) => {
                let b: Vec<u8> = v.iter().flat_map(|x| x.to_le_bytes()).collect();
                ("f", PyBytes::new(py, &b).into_any().unbind(), py.None())
            }
            Column::Bool(v, m) => ("b", PyBytes::new(py, &v).into_any().unbind(), mask(py, &m)),
            Column::Object(v) => ("o", PyList::new(py, v)?.into_any().unbind(), py.None()),
        };
        Ok(t.into_pyobject(py)?.into_any().unbind())
    }
}

/// A column's last string and its object, reused while the value repeats.
type LastString = Option<(String, Py<PyAny>)>;

/// The columns being built: one per flat name (`a.b.c`), in the order names first appear.
struct Columns<'py> {
    py: Python<'py>,
    cols: Vec<(String, Column, LastString)>,
    index: crate::convert::FastMap<usize>,
    rows: usize,
    /// The flat name of the member at hand (members read from JSON text).
    name: String,
    paths: Paths,
}

/// The flat names of the tape's members, by their parent's path and the address of their key:
/// a member's column is found without making or hashing its name's text.
struct Paths {
    /// (parent path, key address, key length) ▶ path.
    ids: std::collections::HashMap<(usize, usize, usize), usize, std::hash::BuildHasherDefault<IntHash>>,
    /// Path ▶ flat name.
    names: Vec<String>,
    /// Path ▶ its column, once it has one.
    columns: Vec<Option<usize>>,
    /// Event position ▶ (parent, key address, key length, path) of the last tape: frames
    /// repeat their shapes.
    last: Vec<(usize, usize, usize, usize)>,
}

impl Paths {
    /// The top-level object's path.
    const TOP: usize = 0;

    fn new() -> Paths {
        Paths { ids: Default::default(), names: vec![String::new()], columns: vec![None], last: Vec::new() }
    }

    /// The path of member `key` of the object at `parent`, the tape's event `at`.
    fn child(&mut self, at: usize, parent: usize, key: &'static str) -> usize {
        let ptr = key.as_ptr() as usize;
        if let Some(&(p, k, len, path)) = self.last.get(at) {
            if (p, k, len) == (parent, ptr, key.len()) {
                return path;
            }
        }
        let path = match self.ids.get(&(parent, ptr, key.len())) {
            Some(&path) => path,
            None => {
                let name = match self.names[parent].as_str() {
                    "" => key.to_string(),
                    outer => format!("{outer}.{key}"),
                };
                self.names.push(name);
                self.columns.push(None);
                self.ids.insert((parent, ptr, key.len()), self.names.len() - 1);
                self.names.len() - 1
            }
        };
        if self.last.len() <= at {
            self.last.resize(at + 1, (usize::MAX, 0, 0, 0));
        }
        self.last[at] = (parent, ptr, key.len(), path);
        path
    }
}

/// A hasher for keys of integers (addresses, indices): one multiply per word.
#[derive(Default, Clone, Copy)]
struct IntHash(u64);

impl std::hash::Hasher for IntHash {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        for b in bytes {
            self.write_u64(u64::from(*b));
        }
    }
    fn write_u64(&mut self, v: u64) {
        self.0 = (self.0.rotate_left(26) ^ v).wrapping_mul(0x9e37_79b9_7f4a_7c15);
    }
    fn write_usize(&mut self, v: usize) {
        self.write_u64(v as u64);
    }
}

impl<'py> Columns<'py> {
    /// Add one frame's object, as the decoder's tape, as a row.
    fn row_tape(&mut self, tape: &Tape) -> PyResult<()> {
        // The paths of the open objects.
        let mut open: Vec<usize> = Vec::new();
        let events = &tape.events;
        let mut i = 0;
        while i < events.len() {
            let at = i;
            let e = events[i];
            i += 1;
            let Some(key) = e.key() else {
                // The end of an object.
                open.pop();
                continue;
            };
            let path = match open.last() {
                Some(&parent) => self.paths.child(at, parent, key),
                None => Paths::TOP,
            };
            match e {
                Event::Begin(_) => open.push(path),
                Event::JsonOpen(_, a, b) => {
                    self.name.clone_from(&self.paths.names[path]);
                    self.object(&mut TextParser::new(&tape.text[a..b]))?;
                    open.push(path);
                }
                // Arrays stay one value (a list) in their column.
                Event::BeginArray(_) => {
                    let end = crate::tape::value_end(events, at);
                    let list = crate::tape::value_at(self.py, tape, at..end, &[])?;
                    i = end;
                    self.leaf_at(path, Leaf::Object(list.unbind()))?
                }
                Event::Json(_, a, b) => {
                    self.name.clone_from(&self.paths.names[path]);
                    self.value(&mut TextParser::new(&tape.text[a..b]))?
                }
                // As the text reads back: an integer beyond i64 is a float.
                Event::Uint(_, v) => self.leaf_at(path, i64::try_from(v).map_or(Leaf::Float(v as f64), Leaf::Int))?,
                Event::Bool(_, b) => self.leaf_at(path, Leaf::Bool(b))?,
                Event::Float(_, x) => self.leaf_at(path, Leaf::Float(x))?,
                Event::Null(_) => self.leaf_at(path, Leaf::Null)?,
                Event::Str(_, a, b) => self.leaf_at(path, Leaf::Str(std::borrow::Cow::Borrowed(tape.str(a, b))))?,
                Event::End => unreachable!("handled above"),
            }
        }
        self.rows += 1;
        Ok(())
    }

    /// The value at the reader, of the member named `self.name`: an object's members each in
    /// their column, anything else in this one.
    fn value(&mut self, p: &mut TextParser<'_>) -> PyResult<()> {
        p.ws();
        match p.peek() {
            Some(b'{') => self.object(p),
            // Arrays stay one value (a list) in their column.
            Some(b'[') => {
                let list = p.value(self.py, &[])?.unbind();
                self.leaf(Leaf::Object(list))
            }
            _ => {
                let leaf = p.scalar()?;
                self.leaf(leaf)
            }
        }
    }

    fn object(&mut self, p: &mut TextParser<'_>) -> PyResult<()> {
        p.expect(b'{')?;
        p.ws();
        if p.peek() == Some(b'}') {
            p.advance();
            return Ok(());
        }
        loop {
            p.ws();
            let k = p.string()?;
            p.expect(b':')?;
            let len = self.name.len();
            if len > 0 {
                self.name.push('.');
            }
            self.name.push_str(&k);
            self.value(p)?;
            self.name.truncate(len);
            p.ws();
            match p.peek() {
                Some(b',') => p.advance(),
                Some(b'}') => {
                    p.advance();
                    return Ok(());
                }
                _ => return Err(p.fail("expected ',' or '}'")),
            }
        }
    }

    /// A value of the column named `self.name`.
    fn leaf(&mut self, v: Leaf<'_>) -> PyResult<()> {
        let i = self.column(&v);
        self.push_to(i, v)
    }

    /// The column named `self.name` (made for a first value `v` when new).
    fn column(&mut self, v: &Leaf<'_>) -> usize {
        match self.index.get(self.name.as_str()) {
            Some(i) => *i,
            None => {
                let mut c = Column::new_for(v);
                for _ in 0..self.rows {
                    c.push_missing(self.py);
                }
                self.cols.push((self.name.clone(), c, None));
                self.index.insert(self.name.clone(), self.cols.len() - 1);
                self.cols.len() - 1
            }
        }
    }

    /// A value of the tape's member at `path` (its column found by the path, not its name).
    fn leaf_at(&mut self, path: usize, v: Leaf<'_>) -> PyResult<()> {
        let i = match self.paths.columns[path] {
            Some(i) => i,
            None => {
                self.name.clone_from(&self.paths.names[path]);
                let i = self.column(&v);
                self.paths.columns[path] = Some(i);
                i
            }
        };
        self.push_to(i, v)
    }

    /// Add `v` to column `i` (after the missing values of the rows that lacked it).
    fn push_to(&mut self, i: usize, v: Leaf<'_>) -> PyResult<()> {
        let py = self.py;
        let (_, c, last) = &mut self.cols[i];
        while c.len() < self.rows {
            c.push_missing(py);
        }
        match (v, &mut *c) {
            // Captures repeat their strings (addresses, names): one object per run of them.
            (Leaf::Str(s), Column::Object(objs)) => {
                if let Some((_, obj)) = last.as_ref().filter(|(text, _)| *text == s) {
                    objs.push(obj.clone_ref(py));
                } else {
                    let obj = PyString::new(py, &s).into_any().unbind();
                    objs.push(obj.clone_ref(py));
                    *last = Some((s.into_owned(), obj));
                }
                Ok(())
            }
            (v, c) => c.push(py, v),
        }
    }
}

/// read_columns(path_or_binary_file) -> dict[str, tuple]
///
/// Every frame's flat fields (`bth.psn`, `ip.src`, …) as typed columns, in the order they
/// first appear: ("i", int64 bytes, valid-mask bytes), ("f", float64 bytes, None),
/// ("b", bool bytes, valid-mask bytes) or ("o", list, None). roce.dataframe builds on this.
#[pyfunction]
fn read_columns<'py>(py: Python<'py>, source: &Bound<'py, PyAny>) -> PyResult<Bound<'py, PyDict>> {
    let mut f = Frames::new(source)?;
    f.dec.json.tape = Some(Tape::default());
    let mut t =
        Columns { py, cols: Vec::new(), index: Default::default(), rows: 0, name: String::new(), paths: Paths::new() };
    while f.next()? {
        if let Some(tape) = &f.dec.json.tape {
            t.row_tape(tape)?;
        }
    }
    let d = PyDict::new(py);
    for (name, mut c, _) in t.cols {
        while c.len() < t.rows {
            c.push_missing(py);
        }
        d.set_item(name, c.into_py(py)?)?;
    }
    Ok(d)
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<CaptureReader>()?;
    m.add_function(wrap_pyfunction!(read, m)?)?;
    m.add_function(wrap_pyfunction!(frames, m)?)?;
    m.add_function(wrap_pyfunction!(read_columns, m)?)?;
    Ok(())
}
