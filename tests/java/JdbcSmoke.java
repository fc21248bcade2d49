// JDBC smoke test for Headwater through pgjdbc (what DBeaver, Metabase and Tableau use).
//
//   javac --release 17 -cp /usr/share/java/postgresql.jar -d OUT tests/java/JdbcSmoke.java
//   java -cp OUT:/usr/share/java/postgresql.jar JdbcSmoke HOST PORT [--metadata]
//
// Connects to jdbc:postgresql://HOST:PORT/headwater?user=headwater, creates a table of
// int, bigint, text, numeric(10,2), boolean, date, timestamp and double precision
// columns, inserts rows with a PreparedStatement (every setter, NULLs through setNull,
// addBatch/executeBatch), reads them back through a Statement (unnamed, text results)
// and through one PreparedStatement run more than prepareThreshold (5) times, so that
// pgjdbc turns it into a server-side named statement (and asks for binary results),
// checks every value, expects SQLSTATE 42P01 for a missing table and keeps using the
// connection, then drops the table. With --metadata it also checks DatabaseMetaData as
// DBeaver uses it on connect: getCatalogs/getSchemas/getTableTypes, getTables with TABLE,
// VIEW and MATERIALIZED VIEW types, getColumns (types, nullability, defaults),
// getPrimaryKeys, getIndexInfo, getImportedKeys, and ResultSetMetaData's catalog lookups.
// Prints "JDBC OK" and exits 0, or "JDBC FAIL: ..." and exits 1.

import java.math.BigDecimal;
import java.sql.Connection;
import java.sql.DatabaseMetaData;
import java.sql.Date;
import java.sql.DriverManager;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.sql.ResultSetMetaData;
import java.sql.SQLException;
import java.sql.Statement;
import java.sql.Timestamp;
import java.sql.Types;
import java.util.ArrayList;
import java.util.List;
import java.util.Objects;
import java.util.Properties;

import org.postgresql.PGStatement;

public final class JdbcSmoke {

    private static final int PREPARE_THRESHOLD = 5; // pgjdbc's default
    private static String step = "start";

    private static final class Failure extends RuntimeException {
        private static final long serialVersionUID = 1L;

        Failure(String message) {
            super(message);
        }
    }

    /** One row of the test table; null fields are SQL NULLs. */
    private record Row(int i, Long b, String t, BigDecimal n, Boolean f, Date d, Timestamp ts,
                       Double dp) {
    }

    private static final String[] NAMES = {"i", "b", "t", "n", "f", "d", "ts", "dp"};
    private static final int[] SQL_TYPES = {Types.INTEGER, Types.BIGINT, Types.VARCHAR,
        Types.NUMERIC, Types.BIT, Types.DATE, Types.TIMESTAMP, Types.DOUBLE};
    private static final Class<?>[] JAVA_CLASSES = {Integer.class, Long.class, String.class,
        BigDecimal.class, Boolean.class, Date.class, Timestamp.class, Double.class};

    private static List<Row> rows() {
        List<Row> rows = new ArrayList<>();
        rows.add(new Row(1, Long.MAX_VALUE, "hello", new BigDecimal("12345678.91"), true,
            Date.valueOf("2024-02-29"), Timestamp.valueOf("2024-02-29 13:45:30.123456"),
            3.141592653589793));
        rows.add(new Row(2, Long.MIN_VALUE, "h\u00e9llo \u2603 'quoted' \\back\\ \"dq\" tab\tend",
            new BigDecimal("-0.5"), false, Date.valueOf("1999-12-31"),
            Timestamp.valueOf("1999-12-31 23:59:59"), 1.0E300));
        rows.add(new Row(3, 0L, "", new BigDecimal("0"), true, Date.valueOf("1970-01-01"),
            Timestamp.valueOf("1970-01-01 00:00:00.000001"), -0.1));
        rows.add(new Row(4, null, null, null, null, null, null, null));
        rows.add(new Row(Integer.MIN_VALUE, -1L, "line1\nline2", new BigDecimal("99999999.99"),
            false, Date.valueOf("2000-01-01"), Timestamp.valueOf("2038-01-19 03:14:08.5"),
            2.5));
        rows.add(new Row(Integer.MAX_VALUE, 42L, "last", new BigDecimal("-99999999.99"), true,
            Date.valueOf("2100-12-31"), Timestamp.valueOf("2100-12-31 12:00:00"), -0.0));
        return rows;
    }

