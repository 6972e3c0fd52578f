-- llama.cpp's operators as traced in unmodified llama-bench, against llama.cpp's own
-- `test-backend-ops perf` of the same op run alone on the CPU backend with the same
-- threads: matched by op, output shape and, for a product, its inner dimension (the
-- first source's ne0). `test_backend_ops` is the table `test-backend-ops --output sql`
-- creates (its statements are under runs/llama_ops/, loaded by tables.py); `time_us` is
-- its time per run. `exported as` is the name of the first graph node llama.cpp's
-- export found with that op and shape (others with the same shape share its line).
-- `phase` is by the graph's batch: prefill is llama-bench's prompt test, one batch as long
-- as the exported context into an empty cache, so its attention spans the same cells as
-- the export's prompt graph; decode is every one-token graph (the first generated token
-- included, which the analyzer counts as a sequence's prefill). In decode, attention
-- (FLASH_ATTN_EXT, SOFT_MAX, the products over the KV cache) is left out: the export's
-- graphs attend over the whole context, the traced decode over a few dozen cells.
-- SET_ROWS is left out: its output shape is the cache's, not the rows it writes.
WITH runs AS (
    SELECT run_id, label FROM read_parquet('{runs}/runs/*.parquet') WHERE label LIKE 'llama-ops/%'),
alone AS (
    SELECT op_name, regexp_extract(op_params, 'name=([^,]+)', 1) AS name,
           regexp_extract(op_params, 'ne=\[([0-9]+),([0-9]+),([0-9]+),([0-9]+)\]',
                          ['n0', 'n1', 'n2', 'n3']) AS ne,
           regexp_extract(op_params, 'sources=([a-z0-9_]+)\[', 1) AS src0_type,
           CAST(regexp_extract(op_params, 'sources=[a-z0-9_]+\[([0-9]+)', 1) AS BIGINT) AS src0_ne0,
           CAST(time_us AS DOUBLE) AS us, CAST(n_runs AS BIGINT) AS runs
    FROM test_backend_ops
    WHERE test_mode = 'perf' AND CAST(time_us AS DOUBLE) > 0),
traced AS (
    SELECT DISTINCT o.run_id, CASE WHEN t.n_tokens > 1 THEN 'prefill' ELSE 'decode' END AS phase,
           o.graph, o.node, o.op, o.class, o.ne0, o.ne1, o.ne2,
           o.ne3, o.mm_k, o.node_end_ns - o.node_start_ns AS ns
    FROM read_parquet('{runs}/operators/*.parquet') o JOIN runs USING (run_id)
    JOIN read_parquet('{runs}/tokens/*.parquet') t ON t.run_id = o.run_id AND t.call = o.call
    WHERE t.phase IN ('prefill', 'decode')),
per_shape AS (
    SELECT phase, op, ne0, ne1, ne2, ne3, mm_k, string_agg(DISTINCT class, ', ') AS classes,
           count(*) AS nodes, median(ns) AS ns
    FROM traced
    WHERE op <> 'SET_ROWS'
      AND (phase = 'prefill'
           OR (op NOT IN ('FLASH_ATTN_EXT', 'SOFT_MAX') AND class NOT IN ('kq', 'kqv')))
    GROUP BY phase, op, ne0, ne1, ne2, ne3, mm_k)
SELECT p.phase, p.op, p.classes AS "traced classes", a.name AS "exported as",
       concat_ws('x', p.ne0, nullif(p.ne1, 1), nullif(p.ne2, 1), nullif(p.ne3, 1)) AS shape,
       CASE WHEN p.op = 'MUL_MAT' THEN a.src0_type END AS "weight type",
       p.nodes AS "traced nodes", round(p.ns / 1e3, 2) AS "traced median (us)",
       round(a.us, 2) AS "alone (us)", a.runs AS "runs alone",
       round(p.ns / 1e3 / a.us, 2) AS "traced / alone"
FROM per_shape p JOIN alone a
  ON a.op_name = p.op AND CAST(a.ne.n0 AS BIGINT) = p.ne0 AND CAST(a.ne.n1 AS BIGINT) = p.ne1
 AND CAST(a.ne.n2 AS BIGINT) = p.ne2 AND CAST(a.ne.n3 AS BIGINT) = p.ne3
 AND (p.op <> 'MUL_MAT' OR a.src0_ne0 = p.mm_k)
-- Two exported ops of one shape (GET_ROWS of the f32 and of the quantized table): the one
-- whose node class the trace has.
QUALIFY row_number() OVER (
    PARTITION BY p.phase, p.op, p.ne0, p.ne1, p.ne2, p.ne3, p.mm_k
    ORDER BY contains(p.classes, regexp_replace(a.name, '-[0-9]+$', '')) DESC, a.us) = 1
ORDER BY p.phase DESC, p.nodes * p.ns DESC;
