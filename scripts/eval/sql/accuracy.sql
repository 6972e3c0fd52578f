-- Accuracy of the tracer's spans against the engine's own timestamps (lm-Meter, seed 000):
-- per span, L = the tracer's duration, G = the engine's (--self-profile, read inside the
-- probed function's body); A = (1 - |L - G| / G) * 100 %, eps = |L - G| [us] / G [ms].
-- One row per run, phase (prefill, decode) and level (token, graph, op, op > 100 us).
WITH runs AS (SELECT run_id, label FROM read_parquet('{runs}/runs/*.parquet')),
gt AS (SELECT * FROM read_json('{runs}/ground_truth/*.jsonl', format = 'newline_delimited')),
calls AS (
    SELECT run_id, call, tid, phase, start_ns, dur_ns,
           row_number() OVER (PARTITION BY run_id, tid ORDER BY start_ns) AS k
    FROM read_parquet('{runs}/tokens/*.parquet')),
graphs AS (
    SELECT g.run_id, g.graph_id, g.dur_ns, c.phase
    FROM read_parquet('{runs}/graphs/*.parquet') g
    JOIN calls c ON c.run_id = g.run_id AND c.call = g.call),
gt_tokens AS (
    SELECT *, row_number() OVER (PARTITION BY label, tid ORDER BY start_ns) AS k
    FROM gt WHERE level = 'token'),
pairs AS (
    SELECT r.label, c.phase, 'token' AS level, c.dur_ns AS l, g.end_ns - g.start_ns AS g
    FROM gt_tokens g JOIN runs r USING (label)
    JOIN calls c ON c.run_id = r.run_id AND c.tid = g.tid AND c.k = g.k
    UNION ALL
    SELECT r.label, t.phase, 'graph', t.dur_ns, g.end_ns - g.start_ns
    FROM gt g JOIN runs r USING (label)
    JOIN graphs t ON t.run_id = r.run_id AND t.graph_id = g.graph
    WHERE g.level = 'graph'
    UNION ALL
    SELECT r.label, c.phase,
           CASE WHEN g.end_ns - g.start_ns > 100000 THEN 'op > 100 us' ELSE 'op <= 100 us' END,
           o.dur_ns, g.end_ns - g.start_ns
    FROM gt g JOIN runs r USING (label)
    JOIN read_parquet('{runs}/operators/*.parquet') o
      ON o.run_id = r.run_id AND o.graph_id = g.graph AND o.node = g.node AND o.tid = g.tid
    JOIN calls c ON c.run_id = o.run_id AND c.call = o.call
    WHERE g.level = 'op'),
scored AS (
    SELECT *, 100 * (1 - abs(l - g) / greatest(g, 1)) AS a,
           (abs(l - g) / 1e3) / (greatest(g, 1) / 1e6) AS eps
    FROM pairs)
SELECT label AS run, phase, level, count(*) AS spans,
       round(median(g) / 1e3, 1) AS "median G (us)",
       round(avg(a), 3) AS "mean A (%)", round(median(a), 3) AS "median A (%)",
       round(min(a), 2) AS "worst A (%)",
       round(avg(eps), 2) AS "mean eps (us/ms)", round(max(eps), 1) AS "worst eps",
       round(median(l - g) / 1e3, 2) AS "median L - G (us)",
       round(quantile_cont(l - g, 0.9) / 1e3, 2) AS "p90 L - G (us)"
FROM scored
GROUP BY ALL
ORDER BY run, phase DESC, level DESC;
