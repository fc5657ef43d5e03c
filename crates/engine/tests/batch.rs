//! `Engine::apply_all`: a batch of commands takes effect whole or not at
//! all, and a refusal says which command and what kind of refusal it is.

mod common;

use common::*;
use dummynet_engine::config::*;
use dummynet_engine::{BatchError, Command, ConfigError, ConfigErrorKind, Engine};

/// Rule numbers and pipe numbers, as `show` would list them.
fn config_of(e: &Engine<u64>) -> (Vec<u16>, Vec<u32>) {
    let s = e.snapshot();
    (
        s.rules.iter().map(|r| r.number).collect(),
        s.links.iter().map(|l| l.number).collect(),
    )
}

#[test]
fn a_refused_third_command_leaves_the_first_two_unapplied_and_packets_queued() {
    let mut h = Harness::new(1);
    h.apply(pipe(1, 1_000_000, 10 * MS));
    h.apply(rule(100, Action::Pipe(1), vec![]));
    // Three 1500-byte packets at once: 12 ms each on the wire at 1 Mbit/s.
    let ids: Vec<u64> = (0..3)
        .map(|_| h.send(0, udp([10, 0, 0, 1], [10, 0, 0, 2], 1, 2, 1500)))
        .collect();
    h.run_until(MS);
    let before = config_of(&h.e);
    let refused = h.e.apply_all(
        MS,
        vec![
            pipe(2, 2_000_000, 0),
            rule(50, Action::Pipe(2), vec![]),
            Command::DeletePipes(vec![9]),
        ],
    );
    let Err(BatchError { index, error }) = refused else {
        panic!("the batch was taken: {refused:?}");
    };
    assert_eq!(index, 2);
    assert_eq!(error.kind(), ConfigErrorKind::NotFound);
    assert_eq!(error.message(), "pipe 9 does not exist");
    assert_eq!(config_of(&h.e), before, "pipe 2 and rule 50 stay out");
    assert_eq!(h.e.held_packets(), 3);
    h.finish();
    // Released as if no batch had come: 12, 24, 36 ms on the wire + 10 ms.
    for (i, id) in ids.iter().enumerate() {
        assert_eq!(h.departure(*id), (i as u64 + 1) * 12 * MS + 10 * MS);
    }
}

#[test]
fn each_command_is_checked_against_the_ones_before_it() {
    let mut e: Engine<u64> = Engine::new(1);
    // The delete finds the pipe the batch made.
    let notes = e
        .apply_all(
            0,
            vec![pipe(2, 1_000_000, 0), Command::DeletePipes(vec![2])],
        )
        .unwrap();
    assert!(notes.is_empty(), "{notes:?}");
    assert_eq!(config_of(&e).1, Vec::<u32>::new());
    // The second delete does not find what the first removed.
    e.apply(0, pipe(1, 1_000_000, 0)).unwrap();
    let r = e.apply_all(
        0,
        vec![Command::DeletePipes(vec![1]), Command::DeletePipes(vec![1])],
    );
    assert_eq!(
        r.map_err(|b| b.index),
        Err(1),
        "the second command is the one refused"
    );
    assert_eq!(config_of(&e).1, vec![1], "pipe 1 is still there");
    // A table made in the batch is there for its `add`; made twice, the
    // second is a conflict.
    let t = TableName::Number(1);
    e.apply_all(
        0,
        vec![
            Command::Table(t.clone(), TableCmd::Create(TableType::Addr)),
            Command::Table(t.clone(), TableCmd::Flush),
        ],
    )
    .unwrap();
    let r = e.apply_all(
        0,
        vec![
            Command::Table(t.clone(), TableCmd::Destroy),
            Command::Table(t.clone(), TableCmd::Create(TableType::Addr)),
            Command::Table(t.clone(), TableCmd::Create(TableType::Addr)),
        ],
    );
    let Err(b) = r else { panic!("taken: {r:?}") };
    assert_eq!((b.index, b.error.kind()), (2, ConfigErrorKind::Conflict));
    assert_eq!(
        e.snapshot().tables.len(),
        1,
        "the destroy did not take effect either"
    );
}

#[test]
fn refusals_have_kinds() {
    let mut e: Engine<u64> = Engine::new(1);
    let kind = |r: Result<(), ConfigError>| r.map_err(|e| e.kind());
    assert_eq!(
        kind(e.apply(0, Command::DeleteRules(vec![7]))),
        Err(ConfigErrorKind::NotFound)
    );
    assert_eq!(
        kind(e.apply(0, pipe(1, 20_000_000_000_000, 0))),
        Err(ConfigErrorKind::Invalid)
    );
    let t = TableName::Number(3);
    assert_eq!(
        kind(e.apply(0, Command::Table(t.clone(), TableCmd::Flush))),
        Err(ConfigErrorKind::NotFound)
    );
    e.apply(
        0,
        Command::Table(t.clone(), TableCmd::Create(TableType::Addr)),
    )
    .unwrap();
    assert_eq!(
        kind(e.apply(0, Command::Table(t, TableCmd::Create(TableType::Addr)))),
        Err(ConfigErrorKind::Conflict)
    );
}
