// Connects to Retina through pgjdbc (Debian's libpostgresql-jdbc-java), as JDBC BI
// tools do. Usage: java -cp /usr/share/java/postgresql.jar JdbcProbe.java HOST PORT
// Prints one "name=value" line per step; a failed step prints "name=ERROR ..." and
// the exit status is then 1. Run by crates/retina-server/tests/clients.rs.

import java.sql.Connection;
import java.sql.DatabaseMetaData;
import java.sql.DriverManager;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.sql.Statement;
import java.util.ArrayList;
import java.util.List;

public class JdbcProbe {
    interface Step {
        String run(Connection connection) throws Exception;
    }

    static boolean failed = false;

    static void step(Connection connection, String name, Step step) {
        try {
            System.out.println(name + "=" + step.run(connection));
        } catch (Exception error) {
            failed = true;
            System.out.println(name + "=ERROR " + error.toString().replace('\n', ' '));
            error.printStackTrace();
        }
    }

    public static void main(String[] args) throws Exception {
        String url = "jdbc:postgresql://" + args[0] + ":" + args[1] + "/retina?user=retina&connectTimeout=10&socketTimeout=30";
        try (Connection connection = DriverManager.getConnection(url)) {
            step(connection, "version", c -> {
                try (Statement s = c.createStatement(); ResultSet r = s.executeQuery("SELECT version()")) {
                    r.next();
                    return r.getString(1);
                }
            });
            step(connection, "database_product", c -> {
                DatabaseMetaData meta = c.getMetaData();
                return meta.getDatabaseProductName() + " " + meta.getDatabaseMajorVersion() + "." + meta.getDatabaseMinorVersion();
            });
            // Server-side prepared: pgjdbc switches to a named statement after
            // prepareThreshold (5) executions, so run it more often than that.
            step(connection, "prepared", c -> {
                List<String> seen = new ArrayList<>();
                try (PreparedStatement p = c.prepareStatement("SELECT id, name, qty FROM shop.items WHERE id <= ? ORDER BY id")) {
                    for (int run = 0; run < 7; run++) {
                        p.setLong(1, 2);
                        List<String> rows = new ArrayList<>();
                        try (ResultSet r = p.executeQuery()) {
                            while (r.next()) {
                                rows.add(r.getLong("id") + ":" + r.getString("name") + ":" + r.getInt("qty"));
                            }
                        }
                        if (!seen.contains(String.join(",", rows))) {
                            seen.add(String.join(",", rows));
                        }
                    }
                }
                return String.join(" | ", seen);
            });
            step(connection, "text_parameter", c -> {
                try (PreparedStatement p = c.prepareStatement("SELECT count(*) FROM shop.items WHERE name = ?")) {
                    p.setString(1, "item 2");
                    try (ResultSet r = p.executeQuery()) {
                        r.next();
                        return Long.toString(r.getLong(1));
                    }
                }
            });
            // Typed parameters, each run past prepareThreshold (pgjdbc then binds
            // numerics, bytes and UUIDs in binary): a double is not an integer even
            // where DataFusion would infer one.
            step(connection, "typed_parameters", c -> {
                List<String> seen = new ArrayList<>();
                try (PreparedStatement p = c.prepareStatement("SELECT ? * 2, ?, ?, ?, count(*) FROM shop.items WHERE qty < ?")) {
                    for (int run = 0; run < 7; run++) {
                        p.setDouble(1, 1.25);
                        p.setBigDecimal(2, new java.math.BigDecimal("-12.34"));
                        p.setBytes(3, new byte[] {1, (byte) 0xff});
                        p.setObject(4, java.util.UUID.fromString("a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11"));
                        p.setDouble(5, 25.5);
                        try (ResultSet r = p.executeQuery()) {
                            r.next();
                            byte[] bytes = r.getBytes(3);
                            String row = r.getDouble(1) + ":" + r.getBigDecimal(2).stripTrailingZeros().toPlainString() + ":"
                                + bytes.length + "," + (bytes[1] & 0xff) + ":" + r.getString(4) + ":" + r.getLong(5);
                            if (!seen.contains(row)) {
                                seen.add(row);
                            }
                        }
                    }
                }
                return String.join(" | ", seen);
            });
            // setDate sends "2024-01-01 +00"; setTimestamp sends the JVM zone's offset,
            // which PostgreSQL drops for a timestamp without time zone.
            step(connection, "dates", c -> {
                java.util.TimeZone before = java.util.TimeZone.getDefault();
                java.util.TimeZone.setDefault(java.util.TimeZone.getTimeZone("America/New_York"));
                try (PreparedStatement p = c.prepareStatement("SELECT ?::date, ?::timestamp")) {
                    p.setDate(1, java.sql.Date.valueOf("2024-01-01"));
                    p.setTimestamp(2, java.sql.Timestamp.valueOf("2024-01-01 12:00:00"));
                    try (ResultSet r = p.executeQuery()) {
                        r.next();
                        return r.getString(1) + "|" + r.getTimestamp(2);
                    }
                } finally {
                    java.util.TimeZone.setDefault(before);
                }
            });
            step(connection, "tables", c -> {
                List<String> names = new ArrayList<>();
                try (ResultSet r = c.getMetaData().getTables(null, "shop", "%", new String[] {"TABLE"})) {
                    while (r.next()) {
                        names.add(r.getString("TABLE_SCHEM") + "." + r.getString("TABLE_NAME"));
                    }
                }
                return String.join(",", names);
            });
            // What DBeaver, Spark and ORMs ask for a table's key.
            step(connection, "primary_keys", c -> {
                List<String> keys = new ArrayList<>();
                try (ResultSet r = c.getMetaData().getPrimaryKeys(null, "shop", "items")) {
                    while (r.next()) {
                        keys.add(r.getString("COLUMN_NAME") + ":" + r.getShort("KEY_SEQ") + ":" + r.getString("PK_NAME"));
                    }
                }
                return String.join(",", keys);
            });
            step(connection, "imported_keys", c -> {
                int count = 0;
                try (ResultSet r = c.getMetaData().getImportedKeys(null, "shop", "items")) {
                    while (r.next()) {
                        count++;
                    }
                }
                return Integer.toString(count);
            });
            step(connection, "columns", c -> {
                List<String> columns = new ArrayList<>();
                try (ResultSet r = c.getMetaData().getColumns(null, "shop", "items", "%")) {
                    while (r.next()) {
                        columns.add(r.getString("COLUMN_NAME") + ":" + r.getString("TYPE_NAME") + ":" + r.getInt("NULLABLE"));
                    }
                }
                return String.join(",", columns);
            });
        }
        // currentSchema: pgjdbc's start-up search path, for unqualified names.
        try (Connection connection = DriverManager.getConnection(url + "&currentSchema=shop")) {
            step(connection, "current_schema", c -> {
                try (Statement s = c.createStatement(); ResultSet r = s.executeQuery("SELECT count(*) FROM items")) {
                    r.next();
                    return Long.toString(r.getLong("count"));
                }
            });
        }
        System.exit(failed ? 1 : 0);
    }
}
