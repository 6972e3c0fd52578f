-- Operator accuracy per op type (operators longer than 100 us, where lm-Meter's bar of
-- mean A >= 98 % applies), per run and phase.
WITH runs AS (SELECT run_id, label FROM read_parquet('{runs}/runs/*.parquet')),
gt AS (SELECT * FROM read_json('{runs}/ground_truth/*.jsonl', format = 'newline_delimited')),
calls AS (SELECT run_id, call, phase FROM read_parquet('{runs}/tokens/*.parquet')),
pairs AS (
    SELECT r.label, c.phase, o.op, o.dur_ns AS l, g.end_ns - g.start_ns AS g
    FROM gt g JOIN runs r USING (label)
    JOIN read_parquet('{runs}/operators/*.parquet') o
      ON o.run_id = r.run_id AND o.graph_id = g.graph AND o.node = g.node AND o.tid = g.tid
    JOIN calls c ON c.run_id = o.run_id AND c.call = o.call
    WHERE g.level = 'op' AND g.end_ns - g.start_ns > 100000)
SELECT label AS run, phase, op, count(*) AS spans,
       round(median(g) / 1e3, 1) AS "median G (us)",
       round(avg(100 * (1 - abs(l - g) / g)), 3) AS "mean A (%)",
       round(min(100 * (1 - abs(l - g) / g)), 2) AS "worst A (%)",
       round(avg((abs(l - g) / 1e3) / (g / 1e6)), 2) AS "mean eps (us/ms)"
FROM pairs
GROUP BY ALL
ORDER BY run, phase DESC, spans DESC;
