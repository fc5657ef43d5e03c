//! Views: the read-only copies `show` and the snapshot are made from.

use super::*;

impl<P: Payload> Pipes<P> {
    pub fn link_params(&self, n: u32) -> Option<&LinkConfig> {
        self.links.get(&n)
    }

    pub fn sched_view(&self, n: u32) -> Option<crate::stats::SchedView> {
        let s = self.scheds.get(&n)?;
        // In table order: sorting is for whoever shows them, off the data
        // plane (with 65536 of them, it was half of a snapshot's time).
        let instances: Vec<crate::stats::InstanceView> = s
            .instances
            .values()
            .filter_map(|&i| self.instances.get(i))
            .map(|i| {
                let len_pkts = i.backlog;
                let len_bytes: u64 = i
                    .queues
                    .iter()
                    .filter_map(|&q| self.queues.get(q))
                    .map(|q| q.bytes)
                    .sum();
                crate::stats::InstanceView {
                    id: i.id,
                    counters: FlowCounters {
                        len_pkts,
                        len_bytes,
                        ..i.counters
                    },
                }
            })
            .collect();
        Some(crate::stats::SchedView {
            number: n,
            kind: s.kind.display,
            mask: s.mask,
            params: s.params.clone(),
            instances,
        })
    }

    pub fn flowset_view(&self, n: u32) -> Option<crate::stats::FlowsetView> {
        let fs = self.flowsets.get(&n)?;
        // A flow-queueing scheduler's queues are its buckets: the key holds
        // the bucket's index in `src` (see `queue_for`).
        let buckets = self.scheds.get(&fs.sched).is_some_and(|s| s.sub.is_some());
        // In table order, as `instances` in `sched_view`.
        let flows: Vec<crate::stats::FlowView> = fs
            .queues
            .iter()
            .filter_map(|(&(_, id), &q)| self.queues.get(q).map(|q| (id, q)))
            .map(|(id, q)| crate::stats::FlowView {
                id,
                sub_queue: buckets.then(|| u32::try_from(id.src).unwrap_or(u32::MAX)),
                counters: FlowCounters {
                    tot_pkts: q.tot_pkts,
                    tot_bytes: q.tot_bytes,
                    len_pkts: q.pkts.len() as u32,
                    len_bytes: q.bytes,
                    drops: q.drops,
                    waited: 0,
                },
            })
            .collect();
        Some(crate::stats::FlowsetView {
            number: n,
            sched: fs.sched,
            linked: self.scheds.contains_key(&fs.sched),
            weight: fs.cfg.weight,
            lmax: fs.cfg.lmax,
            pri: fs.cfg.pri,
            limit: fs.cfg.limit,
            plr: fs.cfg.plr,
            mask: fs.cfg.mask,
            buckets: fs.cfg.buckets,
            aqm: aqm::display(&fs.cfg.aqm),
            loss: fs.cfg.loss,
            duplicate: fs.cfg.duplicate,
            corrupt: fs.cfg.corrupt,
            staged: fs.cfg.staged.clone(),
            flows,
        })
    }
}