    private static void check(boolean cond, String what) {
        if (!cond) {
            throw new Failure(what);
        }
    }

    private static void bind(PreparedStatement ps, Row r) throws SQLException {
        ps.setInt(1, r.i());
        if (r.b() == null) ps.setNull(2, Types.BIGINT); else ps.setLong(2, r.b());
        if (r.t() == null) ps.setNull(3, Types.VARCHAR); else ps.setString(3, r.t());
        if (r.n() == null) ps.setNull(4, Types.NUMERIC); else ps.setBigDecimal(4, r.n());
        if (r.f() == null) ps.setNull(5, Types.BOOLEAN); else ps.setBoolean(5, r.f());
        if (r.d() == null) ps.setNull(6, Types.DATE); else ps.setDate(6, r.d());
        if (r.ts() == null) ps.setNull(7, Types.TIMESTAMP); else ps.setTimestamp(7, r.ts());
        if (r.dp() == null) ps.setNull(8, Types.DOUBLE); else ps.setDouble(8, r.dp());
    }

    private static void eq(Object expected, Object actual, String what) {
        check(Objects.equals(expected, actual),
            what + ": expected <" + expected + "> got <" + actual + ">");
    }

    /** Reads the current row of rs with typed getters and compares it with r. */
    private static void checkRow(ResultSet rs, Row r, String how) throws SQLException {
        String p = how + " row i=" + r.i() + " ";
        eq(r.i(), rs.getInt(1), p + "getInt(i)");
        long b = rs.getLong(2);
        eq(r.b(), rs.wasNull() ? null : b, p + "getLong(b)");
        eq(r.t(), rs.getString(3), p + "getString(t)");
        BigDecimal n = rs.getBigDecimal(4);
        if (r.n() == null) {
            eq(null, n, p + "getBigDecimal(n)");
        } else {
            check(n != null && n.compareTo(r.n()) == 0,
                p + "getBigDecimal(n): expected " + r.n() + " got " + n);
            eq(2, n.scale(), p + "numeric(10,2) scale of " + n);
        }
        boolean f = rs.getBoolean(5);
        eq(r.f(), rs.wasNull() ? null : f, p + "getBoolean(f)");
        eq(r.d() == null ? null : r.d().toString(),
            rs.getDate(6) == null ? null : rs.getDate(6).toString(), p + "getDate(d)");
        eq(r.ts(), rs.getTimestamp(7), p + "getTimestamp(ts)");
        double dp = rs.getDouble(8);
        eq(r.dp(), rs.wasNull() ? null : dp, p + "getDouble(dp)");
        for (int c = 1; c <= 8; c++) {
            Object o = rs.getObject(c);
            if (o != null && !JAVA_CLASSES[c - 1].isInstance(o)) {
                throw new Failure(p + "getObject(" + NAMES[c - 1] + ") is "
                    + o.getClass().getName() + ", expected " + JAVA_CLASSES[c - 1].getName());
            }
        }
    }

    private static void checkMetaData(ResultSetMetaData md, String how) throws SQLException {
        eq(8, md.getColumnCount(), how + " column count");
        for (int c = 1; c <= 8; c++) {
            eq(NAMES[c - 1], md.getColumnLabel(c), how + " column " + c + " label");
            // getColumnType maps the RowDescription type OID; getColumnTypeName is avoided
            // on purpose: it queries pg_catalog (serial detection), which is metadata.
            eq(SQL_TYPES[c - 1], md.getColumnType(c),
                how + " column " + NAMES[c - 1] + " java.sql.Types code");
        }
    }

    private static void expectMissingTable(Connection c, String sql, boolean prepared) {
        try {
            if (prepared) {
                try (PreparedStatement ps = c.prepareStatement(sql)) {
                    ps.setInt(1, 1);
                    ps.executeQuery().close();
                }
            } else {
                try (Statement s = c.createStatement()) {
                    s.executeQuery(sql).close();
                }
            }
        } catch (SQLException e) {
            eq("42P01", e.getSQLState(), "SQLSTATE of <" + sql + "> (" + e.getMessage() + ")");
            return;
        }
        throw new Failure("<" + sql + "> succeeded, expected SQLSTATE 42P01");
    }

