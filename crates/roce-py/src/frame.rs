//! `roce.Frame`: a dissected frame whose Python values are made only when read.
//!
//! `roce.decode` makes the whole dict of a frame (≈ 70 objects): most of its cost is CPython's,
//! not the decoder's. A script that reads a field or two (`f.bth.psn`, scapy's `pkt[BTH].psn`)
//! needs none of the rest. A `Frame` checks the whole frame when it is made and keeps its bytes:
//!
//! - a RoCEv2 frame that is clean (rxe would take it; every byte is in its fields) or whose
//!   only fault is its ICRC: the wire crate's walk and ICRC check only, keeping the BTH and
//!   extension headers and whether the ICRC was right; its transport members are
//!   rendered by the decoder's own renderer ([`roce_decode::decode::transport_json`]) on the
//!   first read of one, the rest (a MAD's records and their `mad_error` too) by the decoder on
//!   the first read of another member. In a capture, a frame that carries a MAD is decoded at
//!   once instead: RMPP segments are put together across frames;
//! - any other frame (an error, ARP, IGMP, another link type): the decoder runs at once, as
//!   `decode` and `read` run it, and its JSON text is kept.
//!
//! Member values are read from that text when asked for (a `LayerView` holds the text and where
//! its object starts), so the values are the decoder's: `f.to_dict() == roce.decode(bytes)`.

use pyo3::exceptions::{PyAttributeError, PyKeyError};
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict, PyList, PyString};
use roce_decode::decode::{transport_json, Decoder, Meta};
use roce_decode::json_out::Json;
use roce_wire::demux::{Checks, Payload, Sliced};
use roce_wire::ext::ExtHeaders;
use std::sync::Arc;

use crate::convert::{bytes_of, json_text_to_py, TextParser};
use crate::{lone_frame, not_even_link_text, CAPTURE_MEMBERS};

/// The members a clean RoCEv2 frame may lack besides the MAD's (its extension headers): a
/// read of one (or of `error`) answers "absent" without running the decoder.
const EXT_MEMBERS: [&str; 9] =
    ["deth", "xrceth", "feth", "reth", "atomic_eth", "aeth", "atomic_ack_eth", "immdt", "ieth"];

/// The methods and properties of `Frame`: an attribute of these names is the
/// method, any other the member.
const METHODS: [&str; 8] = ["to_dict", "summary", "layers", "keys", "items", "values", "get", "data"];

/// What the wire walk kept of a RoCEv2 frame that is clean or whose only fault is its ICRC.
struct Transport {
    bth: roce_wire::bth::Repr,
    ext: ExtHeaders,
    /// The ICRC was right (the frame is clean): the decoder's object has no `error` then.
    icrc_ok: bool,
}

/// The walk of a RoCEv2 Ethernet frame whose transport members the decoder writes from the
/// same BTH and extension headers (see `Decoder::roce`): a clean frame (no `error`, no `raw`),
/// or one whose only fault is its ICRC (the strict walk's refusal, the last check it makes:
/// nothing before it refused) and that the walk covers to its last byte. With `mad_too`
/// false, a frame that carries a MAD is left to the decoder (a capture's RMPP state goes with
/// it).
fn clean_transport(data: &[u8], link_type: u32, mad_too: bool) -> Option<Transport> {
    if link_type != roce_decode::capture::linktype::ETHERNET {
        return None;
    }
    let Ok(Sliced { payload: Payload::RoceV2 { packet, refused }, .. }) = Sliced::from_ethernet(data, Checks::Lax)
    else {
        return None;
    };
    let icrc_ok = match refused {
        None => true,
        Some(roce_wire::Error::Content { kind: roce_wire::ContentError::IcrcMismatch { .. }, .. }) => false,
        Some(_) => return None,
    };
    let f = packet.to_frame().ok()?;
    let (bth, ext) = (f.repr.bth, f.repr.ext);
    // The decoder reads a MAD whenever either end is QP1 and a DETH is there.
    let gsi = (bth.dest_qp == 1 || ext.deth.is_some_and(|d| d.src_qp == 1)) && ext.deth.is_some();
    // Bytes the fields do not give back come along as `raw`.
    let covered = f.offsets.end + f.trailer.len() == data.len();
    ((mad_too || !gsi) && covered).then_some(Transport { bth, ext, icrc_ok })
}

