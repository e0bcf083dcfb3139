//! Serialization helpers for the optional `serde` feature: byte arrays as lowercase hex
//! strings, GIDs as IPv6-style text.

/// Serialize bytes as one lowercase hex string.
pub fn hex<S: serde::Serializer, const N: usize>(bytes: &[u8; N], s: S) -> Result<S::Ok, S::Error> {
    s.collect_str(&crate::HexBytes(bytes))
}

impl serde::Serialize for crate::Gid {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}