    private static void selectOne(Connection c, String when) throws SQLException {
        try (Statement s = c.createStatement(); ResultSet rs = s.executeQuery("SELECT 1")) {
            check(rs.next(), "SELECT 1 " + when + ": no row");
            eq(1, rs.getInt(1), "SELECT 1 " + when);
        }
    }

    private static void run(Connection c, String table, boolean metadata) throws SQLException {
        List<Row> rows = rows();

        step = "SELECT 1";
        selectOne(c, "after connect");
        check(c.getAutoCommit(), "autocommit should be on by default");

        step = "CREATE TABLE";
        try (Statement s = c.createStatement()) {
            s.executeUpdate("CREATE TABLE " + table + " (i int, b bigint, t text, "
                + "n numeric(10,2), f boolean, d date, ts timestamp, dp double precision)");
        }

        step = "INSERT (executeUpdate + addBatch/executeBatch)";
        String insert = "INSERT INTO " + table + " (i, b, t, n, f, d, ts, dp) "
            + "VALUES (?, ?, ?, ?, ?, ?, ?, ?)";
        try (PreparedStatement ps = c.prepareStatement(insert)) {
            bind(ps, rows.get(0));
            eq(1, ps.executeUpdate(), "executeUpdate count");
            for (Row r : rows.subList(1, rows.size())) {
                bind(ps, r);
                ps.addBatch();
            }
            int[] counts = ps.executeBatch();
            eq(rows.size() - 1, counts.length, "executeBatch result length");
            for (int k : counts) {
                check(k == 1 || k == Statement.SUCCESS_NO_INFO, "executeBatch count " + k);
            }
        }

        step = "SELECT through Statement";
        try (Statement s = c.createStatement();
             ResultSet rs = s.executeQuery("SELECT i, b, t, n, f, d, ts, dp FROM " + table
                 + " ORDER BY i")) {
            checkMetaData(rs.getMetaData(), "Statement");
            List<Row> sorted = new ArrayList<>(rows);
            sorted.sort((x, y) -> Integer.compare(x.i(), y.i()));
            for (Row r : sorted) {
                check(rs.next(), "Statement: missing row i=" + r.i());
                checkRow(rs, r, "Statement");
            }
            check(!rs.next(), "Statement: more rows than inserted");
        }

        step = "prepared SELECT run " + (2 * PREPARE_THRESHOLD) + " times";
        String select = "SELECT i, b, t, n, f, d, ts, dp FROM " + table + " WHERE i = ?";
        try (PreparedStatement ps = c.prepareStatement(select)) {
            for (int k = 0; k < 2 * PREPARE_THRESHOLD; k++) {
                Row r = rows.get(k % rows.size());
                ps.setInt(1, r.i());
                try (ResultSet rs = ps.executeQuery()) {
                    if (k == 0 || k == 2 * PREPARE_THRESHOLD - 1) {
                        checkMetaData(rs.getMetaData(), "prepared run " + (k + 1));
                    }
                    check(rs.next(), "prepared run " + (k + 1) + ": no row for i=" + r.i());
                    checkRow(rs, r, "prepared run " + (k + 1));
                    check(!rs.next(), "prepared run " + (k + 1) + ": more than one row");
                }
            }
            check(ps.unwrap(PGStatement.class).isUseServerPrepare(),
                "statement did not become a server-side prepared statement");

            step = "missing table (42P01)";
            String missing = table + "_missing";
            expectMissingTable(c, "SELECT * FROM " + missing, false);
            selectOne(c, "after 42P01 (simple protocol)");
            expectMissingTable(c, "SELECT * FROM " + missing + " WHERE 1 = ?", true);
            selectOne(c, "after 42P01 (extended protocol)");

            step = "named prepared statement after the errors";
            Row r = rows.get(1);
            ps.setInt(1, r.i());
            try (ResultSet rs = ps.executeQuery()) {
                check(rs.next(), "named statement after error: no row");
                checkRow(rs, r, "named statement after error");
            }
        }

        step = "count(*) and IS NULL";
        try (PreparedStatement ps = c.prepareStatement(
            "SELECT count(*), count(b), sum(n) FROM " + table + " WHERE t IS NOT NULL OR i = ?")) {
            ps.setInt(1, 4);
            try (ResultSet rs = ps.executeQuery()) {
                check(rs.next(), "count: no row");
                eq((long) rows.size(), rs.getLong(1), "count(*)");
                eq((long) rows.size() - 1, rs.getLong(2), "count(b)");
                BigDecimal sum = rows.stream().map(Row::n).filter(Objects::nonNull)
                    .reduce(BigDecimal.ZERO, BigDecimal::add);
                check(sum.compareTo(rs.getBigDecimal(3)) == 0,
                    "sum(n): expected " + sum + " got " + rs.getBigDecimal(3));
            }
        }

        if (metadata) {
            metadataChecks(c, table);
        }

        step = "DROP TABLE";
        try (Statement s = c.createStatement()) {
            s.executeUpdate("DROP TABLE " + table);
        }
        expectMissingTable(c, "SELECT * FROM " + table, false);
        selectOne(c, "after DROP TABLE");
    }

