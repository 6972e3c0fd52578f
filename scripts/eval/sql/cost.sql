-- What recording costs the traced program: CPU time per decode token (user + system of
-- the program and the collector, from wait4; the slope between a short and a long run,
-- so loading and start-up cancel), traced against untraced in interleaved ABBA pairs.
-- A condition other than `unconstrained` ran every measured command in a cgroup with a
-- CPU quota. The interval is the distribution-free one of the median (order statistics of the
-- binomial, ranks in median_ci_ranks, its exact coverage beside it). `untraced spread` is
-- how far the untraced runs alone lie apart ((max - min) / median): a slowdown smaller
-- than it is not resolved by the pairs.
WITH p AS (
    SELECT *, 100 * (traced_cpu_s / untraced_cpu_s - 1) AS cpu_pct,
           100 * (traced_wall_s / untraced_wall_s - 1) AS wall_pct
    FROM read_json('{runs}/cost_pairs.json')),
g AS (
    SELECT target, model, condition, recording, count(*) AS n,
           median(untraced_cpu_s) * 1e3 AS untraced_ms,
           100 * (max(untraced_cpu_s) - min(untraced_cpu_s)) / median(untraced_cpu_s)
               AS untraced_spread_pct,
           median(traced_cpu_s) * 1e3 AS traced_ms,
           median(cpu_pct) AS cpu_pct, list_sort(list(cpu_pct)) AS sorted,
           median(wall_pct) AS wall_pct,
           median(collector_cpu_s) * 1e6 AS collector_us
    FROM p GROUP BY ALL)
SELECT g.target, g.model, g.condition, g.recording, g.n AS pairs,
       round(g.untraced_ms, 3) AS "untraced CPU ms/token",
       round(g.untraced_spread_pct, 1) AS "untraced spread (%)",
       round(g.traced_ms, 3) AS "traced CPU ms/token",
       round(g.cpu_pct, 1) AS "CPU slowdown (%)",
       CASE WHEN c.lo IS NULL THEN '-'
            ELSE printf('%.1f .. %.1f', g.sorted[c.lo], g.sorted[c.hi]) END AS "95 % CI (%)",
       CASE WHEN c.lo IS NULL THEN '-' ELSE printf('%.1f', 100 * c.coverage) END AS "CI coverage (%)",
       round(g.wall_pct, 1) AS "wall slowdown (%)",
       round(g.collector_us, 1) AS "collector CPU us/token"
FROM g LEFT JOIN median_ci_ranks c ON c.n = g.n
ORDER BY g.target DESC, g.model, g.condition DESC, g.recording;
