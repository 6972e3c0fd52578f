//! Results must not depend on the order in which records of different CPUs / threads
//! reached the file: shuffle the golden traces' events (keeping each CPU's, or each
//! thread's, own order, as per-CPU buffers and ring-buffer reservations do, within
//! bounded blocks) and compare every output byte for byte.

mod support;

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use support::{analyze, data, output, read_all, write};
use trace_format::Event;

/// Events per block inside which streams are interleaved at random.
const BLOCK: usize = 96;

/// Interleaves the per-key streams of each block at random, keeping each stream's order.
fn shuffle_streams(events: &[Event], mut key: impl FnMut(&Event) -> u32, seed: u64) -> Vec<Event> {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let mut out = Vec::with_capacity(events.len());
    for block in events.chunks(BLOCK) {
        let mut streams: Vec<(u32, std::collections::VecDeque<Event>)> = Vec::new();
        for e in block {
            let k = key(e);
            match streams.iter_mut().find(|(s, _)| *s == k) {
                Some((_, q)) => q.push_back(e.clone()),
                None => streams.push((k, [e.clone()].into())),
            }
        }
        while !streams.is_empty() {
            let i = rng.random_range(0..streams.len());
            if let Some(e) = streams[i].1.pop_front() {
                out.push(e);
            }
            if streams[i].1.is_empty() {
                streams.swap_remove(i);
            }
        }
    }
    out
}

fn check(trace: &str) {
    let original = data(trace);
    let (header, footer, events) = read_all(&original);
    let (dir_a, _) = analyze(&original);
    let variants = [
        shuffle_streams(&events, |e| e.header().cpu, 1),
        shuffle_streams(&events, |e| e.header().tid, 2),
        // Every event its own stream: a full shuffle inside each block, even of one
        // thread's own records.
        {
            let mut i = 0u32;
            shuffle_streams(
                &events,
                |_| {
                    i += 1;
                    i
                },
                3,
            )
        },
    ];
    assert_ne!(
        variants[2]
            .iter()
            .map(|e| e.header().ts_ns)
            .collect::<Vec<_>>(),
        events.iter().map(|e| e.header().ts_ns).collect::<Vec<_>>(),
        "the full shuffle did not change the order"
    );
    for (n, shuffled) in variants.iter().enumerate() {
        let tmp = tempfile::tempdir().expect("tempdir");
        let path = tmp.path().join("shuffled.pftrace");
        write(&path, &header, footer.as_ref(), shuffled);
        let (dir_b, _) = analyze(&path);
        for file in [
            "summary.json",
            "dag.json",
            "dag_layers.json",
            "stats.json",
            "timeline.json",
            "iterations.csv",
            "load_balance.csv",
        ] {
            assert!(
                output(&dir_a, file) == output(&dir_b, file),
                "{trace}: {file} differs after shuffle variant {n}"
            );
        }
    }
}

#[test]
fn two_thread_trace_is_order_independent() {
    check("tiny_t2.pftrace");
}

#[test]
fn one_thread_trace_is_order_independent() {
    check("tiny_t1.pftrace");
}
