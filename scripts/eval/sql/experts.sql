-- Fig 13 of seed 002: a mixture-of-experts model under a sweep of memory limits. Per
-- limit: the decode step, the expert products' time and major page faults per decode
-- step (summed over layers), and Pearson's r of a (layer, step)'s mean reuse distance
-- (decode steps since its experts were last active) against its expert products' time
-- and faults.
WITH runs AS (
    SELECT run_id, label,
           coalesce(try_cast(regexp_extract(label, '/(\d+)M$', 1) AS INTEGER), 1000000) AS mib
    FROM read_parquet('{runs}/runs/*.parquet') WHERE label LIKE 'experts/%'),
e AS (
    SELECT e.* FROM read_parquet('{runs}/experts/*.parquet') e JOIN runs USING (run_id)
    WHERE e.decode_step IS NOT NULL),
steps AS (
    SELECT run_id, decode_step, sum(time_ns) AS ns, sum(major_faults) AS faults,
           sum(new_experts) AS new_experts
    FROM e GROUP BY ALL),
tok AS (
    SELECT run_id, median(dur_ns) AS ns
    FROM read_parquet('{runs}/tokens/*.parquet') JOIN runs USING (run_id)
    WHERE phase = 'decode' GROUP BY ALL),
fit AS (
    SELECT run_id, count(mean_distance) AS points,
           corr(mean_distance, time_ns) AS r_time, corr(mean_distance, major_faults) AS r_faults
    FROM e GROUP BY ALL)
SELECT r.label AS run, count(*) AS "decode steps",
       round(any_value(t.ns) / 1e6, 2) AS "median decode step (ms)",
       round(median(s.ns) / 1e6, 2) AS "expert products per step (ms)",
       median(s.faults) AS "major faults per step",
       any_value(f.points) AS "(layer, step) points",
       round(any_value(f.r_time), 2) AS "r(distance, time)",
       round(any_value(f.r_faults), 2) AS "r(distance, faults)"
FROM steps s JOIN runs r USING (run_id) JOIN tok t USING (run_id) JOIN fit f USING (run_id)
GROUP BY r.label, r.mib
ORDER BY r.mib DESC;
