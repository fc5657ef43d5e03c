//! The ipfw ruleset. (In progress.)