/// A JSON text shared by a frame and its views.
type Text = Arc<Vec<u8>>;

/// Where the value of member `name` of the object at `at` of `text` starts.
fn find(text: &[u8], at: usize, name: &str) -> PyResult<Option<usize>> {
    let mut found = None;
    TextParser::at(text, at).members(|k, a| {
        let hit = k == name.as_bytes();
        if hit {
            found = Some(a);
        }
        hit
    })?;
    Ok(found)
}

/// The value at `start` of `text`: an object as its LayerView, anything else as json.loads
/// gives it.
fn value_at<'py>(py: Python<'py>, text: &Text, start: usize) -> PyResult<Bound<'py, PyAny>> {
    if text.get(start) == Some(&b'{') {
        return Ok(Bound::new(py, LayerView { text: text.clone(), at: start })?.into_any());
    }
    TextParser::at(text, start).value(py, &[])
}

/// Frame(frame: bytes, link_type: int = 1)
///
/// One frame, dissected and checked at once (the same verdict and `error` as `roce.decode`),
/// whose values are made only when read: `f.bth.psn`, `f["bth"]["psn"]`, `"reth" in f`,
/// `f.layers`, `f.summary()`, `f.to_dict()` (== `roce.decode(frame)`). A Frame is a read-only
/// Mapping of the members of `roce decode --json`'s object; a member that is an object comes
/// as a `LayerView` (a read-only Mapping with attribute access too). Raises DecodeError when
/// the frame is not even Ethernet (or its link type's header), as decode does.
///
/// A clean RoCEv2 frame (rxe would take it), or one whose only fault is its ICRC, is walked
/// and its ICRC checked by the wire crate;
/// its transport members (opcode … bth and the extension headers) are rendered on the first
/// read, by the decoder's own renderer; any other member (and a MAD's records, with their
/// `mad_error`) by the decoder on the first read of one. Any other frame is decoded at once.
#[pyclass(module = "roce", mapping)]
pub struct Frame {
    data: Py<PyBytes>,
    meta: Meta,
    /// Made from bytes alone (no capture): the capture's own members are left out.
    lone: bool,
    /// The wire walk of a clean RoCEv2 frame (or one with a bad ICRC only), and its transport
    /// members' text once rendered.
    transport: Option<(Transport, Option<Text>)>,
    /// The decoder's JSON text and summary (made at once unless `transport`, else on demand).
    text: Option<(Text, String)>,
    /// Members read so far (name ▶ value), from the first read on.
    cache: Option<Py<PyDict>>,
}

impl Frame {
    /// A frame of a capture (`lone`: made from bytes alone); a frame that is not a clean
    /// RoCEv2 one (nor, in a capture, one that carries a MAD) is decoded now by `dec`.
    pub fn make(py: Python<'_>, data: Py<PyBytes>, meta: Meta, lone: bool, dec: &mut Decoder) -> Frame {
        let transport = clean_transport(data.as_bytes(py), meta.linktype, lone).map(|t| (t, None));
        let text = transport.is_none().then(|| run(dec, &meta, data.as_bytes(py)));
        Frame { data, meta, lone, transport, text, cache: None }
    }

    fn text(&mut self, py: Python<'_>) -> &(Text, String) {
        let (data, meta) = (&self.data, &self.meta);
        self.text.get_or_insert_with(|| run(&mut Decoder::new(), meta, data.as_bytes(py)))
    }

