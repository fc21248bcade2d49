-- PostgreSQL 15 docs 9.5 and 9.6: binary string and bit string functions.
SELECT '\x123456'::bytea || '\x789a00bcde'::bytea
SELECT '\xdeadbeef'::bytea
SELECT 'abc'::bytea
SELECT E'\\000'::bytea
SELECT bit_length('\x123456'::bytea)
SELECT btrim('\x1234567890'::bytea, '\x9012'::bytea)
SELECT ltrim('\x1234567890'::bytea, '\x9012'::bytea)
SELECT rtrim('\x1234567890'::bytea, '\x9012'::bytea)
SELECT length('\x1234567890'::bytea)
SELECT octet_length('\x123456'::bytea)
SELECT overlay('\x1234567890'::bytea placing '\002\003'::bytea from 2 for 3)
SELECT position('\x5678'::bytea in '\x1234567890'::bytea)
SELECT substring('\x1234567890'::bytea from 3 for 2)
SELECT substr('\x1234567890'::bytea, 3, 2)
SELECT get_bit('\x1234567890'::bytea, 30)
SELECT get_byte('\x1234567890'::bytea, 4)
SELECT set_bit('\x1234567890'::bytea, 30, 0)
SELECT set_byte('\x1234567890'::bytea, 4, 64)
SELECT bit_count('\x1234567890'::bytea)
SELECT md5('Th\000omas'::bytea)
SELECT sha224('abc'::bytea)
SELECT sha256('abc'::bytea)
SELECT sha384('abc'::bytea)
SELECT sha512('abc'::bytea)
SELECT encode('123\000\001', 'base64')
SELECT encode('abc'::bytea, 'hex')
SELECT encode('a\\b'::bytea, 'escape')
SELECT decode('MTIzAAE=', 'base64')
SELECT decode('616263', 'hex')
SELECT decode('zz', 'hex')
SELECT convert_from('text_in_utf8'::bytea, 'UTF8')
SELECT convert_to('some_text', 'UTF8')
SELECT convert('text_in_utf8'::bytea, 'UTF8', 'LATIN1')
SELECT length('jose'::bytea, 'UTF8')
SELECT '\x0102'::bytea = '\x0102'::bytea
SELECT '\x01'::bytea < '\x02'::bytea
SELECT B'10001' || B'011'
SELECT B'10001' & B'01101'
SELECT B'10001' | B'01101'
SELECT B'10001' # B'01101'
SELECT ~ B'10001'
SELECT B'10001' << 3
SELECT B'10001' >> 2
SELECT bit_count(B'10111')
SELECT bit_length(B'10111')
SELECT length(B'10111')
SELECT octet_length(B'1011111011')
SELECT overlay(B'01010101010101010' placing B'11111' from 2 for 3)
SELECT position(B'010' in B'000001101011')
SELECT substring(B'110010111111' from 3 for 2)
SELECT get_bit(B'101010101010101010', 6)
SELECT set_bit(B'101010101010101010', 0, 0)
SELECT 44::bit(10)
SELECT 44::bit(3)
SELECT cast(-44 as bit(12))
SELECT '1110'::bit(4)::integer
SELECT B'101'::varbit
SELECT X'1F'
SELECT B'1' & B'11'
