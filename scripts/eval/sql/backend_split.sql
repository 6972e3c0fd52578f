-- Fig 7 of seed 002: where a decode call's time goes when its graph is split between two
-- backends: each backend's compute, the copies between them (BACKEND_COPY) and the CPU's
-- waits for the other backend (BACKEND_SYNC), as node time (first thread's entry to last
-- thread's exit) per decode call, median over calls.
WITH runs AS (
    SELECT run_id, label FROM read_parquet('{runs}/runs/*.parquet') WHERE label LIKE 'split/%'),
calls AS (
    SELECT t.run_id, t.call, t.dur_ns
    FROM read_parquet('{runs}/tokens/*.parquet') t JOIN runs USING (run_id)
    WHERE t.phase = 'decode'),
nodes AS (
    SELECT DISTINCT o.run_id, o.call, o.graph, o.node, o.op,
           o.node_end_ns - o.node_start_ns AS ns
    FROM read_parquet('{runs}/operators/*.parquet') o JOIN runs USING (run_id)),
parts AS (
    SELECT n.run_id, n.call,
           CASE WHEN n.op = 'BACKEND_COPY' THEN 'copies between backends'
                WHEN n.op = 'BACKEND_SYNC' THEN 'waits for the other backend'
                ELSE 'compute on ' || g.backend END AS part,
           sum(n.ns) AS ns, count(*) AS nodes
    FROM nodes n JOIN read_parquet('{runs}/graphs/*.parquet') g USING (run_id, graph)
    GROUP BY ALL)
SELECT r.label AS run, p.part, count(*) AS "decode calls",
       round(median(p.nodes), 1) AS "nodes per call",
       round(median(p.ns) / 1e6, 3) AS "median per call (ms)",
       round(median(100 * p.ns / c.dur_ns), 1) AS "median share of the call (%)"
FROM parts p JOIN calls c USING (run_id, call) JOIN runs r USING (run_id)
GROUP BY ALL
ORDER BY run, "median per call (ms)" DESC;
