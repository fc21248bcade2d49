-- PostgreSQL 15 docs 9.21: aggregate functions, over the fixture table pgf_t.
SELECT count(*) FROM pgf_t
SELECT count(n) FROM pgf_t
SELECT count(DISTINCT grp) FROM pgf_t
SELECT count(DISTINCT n) FROM pgf_t
SELECT sum(n) FROM pgf_t
SELECT sum(x) FROM pgf_t
SELECT sum(d) FROM pgf_t
SELECT sum(n::int8) FROM pgf_t
SELECT sum(n::int2) FROM pgf_t
SELECT sum(d::numeric) FROM pgf_t
SELECT sum(x::real) FROM pgf_t
SELECT sum(n) FROM pgf_t WHERE false
SELECT avg(n) FROM pgf_t
SELECT avg(x) FROM pgf_t
SELECT avg(d) FROM pgf_t
SELECT avg(n::int8) FROM pgf_t
SELECT avg(n::int2) FROM pgf_t
SELECT avg(x::real) FROM pgf_t
SELECT min(n), max(n) FROM pgf_t
SELECT min(s), max(s) FROM pgf_t
SELECT min(d), max(d) FROM pgf_t
SELECT min(ts), max(ts) FROM pgf_t
SELECT min(b::int), max(b::int) FROM pgf_t
SELECT bool_and(b), bool_or(b) FROM pgf_t
SELECT every(b) FROM pgf_t
SELECT bit_and(n), bit_or(n), bit_xor(n) FROM pgf_t
SELECT string_agg(s, ',') FROM (SELECT s FROM pgf_t ORDER BY id) q
SELECT string_agg(s, ', ' ORDER BY s) FROM pgf_t
SELECT string_agg(s, ', ' ORDER BY s DESC) FROM pgf_t
SELECT string_agg(DISTINCT grp, '|' ORDER BY grp) FROM pgf_t
SELECT string_agg(s, NULL ORDER BY s) FROM pgf_t
SELECT array_agg(n ORDER BY id) FROM pgf_t
SELECT array_agg(DISTINCT n ORDER BY n) FROM pgf_t
SELECT count(*) FILTER (WHERE n > 6) FROM pgf_t
SELECT sum(n) FILTER (WHERE grp = 'a') FROM pgf_t
SELECT grp, count(*), sum(n), avg(d) FROM pgf_t GROUP BY grp ORDER BY grp
SELECT grp, string_agg(s, ',' ORDER BY id) FROM pgf_t GROUP BY grp ORDER BY grp NULLS FIRST
SELECT grp, max(x) - min(x) FROM pgf_t GROUP BY grp HAVING count(*) > 1 ORDER BY grp
SELECT stddev(n) FROM pgf_t
SELECT stddev_pop(n) FROM pgf_t
SELECT stddev_samp(x) FROM pgf_t
SELECT stddev(d) FROM pgf_t
SELECT variance(n) FROM pgf_t
SELECT var_pop(n) FROM pgf_t
SELECT var_samp(x) FROM pgf_t
SELECT variance(d) FROM pgf_t
SELECT stddev(n) FROM pgf_t WHERE id = 1
SELECT corr(n, x) FROM pgf_t
SELECT covar_pop(n, x) FROM pgf_t
SELECT covar_samp(n, x) FROM pgf_t
SELECT regr_avgx(n, x), regr_avgy(n, x) FROM pgf_t
SELECT regr_count(n, x) FROM pgf_t
SELECT regr_intercept(n, x) FROM pgf_t
SELECT regr_r2(n, x) FROM pgf_t
SELECT regr_slope(n, x) FROM pgf_t
SELECT regr_sxx(n, x), regr_sxy(n, x), regr_syy(n, x) FROM pgf_t
SELECT mode() WITHIN GROUP (ORDER BY n) FROM pgf_t
SELECT percentile_cont(0.5) WITHIN GROUP (ORDER BY n) FROM pgf_t
SELECT percentile_cont(0.25) WITHIN GROUP (ORDER BY x) FROM pgf_t
SELECT percentile_cont(ARRAY[0.25, 0.5, 0.75]) WITHIN GROUP (ORDER BY x) FROM pgf_t
SELECT percentile_disc(0.5) WITHIN GROUP (ORDER BY n) FROM pgf_t
SELECT percentile_disc(0.5) WITHIN GROUP (ORDER BY s) FROM pgf_t
SELECT percentile_cont(0.5) WITHIN GROUP (ORDER BY ts) FROM pgf_t
SELECT percentile_cont(0.5) WITHIN GROUP (ORDER BY d) FROM pgf_t
SELECT rank(7) WITHIN GROUP (ORDER BY n) FROM pgf_t
SELECT dense_rank(7) WITHIN GROUP (ORDER BY n) FROM pgf_t
SELECT percent_rank(7) WITHIN GROUP (ORDER BY n) FROM pgf_t
SELECT cume_dist(7) WITHIN GROUP (ORDER BY n) FROM pgf_t
SELECT grp, count(*) FROM pgf_t GROUP BY ROLLUP (grp) ORDER BY grp NULLS LAST, 2
SELECT grp, b, count(*) FROM pgf_t GROUP BY CUBE (grp, b) ORDER BY 1, 2, 3
SELECT grp, b, count(*) FROM pgf_t GROUP BY GROUPING SETS ((grp), (b), ()) ORDER BY 1, 2, 3
SELECT grp, GROUPING(grp), count(*) FROM pgf_t GROUP BY ROLLUP (grp) ORDER BY 1, 2
SELECT count(*), count(1), count(NULL) FROM pgf_t
SELECT count(DISTINCT (grp, b)) FROM pgf_t
SELECT max(n) + min(n) * 2 FROM pgf_t
SELECT avg(n)::numeric(10,3) FROM pgf_t
SELECT round(avg(x)::numeric, 4) FROM pgf_t
SELECT sum(n) / count(n) FROM pgf_t
SELECT avg(DISTINCT n) FROM pgf_t
SELECT sum(DISTINCT n) FROM pgf_t
SELECT xmlagg(xmlelement(name x, s) ORDER BY id) FROM pgf_t WHERE id < 3
SELECT sum(1) FROM pgf_t
SELECT count(*) FROM pgf_e
SELECT sum(k), avg(k), max(v), bool_and(k > 0), array_agg(k), string_agg(v, ',') FROM pgf_e
SELECT grp FROM pgf_t GROUP BY grp ORDER BY count(*) DESC, grp
SELECT DISTINCT grp FROM pgf_t ORDER BY grp
SELECT count(*) FROM (SELECT DISTINCT n FROM pgf_t) q
SELECT sum(x * n) FROM pgf_t
SELECT avg(ts - timestamp '2024-01-01') FROM pgf_t
SELECT sum(ts - timestamp '2024-01-01') FROM pgf_t
SELECT min(ts::date), max(ts::date) FROM pgf_t
SELECT avg(n) FILTER (WHERE b) FROM pgf_t
