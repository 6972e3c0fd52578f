//! ProfStat tables as CSV (RFC 4180 quoting where needed).

use std::io::{self, Write};

use crate::stats::ProfStat;

/// Quotes a field if it contains a comma, quote or newline.
pub fn field(s: &str) -> String {
    if s.contains([',', '"', '\n', '\r']) {
        format!("\"{}\"", s.replace('"', "\"\""))
    } else {
        s.to_owned()
    }
}

fn opt(v: Option<f64>) -> String {
    v.map_or_else(String::new, |v| format!("{v}"))
}

/// `iterations.csv`: one row per decode call; one column per node class.
///
/// # Errors
/// I/O errors of `w`.
pub fn write_iterations(s: &ProfStat, mut w: impl Write) -> io::Result<()> {
    let mut classes: Vec<&String> = s
        .iterations
        .iter()
        .flat_map(|r| r.class_ms.keys())
        .collect();
    classes.sort();
    classes.dedup();
    write!(w, "index,phase,pos,n_tokens,start_ms,latency_ms")?;
    for c in &classes {
        write!(w, ",{}_ms", field(c))?;
    }
    writeln!(w)?;
    for r in &s.iterations {
        write!(
            w,
            "{},{},{},{},{},{}",
            r.index,
            r.phase.name(),
            r.pos,
            r.n_tokens,
            r.start_ms,
            r.latency_ms
        )?;
        for c in &classes {
            write!(w, ",{}", r.class_ms.get(*c).copied().unwrap_or(0.0))?;
        }
        writeln!(w)?;
    }
    Ok(())
}

/// `growth.csv`: node classes by how their time grows with context length.
///
/// # Errors
/// I/O errors of `w`.
pub fn write_growth(s: &ProfStat, mut w: impl Write) -> io::Result<()> {
    writeln!(
        w,
        "class,mean_ms,slope_ns_per_pos,intercept_ns,r2,share_of_growth"
    )?;
    for r in &s.growth {
        writeln!(
            w,
            "{},{},{},{},{},{}",
            field(&r.class),
            r.mean_ms,
            opt(r.fit.map(|f| f.slope)),
            opt(r.fit.map(|f| f.intercept)),
            opt(r.fit.map(|f| f.r2)),
            opt(r.share_of_growth)
        )?;
    }
    Ok(())
}

/// `matmul.csv`: matrix products of the DAG iteration, time against complexity.
///
/// # Errors
/// I/O errors of `w`.
pub fn write_matmul(s: &ProfStat, mut w: impl Write) -> io::Result<()> {
    writeln!(w, "name,class,layer,complexity,time_ns,attention")?;
    for r in &s.matmul {
        writeln!(
            w,
            "{},{},{},{},{},{}",
            field(&r.name),
            field(&r.class),
            r.layer,
            r.complexity,
            r.time_ns,
            r.attention
        )?;
    }
    Ok(())
}

/// `op_types.csv`: per op type over the run.
///
/// # Errors
/// I/O errors of `w`.
pub fn write_op_types(s: &ProfStat, mut w: impl Write) -> io::Result<()> {
    writeln!(
        w,
        "op,count,total_ms,mean_us,share_of_token_time,idle_share,miss_bandwidth_gbps,stall_ratio,\
         ipc,mpki"
    )?;
    for r in &s.op_types {
        writeln!(
            w,
            "{},{},{},{},{},{},{},{},{},{}",
            r.op,
            r.count,
            r.total_ms,
            r.mean_us,
            r.share_of_token_time,
            r.idle_share,
            opt(r.miss_bandwidth_gbps),
            opt(r.stall_ratio),
            opt(r.ipc),
            opt(r.mpki)
        )?;
    }
    Ok(())
}

/// `load_balance.csv`: per node of the DAG iteration and thread.
///
/// # Errors
/// I/O errors of `w`.
pub fn write_load_balance(s: &ProfStat, mut w: impl Write) -> io::Result<()> {
    writeln!(w, "order,name,op,tid,busy_ns,span_ns,idle_share")?;
    for r in &s.load_balance {
        writeln!(
            w,
            "{},{},{},{},{},{},{}",
            r.order,
            field(&r.name),
            r.op,
            r.tid,
            r.busy_ns,
            r.span_ns,
            r.idle_share
        )?;
    }
    Ok(())
}

