-- Fig 10 of seed 002: matrix-product time against its complexity in decode, where every
-- product is a matrix-vector one: 2 m n k h operations (h: attention's heads), per weight
-- type, from each distinct product's median time (so one line per shape, not per call),
-- with a least-squares line time = a + b * ops. KQ and KQV (products over the KV cache,
-- `cache_k_l0`..., whose length grows) are left out, as in the paper. Default recordings
-- of the dense models only (the accuracy and context runs).
WITH runs AS (
    SELECT run_id, label FROM read_parquet('{runs}/runs/*.parquet')
    WHERE label LIKE 'accuracy/%' OR label LIKE 'context/%'),
calls AS (SELECT run_id, call, phase FROM read_parquet('{runs}/tokens/*.parquet')),
nodes AS (
    SELECT o.run_id, o.graph, o.node, any_value(o.call) AS call, any_value(o.name) AS name,
           any_value(o.src0_dtype) AS dtype,
           any_value(2.0::DOUBLE * o.mm_m * o.mm_n * o.mm_k * o.mm_h) AS ops,
           any_value(o.node_end_ns - o.node_start_ns)::DOUBLE AS ns
    FROM read_parquet('{runs}/operators/*.parquet') o JOIN runs USING (run_id)
    WHERE o.op = 'MUL_MAT' AND o.mm_m IS NOT NULL
      AND o.class NOT IN ('kq', 'kqv') AND coalesce(o.src0, '') NOT LIKE 'cache%'
    GROUP BY o.run_id, o.graph, o.node),
shapes AS (
    SELECT n.run_id, n.name, n.dtype, n.ops, median(n.ns) AS ns, count(*) AS calls
    FROM nodes n JOIN calls c USING (run_id, call)
    WHERE c.phase = 'decode' AND n.dtype IS NOT NULL
    GROUP BY ALL)
SELECT r.label AS run, s.dtype AS "weight type", count(*) AS products,
       sum(s.calls) AS calls,
       round(min(s.ops) / 1e6, 2) AS "min Mops", round(max(s.ops) / 1e6, 2) AS "max Mops",
       round(regr_slope(s.ns, s.ops) * 1e3, 3) AS "ns per kop",
       round(regr_intercept(s.ns, s.ops) / 1e3, 1) AS "intercept (us)",
       round(regr_r2(s.ns, s.ops), 3) AS "R^2",
       round(1 / regr_slope(s.ns, s.ops), 2) AS "GOP/s (1 / slope)"
FROM shapes s JOIN runs r USING (run_id)
GROUP BY ALL
ORDER BY run, "weight type";
