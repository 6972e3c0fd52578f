-- Fig 6 of seed 002: load balance of the worker threads per op type: for every node with
-- more than one thread, the slowest thread's time over the mean (1.00 = perfect). From the
-- context run (the default recording; a --pmc or --exact-spans run moves span starts).
WITH runs AS (
    SELECT run_id, label FROM read_parquet('{runs}/runs/*.parquet') WHERE label LIKE 'context/%'),
per_node AS (
    SELECT o.run_id, o.graph, o.node, any_value(o.op) AS op,
           max(o.dur_ns) / avg(o.dur_ns) AS imbalance, max(o.dur_ns) - avg(o.dur_ns) AS idle_ns,
           count(*) AS threads
    FROM read_parquet('{runs}/operators/*.parquet') o JOIN runs USING (run_id)
    GROUP BY o.run_id, o.graph, o.node
    HAVING count(*) > 1 AND avg(o.dur_ns) > 0)
SELECT r.label AS run, p.op, count(*) AS nodes,
       round(median(p.imbalance), 2) AS "median max/mean",
       round(quantile_cont(p.imbalance, 0.9), 2) AS "p90 max/mean",
       round(sum(p.idle_ns) / 1e6, 2) AS "waiting (ms)"
FROM per_node p JOIN runs r USING (run_id)
GROUP BY ALL
HAVING count(*) >= 8
ORDER BY run, "waiting (ms)" DESC;
