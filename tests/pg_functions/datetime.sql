-- PostgreSQL 15 docs 9.9: date/time functions and operators.
-- extract and date_part for every field (9.9.1), on timestamp, timestamptz, date, time, interval.
SELECT extract(century from timestamp '2001-02-16 20:38:40.123456')
SELECT extract(day from timestamp '2001-02-16 20:38:40.123456')
SELECT extract(decade from timestamp '2001-02-16 20:38:40.123456')
SELECT extract(dow from timestamp '2001-02-16 20:38:40.123456')
SELECT extract(doy from timestamp '2001-02-16 20:38:40.123456')
SELECT extract(epoch from timestamp '2001-02-16 20:38:40.123456')
SELECT extract(hour from timestamp '2001-02-16 20:38:40.123456')
SELECT extract(isodow from timestamp '2001-02-16 20:38:40.123456')
SELECT extract(isoyear from timestamp '2001-02-16 20:38:40.123456')
SELECT extract(julian from timestamp '2001-02-16 20:38:40.123456')
SELECT extract(microseconds from timestamp '2001-02-16 20:38:40.123456')
SELECT extract(millennium from timestamp '2001-02-16 20:38:40.123456')
SELECT extract(milliseconds from timestamp '2001-02-16 20:38:40.123456')
SELECT extract(minute from timestamp '2001-02-16 20:38:40.123456')
SELECT extract(month from timestamp '2001-02-16 20:38:40.123456')
SELECT extract(quarter from timestamp '2001-02-16 20:38:40.123456')
SELECT extract(second from timestamp '2001-02-16 20:38:40.123456')
SELECT extract(week from timestamp '2001-02-16 20:38:40.123456')
SELECT extract(year from timestamp '2001-02-16 20:38:40.123456')
SELECT date_part('century', timestamp '2001-02-16 20:38:40.123456')
SELECT date_part('day', timestamp '2001-02-16 20:38:40.123456')
SELECT date_part('decade', timestamp '2001-02-16 20:38:40.123456')
SELECT date_part('dow', timestamp '2001-02-16 20:38:40.123456')
SELECT date_part('doy', timestamp '2001-02-16 20:38:40.123456')
SELECT date_part('epoch', timestamp '2001-02-16 20:38:40.123456')
SELECT date_part('hour', timestamp '2001-02-16 20:38:40.123456')
SELECT date_part('isodow', timestamp '2001-02-16 20:38:40.123456')
SELECT date_part('isoyear', timestamp '2001-02-16 20:38:40.123456')
SELECT date_part('julian', timestamp '2001-02-16 20:38:40.123456')
SELECT date_part('microseconds', timestamp '2001-02-16 20:38:40.123456')
SELECT date_part('millennium', timestamp '2001-02-16 20:38:40.123456')
SELECT date_part('milliseconds', timestamp '2001-02-16 20:38:40.123456')
SELECT date_part('minute', timestamp '2001-02-16 20:38:40.123456')
SELECT date_part('month', timestamp '2001-02-16 20:38:40.123456')
SELECT date_part('quarter', timestamp '2001-02-16 20:38:40.123456')
SELECT date_part('second', timestamp '2001-02-16 20:38:40.123456')
SELECT date_part('week', timestamp '2001-02-16 20:38:40.123456')
SELECT date_part('year', timestamp '2001-02-16 20:38:40.123456')
SELECT extract(century from timestamptz '2001-02-16 20:38:40.5+05:30')
SELECT extract(day from timestamptz '2001-02-16 20:38:40.5+05:30')
SELECT extract(decade from timestamptz '2001-02-16 20:38:40.5+05:30')
SELECT extract(dow from timestamptz '2001-02-16 20:38:40.5+05:30')
SELECT extract(doy from timestamptz '2001-02-16 20:38:40.5+05:30')
SELECT extract(epoch from timestamptz '2001-02-16 20:38:40.5+05:30')
SELECT extract(hour from timestamptz '2001-02-16 20:38:40.5+05:30')
SELECT extract(isodow from timestamptz '2001-02-16 20:38:40.5+05:30')
SELECT extract(isoyear from timestamptz '2001-02-16 20:38:40.5+05:30')
SELECT extract(julian from timestamptz '2001-02-16 20:38:40.5+05:30')
SELECT extract(microseconds from timestamptz '2001-02-16 20:38:40.5+05:30')
SELECT extract(millennium from timestamptz '2001-02-16 20:38:40.5+05:30')
SELECT extract(milliseconds from timestamptz '2001-02-16 20:38:40.5+05:30')
SELECT extract(minute from timestamptz '2001-02-16 20:38:40.5+05:30')
SELECT extract(month from timestamptz '2001-02-16 20:38:40.5+05:30')
SELECT extract(quarter from timestamptz '2001-02-16 20:38:40.5+05:30')
SELECT extract(second from timestamptz '2001-02-16 20:38:40.5+05:30')
SELECT extract(week from timestamptz '2001-02-16 20:38:40.5+05:30')
SELECT extract(year from timestamptz '2001-02-16 20:38:40.5+05:30')
SELECT extract(timezone from timestamptz '2001-02-16 20:38:40.5+05:30')
SELECT extract(timezone_hour from timestamptz '2001-02-16 20:38:40.5+05:30')
SELECT extract(timezone_minute from timestamptz '2001-02-16 20:38:40.5+05:30')
SELECT extract(century from date '2001-02-16')
SELECT extract(day from date '2001-02-16')
SELECT extract(decade from date '2001-02-16')
SELECT extract(dow from date '2001-02-16')
SELECT extract(doy from date '2001-02-16')
SELECT extract(epoch from date '2001-02-16')
SELECT extract(hour from date '2001-02-16')
SELECT extract(isodow from date '2001-02-16')
SELECT extract(isoyear from date '2001-02-16')
SELECT extract(julian from date '2001-02-16')
SELECT extract(microseconds from date '2001-02-16')
SELECT extract(millennium from date '2001-02-16')
SELECT extract(milliseconds from date '2001-02-16')
SELECT extract(minute from date '2001-02-16')
SELECT extract(month from date '2001-02-16')
SELECT extract(quarter from date '2001-02-16')
SELECT extract(second from date '2001-02-16')
SELECT extract(week from date '2001-02-16')
SELECT extract(year from date '2001-02-16')
SELECT extract(hour from time '13:45:30.25')
SELECT extract(minute from time '13:45:30.25')
SELECT extract(second from time '13:45:30.25')
SELECT extract(milliseconds from time '13:45:30.25')
SELECT extract(microseconds from time '13:45:30.25')
SELECT extract(epoch from time '13:45:30.25')
SELECT extract(day from time '13:45:30.25')
SELECT extract(century from interval '2 years 5 months 3 days 04:05:06.789')
SELECT extract(millennium from interval '2 years 5 months 3 days 04:05:06.789')
SELECT extract(decade from interval '2 years 5 months 3 days 04:05:06.789')
SELECT extract(year from interval '2 years 5 months 3 days 04:05:06.789')
SELECT extract(quarter from interval '2 years 5 months 3 days 04:05:06.789')
SELECT extract(month from interval '2 years 5 months 3 days 04:05:06.789')
SELECT extract(day from interval '2 years 5 months 3 days 04:05:06.789')
SELECT extract(hour from interval '2 years 5 months 3 days 04:05:06.789')
SELECT extract(minute from interval '2 years 5 months 3 days 04:05:06.789')
SELECT extract(second from interval '2 years 5 months 3 days 04:05:06.789')
SELECT extract(milliseconds from interval '2 years 5 months 3 days 04:05:06.789')
SELECT extract(microseconds from interval '2 years 5 months 3 days 04:05:06.789')
SELECT extract(epoch from interval '2 years 5 months 3 days 04:05:06.789')
SELECT extract(dow from interval '2 years 5 months 3 days 04:05:06.789')
SELECT date_part('year', interval '1 year 13 months 40 days 25:00:00')
SELECT date_part('month', interval '1 year 13 months 40 days 25:00:00')
SELECT date_part('day', interval '1 year 13 months 40 days 25:00:00')
SELECT date_part('hour', interval '1 year 13 months 40 days 25:00:00')
SELECT date_part('epoch', interval '1 year 13 months 40 days 25:00:00')
SELECT extract(week from date '2005-01-01')
SELECT extract(isoyear from date '2005-01-01')
SELECT extract(isodow from date '2024-06-09')
SELECT extract(dow from date '2024-06-09')
SELECT extract(century from date '2000-12-31')
SELECT extract(century from date '2001-01-01')
SELECT extract(millennium from date '2000-12-31')
SELECT extract(year from date '0001-12-31 BC')
SELECT extract(century from date '0001-12-31 BC')
SELECT extract(doy from date '2024-12-31')
SELECT extract(epoch from timestamp '1970-01-01 00:00:00')
SELECT extract(epoch from timestamptz '2024-01-01 00:00:00+00')
SELECT extract(foo from timestamp '2001-02-16')
SELECT extract(timezone from timestamp '2001-02-16')
SELECT extract('year' from timestamp '2001-02-16')
SELECT date_part('year', date '2001-02-16')
SELECT date_part('epoch', date '2001-02-16')
SELECT pg_typeof(extract(year from date '2001-02-16'))
SELECT pg_typeof(date_part('year', date '2001-02-16'))
-- 9.9 operators and the other functions.
SELECT date '2001-09-28' + 7
SELECT date '2001-09-28' + interval '1 hour'
SELECT date '2001-09-28' + time '03:00'
SELECT interval '1 day' + interval '1 hour'
SELECT timestamp '2001-09-28 01:00' + interval '23 hours'
SELECT time '01:00' + interval '3 hours'
SELECT - interval '23 hours'
SELECT date '2001-10-01' - date '2001-09-28'
SELECT date '2001-10-01' - 7
SELECT date '2001-09-28' - interval '1 hour'
SELECT time '05:00' - time '03:00'
SELECT time '05:00' - interval '2 hours'
SELECT timestamp '2001-09-28 23:00' - interval '23 hours'
SELECT interval '1 day' - interval '1 hour'
SELECT timestamp '2001-09-29 03:00' - timestamp '2001-07-27 12:00'
SELECT 900 * interval '1 second'
SELECT 21 * interval '1 day'
SELECT double precision '3.5' * interval '1 hour'
SELECT interval '1 hour' / double precision '1.5'
SELECT interval '1 month' / 3
SELECT age(timestamp '2001-04-10', timestamp '1957-06-13')
SELECT age(timestamp '2001-04-10 12:00', timestamp '2001-04-10 08:30:15')
SELECT age(date '2024-03-01', date '2024-01-31')
SELECT age(timestamp '1957-06-13', timestamp '2001-04-10')
SELECT age(timestamptz '2001-04-10 00:00+00', timestamptz '2000-02-29 00:00+00')
SELECT age(timestamp '1957-06-13') > interval '60 years'
SELECT clock_timestamp() > '2020-01-01' -- shape: clock
SELECT current_date -- shape: clock
SELECT current_time -- shape: clock
SELECT current_time(2) -- shape: clock
SELECT current_timestamp -- shape: clock
SELECT current_timestamp(0) -- shape: clock
SELECT localtime -- shape: clock
SELECT localtimestamp -- shape: clock
SELECT now() -- shape: clock
SELECT statement_timestamp() -- shape: clock
SELECT transaction_timestamp() -- shape: clock
SELECT timeofday() -- shape: clock
SELECT now() = current_timestamp
SELECT date_bin('15 minutes', timestamp '2020-02-11 15:44:17', timestamp '2001-01-01')
SELECT date_bin('15 minutes', timestamp '2020-02-11 15:44:17', timestamp '2001-01-01 00:02:30')
SELECT date_bin('1 day', timestamp '2020-02-11 15:44:17', timestamp '2000-01-01')
SELECT date_trunc('hour', timestamp '2001-02-16 20:38:40')
SELECT date_trunc('year', timestamp '2001-02-16 20:38:40')
SELECT date_trunc('quarter', timestamp '2001-05-16 20:38:40')
SELECT date_trunc('month', timestamp '2001-02-16 20:38:40')
SELECT date_trunc('week', timestamp '2001-02-16 20:38:40')
SELECT date_trunc('day', timestamp '2001-02-16 20:38:40')
SELECT date_trunc('minute', timestamp '2001-02-16 20:38:40')
SELECT date_trunc('second', timestamp '2001-02-16 20:38:40.75')
SELECT date_trunc('milliseconds', timestamp '2001-02-16 20:38:40.123456')
SELECT date_trunc('microseconds', timestamp '2001-02-16 20:38:40.123456')
SELECT date_trunc('decade', timestamp '2001-02-16 20:38:40')
SELECT date_trunc('century', timestamp '2001-02-16 20:38:40')
SELECT date_trunc('millennium', timestamp '2001-02-16 20:38:40')
SELECT date_trunc('day', timestamptz '2001-02-16 20:38:40+00')
SELECT date_trunc('day', timestamptz '2001-02-16 20:38:40+00', 'Australia/Sydney')
SELECT date_trunc('hour', interval '2 days 3 hours 40 minutes')
SELECT date_trunc('month', date '2001-02-16')
SELECT date_trunc('fortnight', timestamp '2001-02-16')
SELECT isfinite(date '2001-02-16')
SELECT isfinite(timestamp 'infinity')
SELECT isfinite(interval '4 hours')
SELECT justify_days(interval '35 days')
SELECT justify_days(interval '-35 days')
SELECT justify_hours(interval '27 hours')
SELECT justify_hours(interval '-27 hours')
SELECT justify_interval(interval '1 mon -1 hour')
SELECT justify_interval(interval '50 days 30 hours')
SELECT make_date(2013, 7, 15)
SELECT make_date(-44, 3, 15)
SELECT make_date(2013, 2, 30)
SELECT make_interval(days => 10)
SELECT make_interval(1, 2, 3, 4, 5, 6, 7.5)
SELECT make_interval(years => 1, mins => 30)
SELECT make_interval(secs => 1.5)
SELECT make_time(8, 15, 23.5)
SELECT make_time(25, 0, 0)
SELECT make_timestamp(2013, 7, 15, 8, 15, 23.5)
SELECT make_timestamp(2013, 7, 15, 8, 15, 23)
SELECT make_timestamptz(2013, 7, 15, 8, 15, 23.5)
SELECT make_timestamptz(2013, 7, 15, 8, 15, 23.5, 'America/New_York')
SELECT make_timestamptz(2013, 7, 15, 8, 15, 23.5, '+05')
SELECT to_timestamp(1284352323)
SELECT to_timestamp(1284352323.5)
SELECT to_timestamp(0)
SELECT to_timestamp('Infinity'::float8)
SELECT (date '2001-02-16', date '2001-12-21') OVERLAPS (date '2001-10-30', date '2002-10-30')
SELECT (date '2001-02-16', interval '100 days') OVERLAPS (date '2001-10-30', date '2002-10-30')
SELECT (date '2001-10-29', date '2001-10-30') OVERLAPS (date '2001-10-30', date '2001-10-31')
SELECT (date '2001-10-30', date '2001-10-30') OVERLAPS (date '2001-10-30', date '2001-10-31')
SELECT timestamp '2001-02-16 20:38:40' AT TIME ZONE 'America/Denver'
SELECT timestamptz '2001-02-16 20:38:40-05' AT TIME ZONE 'America/Denver'
SELECT timestamp '2001-02-16 20:38:40' AT TIME ZONE 'Asia/Tokyo' AT TIME ZONE 'America/Chicago'
SELECT timezone('UTC', timestamp '2001-02-16 20:38:40')
SELECT timezone('+05', timestamptz '2001-02-16 20:38:40+00')
SELECT timestamptz '2001-02-16 20:38:40+05:30'
SELECT timestamptz '2001-02-16 20:38:40 America/New_York'
SELECT timestamp '2001-02-16 20:38:40.5'
SELECT timestamp '2001-02-16 20:38:40.123456789'
SELECT timestamp(0) '2001-02-16 20:38:40.5'
SELECT timestamp(2) '2001-02-16 20:38:40.125'
SELECT date '2001-02-16'::timestamp
SELECT timestamp '2001-02-16 20:38:40'::date
SELECT timestamp '2001-02-16 20:38:40'::time
SELECT timestamptz '2001-02-16 20:38:40+02'::date
SELECT date 'epoch'
SELECT date 'infinity'
SELECT timestamp '-infinity'
SELECT date '2001-02-29'
SELECT date '20010216'
SELECT date 'Feb 16, 2001'
SELECT date '16-Feb-2001'
SELECT date '2001-02-16 BC'
SELECT time '04:05:06.789'
SELECT time '04:05 PM'
SELECT time '24:00:00'
SELECT timetz '04:05:06-08'
SELECT time(2) '04:05:06.789'
SELECT interval '1 year 2 months 3 days 04:05:06'
SELECT interval '1-2'
SELECT interval '3 4:05:06'
SELECT interval 'P1Y2M3DT4H5M6S'
SELECT interval '1.5 years'
SELECT interval '1.5 days'
SELECT interval '-1 day +2 hours'
SELECT interval '90 minutes'
SELECT interval '100000 hours'
SELECT interval '0'
SELECT interval '1 second' * 0.001
SELECT interval '2 hours' HOUR
SELECT interval '1 year 2 months' YEAR TO MONTH
SELECT interval '1 day 02:03:04' DAY TO SECOND
SELECT interval(0) '1.75 seconds'
SELECT interval '1 month' = interval '30 days'
SELECT interval '1 day' = interval '24 hours'
SELECT interval '1 day' < interval '25 hours'
SELECT timestamp '2024-01-31' + interval '1 month'
SELECT timestamp '2024-02-29' + interval '1 year'
SELECT timestamp '2024-03-31' - interval '1 month'
SELECT date '2024-01-31' + interval '1 month'
SELECT date '2024-12-31' - date '2024-01-01'
SELECT timestamp '2024-12-31 10:00' - timestamp '2024-01-01'
SELECT timestamptz '2024-03-10 12:00-05' - timestamptz '2024-03-09 12:00-05'
SELECT timestamp '2024-01-01' < timestamp '2024-01-02'
SELECT date '2024-01-01' = timestamp '2024-01-01 00:00'
SELECT date '2024-01-01' < timestamptz '2024-01-01 00:00:01+00'
SELECT generate_series(timestamp '2024-01-01', timestamp '2024-01-03', interval '1 day')
SELECT generate_series(date '2024-01-31', date '2024-05-01', interval '1 month')
SELECT generate_series(timestamptz '2024-01-01 00:00+00', timestamptz '2024-01-01 02:00+00', '30 minutes')
SELECT pg_typeof(date '2024-01-01' + 1)
SELECT pg_typeof(date '2024-01-01' - date '2023-01-01')
SELECT pg_typeof(date '2024-01-01' + interval '1 day')
SELECT pg_typeof(timestamp '2024-01-01' - timestamp '2023-01-01')
SELECT pg_typeof(now()) -- shape: clock (type only)
SELECT to_char(now(), 'YYYY') = extract(year from now())::text
SELECT '2024-01-01 10:00'::timestamptz
SELECT '2024-07-01 10:00'::timestamptz
SELECT 'today'::date = current_date
SELECT 'tomorrow'::date - 'yesterday'::date
SELECT 'allballs'::time
SELECT 'now'::timestamp <= now()::timestamp -- shape: clock
SELECT timestamp '2001-02-16 20:38:40' + 1
SELECT date '2001-02-16' * 2
SELECT date '10000-01-01'
SELECT timestamp '294277-01-01'
SELECT date_part('day', timestamp '2024-03-01' - timestamp '2024-01-01')
SELECT extract(day from timestamp '2024-03-01' - timestamp '2024-01-01')
SELECT extract(epoch from interval '1 month')
SELECT extract(epoch from interval '1 year')
