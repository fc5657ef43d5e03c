//! tc's `.dist` distribution tables: the parser must not panic, and a table
//! it accepts must give samples without overflow for any delay and jitter.
#![no_main]

use std::sync::Arc;

use dummynet_engine::impair::dist::{self, Distribution};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if data.len() < 12 {
        return;
    }
    let (head, rest) = data.split_at(12);
    let Ok(text) = std::str::from_utf8(rest) else {
        return;
    };
    match dist::parse("fuzz", text) {
        Err(e) => {
            let _ = e.to_string();
        }
        Ok(t) => {
            let d = Distribution::Table(Arc::new(t));
            // Delay and jitter as the language allows them (at most an
            // hour each, in nanoseconds), and a random draw.
            let mu = i64::from(u32::from_le_bytes(head[0..4].try_into().unwrap())) * 1_000;
            let sigma = i64::from(u32::from_le_bytes(head[4..8].try_into().unwrap())) * 1_000;
            let rnd = u32::from_le_bytes(head[8..12].try_into().unwrap());
            let _ = dist::sample(mu, sigma, rnd, &d);
            let _ = dist::sample(mu, sigma, rnd.wrapping_mul(2_654_435_761), &d);
        }
    }
});
