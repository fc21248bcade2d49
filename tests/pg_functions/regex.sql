-- PostgreSQL 15 docs 9.7.3: POSIX regular expressions and their functions.
SELECT 'thomas' ~ 't.*ma'
SELECT 'thomas' ~* 'T.*ma'
SELECT 'thomas' !~ 't.*max'
SELECT 'thomas' !~* 'T.*ma'
SELECT 'abc' ~ '^a'
SELECT 'abc' ~ '(b|d)'
SELECT 'abc' ~ '^(b|c)'
SELECT 'abc' ~ '['
SELECT regexp_count('ABCABCAXYaxy', 'A.')
SELECT regexp_count('ABCABCAXYaxy', 'A.', 1, 'i')
SELECT regexp_count('ABCABCAXYaxy', 'A.', 4)
SELECT regexp_instr('ABCDEF', 'c(.)(..)', 1, 1, 0, 'i')
SELECT regexp_instr('ABCDEF', 'c(.)(..)', 1, 1, 0, 'i', 2)
SELECT regexp_instr('ABCDEFGHI', 'x')
SELECT regexp_instr('abcabc', 'b', 1, 2)
SELECT regexp_like('Hello World', 'world')
SELECT regexp_like('Hello World', 'world', 'i')
SELECT regexp_match('foobarbequebaz', 'bar.*que')
SELECT regexp_match('foobarbequebaz', '(bar)(beque)')
SELECT regexp_match('foobarbequebaz', 'xyz')
SELECT regexp_match('foobarbequebaz', 'BAR', 'i')
SELECT (regexp_match('foobarbequebaz', '(bar)(beque)'))[2]
SELECT regexp_match('abc', '(a)(x)?')
SELECT regexp_matches('foo', 'not there')
SELECT regexp_matches('foobarbequebaz', 'ba.', 'g')
SELECT regexp_matches('foobarbequebaz', '(bar)(beque)')
SELECT regexp_matches('abcabc', '(a)(b)', 'g')
SELECT regexp_replace('Thomas', '.[mN]a.', 'M')
SELECT regexp_replace('ABCDEFGHI', '[A-Z]', 'X', 'g')
SELECT regexp_replace('foobarbaz', 'b(..)', 'X\1Y', 'g')
SELECT regexp_replace('foobarbaz', 'b(..)', 'X\&Y')
SELECT regexp_replace('A PostgreSQL function', 'a|e|i|o|u', 'X', 1, 0, 'i')
SELECT regexp_replace('A PostgreSQL function', 'a|e|i|o|u', 'X', 1, 3, 'i')
SELECT regexp_replace('Hello', 'L', 'x', 'gi')
SELECT regexp_replace('abc', '', 'X')
SELECT regexp_replace('abc', '', 'X', 'g')
SELECT regexp_replace('a.b.c', '\.', '-', 'g')
SELECT regexp_replace('  lots   of  space ', '\s+', ' ', 'g')
SELECT regexp_replace('2024-01-15', '(\d+)-(\d+)-(\d+)', '\3/\2/\1')
SELECT regexp_split_to_array('hello world', '\s+')
SELECT regexp_split_to_array('a,b,,c', ',')
SELECT regexp_split_to_array('abc', '')
SELECT regexp_split_to_table('hello world', '\s+')
SELECT regexp_split_to_table('the quick brown fox', 'e')
SELECT regexp_substr('ABCDEF', 'c(.)(..)', 1, 1, 'i')
SELECT regexp_substr('ABCDEF', 'c(.)(..)', 1, 1, 'i', 2)
SELECT regexp_substr('abc', 'x')
SELECT substring('foobar' from 'o.b')
SELECT substring('foobar' from 'o(.)b')
SELECT substring('foobar', 'x')
SELECT 'abc123' ~ '\d+'
SELECT 'abc' ~ '\w+'
SELECT 'ABC' ~ '[[:upper:]]+'
SELECT 'a b' ~ '[[:space:]]'
SELECT 'foo' ~ '^f\w{2}$'
SELECT 'xyz' ~ '(?i)XYZ'
SELECT 'aaa' ~ 'a{2,}'
SELECT regexp_replace('aaa', 'a*?', 'X')
SELECT regexp_replace('abcd', '(?=c)', 'X')
SELECT regexp_match('abc', '(?<=a)b')
SELECT regexp_match('2024-01-15', '^(\d{4})-(\d{2})-(\d{2})$')
SELECT regexp_replace('Hello World', '\m(\w)', '<\1>', 'g')
SELECT regexp_replace('foo', 'o', 'O', 'x')
SELECT regexp_matches('abc', 'b', 'z')
SELECT array_length(regexp_split_to_array('a b c d', ' '), 1)
SELECT regexp_count('aaaa', 'aa')
SELECT regexp_replace(E'line1\nline2', '^line', 'L', 'gn')
SELECT regexp_replace(E'line1\nline2', '^line', 'L', 'g')
