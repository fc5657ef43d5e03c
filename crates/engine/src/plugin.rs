//! The plug-ins as a whole: every AQM and scheduler type that is
//! registered, seen through the sysctls that default their parameters.
//!
//! Each plug-in declares itself in its own folder ([`crate::aqm::REGISTRY`],
//! [`crate::sched::REGISTRY`]) in [`crate::params`]' terms; this module sits
//! above both and answers what concerns all of them.

use crate::params::Tunable;

/// Every tunable of every registered plug-in (AQMs, then scheduler types).
pub fn tunables() -> impl Iterator<Item = &'static Tunable> {
    crate::aqm::REGISTRY
        .iter()
        .flat_map(|t| t.tunables.iter())
        .chain(
            crate::sched::REGISTRY
                .iter()
                .flat_map(|t| t.tunables.iter()),
        )
}

/// The tunable named `sysctl` (after `net.inet.ip.dummynet.`).
pub fn tunable(sysctl: &str) -> Option<&'static Tunable> {
    tunables().find(|t| t.sysctl.eq_ignore_ascii_case(sysctl))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::params::{fill_defaults, get};
    use crate::time::NS_PER_MS;

    #[test]
    fn every_tunable_fills_a_declared_parameter_and_accepts_its_default() {
        let mut names = std::collections::HashSet::new();
        for t in tunables() {
            assert!(names.insert(t.sysctl), "{} registered twice", t.sysctl);
            assert_eq!(t.check(t.default), Ok(t.default), "{}", t.sysctl);
            assert!(t.check(t.max.saturating_add(1)).is_err() || t.max == u64::MAX);
        }
        assert!(tunable("codel.target").is_some());
        assert!(tunable("CODEL.TARGET").is_some());
        assert!(tunable("codel.nothing").is_none());
    }

    #[test]
    fn defaults_fill_only_what_is_missing() {
        let t = tunable("codel.target").unwrap();
        let mut p = vec![("interval".to_string(), 7)];
        fill_defaults(std::slice::from_ref(t), &mut p, |t| t.default);
        assert_eq!(get(&p, "target"), Some(5 * NS_PER_MS));
        let mut p = vec![("target".to_string(), 7)];
        fill_defaults(std::slice::from_ref(t), &mut p, |t| t.default);
        assert_eq!(p, vec![("target".to_string(), 7)]);
    }
}
