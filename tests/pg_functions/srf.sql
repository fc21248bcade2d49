-- PostgreSQL 15 docs 9.25 and 9.26: set returning functions and system information SRFs.
SELECT generate_series(2, 4)
SELECT generate_series(5, 1, -2)
SELECT generate_series(4, 3)
SELECT generate_series(1.1, 4, 1.3)
SELECT generate_series(1, 10, 0)
SELECT * FROM generate_series(1, 3) AS g(x)
SELECT x, x * x FROM generate_series(1, 3) AS g(x) ORDER BY x
SELECT * FROM generate_series(1, 2) a, generate_series(1, 2) b ORDER BY 1, 2
SELECT * FROM generate_series(1, 3) WITH ORDINALITY AS t(v, n) ORDER BY n
SELECT generate_series(1, 3), generate_series(1, 2)
SELECT count(*) FROM generate_series(1, 1000)
SELECT sum(g) FROM generate_series(1, 100) g
SELECT generate_series(date '2024-01-01', date '2024-01-03', interval '1 day')::date
SELECT generate_subscripts('{NULL,1,NULL,2}'::int[], 1)
SELECT generate_subscripts(ARRAY[[1, 2], [3, 4]], 2)
SELECT * FROM (VALUES (1, 'one'), (2, 'two')) AS t(num, letter) ORDER BY num
SELECT * FROM unnest(ARRAY[3, 1, 2]) AS u(x) ORDER BY x
SELECT * FROM ROWS FROM (generate_series(1, 2), unnest(ARRAY['a', 'b', 'c'])) AS t(a, b)
SELECT g FROM generate_series(10, 1, -3) g ORDER BY g
SELECT generate_series(1, 3) + 10
SELECT i, lead(i) OVER (ORDER BY i) FROM generate_series(1, 4) i ORDER BY i
SELECT * FROM generate_series(1, 5) g WHERE g % 2 = 0
SELECT * FROM generate_series(0, 12, 5) WITH ORDINALITY
SELECT generate_series(1::int8, 3::int8)
SELECT generate_series(1, NULL)
SELECT * FROM generate_series(3, 1) g
