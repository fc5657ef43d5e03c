//! dummynet's tools on the virtual clock and around it: [`sim`] (a capture
//! through the rules, exactly), [`plot`] (its charts), [`gen`] and
//! [`tracegen`] (synthetic captures and delivery traces) and [`bench`] (the
//! engine's and the machine's speed). The only crate with plotters and
//! resvg.

pub mod bench;
pub mod gen;
pub mod plot;
pub mod sim;
pub mod tracegen;
