//! Lines of the kinds real ipfw/dnctl scripts are made of (rc.firewall's
//! rule sets, the Handbook's stateful rules, OPNsense's `pipe … type
//! fq_codel …`, browser-testing tools' dnctl pipes, per-host limits with
//! masks, tables with `tablearg`, sets, `call`/`return`, header options),
//! written for this test in `data/script-lines.txt`. Every line parses,
//! except the features dummynet refuses on purpose, which must be refused
//! as unavailable with a message naming the feature.

use dummynet_lang::{parse_command, ErrorKind};

const LINES: &str = include_str!("data/script-lines.txt");

/// The refused lines, by a part of each: the word the message must name.
const REFUSED: [(&str, &str); 6] = [
    ("ipoptions rr", "ipoptions"),
    ("fwd 127.0.0.1,3128", "fwd"),
    ("divert natd", "divert"),
    ("nat 1 config", "nat"),
    ("reject tcp", "reject"),
    ("unreach port", "unreach"),
];

fn refusal(line: &str) -> Option<&'static str> {
    REFUSED
        .iter()
        .find(|(marker, _)| line.contains(marker))
        .map(|(_, word)| *word)
}

#[test]
fn real_script_lines_load_and_refusals_name_the_feature() {
    let mut loaded = 0;
    let mut refused = Vec::new();
    for (n, line) in LINES.lines().enumerate() {
        let result = parse_command(line);
        match (refusal(line), result) {
            (None, Ok(_)) => loaded += 1,
            (None, Err(e)) => panic!("line {}: `{line}` should load: {e}", n + 1),
            (Some(_), Ok(_)) => panic!("line {}: `{line}` should be refused", n + 1),
            (Some(word), Err(e)) => {
                assert_eq!(e.kind, ErrorKind::Unavailable, "line {}: {e}", n + 1);
                assert!(
                    e.message.contains(word) && e.message.contains("dummynet does not do"),
                    "line {}: the refusal names `{word}` and says dummynet does not do it: {e}",
                    n + 1
                );
                refused.push(word);
            }
        }
    }
    refused.sort_unstable();
    let mut expected: Vec<&str> = REFUSED.iter().map(|(_, w)| *w).collect();
    expected.sort_unstable();
    assert_eq!(refused, expected, "each refusal met once");
    assert!(loaded >= 120, "{loaded} lines loaded");
}
