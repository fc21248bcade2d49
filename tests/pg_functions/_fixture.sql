-- Small tables the aggregate, window and sysinfo cases read; created on both servers.
-- Statements are separated by ";" at the end of a line.
DROP VIEW IF EXISTS pgf_v;
DROP TABLE IF EXISTS pgf_t;
DROP TABLE IF EXISTS pgf_e;
CREATE TABLE pgf_t (id int PRIMARY KEY, grp text, n int, x double precision, d numeric(10,2), s text, b boolean, ts timestamp);
INSERT INTO pgf_t VALUES
 (1, 'a', 10, 1.5, 10.25, 'apple', true, '2024-01-01 10:00:00'),
 (2, 'a', 20, 2.5, 20.50, 'banana', false, '2024-01-02 11:30:00'),
 (3, 'a', NULL, 3.5, NULL, 'cherry', true, '2024-01-03 12:00:00'),
 (4, 'b', 5, -1.0, 5.00, 'date', NULL, '2024-02-01 00:00:00'),
 (5, 'b', 5, 0.0, 7.75, NULL, true, '2024-02-15 23:59:59'),
 (6, 'b', 30, 10.0, 100.00, 'fig', false, '2024-03-01 08:15:00'),
 (7, 'c', 7, 7.0, 0.01, 'grape', true, NULL),
 (8, NULL, 8, 8.0, 8.00, 'kiwi', false, '2023-12-31 23:00:00');
CREATE TABLE pgf_e (k int, v text);
CREATE VIEW pgf_v AS SELECT id, n FROM pgf_t WHERE n > 5;
