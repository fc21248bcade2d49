-- PostgreSQL 15 docs 9.4: string functions and operators.
SELECT 'Post' || 'greSQL'
SELECT 'Value: ' || 42
SELECT 42 || ' is the answer'
SELECT 'a' || NULL
SELECT 'Thomas' IS NORMALIZED
SELECT U&'\0061\0308bc' IS NFD NORMALIZED
SELECT bit_length('jose')
SELECT char_length('josé')
SELECT character_length('jose')
SELECT length('jose')
SELECT length('')
SELECT length(NULL::text)
SELECT lower('TOM')
SELECT upper('tom')
SELECT lower('ÀÉÎ') -- the oracle runs with lc_ctype C: ASCII-only case mapping
SELECT normalize(U&'\0061\0308bc', NFC) = U&'\00E4bc'
SELECT octet_length('josé')
SELECT octet_length('jose'::char(10))
SELECT overlay('Txxxxas' placing 'hom' from 2 for 4)
SELECT overlay('Txxxxas' placing 'hom' from 2)
SELECT position('om' in 'Thomas')
SELECT position('x' in 'Thomas')
SELECT substring('Thomas' from 2 for 3)
SELECT substring('Thomas' from 3)
SELECT substring('Thomas' for 2)
SELECT substring('Thomas' from '...$')
SELECT substring('Thomas' from '%#"o_a#"_' for '#')
SELECT substring('Thomas' similar '%#"o_a#"_' escape '#')
SELECT substring('Thomas' from 0 for 3)
SELECT substring('Thomas' from -2 for 5)
SELECT substring('Thomas' from 2 for -1)
SELECT trim(both 'xyz' from 'yxTomxx')
SELECT trim(leading 'xyz' from 'yxTomxx')
SELECT trim(trailing 'xyz' from 'yxTomxx')
SELECT trim('  Tom  ')
SELECT trim(both from '  Tom  ')
SELECT btrim('xyxtrimyyx', 'xyz')
SELECT btrim('  trim  ')
SELECT ltrim('zzzytest', 'xyz')
SELECT ltrim('   test')
SELECT rtrim('testxxzx', 'xyz')
SELECT rtrim('test   ')
SELECT ascii('x')
SELECT ascii('')
SELECT chr(65)
SELECT chr(233)
SELECT chr(0)
SELECT concat('abcde', 2, NULL, 22)
SELECT concat_ws(',', 'abcde', 2, NULL, 22)
SELECT concat_ws(NULL, 'a', 'b')
SELECT concat('a', true, 1.5::float8, NULL, 1e15::float8, false, 'nan'::float8, 1e6::real)
SELECT concat_ws('-', false, 0.5::real, NULL, 0.0::float8, concat(true, 2.5::float8))
SELECT format('Hello %s, %1$s', 'World')
SELECT format('Testing %s, %s, %s, %%', 'one', 'two', 'three')
SELECT format('INSERT INTO %I VALUES(%L)', 'Foo bar', E'O\'Reilly')
SELECT format('INSERT INTO %I VALUES(%L)', 'locations', 'C:\Program Files')
SELECT format('|%10s|', 'foo')
SELECT format('|%-10s|', 'foo')
SELECT format('|%*s|', 10, 'foo')
SELECT format('%s', NULL)
SELECT format('%L', NULL)
SELECT format('%I', 'select')
SELECT format('%s %s', 'a')
SELECT format('%s|%s|%s|%s', 0.0::float8, 1e15::float8, 'nan'::float8, 1e6::real)
SELECT initcap('hi THOMAS')
SELECT initcap('hello-world foo_bar 3rd')
SELECT left('abcde', 2)
SELECT left('abcde', -2)
SELECT right('abcde', 2)
SELECT right('abcde', -2)
SELECT lpad('hi', 5, 'xy')
SELECT lpad('hi', 5)
SELECT lpad('hello', 3)
SELECT rpad('hi', 5, 'xy')
SELECT rpad('hi', 5)
SELECT rpad('hello', 3, 'x')
SELECT md5('abc')
SELECT md5('')
SELECT parse_ident('"SomeSchema".someTable')
SELECT quote_ident('Foo bar')
SELECT quote_ident('foo')
SELECT quote_ident('select')
SELECT quote_literal(E'O\'Reilly')
SELECT quote_literal(42.5)
SELECT quote_literal(NULL)
SELECT quote_nullable(NULL)
SELECT quote_nullable(42.5)
SELECT repeat('Pg', 4)
SELECT repeat('Pg', 0)
SELECT repeat('Pg', -1)
SELECT replace('abcdefabcdef', 'cd', 'XX')
SELECT replace('abc', '', 'X')
SELECT reverse('abcde')
SELECT split_part('abc~@~def~@~ghi', '~@~', 2)
SELECT split_part('abc,def,ghi,jkl', ',', -2)
SELECT split_part('abc,def', ',', 5)
SELECT split_part('abc,def', ',', 0)
SELECT starts_with('alphabet', 'alph')
SELECT starts_with('alphabet', 'beta')
SELECT string_to_array('xx~~yy~~zz', '~~', 'yy')
SELECT string_to_array('a,b,,c', ',')
SELECT string_to_array('abc', NULL)
SELECT string_to_array('abc', '')
SELECT string_to_table('xx~^~yy~^~zz', '~^~', 'yy')
SELECT strpos('high', 'ig')
SELECT strpos('high', 'x')
SELECT substr('alphabet', 3)
SELECT substr('alphabet', 3, 2)
SELECT to_ascii('Karel')
SELECT to_hex(2147483647)
SELECT to_hex(255)
SELECT to_hex(-1)
SELECT to_hex(9223372036854775807)
SELECT translate('12345', '143', 'ax')
SELECT unistr('d\0061t\+000061')
SELECT 'abc' < 'abd'
SELECT 'abc' = 'abc '
SELECT 'abc'::char(5) = 'abc'
SELECT 'abc'::char(5)
SELECT 'abc'::char(5) || 'x'
SELECT length('abc'::char(5))
SELECT 'abcdef'::varchar(3)
SELECT 'abc'::varchar(5)
SELECT ('abc' || x)::varchar(4) FROM (VALUES ('def'), (NULL)) v(x)
SELECT CAST(12345 + x AS varchar(3)), (x > 0)::varchar(2) FROM (VALUES (1)) v(x)
SELECT (x || 'yz')::char(2) || '|', ('é' || x)::varchar(1) FROM (VALUES ('a')) v(x)
SELECT 'ab'::char(1)
SELECT 'A' || 'b' || 3 || true
SELECT 'hello'::text::bytea
SELECT 'café'::bytea
SELECT E'tab\there'
SELECT E'new\nline'
SELECT $$dollar 'quoted'$$
SELECT 'it''s'
SELECT concat()
SELECT lower(NULL)
SELECT upper('straße') -- the oracle runs with lc_ctype C: ASCII-only case mapping
SELECT initcap('élan vital') -- the oracle runs with lc_ctype C: ASCII-only case mapping
SELECT length('日本語')
SELECT substr('日本語テキスト', 2, 3)
SELECT reverse('日本語')
SELECT lpad('日本', 5, '*')
SELECT 'x' || repeat('y', 3) || 'z'
SELECT char_length('abc'::char(10))
SELECT 'abc' || 'def'::char(5) || 'g'
SELECT 'ABC' ILIKE 'abc'
SELECT 'abc' LIKE 'a%'
SELECT 'abc' LIKE '_b_'
SELECT 'abc' NOT LIKE 'a%'
SELECT 'a_c' LIKE 'a\_c'
SELECT 'a%c' LIKE 'a#%c' ESCAPE '#'
SELECT 'abc' ~~ 'a%'
SELECT 'abc' ~~* 'A%'
SELECT 'abc' !~~ 'a%'
SELECT 'abc' !~~* 'A%'
SELECT 'abc' SIMILAR TO 'abc'
SELECT 'abc' SIMILAR TO 'a'
SELECT 'abc' SIMILAR TO '%(b|d)%'
SELECT 'abc' SIMILAR TO '(b|c)%'
SELECT 'abc' NOT SIMILAR TO 'a%'
SELECT 'AbC' ILIKE '%b%'
SELECT '' LIKE ''
SELECT NULL LIKE 'a'
