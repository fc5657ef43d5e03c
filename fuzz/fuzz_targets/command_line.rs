//! One command line, as typed: the parser must never panic, and an error
//! must render (it points into the line, so offsets must stay in bounds).
#![no_main]

use dummynet_engine::Engine;
use dummynet_lang::{parse_command, Statement};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    // No generated host name may become a DNS query.
    dummynet_lang::resolve_host_names(false);
    let Ok(line) = std::str::from_utf8(data) else {
        return;
    };
    if !dummynet_fuzz::safe_text(line) {
        return;
    }
    match parse_command(line) {
        Err(e) => {
            let _ = e.to_string();
        }
        Ok(parsed) => {
            if let Statement::Apply(cmd) = parsed.statement {
                let mut engine: Engine<()> = Engine::new(1);
                if engine.apply(0, cmd).is_ok() {
                    dummynet_fuzz::render_all(&engine.snapshot());
                }
            }
        }
    }
});
