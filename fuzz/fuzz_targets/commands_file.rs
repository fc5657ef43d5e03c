//! A whole commands file (`dummynet sim -f FILE`, `ipfw FILE`): the parser
//! must never panic, and what it accepts, an engine must take without
//! panicking, with `show` rendering whatever state results.
#![no_main]

use dummynet_engine::Engine;
use dummynet_lang::{parse_file, Statement};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    // No generated host name may become a DNS query.
    dummynet_lang::resolve_host_names(false);
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    if !dummynet_fuzz::safe_text(text) {
        return;
    }
    let Ok(lines) = parse_file(text, None) else {
        return;
    };
    let mut engine: Engine<()> = Engine::new(1);
    for (_, parsed) in lines {
        if let Statement::Apply(cmd) = parsed.statement {
            let _ = engine.apply(0, cmd);
        }
    }
    let s = engine.snapshot();
    assert!(s.totals.conserved());
    dummynet_fuzz::render_all(&s);
});