/// `experts.csv`: one row per layer and iteration of a mixture-of-experts model: the
/// experts used (`;`-separated, `n_used` per token), their reuse distances, the mean,
/// the expert products' time and major faults. Empty (header only) for dense models.
///
/// # Errors
/// I/O errors of `w`.
pub fn write_experts(s: &ProfStat, mut w: impl Write) -> io::Result<()> {
    writeln!(
        w,
        "layer,graph,graph_id,n_tokens,decode_step,experts,reuse_distances,mean_distance,time_ns,major_faults"
    )?;
    let Some(x) = &s.experts else {
        return Ok(());
    };
    let join = |v: Vec<String>| v.join(";");
    for l in &x.layers {
        for it in &l.iterations {
            writeln!(
                w,
                "{},{},{},{},{},{},{},{},{},{}",
                l.layer,
                it.graph,
                it.graph_id,
                it.n_tokens,
                it.decode_step.map_or(String::new(), |v| v.to_string()),
                join(it.ids.iter().map(i32::to_string).collect()),
                join(
                    it.reuse_distance
                        .iter()
                        .map(|d| d.map_or("new".to_owned(), |d| d.to_string()))
                        .collect()
                ),
                it.mean_distance
                    .map_or(String::new(), |v| format!("{v:.3}")),
                it.time_ns,
                it.major_faults.map_or(String::new(), |v| v.to_string()),
            )?;
        }
    }
    Ok(())
}

/// `backends.csv`: per op type, shape and backend, count and time (Fig 12: the same
/// operator on each backend). Header only without a second backend.
pub fn write_backend_ops(s: &ProfStat, mut w: impl Write) -> io::Result<()> {
    writeln!(w, "op,shape,backend,count,timed,total_ns,mean_ns,record_ns")?;
    for r in s.backends.iter().flat_map(|b| &b.ops) {
        let mean = r.mean_ns().map(|m| format!("{m:.1}")).unwrap_or_default();
        writeln!(
            w,
            "{},{},{},{},{},{},{mean},{}",
            field(&r.op),
            field(&r.shape),
            field(&r.backend),
            r.count,
            r.timed,
            r.total_ns,
            r.record_ns
        )?;
    }
    Ok(())
}

/// `token_split.csv`: per decode call, compute per backend, copies, sync waits and KV
/// I/O (time and bytes). Header only without a second backend or a KV budget.
pub fn write_token_split(s: &ProfStat, mut w: impl Write) -> io::Result<()> {
    let Some(b) = &s.backends else {
        return writeln!(w, "token");
    };
    write!(w, "token")?;
    for name in &b.backends {
        write!(w, ",{name}_splits,{name}_compute_ns")?;
    }
    writeln!(
        w,
        ",copies,copy_ns,syncs,sync_ns,kv_io_ns,kv_bytes_out,kv_bytes_in,copy_bytes,gpu_submits,gpu_submit_ns,fence_waits,fence_wait_ns,host_io_ns,host_io_bytes,recorded_nodes,record_ns,gpu_timed_nodes,gpu_node_ns"
    )?;
    for t in &b.tokens {
        write!(w, "{}", t.token)?;
        for name in &b.backends {
            write!(
                w,
                ",{},{}",
                t.splits.get(name).copied().unwrap_or(0),
                t.compute_ns.get(name).copied().unwrap_or(0)
            )?;
        }
        writeln!(
            w,
            ",{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{}",
            t.copies,
            t.copy_ns,
            t.syncs,
            t.sync_ns,
            t.kv_io_ns,
            t.kv_bytes_out,
            t.kv_bytes_in,
            t.copy_bytes,
            t.gpu_submits,
            t.gpu_submit_ns,
            t.fence_waits,
            t.fence_wait_ns,
            t.host_io_ns,
            t.host_io_bytes,
            t.recorded_nodes,
            t.record_ns,
            t.gpu_timed_nodes,
            t.gpu_node_ns
        )?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    #[test]
    fn quoting() {
        assert_eq!(super::field("a"), "a");
        assert_eq!(super::field("a,b"), "\"a,b\"");
        assert_eq!(super::field("a\"b"), "\"a\"\"b\"");
    }
}