    /** DatabaseMetaData as DBeaver and other BI tools use it on connect. */
    private static void metadataChecks(Connection c, String table) throws SQLException {
        step = "DatabaseMetaData";
        DatabaseMetaData md = c.getMetaData();
        check(md.getDatabaseProductName().equals("PostgreSQL"),
            "getDatabaseProductName: " + md.getDatabaseProductName());
        check(md.getDatabaseMajorVersion() >= 15,
            "getDatabaseMajorVersion: " + md.getDatabaseMajorVersion());
        eq("headwater", md.getUserName(), "getUserName");

        step = "DatabaseMetaData.getCatalogs";
        List<String> catalogs = new ArrayList<>();
        try (ResultSet rs = md.getCatalogs()) {
            while (rs.next()) {
                catalogs.add(rs.getString("TABLE_CAT"));
            }
        }
        check(catalogs.contains("headwater"), "getCatalogs: " + catalogs);

        step = "DatabaseMetaData.getSchemas";
        List<String> schemas = new ArrayList<>();
        try (ResultSet rs = md.getSchemas()) {
            while (rs.next()) {
                schemas.add(rs.getString("TABLE_SCHEM"));
            }
        }
        check(schemas.contains("public") && schemas.contains("pg_catalog")
            && schemas.contains("information_schema"), "getSchemas: " + schemas);
        try (ResultSet rs = md.getSchemas(null, "pub%")) {
            check(rs.next(), "getSchemas(null, pub%): no row");
            eq("public", rs.getString("TABLE_SCHEM"), "getSchemas(null, pub%)");
            check(!rs.next(), "getSchemas(null, pub%): more than one row");
        }

        step = "DatabaseMetaData.getTableTypes";
        List<String> types = new ArrayList<>();
        try (ResultSet rs = md.getTableTypes()) {
            while (rs.next()) {
                types.add(rs.getString("TABLE_TYPE"));
            }
        }
        check(types.contains("TABLE") && types.contains("VIEW")
            && types.contains("MATERIALIZED VIEW"), "getTableTypes: " + types);

        step = "DatabaseMetaData.getTables(TABLE)";
        try (ResultSet rs = md.getTables(null, null, table, new String[] {"TABLE"})) {
            check(rs.next(), "getTables: table " + table + " not found");
            eq(table, rs.getString("TABLE_NAME"), "getTables TABLE_NAME");
            eq("public", rs.getString("TABLE_SCHEM"), "getTables TABLE_SCHEM");
            eq("TABLE", rs.getString("TABLE_TYPE"), "getTables TABLE_TYPE");
            check(!rs.next(), "getTables: more than one row");
        }

        step = "DatabaseMetaData.getColumns";
        try (ResultSet rs = md.getColumns(null, null, table, null)) {
            for (int col = 1; col <= 8; col++) {
                check(rs.next(), "getColumns: missing column " + NAMES[col - 1]);
                eq(NAMES[col - 1], rs.getString("COLUMN_NAME"), "getColumns COLUMN_NAME");
                eq(col, rs.getInt("ORDINAL_POSITION"), "getColumns ORDINAL_POSITION");
                eq(SQL_TYPES[col - 1], rs.getInt("DATA_TYPE"),
                    "getColumns DATA_TYPE of " + NAMES[col - 1]);
                eq(DatabaseMetaData.columnNullable, rs.getInt("NULLABLE"),
                    "getColumns NULLABLE of " + NAMES[col - 1]);
                if (col == 4) {
                    eq(10, rs.getInt("COLUMN_SIZE"), "numeric(10,2) COLUMN_SIZE");
                    eq(2, rs.getInt("DECIMAL_DIGITS"), "numeric(10,2) DECIMAL_DIGITS");
                }
            }
            check(!rs.next(), "getColumns: more than 8 columns");
        }

        step = "metadata objects (table with keys, indexes, view)";
        String keyed = table + "_k";
        String view = table + "_v";
        try (Statement s = c.createStatement()) {
            s.executeUpdate("CREATE TABLE " + keyed + " (id int, code varchar(12) NOT NULL, "
                + "amount numeric(10,2) DEFAULT 0, note text, PRIMARY KEY (id, code))");
            s.executeUpdate("CREATE INDEX " + keyed + "_amount_idx ON " + keyed + " (amount)");
            s.executeUpdate("CREATE UNIQUE INDEX " + keyed + "_note_key ON " + keyed + " (note)");
            s.executeUpdate("CREATE VIEW " + view + " AS SELECT id, note FROM " + keyed);
        }
        try {
            step = "DatabaseMetaData.getTables(TABLE, VIEW, MATERIALIZED VIEW)";
            List<String> found = new ArrayList<>();
            try (ResultSet rs = md.getTables(null, "public", table + "%",
                    new String[] {"TABLE", "VIEW", "MATERIALIZED VIEW"})) {
                while (rs.next()) {
                    found.add(rs.getString("TABLE_NAME") + ":" + rs.getString("TABLE_TYPE"));
                }
            }
            List<String> expected = List.of(table + ":TABLE", keyed + ":TABLE", view + ":VIEW");
            eq(expected, found, "getTables(TABLE, VIEW, MATERIALIZED VIEW)");
            try (ResultSet rs = md.getTables(null, "public", view, new String[] {"TABLE"})) {
                check(!rs.next(), "getTables(TABLE) lists view " + view);
            }

            step = "DatabaseMetaData.getColumns(view)";
            try (ResultSet rs = md.getColumns(null, "public", view, "%")) {
                check(rs.next(), "getColumns(view): no id");
                eq("id", rs.getString("COLUMN_NAME"), "view column 1");
                eq(Types.INTEGER, rs.getInt("DATA_TYPE"), "view id DATA_TYPE");
                check(rs.next(), "getColumns(view): no note");
                eq("note", rs.getString("COLUMN_NAME"), "view column 2");
                eq(Types.VARCHAR, rs.getInt("DATA_TYPE"), "view note DATA_TYPE");
                check(!rs.next(), "getColumns(view): more than 2 columns");
            }
            try (ResultSet rs = md.getColumns(null, "public", keyed, "%")) {
                String[] names = {"id", "code", "amount", "note"};
                int[] nullable = {DatabaseMetaData.columnNoNulls, DatabaseMetaData.columnNoNulls,
                    DatabaseMetaData.columnNullable, DatabaseMetaData.columnNullable};
                for (int k = 0; k < names.length; k++) {
                    check(rs.next(), "getColumns(" + keyed + "): missing " + names[k]);
                    eq(names[k], rs.getString("COLUMN_NAME"), "getColumns(keyed) name");
                    eq(nullable[k], rs.getInt("NULLABLE"), "NULLABLE of " + names[k]);
                    if (k == 1) {
                        eq("varchar", rs.getString("TYPE_NAME"), "TYPE_NAME of code");
                        eq(12, rs.getInt("COLUMN_SIZE"), "varchar(12) COLUMN_SIZE");
                    }
                    if (k == 2) {
                        eq("0", rs.getString("COLUMN_DEF"), "COLUMN_DEF of amount");
                    }
                }
                check(!rs.next(), "getColumns(keyed): more than 4 columns");
            }

            step = "DatabaseMetaData.getPrimaryKeys";
            try (ResultSet rs = md.getPrimaryKeys(null, "public", keyed)) {
                String[] cols = {"id", "code"}; // ordered by KEY_SEQ
                int[] seq = {1, 2};
                for (int k = 0; k < cols.length; k++) {
                    check(rs.next(), "getPrimaryKeys: missing " + cols[k]);
                    eq(cols[k], rs.getString("COLUMN_NAME"), "getPrimaryKeys COLUMN_NAME");
                    eq(seq[k], rs.getInt("KEY_SEQ"), "getPrimaryKeys KEY_SEQ of " + cols[k]);
                    eq(keyed + "_pkey", rs.getString("PK_NAME"), "getPrimaryKeys PK_NAME");
                }
                check(!rs.next(), "getPrimaryKeys: more than 2 rows");
            }

            step = "DatabaseMetaData.getIndexInfo";
            List<String> indexes = new ArrayList<>();
            try (ResultSet rs = md.getIndexInfo(null, "public", keyed, false, false)) {
                while (rs.next()) {
                    indexes.add(rs.getString("INDEX_NAME") + ":" + rs.getBoolean("NON_UNIQUE")
                        + ":" + rs.getInt("ORDINAL_POSITION") + ":"
                        + rs.getString("COLUMN_NAME"));
                }
            }
            List<String> expectedIdx = List.of(
                keyed + "_note_key:false:1:note",
                keyed + "_pkey:false:1:id",
                keyed + "_pkey:false:2:code",
                keyed + "_amount_idx:true:1:amount");
            eq(expectedIdx, indexes, "getIndexInfo");
            List<String> unique = new ArrayList<>();
            try (ResultSet rs = md.getIndexInfo(null, "public", keyed, true, false)) {
                while (rs.next()) {
                    unique.add(rs.getString("INDEX_NAME"));
                }
            }
            eq(List.of(keyed + "_note_key", keyed + "_pkey", keyed + "_pkey"), unique,
                "getIndexInfo(unique only)");

            step = "DatabaseMetaData.getImportedKeys";
            try (ResultSet rs = md.getImportedKeys(null, "public", keyed)) {
                check(!rs.next(), "getImportedKeys: unexpected foreign key");
            }

            step = "ResultSetMetaData of a table column";
            try (Statement s = c.createStatement();
                 ResultSet rs = s.executeQuery("SELECT id, code FROM " + keyed)) {
                ResultSetMetaData rmd = rs.getMetaData();
                eq("int4", rmd.getColumnTypeName(1), "getColumnTypeName(id)");
                eq(keyed, rmd.getTableName(1), "getTableName(id)");
                eq(ResultSetMetaData.columnNoNulls, rmd.isNullable(2), "isNullable(code)");
            }
        } finally {
            try (Statement s = c.createStatement()) {
                s.executeUpdate("DROP VIEW IF EXISTS " + view);
                s.executeUpdate("DROP TABLE IF EXISTS " + keyed);
            }
        }
    }

