-- Fig 9 of seed 002: per-iteration (decode step) latency against the context length, and
-- the share of attention's operators (KQ, softmax, KQV: the products over the KV cache),
-- whose work grows with it.
WITH runs AS (SELECT run_id, label FROM read_parquet('{runs}/runs/*.parquet') WHERE label LIKE 'context/%'),
steps AS (
    SELECT t.run_id, t.call, t.pos, t.dur_ns
    FROM read_parquet('{runs}/tokens/*.parquet') t JOIN runs USING (run_id)
    WHERE t.phase = 'decode'),
attn_nodes AS (
    SELECT DISTINCT o.run_id, o.call, o.graph, o.node, o.node_end_ns - o.node_start_ns AS ns
    FROM read_parquet('{runs}/operators/*.parquet') o JOIN runs USING (run_id)
    WHERE o.class IN ('kq', 'kq_scaled', 'kq_soft_max', 'kqv')
       OR (o.op = 'MUL_MAT' AND coalesce(o.src0, '') LIKE 'cache%')),
attn AS (SELECT run_id, call, sum(ns) AS ns FROM attn_nodes GROUP BY ALL),
per_step AS (
    SELECT s.run_id, s.pos, s.dur_ns, coalesce(a.ns, 0) AS attn_ns
    FROM steps s LEFT JOIN attn a USING (run_id, call)),
bucketed AS (
    SELECT run_id, (pos // {bucket}) * {bucket} AS ctx, median(dur_ns) / 1e6 AS step_ms,
           median(attn_ns) / 1e6 AS attn_ms, count(*) AS steps
    FROM per_step GROUP BY ALL)
SELECT r.label AS run, b.ctx AS "context from", b.steps,
       round(b.step_ms, 3) AS "median step (ms)", round(b.attn_ms, 3) AS "attention (ms)",
       round(100 * b.attn_ms / b.step_ms, 1) AS "attention share (%)"
FROM bucketed b JOIN runs r USING (run_id)
ORDER BY run, ctx;
