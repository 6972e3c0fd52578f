-- Fig 12 of seed 002: the same op type and shape on each backend of a split run, side by
-- side: median node time in decode per (op, shape, weight type) that ran on both.
WITH runs AS (
    SELECT run_id, label FROM read_parquet('{runs}/runs/*.parquet') WHERE label LIKE 'split/%'),
nodes AS (
    SELECT DISTINCT o.run_id, o.graph, o.node, o.op, o.call,
           concat_ws('x', o.ne0, nullif(o.ne1, 1), nullif(o.ne2, 1), nullif(o.ne3, 1)) AS shape,
           coalesce(o.src0_dtype, '') AS weight,
           o.node_end_ns - o.node_start_ns AS ns
    FROM read_parquet('{runs}/operators/*.parquet') o JOIN runs USING (run_id)
    WHERE o.op NOT IN ('BACKEND_COPY', 'BACKEND_SYNC')),
decode AS (
    SELECT n.*, g.backend
    FROM nodes n JOIN read_parquet('{runs}/graphs/*.parquet') g USING (run_id, graph)
    JOIN read_parquet('{runs}/tokens/*.parquet') t ON t.run_id = n.run_id AND t.call = n.call
    WHERE t.phase = 'decode'),
per_backend AS (
    SELECT run_id, op, shape, weight, backend, count(*) AS nodes, median(ns) AS ns
    FROM decode GROUP BY ALL)
SELECT r.label AS run, a.op, a.shape, nullif(a.weight, '') AS "weight type",
       a.nodes AS "cpu nodes", round(a.ns / 1e3, 1) AS "cpu median (us)",
       b.nodes AS "accel nodes", round(b.ns / 1e3, 1) AS "accel median (us)",
       round(b.ns / greatest(a.ns, 1), 2) AS "accel / cpu"
FROM per_backend a JOIN per_backend b
  ON b.run_id = a.run_id AND b.op = a.op AND b.shape = a.shape AND b.weight = a.weight
 AND a.backend = 'cpu' AND b.backend = 'accel'
JOIN runs r ON r.run_id = a.run_id
ORDER BY run, a.nodes * a.ns + b.nodes * b.ns DESC;
