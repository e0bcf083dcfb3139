//! The sans-IO engine shape every driver in this crate runs: frames and time in, frames and a
//! deadline out (quinn-proto's taxonomy: `handle_*` inputs, `poll_*` outputs).

use std::any::Any;
use std::collections::VecDeque;

use roce_cm::Instant;

/// A sans-IO protocol engine attached to an Ethernet link.
///
/// The driver (the simulated segment [`crate::sim::SimNet`], or later the raw-socket loop)
/// owns the clock and the I/O. It calls
/// - [`Node::handle_frame`] with every frame the link delivers (a node filters destination
///   MACs itself: the link is a hub);
/// - [`Node::poll_transmit`] until it returns `None` after every input and API call, and sends
///   what it returns;
/// - [`Node::poll_timeout`] to learn when to call [`Node::handle_timeout`] next.
///
/// An idle engine must return `None` from `poll_timeout`: a deadline that never moves past
/// `now` is what [`crate::sim::SimNet::drive_bounded`] reports as a livelock.
///
/// `Any` is a supertrait so that a driver holding `dyn Node` can hand back the concrete type
/// (`SimNet::node::<T>`).
pub trait Node: Any {
    /// A frame arrived at `now` (the whole Ethernet frame, without FCS).
    fn handle_frame(&mut self, now: Instant, frame: &[u8]);

    /// The next frame to send: write it to the start of `buf` and return its length, or `None`
    /// when nothing is queued. `buf` is at least [`crate::sim::TX_BUF_LEN`] bytes under the
    /// simulator.
    fn poll_transmit(&mut self, now: Instant, buf: &mut [u8]) -> Option<usize>;

    /// When [`Node::handle_timeout`] is due next, or `None` when no timer is armed.
    fn poll_timeout(&self) -> Option<Instant>;

    /// A deadline returned by [`Node::poll_timeout`] has passed (`now` is at or after it).
    fn handle_timeout(&mut self, now: Instant);
}

/// A frame a [`ScriptedNode`] received, with the time it arrived.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Received {
    /// When the frame was handed to the node.
    pub at: Instant,
    /// The frame's bytes.
    pub data: Vec<u8>,
}

/// A node the test drives by hand: it sends the frames queued with [`ScriptedNode::send`],
/// records every frame it receives, and fires the wake-ups set with
/// [`ScriptedNode::wake_at`] (counting them). Use it as a scripted peer or a sniffer next to
/// an engine under test.
#[derive(Debug, Default, Clone)]
pub struct ScriptedNode {
    outbox: VecDeque<Vec<u8>>,
    received: Vec<Received>,
    wake: Option<Instant>,
    wakeups: Vec<Instant>,
}

impl ScriptedNode {
    /// A node with nothing queued.
    pub fn new() -> ScriptedNode {
        ScriptedNode::default()
    }

    /// Queue a frame; the driver picks it up on its next transmit poll.
    pub fn send(&mut self, frame: impl Into<Vec<u8>>) {
        self.outbox.push_back(frame.into());
    }

    /// Frames queued and not yet polled.
    pub fn queued(&self) -> usize {
        self.outbox.len()
    }

    /// Every frame received so far, in arrival order.
    pub fn received(&self) -> &[Received] {
        &self.received
    }

    /// Take the frames received so far.
    pub fn take_received(&mut self) -> Vec<Received> {
        std::mem::take(&mut self.received)
    }

    /// Arm (or re-arm) a one-shot wake-up at `at`.
    pub fn wake_at(&mut self, at: Instant) {
        self.wake = Some(at);
    }

    /// The times `handle_timeout` was called.
    pub fn wakeups(&self) -> &[Instant] {
        &self.wakeups
    }
}

impl Node for ScriptedNode {
    fn handle_frame(&mut self, now: Instant, frame: &[u8]) {
        self.received.push(Received { at: now, data: frame.to_vec() });
    }

    fn poll_transmit(&mut self, _now: Instant, buf: &mut [u8]) -> Option<usize> {
        let frame = self.outbox.pop_front()?;
        buf[..frame.len()].copy_from_slice(&frame);
        Some(frame.len())
    }

    fn poll_timeout(&self) -> Option<Instant> {
        self.wake
    }

    fn handle_timeout(&mut self, now: Instant) {
        if self.wake.is_some_and(|w| w <= now) {
            self.wake = None;
            self.wakeups.push(now);
        }
    }
}

/// The engine itself is a node: the simulated segment and the raw-socket loop drive it alike.
impl Node for roce_cm::Stack {
    fn handle_frame(&mut self, now: Instant, frame: &[u8]) {
        roce_cm::Stack::handle_frame(self, now, frame)
    }

    fn poll_transmit(&mut self, now: Instant, buf: &mut [u8]) -> Option<usize> {
        roce_cm::Stack::poll_transmit(self, now, buf)
    }

    fn poll_timeout(&self) -> Option<Instant> {
        roce_cm::Stack::poll_timeout(self)
    }

    fn handle_timeout(&mut self, now: Instant) {
        roce_cm::Stack::handle_timeout(self, now)
    }
}
