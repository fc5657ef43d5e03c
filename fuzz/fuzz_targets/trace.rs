//! mahimahi trace files: the parser must not panic, and walking an accepted
//! trace must move forward in time.
#![no_main]

use dummynet_engine::impair::trace::{self, TraceMode};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Some((&flags, rest)) = data.split_first() else {
        return;
    };
    let Ok(text) = std::str::from_utf8(rest) else {
        return;
    };
    let mode = if flags & 1 == 0 {
        TraceMode::Loop
    } else {
        TraceMode::Once
    };
    let t = match trace::parse("fuzz", text, mode) {
        Err(e) => {
            let _ = e.to_string();
            return;
        }
        Ok(t) => t,
    };
    let _ = trace::summary(&t);
    let _ = t.mean_rate();
    let start = u64::from(flags) * 1_000_000;
    let mut prev = 0;
    let mut c = t.first_after(start, start.saturating_sub(1));
    for _ in 0..256 {
        let Some(cur) = c else { break };
        let at = t.at(start, cur);
        assert!(at >= prev, "trace went back from {prev} to {at}");
        prev = at;
        c = t.next(cur);
    }
    // Strictly after. Times cannot saturate here: a trace lasts at most a
    // year, and 256 laps of it are far from u64::MAX nanoseconds.
    if let Some(after) = t.first_after(start, prev) {
        let at = t.at(start, after);
        assert!(at > prev, "{at} is not after {prev}");
    }
});
