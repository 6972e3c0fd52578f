-- Fig 13 of seed 002, by reuse distance: a (layer, decode step)'s expert products' median
-- time and major faults against how long ago its experts were last active (the largest
-- distance among them; `new`: one was never active before), per memory limit.
WITH runs AS (
    SELECT run_id, label,
           coalesce(try_cast(regexp_extract(label, '/(\d+)M$', 1) AS INTEGER), 1000000) AS mib
    FROM read_parquet('{runs}/runs/*.parquet') WHERE label LIKE 'experts/%'),
e AS (
    SELECT e.*,
           CASE WHEN e.new_experts > 0 THEN 'new'
                ELSE (SELECT CASE WHEN m <= 2 THEN '1-2' WHEN m <= 4 THEN '3-4'
                                  WHEN m <= 8 THEN '5-8' ELSE '9+' END
                      FROM (SELECT max(try_cast(d AS INTEGER)) AS m
                            FROM unnest(string_split(e.reuse_distances, ',')) AS u(d)))
           END AS distance
    FROM read_parquet('{runs}/experts/*.parquet') e JOIN runs USING (run_id)
    WHERE e.decode_step IS NOT NULL)
SELECT r.label AS run, e.distance AS "largest distance (steps)", count(*) AS "(layer, step)s",
       round(median(e.time_ns) / 1e6, 3) AS "median expert time (ms)",
       median(e.major_faults) AS "median major faults"
FROM e JOIN runs r USING (run_id)
GROUP BY r.label, r.mib, e.distance
ORDER BY r.mib DESC, CASE e.distance WHEN '1-2' THEN 1 WHEN '3-4' THEN 2 WHEN '5-8' THEN 3
                                      WHEN '9+' THEN 4 ELSE 5 END;
