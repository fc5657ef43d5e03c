//! What the language tests share: a command line to the `Command` or
//! configuration it must parse to (panicking with the parser's own message
//! if it does not), or to the error it must give.
#![allow(dead_code)]

use dummynet_engine::config::{Command, LinkConfig, PipeConfig};
use dummynet_lang::{parse_command, ParseError, Statement};

pub fn apply(line: &str) -> Command {
    match parse_command(line).map(|p| p.statement) {
        Ok(Statement::Apply(c)) => c,
        Ok(other) => panic!("{line}: {other:?}"),
        Err(e) => panic!("{line}:\n{e}"),
    }
}

pub fn pipe(line: &str) -> PipeConfig {
    match apply(line) {
        Command::ConfigPipe(_, cfg) => cfg,
        other => panic!("{line}: {other:?}"),
    }
}

pub fn link(line: &str) -> LinkConfig {
    pipe(line).link
}

pub fn err(line: &str) -> ParseError {
    parse_command(line).expect_err(line)
}