    fn skip(&self) -> &'static [&'static str] {
        if self.lone {
            &CAPTURE_MEMBERS
        } else {
            &[]
        }
    }

    /// A fresh dict of the whole object.
    fn dict<'py>(&mut self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let skip = self.skip();
        let (text, _) = self.text(py);
        Ok(json_text_to_py(py, text, skip)?.cast_into::<PyDict>()?)
    }

    /// The member names, in the decoder's order.
    fn names(&mut self, py: Python<'_>) -> PyResult<Vec<String>> {
        self.names_where(py, |_, _| true)
    }

    /// The names of the members that `keep` keeps (given a name and whether its value is an
    /// object), in the decoder's order; the capture's own left out of a lone frame's.
    fn names_where(&mut self, py: Python<'_>, keep: impl Fn(&str, bool) -> bool) -> PyResult<Vec<String>> {
        let skip = self.skip();
        let (text, _) = self.text(py);
        let mut out = Vec::new();
        TextParser::new(text).members(|k, a| {
            let k = String::from_utf8_lossy(k);
            if !skip.contains(&k.as_ref()) && keep(&k, text[a] == b'{') {
                out.push(k.into_owned());
            }
            false
        })?;
        Ok(out)
    }

    /// A member's value (an object as its LayerView), or None when the frame has no such
    /// member; kept for the next read.
    fn member<'py>(&mut self, py: Python<'py>, name: &Bound<'py, PyString>) -> PyResult<Option<Bound<'py, PyAny>>> {
        if let Some(v) = self.cached(py, name)? {
            return Ok(Some(v));
        }
        with_name(name, |n| self.member_named(py, name, n))
    }

    /// A member read before.
    fn cached<'py>(&self, py: Python<'py>, name: &Bound<'py, PyString>) -> PyResult<Option<Bound<'py, PyAny>>> {
        match &self.cache {
            Some(c) => c.bind(py).get_item(name),
            None => Ok(None),
        }
    }

    /// `member`, past the cache, with the name as text too.
    fn member_named<'py>(
        &mut self,
        py: Python<'py>,
        name: &Bound<'py, PyString>,
        n: &str,
    ) -> PyResult<Option<Bound<'py, PyAny>>> {
        let cache = self.cache.get_or_insert_with(|| PyDict::new(py).unbind()).bind(py).clone();
        let v = match self.locate(py, n)? {
            Some((text, at)) => value_at(py, &text, at)?,
            None => return Ok(None),
        };
        cache.set_item(name, &v)?;
        Ok(Some(v))
    }

    /// The text that holds member `n` and where its value starts.
    fn locate(&mut self, py: Python<'_>, n: &str) -> PyResult<Option<(Text, usize)>> {
        if let Some((t, rendered)) = &mut self.transport {
            let text = rendered.get_or_insert_with(|| {
                // The transport members, by the decoder's renderer.
                let mut j = Json::default();
                j.buf.reserve(512);
                j.begin("");
                transport_json(&mut j, &t.bth, &t.ext);
                j.end();
                Arc::new(j.buf)
            });
            if let Some(a) = find(text, 0, n)? {
                return Ok(Some((text.clone(), a)));
            }
            if EXT_MEMBERS.contains(&n) || (n == "error" && t.icrc_ok) {
                return Ok(None);
            }
        }
        if self.lone && CAPTURE_MEMBERS.contains(&n) {
            return Ok(None);
        }
        let text = self.text(py).0.clone();
        Ok(find(&text, 0, n)?.map(|a| (text, a)))
    }

    fn missing(name: &Bound<'_, PyAny>) -> PyErr {
        PyKeyError::new_err(name.clone().unbind())
    }
}

/// Decode one frame: the JSON text and the summary.
fn run(dec: &mut Decoder, meta: &Meta, data: &[u8]) -> (Text, String) {
    dec.json.off = false;
    dec.summary.off = false;
    dec.decode(meta, data);
    (Arc::new(dec.json.buf.clone()), dec.summary.text.clone())
}

thread_local! {
    /// The text of the attribute names seen, by the name object (held, so that its address
    /// stays its own): converting a name to UTF-8 makes a bytes object under the 3.9 limited
    /// API, and scripts read the same few names again and again.
    static NAMES: std::cell::RefCell<NameTexts> = std::cell::RefCell::new(NameTexts::new());
}

