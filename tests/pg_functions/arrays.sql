-- PostgreSQL 15 docs 9.19: array functions and operators (and 8.15 array literals).
SELECT ARRAY[1, 2, 3]
SELECT ARRAY[1.1, 2.2]
SELECT ARRAY['a', 'b c', NULL, '']
SELECT ARRAY[[1, 2], [3, 4]]
SELECT ARRAY[]::int[]
SELECT '{1,2,3}'::int[]
SELECT '{{1,2},{3,4}}'::int[]
SELECT '[0:2]={1,2,3}'::int[]
SELECT '{"a b", "c\"d"}'::text[]
SELECT ARRAY[true, false]
SELECT ARRAY[date '2024-01-01']
SELECT (ARRAY[1, 2, 3])[2]
SELECT (ARRAY[1, 2, 3])[5]
SELECT (ARRAY[1, 2, 3, 4])[2:3]
SELECT (ARRAY[1, 2, 3, 4])[:2]
SELECT (ARRAY[1, 2, 3, 4])[3:]
SELECT (ARRAY[[1, 2], [3, 4]])[2][1]
SELECT (ARRAY[[1, 2], [3, 4]])[1:2][1:1]
SELECT ARRAY[1, 4, 3] @> ARRAY[3, 1, 3]
SELECT ARRAY[2, 2, 7] <@ ARRAY[1, 7, 4, 2, 6]
SELECT ARRAY[1, 4, 3] && ARRAY[2, 1]
SELECT ARRAY[1, 2, 3] || ARRAY[4, 5, 6, 7]
SELECT ARRAY[1, 2, 3] || ARRAY[[4, 5, 6], [7, 8, 9]]
SELECT 3 || ARRAY[4, 5, 6]
SELECT ARRAY[4, 5, 6] || 7
SELECT ARRAY[1, 2] = ARRAY[1, 2]
SELECT ARRAY[1, 2] < ARRAY[1, 3]
SELECT ARRAY[1, 2, 3] <> ARRAY[1, 2]
SELECT array_append(ARRAY[1, 2], 3)
SELECT array_cat(ARRAY[1, 2, 3], ARRAY[4, 5])
SELECT array_dims(ARRAY[[1, 2, 3], [4, 5, 6]])
SELECT array_dims('[0:2]={1,2,3}'::int[])
SELECT array_fill(11, ARRAY[2, 3])
SELECT array_fill(7, ARRAY[3], ARRAY[2])
SELECT array_length(array[1, 2, 3], 1)
SELECT array_length(array[]::int[], 1)
SELECT array_length(ARRAY[[1, 2], [3, 4]], 2)
SELECT array_lower('[0:2]={1,2,3}'::integer[], 1)
SELECT array_ndims(ARRAY[[1, 2, 3], [4, 5, 6]])
SELECT array_position(ARRAY['sun', 'mon', 'tue', 'wed', 'thu', 'fri', 'sat'], 'mon')
SELECT array_position(ARRAY[1, 2, 3, 2], 2, 3)
SELECT array_position(ARRAY[1, 2], 9)
SELECT array_positions(ARRAY['A', 'A', 'B', 'A'], 'A')
SELECT array_prepend(1, ARRAY[2, 3])
SELECT array_remove(ARRAY[1, 2, 3, 2], 2)
SELECT array_replace(ARRAY[1, 2, 5, 4], 5, 3)
SELECT array_to_string(ARRAY[1, 2, 3, NULL, 5], ',', '*')
SELECT array_to_string(ARRAY[1, 2, 3, NULL, 5], ',')
SELECT array_to_string(ARRAY['a', 'b'], '')
SELECT array_upper(ARRAY[1, 8, 3, 7], 1)
SELECT cardinality(ARRAY[[1, 2], [3, 4]])
SELECT cardinality(ARRAY[]::int[])
SELECT trim_array(ARRAY[1, 2, 3, 4, 5, 6], 2)
SELECT unnest(ARRAY[1, 2])
SELECT unnest(ARRAY[['foo', 'bar'], ['baz', 'quux']])
SELECT * FROM unnest(ARRAY[1, 2], ARRAY['foo', 'bar', 'baz']) AS x(a, b)
SELECT * FROM unnest(ARRAY['a', 'b']) WITH ORDINALITY AS t(v, i) ORDER BY i
SELECT unnest('{}'::int[])
SELECT array_agg(x) FROM generate_series(1, 4) AS g(x)
SELECT array_agg(x ORDER BY x DESC) FROM generate_series(1, 4) AS g(x)
SELECT array_agg(s ORDER BY id) FROM pgf_t
SELECT array_agg(ARRAY[x, x * 10] ORDER BY x) FROM generate_series(1, 3) AS g(x)
SELECT ARRAY(SELECT x * 2 FROM generate_series(1, 3) AS g(x) ORDER BY x)
SELECT ARRAY(SELECT id FROM pgf_t WHERE grp = 'a' ORDER BY id)
SELECT 2 = ANY(ARRAY[1, 2, 3])
SELECT 5 = ANY(ARRAY[1, 2, 3])
SELECT 2 = ALL(ARRAY[2, 2])
SELECT 1 < ALL(ARRAY[2, 3])
SELECT NULL = ANY(ARRAY[1])
SELECT 1 = ANY(ARRAY[NULL, 1])
SELECT 2 = ANY(ARRAY[NULL, 1])
SELECT 'b' = ANY('{a,b}'::text[])
SELECT 'x' LIKE ANY(ARRAY['a%', 'x%'])
SELECT 3 = ANY('{1,2,3}')
SELECT array_to_string(string_to_array('1 2 3', ' ')::int[], '+')
SELECT (ARRAY[1, 2, 3])[1:2] || 9
SELECT ARRAY[1, 2]::text[]
SELECT ARRAY['1', '2']::int[]
SELECT ARRAY[1, 2]::float8[]
SELECT '{1.5, 2.25}'::numeric[]
SELECT pg_typeof(ARRAY[1, 2])
SELECT pg_typeof(ARRAY[1.5])
SELECT pg_typeof(ARRAY['a'])
SELECT array_length(ARRAY[1, 2, 3], 0)
SELECT ARRAY[1, 2] || NULL::int[]
SELECT ARRAY[[1, 2], [3]]
SELECT ARRAY[1, 'a']
SELECT array_upper(ARRAY[]::int[], 1)
SELECT ARRAY[ARRAY[1, 2], ARRAY[3, 4]]
SELECT array_cat(NULL, ARRAY[1])
SELECT string_to_array('a b c', ' ')::text[] @> ARRAY['b']
SELECT ARRAY[NULL::int]
SELECT ARRAY['{', '}', ',', '"', '\']
SELECT ARRAY['NULL', 'null']
SELECT '{NULL, "NULL"}'::text[]
