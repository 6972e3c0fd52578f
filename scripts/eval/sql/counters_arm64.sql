-- Fig 11 on the emulated arm64 board: SmolLM2's decode operators recorded with
-- `profinfer record --pmc` inside a stock arm64 kernel under QEMU (TCG, one CPU,
-- `-icount shift=0`, so that the PMU counts retired instructions). Per op type: its share
-- of the decode's instructions, instructions and cycles per span, cycles per instruction,
-- and every other counter the recording opened as its mean per span (QEMU's stall events
-- read zero; it implements no cache events, which the recording leaves out with a note).
WITH runs AS (
    SELECT run_id, label FROM read_parquet('{runs}/runs/*.parquet')
    WHERE label LIKE 'counters-arm64/%'),
spans AS (
    SELECT o.run_id, r.label, o.graph, o.node, o.tid, o.op, o.dur_ns
    FROM read_parquet('{runs}/operators/*.parquet') o JOIN runs r USING (run_id)
    JOIN read_parquet('{runs}/tokens/*.parquet') t ON t.run_id = o.run_id AND t.call = o.call
    WHERE t.phase = 'decode'),
per_op AS (
    SELECT label, op, count(*) AS spans, sum(dur_ns) AS dur_ns FROM spans GROUP BY ALL),
counted AS (
    SELECT s.label, s.op, c.counter, c.value
    FROM spans s JOIN read_parquet('{runs}/operator_counters/*.parquet') c
      USING (run_id, graph, node, tid)),
totals AS (
    SELECT label, op,
           sum(value) FILTER (WHERE counter = 'instructions') AS instructions,
           sum(value) FILTER (WHERE counter = 'cycles') AS cycles
    FROM counted GROUP BY ALL),
others AS (
    PIVOT (SELECT * FROM counted WHERE counter NOT IN ('instructions', 'cycles'))
    ON counter USING round(avg(value), 2) GROUP BY label, op)
SELECT p.label AS run, p.op, p.spans,
       round(100 * t.instructions / sum(t.instructions) OVER (PARTITION BY p.label), 1)
           AS "decode instructions (%)",
       round(t.instructions / p.spans / 1e3, 2) AS "instructions per span (k)",
       round(t.cycles / p.spans / 1e3, 2) AS "cycles per span (k)",
       round(t.cycles / t.instructions, 3) AS "cycles per instruction",
       round(p.dur_ns / p.spans / 1e3, 2) AS "mean span (us, guest clock)",
       o.* EXCLUDE (label, op)
FROM per_op p JOIN totals t USING (label, op) LEFT JOIN others o USING (label, op)
ORDER BY run, t.instructions DESC;
