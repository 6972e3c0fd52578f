-- What recording operators costs a decode step, measured inside one process: each run
-- records operators in windows of ON decode steps in every PERIOD and detaches their
-- probes in between (`profinfer record --op-windows ON/PERIOD`), and compares the median
-- traced step with the median untraced step of the same run (same process, cache, KV
-- state and minutes of the machine; steps during a switch left out). Per run one ratio;
-- here the median over runs and the distribution-free 95 % interval of that median
-- (ranks in median_ci_ranks).
WITH r AS (
    SELECT *, 100 * (traced_p50_ms / untraced_p50_ms - 1) AS step_pct
    FROM read_json('{runs}/cost_windows.json')),
g AS (
    SELECT target, model, windows, count(*) AS n,
           median(untraced_p50_ms) AS untraced_ms,
           median(traced_p50_ms) AS traced_ms,
           median(step_pct) AS step_pct, list_sort(list(step_pct)) AS sorted,
           median(traced_steps) AS traced_steps, median(untraced_steps) AS untraced_steps
    FROM r GROUP BY ALL)
SELECT g.target, g.model, g.windows, g.n AS runs,
       round(g.untraced_ms, 3) AS "untraced step ms",
       round(g.traced_ms, 3) AS "traced step ms",
       round(g.step_pct, 2) AS "step slowdown (%)",
       CASE WHEN c.lo IS NULL THEN '-'
            ELSE printf('%.2f .. %.2f', g.sorted[c.lo], g.sorted[c.hi]) END AS "95 % CI (%)",
       printf('%.2f .. %.2f', g.sorted[1], g.sorted[g.n]) AS "range (%)",
       CAST(g.traced_steps AS INTEGER) AS "traced steps/run",
       CAST(g.untraced_steps AS INTEGER) AS "untraced steps/run"
FROM g LEFT JOIN median_ci_ranks c ON c.n = g.n
ORDER BY g.target DESC, g.model, g.windows;
