//! `profile` files (FreeBSD's dummynet delay profiles): the parser must not
//! panic, and a profile it accepts must draw delays without panicking.
#![no_main]

use dummynet_engine::pipes::profile;
use dummynet_engine::rng::Rng;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    match profile::parse(text) {
        Err(e) => {
            let _ = e.to_string();
        }
        Ok(p) => {
            let mut rng = Rng::new(1);
            for _ in 0..64 {
                let _ = profile::draw(&p, &mut rng);
            }
        }
    }
});