/// Name object's address ▶ the object and its text.
type NameTexts = std::collections::HashMap<usize, (Py<PyString>, std::rc::Rc<str>)>;

/// The names kept (an attribute name is interned: a script has a few dozen).
const MAX_NAMES: usize = 1024;

/// `f` with the text of `name`.
fn with_name<R>(name: &Bound<'_, PyString>, f: impl FnOnce(&str) -> PyResult<R>) -> PyResult<R> {
    let key = name.as_ptr() as usize;
    let known = NAMES.with(|m| m.borrow().get(&key).map(|(_, t)| t.clone()));
    let text = match known {
        Some(t) => t,
        None => {
            let t: std::rc::Rc<str> = name.to_cow()?.into();
            NAMES.with(|m| {
                let mut m = m.borrow_mut();
                if m.len() < MAX_NAMES {
                    m.insert(key, (name.clone().unbind(), t.clone()));
                }
            });
            t
        }
    };
    f(&text)
}

/// The values of (name, value) pairs.
fn values_of<'py>(py: Python<'py>, items: &Bound<'py, PyList>) -> PyResult<Bound<'py, PyList>> {
    let v = items.iter().map(|t| t.get_item(1)).collect::<PyResult<Vec<_>>>()?;
    PyList::new(py, v)
}

/// The attribute as Python finds it without our `__getattribute__` (methods, properties).
fn generic_getattr<'py>(o: &Bound<'py, PyAny>, name: &Bound<'py, PyString>) -> PyResult<Bound<'py, PyAny>> {
    // SAFETY: both pointers are live objects held by the Bounds; the call returns a new
    // reference or NULL with an exception set, as pyo3's own default `tp_getattro` expects.
    unsafe {
        let r = pyo3::ffi::PyObject_GenericGetAttr(o.as_ptr(), name.as_ptr());
        Bound::from_owned_ptr_or_err(o.py(), r)
    }
}

fn bool_object(py: Python<'_>, b: bool) -> PyResult<Py<PyAny>> {
    Ok(b.into_pyobject(py)?.to_owned().into_any().unbind())
}

#[pymethods]
impl Frame {
    #[new]
    #[pyo3(signature = (frame, link_type = 1))]
    fn new(py: Python<'_>, frame: &Bound<'_, PyAny>, link_type: u32) -> PyResult<Frame> {
        let data = match frame.cast::<PyBytes>() {
            Ok(b) => b.clone().unbind(),
            Err(_) => PyBytes::new(py, &bytes_of(frame, "frame")?).unbind(),
        };
        let len = data.as_bytes(py).len();
        let f = Frame::make(py, data, lone_frame(link_type, len), true, &mut Decoder::new());
        if let Some((text, _)) = &f.text {
            if let Some(e) = not_even_link_text(py, text, link_type, len) {
                return Err(e);
            }
        }
        Ok(f)
    }

    fn __getattribute__<'py>(slf: &Bound<'py, Self>, name: &Bound<'py, PyString>) -> PyResult<Bound<'py, PyAny>> {
        let py = slf.py();
        // A member read before: the common case, without converting the name.
        if let Some(v) = slf.borrow().cached(py, name)? {
            return Ok(v);
        }
        with_name(name, |n| {
            if n.starts_with('_') || METHODS.contains(&n) {
                return generic_getattr(slf.as_any(), name);
            }
            match slf.borrow_mut().member_named(py, name, n)? {
                Some(v) => Ok(v),
                None => Err(PyAttributeError::new_err(format!("this frame has no member {n:?}"))),
            }
        })
    }

    fn __getitem__<'py>(&mut self, py: Python<'py>, key: &Bound<'py, PyAny>) -> PyResult<Bound<'py, PyAny>> {
        let Ok(name) = key.cast::<PyString>() else { return Err(Frame::missing(key)) };
        self.member(py, name)?.ok_or_else(|| Frame::missing(key))
    }

