//! Why the engine refused a configuration command.

use std::borrow::Cow;

use crate::classifier::TableError;
use crate::command::SettingError;
use crate::params::ParamError;

/// A configuration command the engine refused; nothing was changed. The
/// variant says what kind of refusal it is, so that a caller can answer a
/// missing object differently from a bad value (an HTTP API: 404 vs 400 vs
/// 409) without reading the words; the words say what and why.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ConfigError {
    /// A value the engine does not take (out of range, unknown scheduler
    /// type, a queue that does not fit its scheduler...).
    #[error("{0}")]
    Invalid(String),
    /// The command names a rule, pipe, queue, scheduler, table or entry
    /// that does not exist.
    #[error("{0}")]
    NotFound(String),
    /// The command is at odds with what exists: a table already there, one
    /// still used by a rule, no room for another schedule.
    #[error("{0}")]
    Conflict(String),
    /// A plug-in (an AQM, a scheduler type, an impairment) refused a value:
    /// its own error, and the sentence for the user, which says where
    /// (`pipe 1 type rr: rr quantum 9 is out of range 64..=2048 bytes`).
    #[error("{words}")]
    Plugin { error: ParamError, words: String },
    /// A setting's value out of range, or an unknown setting.
    #[error(transparent)]
    Setting(#[from] SettingError),
    /// A table command the tables refused (its kind: [`ConfigError::kind`]).
    #[error(transparent)]
    Table(#[from] TableError),
}

impl From<ParamError> for ConfigError {
    /// The plug-in's error, its own words the sentence.
    fn from(error: ParamError) -> Self {
        let words = error.to_string();
        ConfigError::Plugin { error, words }
    }
}

/// [`ConfigError`]'s variant without its message.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ConfigErrorKind {
    Invalid,
    NotFound,
    Conflict,
}

impl ConfigError {
    pub fn kind(&self) -> ConfigErrorKind {
        match self {
            ConfigError::Invalid(_) => ConfigErrorKind::Invalid,
            ConfigError::NotFound(_) => ConfigErrorKind::NotFound,
            ConfigError::Conflict(_) => ConfigErrorKind::Conflict,
            ConfigError::Table(TableError::Exists(_)) => ConfigErrorKind::Conflict,
            ConfigError::Table(TableError::NoTable(_) | TableError::NoEntry { .. }) => {
                ConfigErrorKind::NotFound
            }
            ConfigError::Plugin { .. }
            | ConfigError::Setting(_)
            | ConfigError::Table(TableError::Type { .. } | TableError::Key { .. }) => {
                ConfigErrorKind::Invalid
            }
        }
    }

    /// The sentence for the user.
    pub fn message(&self) -> Cow<'_, str> {
        match self {
            ConfigError::Invalid(m) | ConfigError::NotFound(m) | ConfigError::Conflict(m) => {
                Cow::Borrowed(m)
            }
            ConfigError::Plugin { words, .. } => Cow::Borrowed(words),
            ConfigError::Setting(e) => Cow::Owned(e.to_string()),
            ConfigError::Table(e) => Cow::Owned(e.to_string()),
        }
    }
}

/// A batch [`crate::Engine::apply_all`] refused: the command at `index` (counted
/// from 0) and why. None of the batch took effect.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("command {} of the batch: {error}", index + 1)]
pub struct BatchError {
    pub index: usize,
    pub error: ConfigError,
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::command::{TableKey, TableName, TableType};

    /// A table's refusals keep the kinds (and words) the API answers with.
    #[test]
    fn table_refusals_have_their_kinds() {
        let n = TableName::Number(7);
        let kind = |e: TableError| {
            let e = ConfigError::from(e);
            (e.kind(), e.message().into_owned())
        };
        assert_eq!(
            kind(TableError::Exists(n.clone())),
            (ConfigErrorKind::Conflict, "table 7 already exists".into())
        );
        assert_eq!(
            kind(TableError::NoTable(n.clone())),
            (ConfigErrorKind::NotFound, "table 7 does not exist".into())
        );
        assert_eq!(
            kind(TableError::NoEntry {
                name: n.clone(),
                key: TableKey::Iface("em0".into()),
            }),
            (ConfigErrorKind::NotFound, "table 7 has no entry em0".into())
        );
        assert_eq!(
            kind(TableError::Type {
                name: n,
                holds: TableType::Addr,
                wanted: TableType::Iface,
            }),
            (
                ConfigErrorKind::Invalid,
                "table 7 holds addr keys, not iface".into()
            )
        );
    }
}
