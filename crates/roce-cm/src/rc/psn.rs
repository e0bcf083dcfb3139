//! 24-bit packet sequence numbers [IBA 9.7.1; rxe's `psn_compare`]: everything modulo 2^24,
//! "later" meaning less than half the space ahead.

/// The PSN space mask.
pub const PSN_MASK: u32 = 0xff_ffff;

/// `a + n` in PSN space.
pub const fn add(a: u32, n: u32) -> u32 {
    a.wrapping_add(n) & PSN_MASK
}

/// `a - n` in PSN space.
pub const fn sub(a: u32, n: u32) -> u32 {
    a.wrapping_sub(n) & PSN_MASK
}

/// Signed distance from `b` to `a`: positive when `a` is later (the 24-bit difference
/// shifted into the top of an `i32`, as rxe does, then back).
pub const fn cmp(a: u32, b: u32) -> i32 {
    ((a.wrapping_sub(b) << 8) as i32) >> 8
}

/// `a` is later than `b`.
pub const fn gt(a: u32, b: u32) -> bool {
    cmp(a, b) > 0
}

/// `a` is earlier than `b`.
pub const fn lt(a: u32, b: u32) -> bool {
    cmp(a, b) < 0
}

/// `a` is at or after `b`.
pub const fn ge(a: u32, b: u32) -> bool {
    cmp(a, b) >= 0
}

/// How many PSNs `a` is after `b` (0 when `a` is not later).
pub const fn diff(a: u32, b: u32) -> u32 {
    let d = cmp(a, b);
    if d > 0 {
        d as u32
    } else {
        0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wrap() {
        assert_eq!(add(PSN_MASK, 1), 0);
        assert_eq!(sub(0, 1), PSN_MASK);
        assert!(gt(0, PSN_MASK));
        assert!(lt(PSN_MASK, 0));
        assert_eq!(cmp(2, PSN_MASK - 1), 4);
        assert_eq!(diff(3, PSN_MASK), 4);
        assert_eq!(diff(PSN_MASK, 3), 0);
        // half the space ahead is the limit of "later"
        assert!(gt(0x7f_ffff, 0));
        assert!(lt(0x80_0000, 0));
        assert!(ge(5, 5) && !gt(5, 5));
    }
}
