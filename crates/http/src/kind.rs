//! The three kinds of numbered objects the API serves: pipes, queues and
//! schedulers.

/// Which kind of numbered object a URL names.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum ObjKind {
    Pipe,
    Queue,
    Sched,
}

impl ObjKind {
    pub(super) fn word(self) -> &'static str {
        match self {
            ObjKind::Pipe => "pipe",
            ObjKind::Queue => "queue",
            ObjKind::Sched => "sched",
        }
    }

    /// The numbers of the objects of this kind the snapshot has.
    pub(super) fn numbers(self, snap: &dummynet_engine::Snapshot) -> Vec<u32> {
        let max = dummynet_engine::config::MAX_NUMBER;
        let mut v: Vec<u32> = match self {
            ObjKind::Pipe => snap.links.iter().map(|l| l.number).collect(),
            ObjKind::Queue => snap.flowsets.iter().map(|f| f.number).collect(),
            ObjKind::Sched => snap.scheds.iter().map(|s| s.number).collect(),
        };
        // A pipe's own scheduler and queue live above MAX_NUMBER.
        v.retain(|&n| n >= 1 && n <= max);
        v.sort_unstable();
        v.dedup();
        v
    }
}
