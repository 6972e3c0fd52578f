//! ProfTime (seed 002 §4.2): Chrome Trace Event JSON that Perfetto UI and
//! chrome://tracing open. Streams from the model:
//!
//! - one process (the target), one track per thread: token, graph and phase slices on
//!   the main thread, operator slices on every thread (they nest: op ⊂ graph ⊂ token);
//! - a second track per thread, tid [`STATE_TID_BASE`] + tid, with its scheduler states
//!   (`running cpu N`, `runnable`, `sleeping`), so they do not break the nesting;
//! - counter tracks: decode tokens/s, and each counter's rate per decode call;
//! - instants: QoS switches and loss records;
//! - `ts`/`dur` in µs relative to the first event, with ns kept as 3 decimals.

use std::collections::HashMap;
use std::io::{self, Write};

use crate::{
    export::{json_str, us},
    model::{NONE_U32, PMC_MISSING, TokenPhase, TraceModel},
};

/// Thread-state tracks use tid `STATE_TID_BASE + tid`.
pub const STATE_TID_BASE: u64 = 1_000_000_000;

/// A GPU's lane (its nodes' execution from its timestamps) uses tid `GPU_TID_BASE + kind`.
pub const GPU_TID_BASE: u64 = 2_000_000_000;
/// The track of the CPU's waits for the accel (a split pass).
pub const SYNC_TID: u64 = STATE_TID_BASE - 1;

/// Options of the timeline export.
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct ChromeOptions {
    /// Emit operator slices (the bulk of the file).
    pub ops: bool,
    /// Emit thread-state slices.
    pub states: bool,
}

impl Default for ChromeOptions {
    fn default() -> Self {
        ChromeOptions {
            ops: true,
            states: true,
        }
    }
}

struct Out<W: Write> {
    w: W,
    first: bool,
    base: u64,
    pid: u32,
    /// Track id → process id of the backend group it belongs to (only tracks outside
    /// the target's own group).
    group: HashMap<u64, u32>,
}

impl<W: Write> Out<W> {
    fn raw(&mut self, obj: &str) -> io::Result<()> {
        if self.first {
            self.first = false;
        } else {
            self.w.write_all(b",\n")?;
        }
        self.w.write_all(obj.as_bytes())
    }

    fn ts(&self, ns: u64) -> String {
        us(ns.saturating_sub(self.base))
    }

    fn slice(
        &mut self,
        tid: u64,
        name: &str,
        cat: &str,
        start: u64,
        end: u64,
        args: &str,
    ) -> io::Result<()> {
        let s = format!(
            r#"{{"ph":"X","pid":{},"tid":{tid},"name":{},"cat":"{cat}","ts":{},"dur":{},"args":{args}}}"#,
            self.group.get(&tid).copied().unwrap_or(self.pid),
            json_str(name),
            self.ts(start),
            us(end.saturating_sub(start)),
        );
        self.raw(&s)
    }
}

