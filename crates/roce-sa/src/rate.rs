//! Rate and MTU codes: validity and the order of rate codes.
//!
//! IB rate codes are not monotonic in speed (5 = 5 Gb/s comes after 3 = 10 Gb/s), so every
//! comparison goes through the rank of the code, as OpenSM's `ib_path_compare_rates` does with
//! its `ordered_rates` table [osm_helper.c]. The table covers codes 2..=20 (`IB_MIN_RATE` ..
//! `IB_MAX_RATE` of the OpenSM source read; codes 21 and up, 400 and 600 Gb/s, are not in it).

use core::cmp::Ordering;

/// Rank of each rate code by speed (index = code; 0 = not a valid code).
const RANK: [u8; 21] = [
    0, 0,  // 0, 1: reserved
    1,  // 2: 2.5 Gb/s
    3,  // 3: 10 Gb/s
    6,  // 4: 30 Gb/s
    2,  // 5: 5 Gb/s
    5,  // 6: 20 Gb/s
    9,  // 7: 40 Gb/s
    10, // 8: 60 Gb/s
    13, // 9: 80 Gb/s
    14, // 10: 120 Gb/s
    4,  // 11: 14 Gb/s
    12, // 12: 56 Gb/s
    16, // 13: 112 Gb/s
    17, // 14: 168 Gb/s
    7,  // 15: 25 Gb/s
    15, // 16: 100 Gb/s
    18, // 17: 200 Gb/s
    19, // 18: 300 Gb/s
    8,  // 19: 28 Gb/s
    11, // 20: 50 Gb/s
];

/// Whether `rate` is a rate code 2..=20 (`ib_rate_is_valid`).
pub const fn rate_is_valid(rate: u8) -> bool {
    rate >= 2 && (rate as usize) < RANK.len()
}

/// Whether `mtu` is an MTU code 1..=5 (`ib_mtu_is_valid`).
pub const fn mtu_is_valid(mtu: u8) -> bool {
    mtu >= 1 && mtu <= 5
}

fn rank(rate: u8) -> u8 {
    RANK.get(usize::from(rate)).copied().unwrap_or(0)
}

/// Compare two rate codes by speed (`ib_path_compare_rates`); invalid codes rank lowest.
pub fn compare_rates(a: u8, b: u8) -> Ordering {
    rank(a).cmp(&rank(b))
}

/// The next slower rate code (`ib_path_rate_get_prev`), or 0 when there is none.
pub fn rate_prev(rate: u8) -> u8 {
    let r = rank(rate);
    if r <= 1 {
        return 0;
    }
    RANK.iter().position(|&x| x == r - 1).map_or(0, |i| i as u8)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ranks_are_a_permutation() {
        let mut seen = [false; 20];
        for code in 2..=20u8 {
            let r = rank(code) as usize;
            assert!((1..=19).contains(&r));
            assert!(!seen[r], "rank {r} twice");
            seen[r] = true;
        }
    }

    #[test]
    fn order_and_prev() {
        assert_eq!(compare_rates(5, 3), Ordering::Less); // 5 Gb/s < 10 Gb/s
        assert_eq!(compare_rates(16, 12), Ordering::Greater); // 100 > 56
        assert_eq!(compare_rates(3, 3), Ordering::Equal);
        assert_eq!(rate_prev(3), 5); // below 10 Gb/s is 5 Gb/s
        assert_eq!(rate_prev(5), 2);
        assert_eq!(rate_prev(2), 0); // nothing below 2.5 Gb/s
        assert!(rate_is_valid(2) && rate_is_valid(20) && !rate_is_valid(1) && !rate_is_valid(21));
        assert!(mtu_is_valid(1) && mtu_is_valid(5) && !mtu_is_valid(0) && !mtu_is_valid(6));
    }
}
