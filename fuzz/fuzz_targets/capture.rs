//! A pcap or pcapng file, as `sim` reads it: never a panic, what it
//! accepts is consistent (a known link type, no frame longer than its wire
//! length, no more frame bytes than the file had), and what `sim` would
//! write back from it reads back the same.
#![no_main]

use dummynet::capture::{link_type, parse, Writer, SNAPLEN};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(cap) = parse(data) else {
        return;
    };
    assert_eq!(link_type(cap.linktype), Some(cap.link));
    let mut bytes = 0usize;
    for f in &cap.frames {
        assert!(f.data.len() <= f.orig_len as usize, "{f:?}");
        bytes += f.data.len();
    }
    assert!(
        bytes <= data.len(),
        "{bytes} frame bytes from a {}-byte file",
        data.len()
    );

    // Written as sim writes its output (nanosecond pcap), read back.
    let Ok(mut w) = Writer::new(Vec::new(), cap.linktype) else {
        return;
    };
    for f in &cap.frames {
        if w.write(f.ts, f.orig_len, &f.data).is_err() {
            // A time past what pcap's 32-bit seconds hold: refused, not
            // written wrong.
            assert!(f.ts / 1_000_000_000 > u64::from(u32::MAX), "{f:?}");
            return;
        }
    }
    let again = parse(&w.into_inner()).expect("sim's own output reads back");
    assert_eq!(again.linktype, cap.linktype);
    assert_eq!(again.frames.len(), cap.frames.len());
    for (a, b) in cap.frames.iter().zip(&again.frames) {
        let cut = &a.data[..a.data.len().min(SNAPLEN as usize)];
        assert_eq!(b.data, cut);
        assert_eq!(b.ts, a.ts, "timestamp changed by a round trip");
        assert_eq!(b.orig_len, a.orig_len);
    }
});
