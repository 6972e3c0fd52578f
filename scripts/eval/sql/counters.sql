-- Fig 11 of seed 002: what the operators' counters show, per op type in decode. The
-- counters are read at both bounds of every operator span (`profinfer record --pmc`);
-- each column is a counter's mean per span (thread and node), so a software counter
-- such as task-clock (ns on a CPU) compares with the mean span, and hardware ones
-- (cycles, cache refills, stall cycles, where the machine has a PMU) give rates per op.
WITH runs AS (
    SELECT run_id, label FROM read_parquet('{runs}/runs/*.parquet') WHERE label LIKE 'counters/%'),
slices AS (
    SELECT o.run_id, r.label, o.graph, o.node, o.tid, o.op, o.dur_ns
    FROM read_parquet('{runs}/operators/*.parquet') o JOIN runs r USING (run_id)
    JOIN read_parquet('{runs}/tokens/*.parquet') t ON t.run_id = o.run_id AND t.call = o.call
    WHERE t.phase = 'decode'),
per_op AS (
    SELECT label, op, count(*) AS spans, sum(dur_ns) AS dur_ns
    FROM slices GROUP BY ALL),
values AS (
    SELECT s.label, s.op, c.counter, c.value
    FROM slices s JOIN read_parquet('{runs}/operator_counters/*.parquet') c
      USING (run_id, graph, node, tid)),
wide AS (PIVOT values ON counter USING round(avg(value), 2) GROUP BY label, op)
SELECT p.label AS run, p.op, p.spans,
       round(100 * p.dur_ns / sum(p.dur_ns) OVER (PARTITION BY p.label), 1) AS "decode time (%)",
       round(p.dur_ns / p.spans / 1e3, 2) AS "mean span (us)",
       w.* EXCLUDE (label, op)
FROM per_op p JOIN wide w USING (label, op)
ORDER BY run, p.dur_ns DESC;
