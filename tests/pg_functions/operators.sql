-- PostgreSQL 15 docs 9.1, 9.2, 9.17, 9.18, 9.23, 9.24: logical, comparison, conditional,
-- subquery and row-comparison operators, and common casts.
SELECT true AND NULL
SELECT false AND NULL
SELECT true OR NULL
SELECT false OR NULL
SELECT NOT NULL::boolean
SELECT NOT true
SELECT 1 < 2, 2 <= 2, 3 > 4, 4 >= 4, 5 = 5, 5 <> 6, 5 != 6
SELECT 2 BETWEEN 1 AND 3
SELECT 2 BETWEEN 3 AND 1
SELECT 2 BETWEEN SYMMETRIC 3 AND 1
SELECT 2 NOT BETWEEN 1 AND 3
SELECT 1 IS DISTINCT FROM NULL
SELECT NULL IS DISTINCT FROM NULL
SELECT 1 IS NOT DISTINCT FROM 1
SELECT NULL IS NULL, NULL IS NOT NULL
SELECT 1 ISNULL
SELECT 1 NOTNULL
SELECT true IS TRUE, NULL IS TRUE, NULL IS NOT FALSE
SELECT NULL::boolean IS UNKNOWN
SELECT num_nonnulls(1, NULL, 2)
SELECT num_nulls(1, NULL, 2)
SELECT CASE WHEN 1 = 1 THEN 'one' ELSE 'other' END
SELECT CASE 2 WHEN 1 THEN 'one' WHEN 2 THEN 'two' END
SELECT CASE 3 WHEN 1 THEN 'one' END
SELECT CASE WHEN NULL THEN 1 ELSE 2 END
SELECT CASE WHEN false THEN 1 ELSE 2.5 END
SELECT COALESCE(NULL, 2, 3)
SELECT COALESCE(NULL, NULL)
SELECT COALESCE(NULL::int, 1.5)
SELECT NULLIF(1, 1)
SELECT NULLIF(1, 2)
SELECT NULLIF('a', 'b')
SELECT GREATEST(1, 5, 3)
SELECT GREATEST(1, NULL, 3)
SELECT LEAST(1.5, 0.5, 2)
SELECT LEAST('b', 'a', 'c')
SELECT GREATEST(date '2024-01-01', date '2023-01-01')
SELECT 1 IN (1, 2, 3)
SELECT 4 IN (1, 2, 3)
SELECT 4 NOT IN (1, 2, NULL)
SELECT 1 IN (1, NULL)
SELECT 2 IN (1, NULL)
SELECT EXISTS (SELECT 1 FROM pgf_t WHERE n > 25)
SELECT EXISTS (SELECT 1 FROM pgf_e)
SELECT NOT EXISTS (SELECT 1 FROM pgf_e)
SELECT 5 IN (SELECT n FROM pgf_t)
SELECT 6 NOT IN (SELECT n FROM pgf_t)
SELECT 6 NOT IN (SELECT n FROM pgf_t WHERE n IS NOT NULL)
SELECT 20 = ANY (SELECT n FROM pgf_t)
SELECT 40 > ALL (SELECT n FROM pgf_t WHERE n IS NOT NULL)
SELECT 40 > ALL (SELECT n FROM pgf_t)
SELECT (SELECT max(n) FROM pgf_t)
SELECT (SELECT n FROM pgf_t)
SELECT (SELECT n FROM pgf_t WHERE id = 99)
SELECT ROW(1, 2, 3) < ROW(1, 3, 0)
SELECT ROW(1, 2) = ROW(1, 2)
SELECT ROW(1, NULL) = ROW(1, 2)
SELECT ROW(1, NULL) IS DISTINCT FROM ROW(1, 2)
SELECT (1, 'a') IN ((1, 'a'), (2, 'b'))
SELECT ROW(1, 'a')
SELECT ROW(1, NULL, 'x y')
SELECT (ROW(1, 2.5)).f2
SELECT 1::text
SELECT '1'::int
SELECT 1.5::text
SELECT true::text
SELECT true::int
SELECT 1::boolean
SELECT 0::boolean
SELECT 'yes'::boolean
SELECT 'off'::boolean
SELECT 't'::boolean
SELECT 'maybe'::boolean
SELECT CAST('42' AS bigint)
SELECT CAST(42 AS numeric(5,2))
SELECT CAST(3.99 AS int)
SELECT CAST(3.99 AS bigint)
SELECT CAST(1e10 AS int)
SELECT '3.7'::float8::int
SELECT '1e2'::numeric
SELECT '  abc  '::char(3)
SELECT 'abc'::name
SELECT 'a'::"char"
SELECT 42::oid
SELECT 'pg_class'::regclass
SELECT 'pg_class'::regclass::oid
SELECT 'int4'::regtype
SELECT 'now'::text
SELECT int4 '42'
SELECT numeric '1.50'
SELECT text 'x' || text 'y'
SELECT pg_typeof(1)
SELECT pg_typeof(1.5)
SELECT pg_typeof('a')
SELECT pg_typeof(1::int8 + 1)
SELECT pg_typeof(1 + 1.5)
SELECT pg_typeof(1::float4 + 1)
SELECT pg_typeof(5 / 2)
SELECT pg_typeof(sum(1))
SELECT pg_typeof(avg(1))
SELECT pg_typeof(count(*))
SELECT pg_typeof(NULL)
SELECT pg_typeof(true)
SELECT pg_typeof(CASE WHEN true THEN 1 ELSE 2.0 END)
SELECT pg_typeof(COALESCE(1, 2::bigint))
SELECT '00000000-0000-0000-0000-000000000001'::uuid
SELECT 'A0EEBC99-9C0B-4EF8-BB6D-6BB9BD380A11'::uuid
SELECT '{a0eebc99-9c0b4ef8-bb6d6bb9-bd380a11}'::uuid
SELECT gen_random_uuid() -- shape: random
SELECT length(gen_random_uuid()::text)
SELECT '192.168.1.5'::inet
SELECT '192.168.1.0/24'::cidr
SELECT '192.168.1.5'::inet << '192.168.1.0/24'::inet
SELECT host('192.168.1.5/24'::inet)
SELECT masklen('192.168.1.5/24'::inet)
SELECT netmask('192.168.1.5/24'::inet)
SELECT family('::1'::inet)
SELECT abbrev('10.1.0.0/16'::cidr)
SELECT broadcast('192.168.1.5/24'::inet)
SELECT network('192.168.1.5/24'::inet)
SELECT '08:00:2b:01:02:03'::macaddr
SELECT 'a & b'::tsquery
SELECT to_tsvector('english', 'The Fat Rats')
SELECT to_tsvector('english', 'fat cats ate rats') @@ to_tsquery('english', 'cat & rat')
SELECT plainto_tsquery('english', 'The Fat Rats')
SELECT point(1, 2)
SELECT point(1, 2) <-> point(4, 6)
SELECT box(point(0, 0), point(1, 1))
SELECT area(box(point(0, 0), point(2, 3)))
SELECT '[1,5)'::int4range
SELECT int4range(1, 5) @> 3
SELECT numrange(1.5, 2.5, '[]')
SELECT daterange('2024-01-01', '2024-02-01')
SELECT lower(int4range(1, 5)), upper(int4range(1, 5))
SELECT isempty(int4range(1, 1))
SELECT int4range(1, 5) && int4range(4, 8)
SELECT int4range(1, 5) * int4range(3, 8)
SELECT int4range(1, 5) + int4range(3, 8)
SELECT xmlelement(name foo, xmlattributes('xyz' as bar), 'content')
SELECT xmlforest('abc' AS foo, 123 AS bar)
SELECT 'abc' COLLATE "C" < 'abd'
SELECT 1 WHERE NULL
SELECT NULL::int + 1
SELECT NULL || 'x'
SELECT 'a' = NULL
SELECT 1 = 1.0
SELECT 1::int8 = 1::int2
SELECT 0.1::float4 = 0.1::float8
SELECT '1'::text = 1::text
SELECT 'abc' > 'ABC'
SELECT 'B' < 'a'
SELECT 'a' < 'B' COLLATE "C"
SELECT 1 OPERATOR(pg_catalog.+) 2