    fn __contains__(&mut self, py: Python<'_>, key: &Bound<'_, PyAny>) -> PyResult<bool> {
        let Ok(name) = key.cast::<PyString>() else { return Ok(false) };
        Ok(self.member(py, name)?.is_some())
    }

    /// get(name, default=None): the member, or default.
    #[pyo3(signature = (key, default = None))]
    fn get<'py>(
        &mut self,
        py: Python<'py>,
        key: &Bound<'py, PyAny>,
        default: Option<Bound<'py, PyAny>>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let found = match key.cast::<PyString>() {
            Ok(name) => self.member(py, name)?,
            Err(_) => None,
        };
        Ok(found.or(default).unwrap_or_else(|| py.None().into_bound(py)))
    }

    fn __len__(&mut self, py: Python<'_>) -> PyResult<usize> {
        Ok(self.names(py)?.len())
    }

    fn __iter__<'py>(&mut self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        self.keys(py)?.try_iter().map(Bound::into_any)
    }

    /// The member names, in the decoder's order.
    fn keys<'py>(&mut self, py: Python<'py>) -> PyResult<Bound<'py, PyList>> {
        PyList::new(py, self.names(py)?)
    }

    /// The members' values (objects as LayerViews), in the decoder's order.
    fn values<'py>(&mut self, py: Python<'py>) -> PyResult<Bound<'py, PyList>> {
        values_of(py, &self.items(py)?)
    }

    /// (name, value) pairs (objects as LayerViews), in the decoder's order.
    fn items<'py>(&mut self, py: Python<'py>) -> PyResult<Bound<'py, PyList>> {
        let mut out = Vec::new();
        for k in self.names(py)? {
            let name = PyString::new(py, &k);
            let v = self.member(py, &name)?.unwrap_or_else(|| py.None().into_bound(py));
            out.push((name, v));
        }
        PyList::new(py, out)
    }

    /// to_dict() -> dict: the whole object, a new dict equal to `roce.decode(bytes)` (or, for a
    /// frame of `roce.frames`, to the object `roce.read` gives).
    // `&mut`: the decoder's text of a clean frame is made on the first call.
    #[allow(clippy::wrong_self_convention)]
    fn to_dict<'py>(&mut self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        self.dict(py)
    }

    /// summary() -> str: the one-line summary `roce decode` prints.
    fn summary(&mut self, py: Python<'_>) -> String {
        self.text(py).1.clone()
    }

    /// The layers present (the members that are objects, `error` and `mad_error` aside), in
    /// wire order.
    #[getter]
    fn layers(&mut self, py: Python<'_>) -> PyResult<Vec<String>> {
        self.names_where(py, |k, object| object && k != "error" && k != "mad_error")
    }

    /// The frame's bytes.
    #[getter]
    fn data(&self, py: Python<'_>) -> Py<PyBytes> {
        self.data.clone_ref(py)
    }

    fn __bytes__(&self, py: Python<'_>) -> Py<PyBytes> {
        self.data.clone_ref(py)
    }

    fn __eq__<'py>(slf: &Bound<'py, Self>, other: &Bound<'py, PyAny>) -> PyResult<Py<PyAny>> {
        let py = slf.py();
        let eq = if slf.is(other) {
            true
        } else if let Ok(o) = other.cast::<Frame>() {
            let theirs = o.borrow_mut().dict(py)?;
            slf.borrow_mut().dict(py)?.eq(theirs)?
        } else if other.is_instance_of::<PyDict>() {
            slf.borrow_mut().dict(py)?.eq(other)?
        } else {
            return Ok(py.NotImplemented());
        };
        bool_object(py, eq)
    }

    fn __repr__(&mut self, py: Python<'_>) -> String {
        format!("<roce.Frame {}>", self.text(py).1)
    }
}

/// One member of a frame that is an object (`bth`, `reth`, `mcmember`, `error` …): a
/// read-only Mapping of its fields, also read as attributes (`f.bth.psn`; a field that shares
/// a method's name, such as `items`, is the field); an object inside it comes as a LayerView
/// too. Its values are read from the decoder's text when asked for. Equal to the dict
/// `roce.decode` gives for it; `to_dict()` is that dict.
#[pyclass(module = "roce", frozen, mapping)]
pub struct LayerView {
    text: Text,
    /// Where the object starts in `text`.
    at: usize,
}

