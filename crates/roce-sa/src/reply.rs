//! [`Reply`]: the MADs to send back for one received MAD, and how the responder and the
//! ServiceRecord service build the ones they share (error answers, segmented tables).

use core::ops::Deref;

use roce_wire::mad::{self, MadStatus, Method};
use roce_wire::rmpp::{RmppFlags, RmppRepr, RmppType, NO_RESPTIME, RMPP_VERSION};
use roce_wire::sa::{self, SaData, SaMad, SA_DATA_LEN, SA_DATA_OFFSET, SA_HEADER_LEN, SA_HEADER_OFFSET};
use roce_wire::MAD_SIZE;

/// The answer to one MAD: nothing (a response, or a MAD the responder drops), one MAD (every
/// answer but a GetTableResp of more than one segment) or several (the RMPP segments of a
/// GetTableResp, in order). Dereferences to a slice of 256-byte MADs, so `reply.len()`,
/// `reply[0]` and `reply.iter()` work; without an allocation for the one-MAD case.
// The one-MAD variant is inline on purpose: it spares an allocation per transaction.
#[allow(clippy::large_enum_variant)]
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum Reply {
    /// Nothing to send.
    #[default]
    None,
    /// One MAD.
    One([u8; MAD_SIZE]),
    /// Several MADs (RMPP segments), sent in this order.
    Many(Vec<[u8; MAD_SIZE]>),
}

impl Reply {
    /// The MADs as a slice.
    pub fn as_slice(&self) -> &[[u8; MAD_SIZE]] {
        match self {
            Reply::None => &[],
            Reply::One(m) => core::slice::from_ref(m),
            Reply::Many(v) => v,
        }
    }

    /// The MADs in a vector.
    pub fn into_vec(self) -> Vec<[u8; MAD_SIZE]> {
        match self {
            Reply::None => Vec::new(),
            Reply::One(m) => vec![m],
            Reply::Many(v) => v,
        }
    }

    /// The first MAD, if any.
    pub fn first(&self) -> Option<&[u8; MAD_SIZE]> {
        self.as_slice().first()
    }
}

impl Deref for Reply {
    type Target = [[u8; MAD_SIZE]];
    fn deref(&self) -> &Self::Target {
        self.as_slice()
    }
}

impl From<Reply> for Vec<[u8; MAD_SIZE]> {
    fn from(r: Reply) -> Self {
        r.into_vec()
    }
}

impl IntoIterator for Reply {
    type Item = [u8; MAD_SIZE];
    type IntoIter = std::vec::IntoIter<[u8; MAD_SIZE]>;
    fn into_iter(self) -> Self::IntoIter {
        self.into_vec().into_iter()
    }
}

impl<'a> IntoIterator for &'a Reply {
    type Item = &'a [u8; MAD_SIZE];
    type IntoIter = core::slice::Iter<'a, [u8; MAD_SIZE]>;
    fn into_iter(self) -> Self::IntoIter {
        self.as_slice().iter()
    }
}

/// An error answer as OpenSM builds it [osm_sa.c `osm_sa_send_error`]: the request MAD
/// (header, RMPP and SA headers, data) sent back with the status, the method SubnAdmGet for
/// a SubnAdmSet and the request's own otherwise, with the R bit (so GetResp for Get and Set,
/// DeleteResp, GetTableResp, and `method | 0x80` for any other), SM_Key 0 (C15-0.1.5) and,
/// for a GetTable, AttributeOffset 0. The one error answer of the responder and of the
/// ServiceRecord service.
pub(crate) fn error_mad(req: &SaMad, status: MadStatus) -> [u8; MAD_SIZE] {
    error_mad_bytes(&req.to_bytes(), status)
}

/// [`error_mad`] from the request's bytes.
pub(crate) fn error_mad_bytes(request: &[u8; MAD_SIZE], status: MadStatus) -> [u8; MAD_SIZE] {
    let mut b = *request;
    let method = b[mad::field::METHOD] & !mad::METHOD_RESPONSE_BIT;
    let set = u8::from(Method::Set);
    b[mad::field::METHOD] = if method == set { u8::from(Method::Get) } else { method } | mad::METHOD_RESPONSE_BIT;
    b[mad::field::STATUS].copy_from_slice(&status.0.to_be_bytes());
    let mut sa = sa::Packet::new_unchecked(&mut b[SA_HEADER_OFFSET..SA_DATA_OFFSET]);
    sa.set_sm_key(0);
    if method == u8::from(Method::GetTable) {
        sa.set_attribute_offset(0);
    }
    b
}

/// A GetTableResp of `count` records of `record_len` bytes each (`emit` writes record `i` into
/// its slot), cut into 200-byte RMPP DATA segments; AttributeOffset `offset_words`, 0 for an
/// empty table.
pub(crate) fn segmented_table_reply(
    req: &SaMad,
    record_len: usize,
    count: usize,
    offset_words: u16,
    emit: impl Fn(usize, &mut [u8]),
) -> Reply {
    let data_len = count * record_len;
    let segments = data_len.div_ceil(SA_DATA_LEN).max(1);
    let mut stream = vec![0u8; segments * SA_DATA_LEN];
    for i in 0..count {
        emit(i, &mut stream[i * record_len..(i + 1) * record_len]);
    }
    let offset = if count == 0 { 0 } else { offset_words };
    let mut out = Vec::with_capacity(segments);
    for (s, chunk) in stream.chunks_exact(SA_DATA_LEN).enumerate() {
        let (first, last) = (s == 0, s + 1 == segments);
        let mut flags = RmppFlags::ACTIVE;
        if first {
            flags |= RmppFlags::FIRST;
        }
        if last {
            flags |= RmppFlags::LAST;
        }
        // PayloadLength: the bytes after the RMPP header in the whole transfer on the first
        // segment, in this segment on the last, 0 in between (the SA header repeats in each).
        let payload = if last {
            SA_HEADER_LEN + data_len - SA_DATA_LEN * (segments - 1)
        } else if first {
            data_len + SA_HEADER_LEN * segments
        } else {
            0
        };
        let mut data = [0u8; SA_DATA_LEN];
        data.copy_from_slice(chunk);
        let mut m = req.response_to(Method::GetTable, MadStatus::SUCCESS, SaData::Raw(data));
        m.rmpp = RmppRepr {
            version: RMPP_VERSION,
            rmpp_type: RmppType::Data,
            resp_time: NO_RESPTIME,
            flags,
            status: 0,
            data1: s as u32 + 1,
            data2: payload as u32,
        };
        m.sa.attribute_offset = offset;
        out.push(m.to_bytes());
    }
    if out.len() == 1 {
        Reply::One(out[0])
    } else {
        Reply::Many(out)
    }
}
