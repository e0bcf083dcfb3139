//! RTU (ReadyToUse, attribute 0x0014): IBTA vol. 1 table 111, `struct cm_rtu_msg`
//! [cm_msgs.h], `CM_RTU_*` [ibta_vol1_c12.h]. Offsets are from the start of the data area
//! (MAD byte 24); tshark 4.0 names are `infiniband.cm.rtu.*`.

use crate::cm::{check_data_len, DATA_LEN};

/// Byte positions inside the RTU body (data-area offsets).
pub mod field {
    use crate::field::*;
    /// Local Communication ID. tshark: `infiniband.cm.rtu.localcommid`.
    pub const LOCAL_COMM_ID: Field = 0..4;
    /// Remote Communication ID. tshark: `infiniband.cm.rtu.remotecommid`.
    pub const REMOTE_COMM_ID: Field = 4..8;
    /// Private data (224 bytes). tshark: `infiniband.cm.rtu.private`.
    pub const PRIVATE_DATA: Field = 8..232;
}

fixed_view!(check: check_data_len);

wire_fields! {
    /// An owned RTU body.
    #[cfg_attr(feature = "serde", derive(serde::Serialize))]
    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    pub struct Repr {
        /// Local Communication ID.
        local_comm_id, set_local_comm_id: u32 = be32(field::LOCAL_COMM_ID),
        /// Remote Communication ID.
        remote_comm_id, set_remote_comm_id: u32 = be32(field::REMOTE_COMM_ID),
        /// Private data (224 bytes).
        private_data, private_data_mut: [u8; 224] = bytes(field::PRIVATE_DATA),
    }
}

cm_body!(private_data: 224, "IB_CM_RTU_PRIVATE_DATA_SIZE");

#[cfg(test)]
mod tests {
    extern crate std;
    use super::*;
    use crate::cm::test_util::*;
    use crate::error::{Error, Layer};
    use proptest::prelude::*;

    #[test]
    fn golden_kernel_rtu() {
        // cm_format_rtu: local ID, remote ID, optional private data.
        let mut d = [0u8; DATA_LEN];
        iba_set32(&mut d, 0, 32, 0x1234_5678); // CM_RTU_LOCAL_COMM_ID
        iba_set32(&mut d, 4, 32, 0xCAFE_0001); // CM_RTU_REMOTE_COMM_ID
        iba_set_mem(&mut d, 8, b"go"); // CM_RTU_PRIVATE_DATA
        let mut r = Repr { local_comm_id: 0x1234_5678, remote_comm_id: 0xCAFE_0001, ..Repr::default() };
        r.private_data[..2].copy_from_slice(b"go");
        let mut out = [0u8; DATA_LEN];
        r.emit_bytes(&mut out);
        assert_eq!(out, d);
        assert_eq!(Repr::parse_bytes(&d).unwrap(), r);
    }

    #[test]
    fn truncation() {
        let d = [0u8; DATA_LEN];
        for len in 0..DATA_LEN {
            assert_eq!(Repr::parse_bytes(&d[..len]), Err(Error::len(Layer::Cm, 24, DATA_LEN, len)));
        }
    }

    proptest! {
        #[test]
        fn repr_round_trips(l in any::<u32>(), r in any::<u32>(), pd in bytes::<224>()) {
            let repr = Repr { local_comm_id: l, remote_comm_id: r, private_data: pd };
            let mut buf = [0u8; DATA_LEN];
            repr.emit_bytes(&mut buf);
            prop_assert_eq!(Repr::parse_bytes(&buf).unwrap(), repr);
        }

        #[test]
        fn bytes_round_trip(d in bytes::<DATA_LEN>()) {
            let mut out = [0u8; DATA_LEN];
            Repr::parse_bytes(&d).unwrap().emit_bytes(&mut out);
            prop_assert_eq!(&out[..], &d[..]);
        }
    }
}
