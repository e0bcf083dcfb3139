//! What every command shares and none owns: the exit statuses ([`exit`]), ending like a
//! process on the kernel on a signal or a closed stdout ([`shutdown`]), the one printer of
//! results, status lines, events and counters ([`out`]), and opening a driven stack on a raw
//! socket or ibsim ([`tools`]).

pub mod exit;
pub mod out;
pub mod shutdown;
pub mod tools;
