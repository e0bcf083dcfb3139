//! DREP (Disconnect Reply, attribute 0x0016): the same layout as RTU — LocalCommID (data
//! bytes 0..4), RemoteCommID (4..8), 224 bytes of private data (8..232)
//! [ibta_vol1_c12.h CM_DREP_*; cm_msgs.h struct cm_drep_msg] — so it is RTU's view and Repr.
//! tshark names its fields `infiniband.cm.drsp.*`.

pub use super::rtu::{field, Packet, Repr};
