-- PostgreSQL 15 docs 9.26 and 9.27: system information and administration functions that
-- BI tools and drivers call. Sizes, pids and versions differ legitimately: shape only.
SELECT current_database()
SELECT current_catalog
SELECT current_schema()
SELECT current_schema
SELECT current_schemas(false)
SELECT current_schemas(true)
SELECT current_user
SELECT current_role
SELECT session_user
SELECT user
SELECT pg_typeof(current_user)
SELECT version() LIKE 'PostgreSQL 15%'
SELECT version() -- shape: build string differs
SELECT current_setting('server_version_num')::int / 10000
SELECT current_setting('DateStyle')
SELECT current_setting('TimeZone')
SELECT current_setting('standard_conforming_strings')
SELECT current_setting('client_encoding')
SELECT current_setting('search_path')
SELECT current_setting('max_identifier_length')
SELECT current_setting('no_such_setting')
SELECT current_setting('no_such_setting', true)
SELECT set_config('application_name', 'sweep', false)
SELECT set_config('search_path', current_setting('search_path'), false)
SELECT current_setting('is_superuser')
SELECT pg_backend_pid() > 0
SELECT pg_backend_pid() -- shape: a process id
SELECT inet_client_addr() -- shape: the client address
SELECT inet_server_port() -- shape: the port
SELECT pg_postmaster_start_time() -- shape: a clock
SELECT pg_conf_load_time() -- shape: a clock
SELECT pg_is_in_recovery()
SELECT txid_current() -- shape: a transaction counter
SELECT txid_current() > 0
SELECT pg_current_xact_id() -- shape: a transaction counter
SELECT txid_current_if_assigned() -- shape: a transaction counter
SELECT pg_database_size('headwater') -- shape: a size on disk
SELECT pg_database_size(current_database()) > 0
SELECT pg_database_size('no_such_db')
SELECT pg_relation_size('pgf_t') -- shape: a size on disk
SELECT pg_relation_size('pgf_t') >= 0
SELECT pg_total_relation_size('pgf_t') -- shape: a size on disk
SELECT pg_total_relation_size('pgf_t') >= pg_relation_size('pgf_t')
SELECT pg_table_size('pgf_t') -- shape: a size on disk
SELECT pg_indexes_size('pgf_t') -- shape: a size on disk
SELECT pg_relation_size('no_such_table')
SELECT pg_column_size(1::int4)
SELECT pg_column_size('abc'::text)
SELECT pg_size_pretty(10::bigint)
SELECT pg_size_pretty(1024::bigint)
SELECT pg_size_pretty(123456789::bigint)
SELECT pg_size_pretty(10737418240::bigint)
SELECT pg_size_pretty(1234567890123456::bigint)
SELECT pg_size_pretty(-5000::bigint)
SELECT pg_size_pretty(12345.678::numeric)
SELECT pg_size_bytes('1 kB')
SELECT pg_size_bytes('1.5 GB')
SELECT pg_size_bytes('100')
SELECT pg_size_bytes('1 XB')
SELECT pg_get_viewdef('pgf_v')
SELECT pg_get_viewdef('pgf_v', true)
SELECT pg_get_viewdef('pgf_v'::regclass)
SELECT pg_get_viewdef('pgf_v'::regclass, true)
SELECT pg_get_viewdef('pgf_t')
SELECT pg_get_constraintdef(oid) FROM pg_constraint WHERE conrelid = 'pgf_t'::regclass
SELECT pg_get_indexdef(indexrelid) FROM pg_index WHERE indrelid = 'pgf_t'::regclass
SELECT pg_get_expr(adbin, adrelid) FROM pg_attrdef WHERE adrelid = 'pgf_t'::regclass
SELECT pg_get_userbyid(10) -- shape: the bootstrap superuser's name
SELECT pg_get_userbyid(0)
SELECT format_type('int4'::regtype, NULL)
SELECT format_type('numeric'::regtype, 655366)
SELECT format_type('varchar'::regtype, 14)
SELECT format_type('timestamptz'::regtype, NULL)
SELECT format_type(atttypid, atttypmod) FROM pg_attribute WHERE attrelid = 'pgf_t'::regclass AND attnum > 0 ORDER BY attnum
SELECT obj_description('pgf_t'::regclass, 'pg_class')
SELECT obj_description('pgf_t'::regclass)
SELECT col_description('pgf_t'::regclass, 1)
SELECT shobj_description(1, 'pg_database')
SELECT obj_description(oid, 'pg_namespace') FROM pg_namespace WHERE nspname = 'public'
SELECT has_table_privilege('pgf_t', 'SELECT')
SELECT has_table_privilege('headwater', 'pgf_t', 'INSERT')
SELECT has_table_privilege('pgf_t', 'select,insert')
SELECT has_table_privilege('no_such_table', 'SELECT')
SELECT has_table_privilege('pgf_t', 'FLY')
SELECT has_schema_privilege('public', 'USAGE')
SELECT has_schema_privilege('headwater', 'public', 'CREATE')
SELECT has_database_privilege('headwater', 'CONNECT')
SELECT has_database_privilege(current_database(), 'CREATE')
SELECT has_column_privilege('pgf_t', 'n', 'SELECT')
SELECT has_column_privilege('pgf_t', 'nope', 'SELECT')
SELECT has_any_column_privilege('pgf_t', 'SELECT')
SELECT has_function_privilege('abs(int)', 'EXECUTE')
SELECT has_sequence_privilege('no_such_seq', 'USAGE')
SELECT has_type_privilege('int4', 'USAGE')
SELECT has_language_privilege('sql', 'USAGE')
SELECT has_tablespace_privilege('pg_default', 'CREATE')
SELECT pg_has_role('headwater', 'MEMBER')
SELECT pg_table_is_visible('pgf_t'::regclass)
SELECT pg_type_is_visible('int4'::regtype)
SELECT pg_function_is_visible('abs(int)'::regprocedure)
SELECT to_regclass('pgf_t')
SELECT to_regclass('no_such_table')
SELECT to_regtype('integer')
SELECT to_regtype('no_such_type')
SELECT to_regproc('now')
SELECT to_regnamespace('public')
SELECT to_regrole('headwater')
SELECT 'pgf_t'::regclass
SELECT 'pgf_t'::regclass::oid > 0
SELECT 'no_such_table'::regclass
SELECT pg_encoding_to_char(6)
SELECT pg_char_to_encoding('UTF8')
SELECT pg_client_encoding()
SELECT getdatabaseencoding()
SELECT pg_jit_available()
SELECT pg_my_temp_schema()
SELECT pg_is_other_temp_schema(99)
SELECT pg_listening_channels()
SELECT pg_notification_queue_usage()
SELECT pg_trigger_depth()
SELECT row_security_active('pgf_t')
SELECT pg_tablespace_location(1663)
SELECT pg_get_serial_sequence('pgf_t', 'id')
SELECT pg_relation_filenode('pgf_t') -- shape: a file number
SELECT pg_relation_filepath('pgf_t') -- shape: a file path
SELECT pg_cancel_backend(0)
SELECT pg_reload_conf()
SELECT pg_sleep(0)
SELECT pg_sleep(0.01)
SELECT pg_current_wal_lsn() -- shape: a log position
SELECT pg_xact_commit_timestamp('1'::xid)
SELECT pg_stat_get_numscans('pgf_t'::regclass) -- shape: statistics counter
SELECT nspname FROM pg_namespace WHERE nspname IN ('public', 'pg_catalog', 'information_schema') ORDER BY 1
SELECT datname FROM pg_database WHERE datname = current_database()
SELECT relname, relkind FROM pg_class WHERE relname IN ('pgf_t', 'pgf_e', 'pgf_v') ORDER BY 1
SELECT attname, attnum, attnotnull FROM pg_attribute WHERE attrelid = 'pgf_t'::regclass AND attnum > 0 ORDER BY attnum
SELECT table_name, table_type FROM information_schema.tables WHERE table_name LIKE 'pgf%' ORDER BY 1
SELECT column_name, data_type, is_nullable, ordinal_position FROM information_schema.columns WHERE table_name = 'pgf_t' ORDER BY ordinal_position
SELECT column_name, numeric_precision, numeric_scale, character_maximum_length FROM information_schema.columns WHERE table_name = 'pgf_t' ORDER BY ordinal_position
SELECT table_name, view_definition FROM information_schema.views WHERE table_name = 'pgf_v'
SELECT typname FROM pg_type WHERE oid = 'int4'::regtype
SELECT typname, typlen FROM pg_type WHERE typname IN ('int4', 'text', 'numeric', 'timestamptz') ORDER BY 1
SELECT proname FROM pg_proc WHERE proname = 'pg_size_pretty' ORDER BY 1 LIMIT 1
SELECT count(*) > 0 FROM pg_settings
SELECT setting FROM pg_settings WHERE name = 'max_identifier_length'
SELECT count(*) >= 0 FROM pg_stat_activity
SELECT usename FROM pg_user WHERE usename = current_user
SELECT rolname, rolsuper FROM pg_roles WHERE rolname = current_user
SELECT schema_name FROM information_schema.schemata WHERE schema_name = 'public'
SELECT constraint_type FROM information_schema.table_constraints WHERE table_name = 'pgf_t'
SELECT indexname FROM pg_indexes WHERE tablename = 'pgf_t'
SELECT viewname, definition FROM pg_views WHERE viewname = 'pgf_v'
SELECT tablename, schemaname FROM pg_tables WHERE tablename LIKE 'pgf%' ORDER BY 1
