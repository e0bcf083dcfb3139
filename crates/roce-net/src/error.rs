//! The typed errors of roce-net's I/O. They travel inside `io::Error` (kind `Other`), so the
//! `io::Result` signatures stay; a caller that wants the cause downcasts
//! (`e.get_ref().and_then(|e| e.downcast_ref::<NetError>())`).

use std::io;

use roce_cm::Errno;

/// What went wrong below the engine, with the values that say why.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum NetError {
    /// An engine call refused (the call's name and the kernel errno it returned).
    #[error("{call}: {errno}")]
    Cm {
        /// The `Stack` call.
        call: &'static str,
        /// Its error.
        errno: Errno,
    },
    /// ibsim's connect reply named a client number beyond its table.
    #[error("ibsim: bad client number {0} in the connect reply")]
    BadClient(u32),
    /// The node found by NodeGUID answers with another NodeGUID when attached by name.
    #[error("ibsim: node {description:?} has NodeGUID {found:#018x}, not {expected:#018x}")]
    NodeGuid {
        /// The node's description.
        description: String,
        /// The NodeGUID of the client attached.
        found: u64,
        /// The NodeGUID looked for.
        expected: u64,
    },
    /// ibsim refused a control request.
    #[error("ibsim @{sockname}:ctl refused control request {kind} for client {client}")]
    CtlRefused {
        /// The simulator's socket name.
        sockname: String,
        /// The request type.
        kind: u32,
        /// Our client number.
        client: u32,
    },
    /// A directed-route SubnGet answered with a non-zero status.
    #[error("ibsim: SubnGet attribute {attribute:#06x} along {path:?} answered with status {status:#06x}")]
    SmpStatus {
        /// The attribute asked for.
        attribute: u16,
        /// The directed route.
        path: Vec<u8>,
        /// The MAD status (without the direction bit).
        status: u16,
    },
    /// The interface's index does not fit `sockaddr_ll`.
    #[error("interface index out of range")]
    InterfaceIndex,
}

impl From<NetError> for io::Error {
    fn from(e: NetError) -> io::Error {
        io::Error::other(e)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_and_downcast() {
        let e: io::Error = NetError::Cm { call: "join_multicast", errno: Errno::EINVAL }.into();
        assert_eq!(e.kind(), io::ErrorKind::Other);
        assert_eq!(e.to_string(), format!("join_multicast: {}", Errno::EINVAL));
        let inner = e.get_ref().and_then(|e| e.downcast_ref::<NetError>());
        assert_eq!(inner, Some(&NetError::Cm { call: "join_multicast", errno: Errno::EINVAL }));
        assert_eq!(NetError::BadClient(99).to_string(), "ibsim: bad client number 99 in the connect reply");
    }
}
