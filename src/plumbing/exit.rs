//! One table of exit statuses, the same for every `roce` command. `--help` and README.md show
//! [`TABLE`]; every command returns one of these.

/// Done: every step succeeded.
pub const OK: u8 = 0;
/// The command ran but the operation failed: a peer refused, no answer came, a step was not
/// verified.
pub const FAILED: u8 = 1;
/// A usage error (clap's own status for bad arguments), or input that cannot be read or was cut
/// short.
pub const USAGE: u8 = 2;
/// The command cannot run here: no CAP_NET_RAW, no such interface or device.
pub const ENVIRONMENT: u8 = 3;
/// Ended by signal N (after the ids were destroyed): the status is `SIGNAL_BASE + N`, as a shell
/// reports a process killed by N (129 SIGHUP, 130 SIGINT, 143 SIGTERM).
pub const SIGNAL_BASE: u8 = 128;
/// Standard output was closed (`| head`): a quiet stop after the ids were destroyed, reported as
/// a process killed by SIGPIPE would be (128 + 13).
pub const CLOSED_PIPE: u8 = 141;

/// The table as `--help` and README.md print it.
pub const TABLE: &str = "\
Exit status (every command):
  0    done: every step succeeded
  1    the operation failed (a peer refused, no answer, a step not verified)
  2    usage error, or input that cannot be read or was cut short
  3    cannot run here (no CAP_NET_RAW, no such interface or device)
  128+N  ended by signal N after the ids were destroyed (129 SIGHUP, 130 SIGINT, 143 SIGTERM)
  141  standard output closed, after the ids were destroyed";

/// The status of a command ended by signal `signo`.
pub fn signal_status(signo: i32) -> u8 {
    SIGNAL_BASE.saturating_add(u8::try_from(signo).unwrap_or(u8::MAX - SIGNAL_BASE))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn signal_statuses_are_the_shells() {
        assert_eq!(signal_status(1), 129);
        assert_eq!(signal_status(2), 130);
        assert_eq!(signal_status(15), 143);
        assert_eq!(signal_status(13), CLOSED_PIPE);
        assert_eq!(signal_status(1000), u8::MAX);
    }
}
