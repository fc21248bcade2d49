-- PostgreSQL 15 docs 9.3: mathematical operators and functions.
SELECT 2 + 3
SELECT 2 - 3
SELECT 2 * 3
SELECT 5 / 2
SELECT -5 / 2
SELECT 5.0 / 2
SELECT 5 % 4
SELECT -5 % 4
SELECT 5.5 % 2
SELECT 2.0 ^ 3.0
SELECT 2 ^ 3
SELECT 2 ^ 0.5
SELECT |/ 25.0
SELECT ||/ 64.0
SELECT @ -5.0
SELECT 91 & 15
SELECT 32 | 3
SELECT 17 # 5
SELECT ~1
SELECT 1 << 4
SELECT 8 >> 2
SELECT 1 / 0
SELECT 1.0 / 0
SELECT 1 % 0
SELECT 2147483647 + 1
SELECT 9223372036854775807 + 1
SELECT 32767::smallint + 1::smallint
SELECT abs(-17.4)
SELECT abs(-17)
SELECT abs(-2147483648)
SELECT cbrt(64.0)
SELECT cbrt(27)
SELECT ceil(42.2)
SELECT ceil(-42.8)
SELECT ceiling(95.3)
SELECT ceil(42.2::float8)
SELECT degrees(0.5)
SELECT div(9, 4)
SELECT div(-9, 4)
SELECT exp(1.0)
SELECT exp(1)
SELECT exp(0)
SELECT factorial(5)
SELECT factorial(20)
SELECT floor(42.8)
SELECT floor(-42.8)
SELECT floor(42.8::float8)
SELECT gcd(1071, 462)
SELECT gcd(0, 0)
SELECT lcm(1071, 462)
SELECT ln(2.0)
SELECT ln(2)
SELECT ln(0)
SELECT ln(-1)
SELECT log(100)
SELECT log(100.0)
SELECT log10(1000)
SELECT log(2.0, 64.0)
SELECT log(2, 64)
SELECT min_scale(8.4100)
SELECT mod(9, 4)
SELECT mod(-9, 4)
SELECT mod(9.5, 4)
SELECT pi()
SELECT power(9, 3)
SELECT power(9.0, 3.0)
SELECT power(2, -1)
SELECT power(-8, 1.0/3)
SELECT radians(45.0)
SELECT round(42.4)
SELECT round(42.5)
SELECT round(-42.5)
SELECT round(42.5::float8)
SELECT round(43.5::float8)
SELECT round(42.4382, 2)
SELECT round(1234.5678, -2)
SELECT round(2.5, 0)
SELECT round(1::numeric / 3, 5)
SELECT scale(8.4100)
SELECT sign(-8.4)
SELECT sign(0)
SELECT sign(5::float8)
SELECT sqrt(2)
SELECT sqrt(2.0)
SELECT sqrt(16)
SELECT sqrt(-1)
SELECT trim_scale(8.4100)
SELECT trunc(42.8)
SELECT trunc(-42.8)
SELECT trunc(42.4382, 2)
SELECT trunc(42.8::float8)
SELECT width_bucket(5.35, 0.024, 10.06, 5)
SELECT width_bucket(now()::date - date '2000-01-01', 0, 100000, 10) -- shape: depends on the clock
SELECT width_bucket(-1, 0, 10, 5)
SELECT width_bucket(11, 0, 10, 5)
SELECT width_bucket(3, ARRAY[1, 2, 5, 10])
SELECT acos(1)
SELECT acosd(0.5)
SELECT asin(1)
SELECT asind(0.5)
SELECT atan(1)
SELECT atand(1)
SELECT atan2(1, 0)
SELECT atan2d(1, 0)
SELECT cos(0)
SELECT cosd(60)
SELECT cot(1)
SELECT cotd(45)
SELECT sin(1)
SELECT sind(30)
SELECT tan(1)
SELECT tand(45)
SELECT sinh(1)
SELECT cosh(0)
SELECT tanh(1)
SELECT asinh(1)
SELECT acosh(1)
SELECT atanh(0.5)
SELECT setseed(0.5)
SELECT random() < 1.0 -- shape: random
SELECT 1::numeric / 3
SELECT 2::numeric / 3
SELECT 10::numeric / 4
SELECT 1 / 3.0
SELECT 123456789012345678901234567890::numeric * 98765432109876543210
SELECT 0.1 + 0.2
SELECT 0.1::float8 + 0.2::float8
SELECT 1e300::float8 * 1e300::float8
SELECT 'NaN'::numeric
SELECT 'NaN'::float8 + 1
SELECT 'Infinity'::float8
SELECT '-Infinity'::numeric
SELECT 1.5::float4
SELECT 3.14159265358979::float4
SELECT 1.0::float8 / 3
SELECT 100000000000000000000::float8
SELECT 1e-10::float8
SELECT 123.456::numeric(5,1)
SELECT 12345.6::numeric(5,1)
SELECT 2.5::int
SELECT 3.5::int
SELECT (-2.5)::int
SELECT 2.5::float8::int
SELECT '42'::int + 1
SELECT ' 42 '::int
SELECT '4x'::int
SELECT 7::int2 / 2::int2
SELECT 7::int8 % 3
SELECT 1.5 * 2
SELECT 1.50 * 2.00
SELECT 1.5 + 1.25
SELECT -0.0::float8
SELECT 1e20::numeric
SELECT 0.000001::numeric * 0.000001
SELECT sum(x) FROM generate_series(1, 100) AS g(x)
