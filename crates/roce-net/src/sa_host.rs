//! An SA host: a [`roce_cm::Stack`] (for ARP/ND and RoCEv2 framing on QP1) with a
//! [`roce_sa::SaResponder`] registered as its class-0x03 agent, the way `roce sa-agent` sits on
//! a kernel's umad. Used in-process on the simulated link and by `roce demo`.

use roce_cm::{Instant, Stack, StackConfig};
use roce_sa::{ConfigError, Requester, RmppSender, SaConfig, SaResponder};

use crate::node::Node;

/// A host whose QP1 answers SA requests with an in-process responder.
#[derive(Debug)]
pub struct SaHost {
    /// The port's engine (ARP, framing, QP1).
    pub stack: Stack,
    /// The SA.
    pub sa: SaResponder,
    /// The SA's windowed RMPP sender (its tables go out as the requesters' ACKs admit).
    pub rmpp: RmppSender,
    /// MADs answered (responses sent, RMPP segments counted one each).
    pub answered: u64,
}

impl SaHost {
    /// A host with this port configuration and SA configuration, or the reason the SA
    /// configuration is refused.
    pub fn new(port: StackConfig, sa: SaConfig) -> Result<SaHost, ConfigError> {
        Ok(SaHost::with_responder(port, SaResponder::new(sa)?))
    }

    /// A host with this port configuration and the default SA configuration.
    pub fn with_defaults(port: StackConfig) -> SaHost {
        SaHost::with_responder(port, SaResponder::with_defaults())
    }

    fn with_responder(port: StackConfig, sa: SaResponder) -> SaHost {
        let mut stack = Stack::new(port);
        stack.register_mad_agent(0x03);
        SaHost { stack, sa, rmpp: RmppSender::default(), answered: 0 }
    }

    /// Hand every queued SA request to the responder (through the RMPP sender) and queue its
    /// answers and the segments the requesters' windows admit.
    pub fn pump(&mut self, now: Instant) {
        let at = now.since_epoch();
        // Each request is read where it waits in QP1's queue, not copied out.
        let (sa, rmpp) = (&mut self.sa, &mut self.rmpp);
        let sent = self
            .stack
            .answer_mad_requests(|req| rmpp.handle_mad(sa, Requester::new(req.src_gid, req.src_qp), &req.mad, at));
        self.answered += sent as u64;
        while let Some((to, mad)) = self.rmpp.poll_transmit(at) {
            self.stack.send_mad(to.gid.to_ip(), to.qpn, &mad);
            self.answered += 1;
        }
    }
}

impl Node for SaHost {
    fn handle_frame(&mut self, now: Instant, frame: &[u8]) {
        self.stack.handle_frame(now, frame);
        self.sa.handle_time(now.since_epoch());
        self.pump(now);
    }

    fn poll_transmit(&mut self, now: Instant, buf: &mut [u8]) -> Option<usize> {
        self.stack.poll_transmit(now, buf)
    }

    fn poll_timeout(&self) -> Option<Instant> {
        let rmpp =
            self.rmpp.poll_timeout().map(|d| Instant::from_nanos(u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)));
        match (self.stack.poll_timeout(), rmpp) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    fn handle_timeout(&mut self, now: Instant) {
        self.stack.handle_timeout(now);
        self.sa.handle_time(now.since_epoch());
        self.rmpp.handle_timeout(now.since_epoch());
        self.pump(now);
    }
}
