//! The outcome of an application's SA query ([`crate::Stack::sa_query`]): one MAD, or an RMPP
//! message reassembled by the SA client (rmpp_recv.rs).

use roce_wire::sa::{SaMad, SA_DATA_LEN, SA_DATA_OFFSET, SA_HEADER_LEN};

use crate::Errno;

/// The outcome of an application's SA query: the response (whatever its status) with the SA
/// data of the whole answer — every RMPP DATA segment's, reassembled — or the errno when the SA
/// never answered within the retries (ETIMEDOUT) or its RMPP transfer failed (`rmpp_error`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SaQueryResult {
    /// The handle `sa_query` returned.
    pub handle: u64,
    /// The SA's response (the first segment's headers for an RMPP message), or the error.
    pub result: Result<SaMad, Errno>,
    /// The SA data of the whole answer: for an RMPP message, every segment's data up to the
    /// Last segment's PayloadLength; for one MAD, its 200 data bytes (a single DATA segment:
    /// PayloadLength − 20 of them). Empty on an error.
    pub data: bytes::Bytes,
    /// The RMPP DATA segments the answer came in (0: one MAD without RMPP).
    pub segments: u32,
    /// The RMPP ACKs sent for it.
    pub acks: u32,
    /// Why an RMPP answer ended without a table (`result` holds its errno).
    pub rmpp_error: Option<crate::RmppError>,
}

impl SaQueryResult {
    /// The answer to `handle`: one MAD (`table` None) or a reassembled RMPP message.
    pub(crate) fn answer(handle: u64, mad: &[u8], table: Option<Box<crate::rmpp_recv::Reassembly>>) -> SaQueryResult {
        use roce_wire::rmpp::RmppType;
        // A table's headers are its first segment's (the MAD at hand is its Last).
        let head = table.as_ref().map_or(mad, |re| &re.first[..]);
        let Ok(resp) = SaMad::parse(head) else { return Self::failed(handle, Errno::EINVAL, None) };
        let (data, segments, acks) = match table {
            Some(re) => (bytes::Bytes::from(re.data), re.seg_num, re.acks),
            None if resp.rmpp.is_active() && resp.rmpp.rmpp_type == RmppType::Data => {
                let n = (resp.rmpp.data2 as usize).saturating_sub(SA_HEADER_LEN).min(SA_DATA_LEN);
                (bytes::Bytes::copy_from_slice(&mad[SA_DATA_OFFSET..SA_DATA_OFFSET + n]), 1, 1)
            }
            None => (bytes::Bytes::copy_from_slice(&mad[SA_DATA_OFFSET..SA_DATA_OFFSET + SA_DATA_LEN]), 0, 0),
        };
        SaQueryResult { handle, result: Ok(resp), data, segments, acks, rmpp_error: None }
    }

    /// A failed query.
    pub(crate) fn failed(handle: u64, errno: Errno, rmpp_error: Option<crate::RmppError>) -> SaQueryResult {
        SaQueryResult { handle, result: Err(errno), data: bytes::Bytes::new(), segments: 0, acks: 0, rmpp_error }
    }

    /// The records of the answer's data: `record_len` bytes every AttributeOffset × 8 bytes,
    /// those that end within the data; none when AttributeOffset is 0 (an empty table) or
    /// smaller than a record.
    pub fn records(&self, record_len: usize) -> impl Iterator<Item = &[u8]> {
        let stride = self.result.as_ref().map_or(0, |m| usize::from(m.sa.attribute_offset) * 8);
        let data = &self.data[..];
        let n = if stride >= record_len && record_len > 0 {
            data.len().saturating_sub(record_len) / stride + usize::from(data.len() >= record_len)
        } else {
            0
        };
        (0..n).map(move |i| &data[i * stride..i * stride + record_len])
    }
}