    public static void main(String[] args) {
        List<String> positional = new ArrayList<>();
        boolean metadata = false;
        for (String a : args) {
            if (a.equals("--metadata")) {
                metadata = true;
            } else {
                positional.add(a);
            }
        }
        if (positional.size() != 2) {
            System.err.println("usage: JdbcSmoke HOST PORT [--metadata]");
            System.exit(2);
        }
        String url = "jdbc:postgresql://" + positional.get(0) + ":" + positional.get(1)
            + "/headwater?user=headwater";
        Properties props = new Properties();
        props.setProperty("connectTimeout", "20");
        props.setProperty("socketTimeout", "120");
        String table = "jdbc_smoke_" + Long.toString(System.nanoTime() & 0xffffffffL, 36);

        step = "connect to " + url;
        try (Connection c = DriverManager.getConnection(url, props)) {
            try {
                run(c, table, metadata);
            } catch (RuntimeException | SQLException e) {
                try (Statement s = c.createStatement()) { // best effort clean-up
                    s.executeUpdate("DROP TABLE IF EXISTS " + table);
                } catch (SQLException ignored) {
                    // the original failure is what matters
                }
                throw e;
            }
        } catch (Failure f) {
            System.err.println("JDBC FAIL at " + step + ": " + f.getMessage());
            System.exit(1);
        } catch (SQLException e) {
            System.err.println("JDBC FAIL at " + step + ": SQLException [SQLSTATE "
                + e.getSQLState() + "] " + e.getMessage());
            e.printStackTrace();
            System.exit(1);
        } catch (Throwable t) {
            System.err.println("JDBC FAIL at " + step + ": " + t);
            t.printStackTrace();
            System.exit(1);
        }
        System.out.println("JDBC OK");
    }
}