/// Writes the timeline.
///
/// # Errors
/// I/O errors of `w`.
pub fn write(model: &TraceModel, opts: &ChromeOptions, w: impl Write) -> io::Result<()> {
    let base = model.first_ns().unwrap_or(0);
    let pid = model.target_pid();
    // A split pass: one track group (process) per backend.
    let backend_of = crate::backends::thread_backends(model);
    let mut group = HashMap::new();
    for (&tid, &kind) in &backend_of {
        let gpid = crate::backends::backend_group_pid(pid, kind);
        group.insert(u64::from(tid), gpid);
        group.insert(STATE_TID_BASE + u64::from(tid), gpid);
    }
    let gpu = crate::backends::gpu_lanes(model);
    for &kind in &gpu.kinds {
        group.insert(
            GPU_TID_BASE + u64::from(kind),
            crate::backends::backend_group_pid(pid, kind),
        );
    }
    let mut o = Out {
        w,
        first: true,
        base,
        pid,
        group,
    };
    o.w.write_all(b"{\"displayTimeUnit\":\"ns\",\"traceEvents\":[\n")?;
    let mut kinds: Vec<u32> = backend_of
        .values()
        .copied()
        .chain(gpu.kinds.iter().copied())
        .collect();
    kinds.sort_unstable();
    kinds.dedup();
    let own_name = if kinds.is_empty() {
        format!("engine (pid {pid})")
    } else {
        format!("engine (pid {pid}): cpu backend")
    };
    o.raw(&format!(
        r#"{{"ph":"M","pid":{pid},"name":"process_name","args":{{"name":{}}}}}"#,
        json_str(&own_name)
    ))?;
    for (i, &kind) in kinds.iter().enumerate() {
        let gpid = crate::backends::backend_group_pid(pid, kind);
        o.raw(&format!(
            r#"{{"ph":"M","pid":{gpid},"name":"process_name","args":{{"name":{}}}}}"#,
            json_str(&format!(
                "engine (pid {pid}): {} backend",
                crate::model::backend_name(kind)
            ))
        ))?;
        o.raw(&format!(
            r#"{{"ph":"M","pid":{gpid},"name":"process_sort_index","args":{{"sort_index":{}}}}}"#,
            i + 1
        ))?;
    }
    let threads = model.target_threads();
    for (i, th) in threads.iter().enumerate() {
        let label = if th.comm.is_empty() {
            format!("tid {}", th.tid)
        } else {
            format!("{} ({})", th.comm, th.tid)
        };
        let label = if th.is_main {
            format!("{label} main")
        } else {
            label
        };
        for (tid, name, sort) in [
            (u64::from(th.tid), label.clone(), 2 * i),
            (
                STATE_TID_BASE + u64::from(th.tid),
                format!("{label} sched"),
                2 * i + 1,
            ),
        ] {
            let tpid = o.group.get(&tid).copied().unwrap_or(pid);
            o.raw(&format!(
                r#"{{"ph":"M","pid":{tpid},"tid":{tid},"name":"thread_name","args":{{"name":{}}}}}"#,
                json_str(&name)
            ))?;
            o.raw(&format!(
                r#"{{"ph":"M","pid":{tpid},"tid":{tid},"name":"thread_sort_index","args":{{"sort_index":{sort}}}}}"#
            ))?;
        }
    }
    // The CPU's waits for the accel, on a track of their own, totalled in its name.
    let waits = crate::backends::sync_waits(model);
    if !waits.is_empty() {
        let total: u64 = waits.iter().map(|w| w.1.saturating_sub(w.0)).sum();
        o.raw(&format!(
            r#"{{"ph":"M","pid":{pid},"tid":{SYNC_TID},"name":"thread_name","args":{{"name":{}}}}}"#,
            json_str(&format!(
                "CPU waits for accel ({} syncs, {} in all)",
                waits.len(),
                crate::export::dot::fmt_ns(total)
            ))
        ))?;
        o.raw(&format!(
            r#"{{"ph":"M","pid":{pid},"tid":{SYNC_TID},"name":"thread_sort_index","args":{{"sort_index":-1}}}}"#
        ))?;
        for &(start, end, name) in &waits {
            let args = format!(r#"{{"node":{}}}"#, json_str(name));
            o.slice(SYNC_TID, "wait for accel", "sync", start, end, &args)?;
        }
    }
    // Tokens, graphs, phases.
    let split = Some(crate::backends::compute(model)).filter(|b| b.is_interesting());
    for t in model.tokens() {
        let Some(end) = t.end_ns else { continue };
        let name = t.label();
        let mut args = format!(
            r#"{{"index":{},"n_tokens":{},"pos":{},"phase":"{}","ret":{}"#,
            t.index,
            t.n_tokens,
            t.pos,
            t.phase.name(),
            t.ret
        );
        if t.seqs.known() {
            args.push_str(&format!(
                r#","n_seqs":{},"seq_mask":{}{}"#,
                t.seqs.n,
                t.seqs.mask,
                if t.seqs.lower_bound {
                    r#","n_seqs_lower_bound":1"#
                } else {
                    ""
                }
            ));
        }
        if let Some(ts) = split.as_ref().and_then(|b| b.tokens.get(t.index as usize)) {
            args.push_str(&format!(
                r#","sync_wait_ns":{},"copy_ns":{},"kv_io_ns":{},"kv_bytes_out":{},"kv_bytes_in":{}"#,
                ts.sync_ns, ts.copy_ns, ts.kv_io_ns, ts.kv_bytes_out, ts.kv_bytes_in
            ));
            for (b, ns) in &ts.compute_ns {
                args.push_str(&format!(r#","{b}_compute_ns":{ns}"#));
            }
        }
        args.push('}');
        o.slice(u64::from(t.tid), &name, "token", t.start_ns, end, &args)?;
    }
    for g in model.graphs() {
        let Some(end) = g.end_ns else { continue };
        let args = format!(
            r#"{{"graph_id":{},"n_nodes":{},"backend":"{}","backend_id":{},"n_tokens":{},"pos":{}}}"#,
            g.graph_id,
            g.n_nodes,
            g.backend_name(),
            g.backend_id,
            g.n_tokens,
            g.pos
        );
        let name = if split.is_some() {
            format!(
                "graph {} ({} split, {} nodes)",
                g.graph_id,
                g.backend_name(),
                g.n_nodes
            )
        } else {
            format!("graph {} ({})", g.graph_id, g.backend_name())
        };
        o.slice(u64::from(g.tid), &name, "graph", g.start_ns, end, &args)?;
    }
    for p in model.phases() {
        let args = format!(r#"{{"arg":{},"ret":{}}}"#, p.arg, p.ret);
        o.slice(
            u64::from(p.tid),
            p.kind.name(),
            "phase",
            p.start_ns,
            p.end_ns,
            &args,
        )?;
    }
    for &kind in &gpu.kinds {
        o.raw(&format!(
            r#"{{"ph":"M","pid":{},"tid":{},"name":"thread_name","args":{{"name":"GPU (node timestamps)"}}}}"#,
            crate::backends::backend_group_pid(pid, kind),
            GPU_TID_BASE + u64::from(kind)
        ))?;
    }
    for g in &gpu.slices {
        let args = format!(r#"{{"op":{}}}"#, json_str(&g.op));
        o.slice(
            GPU_TID_BASE + u64::from(g.backend_kind),
            g.name,
            "gpu",
            g.start_ns,
            g.end_ns,
            &args,
        )?;
    }
    for c in model.backend_calls() {
        let args = format!(
            r#"{{"kind":"{}","backend":"{}","bytes":{}}}"#,
            c.kind.name(),
            c.backend_kind
                .map_or_else(String::new, crate::model::backend_name),
            c.bytes
        );
        o.slice(
            u64::from(c.tid),
            &c.label(),
            "backend",
            c.start_ns,
            c.end_ns,
            &args,
        )?;
    }
    // Operators.
    if opts.ops {
        let nodes = model.nodes();
        let threads_all = model.threads();
        let counters = model.counter_names();
        let backends: Vec<String> = model.graphs().iter().map(|g| g.backend_name()).collect();
        let mut args = String::new();
        for s in model.slices() {
            // A span without a node (dropped over a limit) is not drawn.
            let Some(n) = nodes.get(s.node as usize) else {
                continue;
            };
            let tid = threads_all[s.thread as usize].tid;
            args.clear();
            args.push_str(&format!(
                r#"{{"op":"{}","name":{},"layer":{},"shape":"{}","index":{}"#,
                n.op_name(),
                json_str(&n.name),
                n.layer,
                n.shape(),
                n.index
            ));
            if s.graph != NONE_U32 {
                args.push_str(&format!(
                    r#","graph":{},"backend":"{}""#,
                    s.graph,
                    backends.get(s.graph as usize).map_or("?", String::as_str)
                ));
            }
            if let Some(deltas) = model.slice_pmc(s) {
                for (name, &v) in counters.iter().zip(deltas) {
                    if v != PMC_MISSING {
                        args.push_str(&format!(",{}:{v}", json_str(name)));
                    }
                }
            }
            args.push('}');
            o.slice(
                u64::from(tid),
                &n.name,
                &n.op_name(),
                s.start_ns,
                s.end_ns,
                &args,
            )?;
        }
    }
    // Thread states.
    if opts.states {
        for th in &threads {
            let tid = STATE_TID_BASE + u64::from(th.tid);
            for s in th.states.slices() {
                let name = match s.state {
                    crate::model::SchedState::Running => format!("running cpu {}", s.cpu),
                    st => st.name().to_owned(),
                };
                let args = format!(r#"{{"cpu":{}}}"#, i64::from(s.cpu as i32));
                o.slice(tid, &name, "sched", s.start_ns, s.end_ns, &args)?;
            }
        }
    }
    // Counter tracks.
    let mut prev_produced: Option<u64> = None;
    for t in model.tokens() {
        let p = t.produced_ns();
        if t.phase == TokenPhase::Decode
            && let (Some(a), Some(b)) = (prev_produced, p)
            && b > a
        {
            let ts = o.ts(b);
            o.raw(&format!(
                r#"{{"ph":"C","pid":{pid},"name":"tokens/s","ts":{ts},"args":{{"tokens/s":{:.3}}}}}"#,
                1e9 / (b - a) as f64
            ))?;
        }
        prev_produced = p;
    }
    let counters = model.counter_names();
    if !counters.is_empty() {
        for (start, rates) in crate::export::counter_rates_per_call(model) {
            let ts = o.ts(start);
            for (name, rate) in counters.iter().zip(rates) {
                if let Some(rate) = rate {
                    o.raw(&format!(
                        r#"{{"ph":"C","pid":{pid},"name":{},"ts":{ts},"args":{{"per_s":{rate:.3}}}}}"#,
                        json_str(&format!("{name}/s")),
                    ))?;
                }
            }
        }
    }
    // Instants.
    for q in model.qos_switches() {
        let ts = o.ts(q.ts_ns);
        o.raw(&format!(
            r#"{{"ph":"i","s":"g","pid":{pid},"tid":0,"name":"QoS levels {:#x} -> {:#x}","ts":{ts},"args":{{"tps":{:.3},"min_tps":{:.3}}}}}"#,
            q.levels_before,
            q.levels_after,
            q.tps_milli as f64 / 1e3,
            q.min_tps_milli as f64 / 1e3
        ))?;
    }
    for l in model.losses() {
        let ts = o.ts(l.ts_ns);
        o.raw(&format!(
            r#"{{"ph":"i","s":"g","pid":{pid},"tid":0,"name":"lost {} events on cpu {}","ts":{ts},"args":{{"cpu":{},"lost":{}}}}}"#,
            l.lost, l.cpu, l.cpu, l.lost
        ))?;
    }
    for (ts_ns, name) in crate::recording_mode::timeline_marks(model) {
        let ts = o.ts(ts_ns);
        o.raw(&format!(
            r#"{{"ph":"i","s":"g","pid":{pid},"tid":0,"name":{},"cat":"recording","ts":{ts}}}"#,
            json_str(&name)
        ))?;
    }
    o.w.write_all(b"\n],\"otherData\":{\"base_ns\":")?;
    o.w.write_all(base.to_string().as_bytes())?;
    o.w.write_all(b"}}\n")?;
    o.w.flush()
}
