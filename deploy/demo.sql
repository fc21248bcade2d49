-- The topology's demo (docker-compose.yml; tests/test_topology.py runs it too):
-- a table sunk into the PostgreSQL service, and into the S3 bucket as a Delta table
-- of its changes and an Iceberg mirror.
CREATE TABLE orders (id bigint PRIMARY KEY, customer text NOT NULL, amount numeric(10,2));
INSERT INTO orders SELECT g, 'c' || (g % 7), g * 1.25 FROM generate_series(1, 1000) AS s(g);
CREATE SINK orders_pg FROM orders
  INTO POSTGRES 'host=postgres port=5432 user=headwater password=headwater dbname=lake'
  TABLE public.orders WITH (interval = '0.5');
CREATE SINK orders_lake FROM orders INTO DELTA 's3://headwater-lake/orders'
  WITH (mode = 'changes', interval = '0.5');
-- and as an Iceberg table in the bucket (its SQL catalog: a SQLite file on headwater's
-- volume; a REST catalog's URL works as well)
CREATE SINK orders_iceberg FROM orders INTO ICEBERG 's3://headwater-lake/warehouse'
  WITH (namespace = 'shop', table = 'orders', interval = '0.5',
        catalog_uri = 'sqlite:////var/lib/headwater/iceberg-catalog.db');