impl LayerView {
    fn field<'py>(&self, py: Python<'py>, key: &Bound<'py, PyAny>) -> PyResult<Option<Bound<'py, PyAny>>> {
        let Ok(name) = key.cast::<PyString>() else { return Ok(None) };
        match with_name(name, |n| find(&self.text, self.at, n))? {
            Some(a) => value_at(py, &self.text, a).map(Some),
            None => Ok(None),
        }
    }

    fn dict<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        Ok(TextParser::at(&self.text, self.at).value(py, &[])?.cast_into::<PyDict>()?)
    }
}

#[pymethods]
impl LayerView {
    fn __getattribute__<'py>(slf: &Bound<'py, Self>, name: &Bound<'py, PyString>) -> PyResult<Bound<'py, PyAny>> {
        // Fields first; then the methods.
        match slf.get().field(slf.py(), name)? {
            Some(v) => Ok(v),
            None => generic_getattr(slf.as_any(), name),
        }
    }

    fn __getitem__<'py>(&self, py: Python<'py>, key: &Bound<'py, PyAny>) -> PyResult<Bound<'py, PyAny>> {
        self.field(py, key)?.ok_or_else(|| PyKeyError::new_err(key.clone().unbind()))
    }

    fn __contains__(&self, py: Python<'_>, key: &Bound<'_, PyAny>) -> PyResult<bool> {
        Ok(self.field(py, key)?.is_some())
    }

    fn __len__(&self, py: Python<'_>) -> PyResult<usize> {
        Ok(self.dict(py)?.len())
    }

    fn __iter__<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        self.dict(py)?.keys().try_iter().map(Bound::into_any)
    }

    /// get(name, default=None): the field, or default.
    #[pyo3(signature = (key, default = None))]
    fn get<'py>(
        &self,
        py: Python<'py>,
        key: &Bound<'py, PyAny>,
        default: Option<Bound<'py, PyAny>>,
    ) -> PyResult<Bound<'py, PyAny>> {
        Ok(self.field(py, key)?.or(default).unwrap_or_else(|| py.None().into_bound(py)))
    }

    /// The field names, in the decoder's order.
    fn keys<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyList>> {
        Ok(self.dict(py)?.keys())
    }

    /// The fields' values (objects as LayerViews).
    fn values<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyList>> {
        values_of(py, &self.items(py)?)
    }

    /// (name, value) pairs (objects as LayerViews).
    fn items<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyList>> {
        let mut out = Vec::new();
        TextParser::at(&self.text, self.at).members(|k, a| {
            out.push((String::from_utf8_lossy(k).into_owned(), a));
            false
        })?;
        let v = out.into_iter().map(|(k, a)| Ok((k, value_at(py, &self.text, a)?))).collect::<PyResult<Vec<_>>>()?;
        PyList::new(py, v)
    }

    /// to_dict() -> dict: the fields as a new dict (nested objects as dicts), equal to what
    /// `roce.decode` gives for this member.
    fn to_dict<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        self.dict(py)
    }

    fn __eq__<'py>(&self, py: Python<'py>, other: &Bound<'py, PyAny>) -> PyResult<Py<PyAny>> {
        let eq = if let Ok(o) = other.cast::<LayerView>() {
            self.dict(py)?.eq(o.get().dict(py)?)?
        } else if other.is_instance_of::<PyDict>() {
            self.dict(py)?.eq(other)?
        } else {
            return Ok(py.NotImplemented());
        };
        bool_object(py, eq)
    }

    fn __repr__(&self, py: Python<'_>) -> PyResult<String> {
        Ok(format!("LayerView({})", self.dict(py)?.repr()?))
    }
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<Frame>()?;
    m.add_class::<LayerView>()?;
    Ok(())
}
