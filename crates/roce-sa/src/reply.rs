//! [`Reply`]: the MADs to send back for one received MAD.

use core::ops::Deref;

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
